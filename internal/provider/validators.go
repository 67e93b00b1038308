package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sshexec"
)

// Named, reusable validators for the provider's attributes.

// isDNSLabel reports whether s is an RFC 1123 label, as Kubernetes
// itself validates one (apimachinery's validation, length included).
func isDNSLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// label accepts a name Kubernetes can use, by apimachinery's own check.
type label struct {
	valid   func(string) []string // apimachinery's validation: nil when valid
	desc    string                // what the value must be
	summary string                // the diagnostic summary
	why     string                // why the rule holds, appended to the detail
}

// dnsLabel accepts an RFC 1123 label: what Kubernetes names namespaces,
// Secrets and labels with.
func dnsLabel() label {
	return label{valid: validation.IsDNS1123Label, summary: "INVALID_REQUEST: not a DNS label",
		desc: "must be a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"}
}

// agentName accepts an RFC 1035 label: an Agent's name names its Service.
// On a Kubernetes compute it is also at most render.MaxAgentNameLength
// characters, so that every name derived from it fits.
func agentName() agentNameValidator {
	return agentNameValidator{label{valid: validation.IsDNS1035Label, summary: "INVALID_REQUEST: not a valid agent name", why: " (it names the agent's Service)",
		desc: "must be a DNS-1035 label: at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"}}
}

// agentNameValidator is agentName: the label check, then, when the
// configuration's compute is a Kubernetes one, the length its derived
// names allow. The kind is read from the agent's configuration; while the
// compute is unknown (terraform validate) the check waits for the plan,
// where Terraform validates the configuration again with known values.
type agentNameValidator struct{ label }

func (v agentNameValidator) Description(context.Context) string {
	return fmt.Sprintf("%s; on a Kubernetes compute at most %d characters, and not ending in -harness-rN or -node-rN (the Service of another agent's Sandbox)", v.desc, render.MaxAgentNameLength())
}
func (v agentNameValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v agentNameValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if len(v.valid(s)) > 0 {
		v.label.ValidateString(ctx, req, resp)
		return
	}
	if !kubernetesCompute(ctx, req.Config) {
		return
	}
	if other, ok := render.SandboxServiceOwner(s); ok {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: agent name is another agent's Sandbox Service",
			fmt.Sprintf("%q is the name of the Service the agent-sandbox controller makes for a Sandbox of agent %q in the same namespace, and an agent's own Service is named like the agent: "+
				"the two agents would share one Service, and agent %q's gateway could reach this one. On a Kubernetes compute an agent's name may not end in -harness-rN or -node-rN; "+
				"choose another name (changing the name replaces the Agent).", s, other, other))
		return
	}
	limit := render.MaxAgentNameLength()
	if len(s) <= limit {
		return
	}
	addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: agent name too long for a Kubernetes compute",
		fmt.Sprintf("%q has %d characters; on a Kubernetes compute an agent's name may have at most %d, so that the longest name derived from it, %q "+
			"(the Sandbox and Service of a sandboxed harness, at a revision number of up to %d digits), stays within the %d characters Kubernetes "+
			"allows Service names and label values. Choose a name of at most %d characters; changing the name replaces the Agent.",
			s, len(s), limit, render.LongestLabelName(s), render.MaxRevisionDigits, render.LabelMaxLength, limit))
}

// kubernetesCompute reports whether the configuration's `compute` is known
// to be a Kubernetes compute: by its kind, or, while that is not known yet
// (a compute created in the same plan), by its kubernetes settings.
func kubernetesCompute(ctx context.Context, cfg tfsdk.Config) bool {
	var c types.Object
	if diags := cfg.GetAttribute(ctx, path.Root("compute"), &c); diags.HasError() || c.IsNull() || c.IsUnknown() {
		return false
	}
	attrs := c.Attributes()
	if kind, ok := attrs["kind"].(types.String); ok && !kind.IsNull() && !kind.IsUnknown() {
		return kind.ValueString() == admission.KindKubernetes
	}
	k, ok := attrs["kubernetes"]
	return ok && !k.IsNull() && !k.IsUnknown()
}

func (v label) Description(context.Context) string             { return v.desc }
func (v label) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v label) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if len(v.valid(s)) > 0 {
		addAttrError(&resp.Diagnostics, req.Path, v.summary, fmt.Sprintf("%q %s%s, such as %q.", s, v.desc, v.why, "support-bot"))
	}
}

// quantity accepts a Kubernetes resource quantity ("2", "500m", "4Gi")
// greater than zero.
type quantity struct{ what string }

func (v quantity) Description(context.Context) string {
	return fmt.Sprintf("must be a Kubernetes %s quantity greater than zero", v.what)
}
func (v quantity) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v quantity) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	q, err := resource.ParseQuantity(req.ConfigValue.ValueString())
	if err != nil || q.Sign() <= 0 {
		example := "\"2\" or \"500m\""
		switch v.what {
		case "memory":
			example = "\"4Gi\" or \"512Mi\""
		case "storage":
			example = "\"10Gi\" or \"500Mi\""
		}
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a valid quantity",
			fmt.Sprintf("%q %s, such as %s.", req.ConfigValue.ValueString(), v.Description(ctx), example))
	}
}

// notAboveLimit accepts a request (cpu_request, memory_request) that is
// at most its limit, a sibling attribute with a schema default: Kubernetes
// refuses a container whose request exceeds its limit. An unparsable
// quantity is quantity's to refuse; an unknown limit waits for the plan.
type notAboveLimit struct {
	limit        string // the sibling limit attribute
	defaultLimit string // the limit's schema default, for an unset limit
}

func (v notAboveLimit) Description(context.Context) string {
	return fmt.Sprintf("must be at most %s (default %s)", v.limit, v.defaultLimit)
}
func (v notAboveLimit) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v notAboveLimit) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	request, err := resource.ParseQuantity(req.ConfigValue.ValueString())
	if err != nil {
		return
	}
	at := req.Path.ParentPath().AtName(v.limit)
	var limit types.String
	if d := req.Config.GetAttribute(ctx, at, &limit); d.HasError() || limit.IsUnknown() {
		return
	}
	lim := v.defaultLimit
	if !limit.IsNull() {
		lim = limit.ValueString()
	}
	q, err := resource.ParseQuantity(lim)
	if err != nil || request.Cmp(q) <= 0 {
		return
	}
	addAttrError(&resp.Diagnostics, req.Path, fmt.Sprintf("INVALID_REQUEST: %s is greater than %s", req.Path, at),
		fmt.Sprintf("%s = %q is more than %s = %q, and Kubernetes refuses a container that requests more than its limit. "+
			"Lower %s to at most %q, or raise %s; left unset, the request equals the limit.",
			req.Path, req.ConfigValue.ValueString(), at, lim, req.Path, lim, at))
}

// labelMap accepts a map of Kubernetes labels (node_selector, pod_labels):
// every key a qualified name, every value a label value, as apimachinery
// validates them. With platform, it also refuses the platform's own keys
// (render.PlatformLabel), whose identity labels always win (LG4).
type labelMap struct{ platform bool }

func (v labelMap) Description(context.Context) string {
	d := "keys must be Kubernetes label keys (an optional DNS subdomain prefix and '/', then a name) and values label values"
	if v.platform {
		d += fmt.Sprintf("; keys under %s and %s are the platform's", render.PlatformLabelPrefix, strings.Join(render.PlatformLabelKeys, ", "))
	}
	return d
}
func (v labelMap) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v labelMap) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	elems := req.ConfigValue.Elements()
	for _, key := range slices.Sorted(maps.Keys(elems)) {
		at := req.Path.AtMapKey(key)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			addAttrError(&resp.Diagnostics, at, "INVALID_REQUEST: not a valid label key",
				fmt.Sprintf("key %q is not a Kubernetes label key: %s. Use a name of at most 63 letters, digits, '-', '_' and '.' that starts and ends with a letter or digit, "+
					"optionally after a DNS subdomain prefix and '/', such as \"team\" or \"example.com/team\".", key, strings.Join(errs, "; ")))
			continue
		}
		if v.platform && render.PlatformLabel(key) {
			addAttrError(&resp.Diagnostics, at, fmt.Sprintf("INVALID_REQUEST: %q is the platform's label", key),
				fmt.Sprintf("key %q is the platform's: the provider sets its identity labels (%s*, %s) on every Pod and they always win (rule LG4). "+
					"Remove %q from %s, or use a key of your own, such as \"example.com/team\".",
					key, render.PlatformLabelPrefix, strings.Join(render.PlatformLabelKeys, ", "), key, req.Path))
			continue
		}
		s, ok := elems[key].(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if errs := validation.IsValidLabelValue(s.ValueString()); len(errs) > 0 {
			addAttrError(&resp.Diagnostics, at, "INVALID_REQUEST: not a valid label value",
				fmt.Sprintf("the value %q of key %q is not a Kubernetes label value: %s. Use at most 63 letters, digits, '-', '_' and '.' that start and end with a letter or digit (or an empty value), such as \"agents\".",
					s.ValueString(), key, strings.Join(errs, "; ")))
		}
	}
}

// dnsSubdomain accepts the name of a Kubernetes object that is a DNS-1123
// subdomain (a Secret, a PriorityClass), as apimachinery validates it.
type dnsSubdomain struct{ what string }

func (v dnsSubdomain) Description(context.Context) string {
	return fmt.Sprintf("must be a %s name: a DNS-1123 subdomain", v.what)
}
func (v dnsSubdomain) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v dnsSubdomain) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if errs := validation.IsDNS1123Subdomain(req.ConfigValue.ValueString()); len(errs) > 0 {
		addAttrError(&resp.Diagnostics, req.Path, fmt.Sprintf("INVALID_REQUEST: not a valid %s name", v.what),
			fmt.Sprintf("%q is not a %s name: %s. Use the name of the %s as Kubernetes has it: lowercase letters, digits, '-' and '.', such as \"registry-credentials\".",
				req.ConfigValue.ValueString(), v.what, strings.Join(errs, "; "), v.what))
	}
}

// uniqueValues accepts a list of strings that names each value once.
type uniqueValues struct{}

func (uniqueValues) Description(context.Context) string { return "must list each value once" }
func (v uniqueValues) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v uniqueValues) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	seen := map[string]bool{}
	for i, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if seen[s.ValueString()] {
			addAttrError(&resp.Diagnostics, req.Path.AtListIndex(i), fmt.Sprintf("INVALID_REQUEST: %q is listed twice", s.ValueString()),
				fmt.Sprintf("%q appears more than once in %s; list each once.", s.ValueString(), req.Path))
		}
		seen[s.ValueString()] = true
	}
}

// toleration accepts a toleration that Kubernetes accepts, judged as its
// API validation judges one: a key is a label key, and without a key the
// operator is Exists (tolerating every taint); an Exists toleration has no
// value, an Equal one a label value; toleration_seconds only with the
// NoExecute effect. Operator and effect values are oneOf's to refuse.
type toleration struct{}

func (toleration) Description(context.Context) string {
	return "must be a Kubernetes toleration"
}
func (v toleration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v toleration) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.ConfigValue.Attributes()
	str := func(name string) (string, bool) {
		s, ok := attrs[name].(types.String)
		if !ok || s.IsUnknown() {
			return "", false
		}
		return s.ValueString(), true
	}
	key, keyKnown := str("key")
	op, opKnown := str("operator")
	if opKnown && op == "" {
		op = "Equal" // the schema's default, not yet applied to the configuration
	}
	value, valueKnown := str("value")
	effect, effectKnown := str("effect")
	switch {
	case keyKnown && key != "":
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			addAttrError(&resp.Diagnostics, req.Path.AtName("key"), "INVALID_REQUEST: not a valid toleration key",
				fmt.Sprintf("key %q is not a Kubernetes label key, as a taint's key is: %s. Use the key of the taint to tolerate, such as \"example.com/dedicated\".", key, strings.Join(errs, "; ")))
		}
	case keyKnown && opKnown && op != "Exists":
		addAttrError(&resp.Diagnostics, req.Path.AtName("operator"), "INVALID_REQUEST: a toleration without a key must use operator \"Exists\"",
			fmt.Sprintf("operator = %q needs a key to compare. Set key to the taint's key, or set operator = \"Exists\" to tolerate every taint (of the effect, when set).", op))
	}
	if opKnown && valueKnown && value != "" {
		if op == "Exists" {
			addAttrError(&resp.Diagnostics, req.Path.AtName("value"), "INVALID_REQUEST: a toleration with operator \"Exists\" has no value",
				fmt.Sprintf("operator = \"Exists\" matches the taint's key whatever its value, and Kubernetes refuses value = %q with it. Remove value, or use operator = \"Equal\".", value))
		} else if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			addAttrError(&resp.Diagnostics, req.Path.AtName("value"), "INVALID_REQUEST: not a valid toleration value",
				fmt.Sprintf("value %q is not a Kubernetes label value, as a taint's value is: %s. Use the value of the taint to tolerate, such as \"agents\".", value, strings.Join(errs, "; ")))
		}
	}
	if secs, ok := attrs["toleration_seconds"].(types.Int64); ok && !secs.IsNull() && !secs.IsUnknown() && effectKnown && effect != "NoExecute" {
		addAttrError(&resp.Diagnostics, req.Path.AtName("toleration_seconds"), "INVALID_REQUEST: toleration_seconds needs effect \"NoExecute\"",
			fmt.Sprintf("toleration_seconds bounds how long a Pod stays on a node after a NoExecute taint appears; with effect = %q Kubernetes refuses it. Set effect = \"NoExecute\", or remove toleration_seconds.", effect))
	}
}

// cpuMillis parses a validated CPU quantity into millicores.
func cpuMillis(s string) int64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return q.MilliValue()
}

// authorizedKey accepts one or more public host keys in
// authorized_keys/known_hosts form, one per line (several while a host's
// key is rotated).
type authorizedKey struct{}

func (authorizedKey) Description(context.Context) string {
	return "must be public keys in authorized_keys form, one per line, such as the content of /etc/ssh/ssh_host_ed25519_key.pub"
}
func (v authorizedKey) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v authorizedKey) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	keys := 0
	for i, line := range strings.Split(req.ConfigValue.ValueString(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		keys++
		if _, err := parseHostKey(line); err != nil {
			addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a host key",
				fmt.Sprintf("Line %d: the host key %s (%v). Read it on the host with `cat /etc/ssh/ssh_host_ed25519_key.pub`, or from `ssh-keyscan -t ed25519 HOST`.", i+1, v.Description(ctx), err))
			return
		}
	}
	if keys == 0 {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a host key",
			fmt.Sprintf("The host key is empty: it %s. Read it on the host with `cat /etc/ssh/ssh_host_ed25519_key.pub`.", v.Description(ctx)))
	}
}

// parseHostKey accepts "ssh-ed25519 AAAA… comment" and, for keyscan output,
// a leading host field, as the SSH executor reads it (no @revoked or
// @cert-authority line).
func parseHostKey(s string) (ssh.PublicKey, error) { return sshexec.ParseHostKey(s) }

// absolutePath accepts an absolute POSIX path.
type absolutePath struct{}

func (absolutePath) Description(context.Context) string { return "must be an absolute path" }
func (v absolutePath) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v absolutePath) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if s := req.ConfigValue.ValueString(); len(s) == 0 || s[0] != '/' {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not an absolute path",
			fmt.Sprintf("%q must be an absolute path on the host, such as /etc/occ/openclaw.env.", s))
	}
}

// configDir refuses an SSH config_dir inside the agents' state root
// (render.ConfigDirOverlapsState).
type configDir struct{}

func (configDir) Description(context.Context) string {
	return "must not be " + render.StateRoot + " or inside it"
}
func (v configDir) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (configDir) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if s := req.ConfigValue.ValueString(); render.ConfigDirOverlapsState(s) {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: config_dir is inside the agents' state",
			fmt.Sprintf("%q is in %s, where each agent's service user owns its state: an agent's directory there could be written by another agent's runtime, "+
				"and the activation runs as root from it. Use a directory only root can write, such as the default /etc/openclaw.", s, render.StateRoot))
	}
}

// addAttrError reports an error at an attribute and names the attribute in
// the detail too: Terraform's text output shows only the enclosing block
// for paths inside nested attributes.
func addAttrError(diags *diag.Diagnostics, at path.Path, summary, detail string) {
	diags.AddAttributeError(at, summary, fmt.Sprintf("Attribute %s: %s", at.String(), detail))
}

// oneOf accepts one of a closed set of values, and refuses anything else as
// INVALID_REQUEST citing rule, like every other refusal of the provider
// (stringvalidator.OneOf's summary names no platform error class).
type oneOf struct {
	values []string
	rule   string
}

func oneOfRule(rule string, values ...string) oneOf { return oneOf{values: values, rule: rule} }

// oneOfValues is oneOf for a closed set that no rule of RULES.md names
// (Kubernetes' own enumerations).
func oneOfValues(values ...string) oneOf { return oneOf{values: values} }

func (v oneOf) Description(context.Context) string {
	return "must be one of " + quotedList(v.values)
}
func (v oneOf) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v oneOf) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	for _, ok := range v.values {
		if s == ok {
			return
		}
	}
	rule := ""
	if v.rule != "" {
		rule = " (rule " + v.rule + ")"
	}
	addAttrError(&resp.Diagnostics, req.Path, fmt.Sprintf("INVALID_REQUEST: unsupported value %q", s),
		fmt.Sprintf("%q is not supported here; use one of %s%s.", s, quotedList(v.values), rule))
}

func quotedList(values []string) string {
	q := make([]string, len(values))
	for i, s := range values {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// positiveDuration accepts a Go duration above zero ("30s", "2m").
type positiveDuration struct{}

func (positiveDuration) Description(context.Context) string {
	return "must be a duration above zero, such as 30s or 2m"
}
func (v positiveDuration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v positiveDuration) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a duration",
			fmt.Sprintf("%q %s (a number and a unit: s, m or h).", req.ConfigValue.ValueString(), v.Description(ctx)))
	}
}

// imageReference accepts a container image reference, tagged or pinned by
// digest (admission.ParseImage).
type imageReference struct{}

func (imageReference) Description(context.Context) string {
	return "must be an image reference [registry/]name[:tag][@sha256:digest]"
}
func (v imageReference) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v imageReference) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := admission.ParseImage(req.ConfigValue.ValueString()); err != nil {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not an image reference",
			err.Error()+". Write registry/name:tag, or pin the image by digest: registry/name:tag@sha256:<64 hex digits> (a tag can be moved to other bytes; a digest cannot).")
	}
}
