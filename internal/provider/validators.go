package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/api/resource"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Named, reusable validators for the provider's attributes.

var (
	dnsLabelRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035Re  = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

// label accepts a name Kubernetes can use: at most 63 characters matching re.
type label struct {
	re      *regexp.Regexp
	desc    string // what the value must be
	summary string // the diagnostic summary
	why     string // why the rule holds, appended to the detail
}

// dnsLabel accepts an RFC 1123 label: what Kubernetes names namespaces,
// Secrets and labels with.
func dnsLabel() label {
	return label{re: dnsLabelRe, summary: "INVALID_REQUEST: not a DNS label",
		desc: "must be a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"}
}

// agentName accepts an RFC 1035 label: an Agent's name names its Service.
// On a Kubernetes compute it is also at most render.MaxAgentNameLength
// characters, so that every name derived from it fits.
func agentName() agentNameValidator {
	return agentNameValidator{label{re: dns1035Re, summary: "INVALID_REQUEST: not a valid agent name", why: " (it names the agent's Service)",
		desc: "must be a DNS-1035 label: at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"}}
}

// agentNameValidator is agentName: the label check, then, when the
// configuration's compute is a Kubernetes one, the length its derived
// names allow. The kind is read from the agent's configuration; while the
// compute is unknown (terraform validate) the check waits for the plan,
// where Terraform validates the configuration again with known values.
type agentNameValidator struct{ label }

func (v agentNameValidator) Description(context.Context) string {
	return fmt.Sprintf("%s; on a Kubernetes compute at most %d characters", v.desc, render.MaxAgentNameLength())
}
func (v agentNameValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v agentNameValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if len(s) > 63 || !v.re.MatchString(s) {
		v.label.ValidateString(ctx, req, resp)
		return
	}
	limit := render.MaxAgentNameLength()
	if len(s) <= limit || !kubernetesCompute(ctx, req.Config) {
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
	if len(s) > 63 || !v.re.MatchString(s) {
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

// dnsSubdomain accepts the name of a Kubernetes object that is a DNS-1123
// subdomain (a StorageClass, a Secret), as apimachinery validates it.
type dnsSubdomain struct{}

func (dnsSubdomain) Description(context.Context) string {
	return "must be a Kubernetes object name: lower-case letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit"
}
func (v dnsSubdomain) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v dnsSubdomain) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if errs := k8svalidation.IsDNS1123Subdomain(req.ConfigValue.ValueString()); len(errs) > 0 {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a Kubernetes object name",
			fmt.Sprintf("%q %s (%s).", req.ConfigValue.ValueString(), v.Description(ctx), strings.Join(errs, "; ")))
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

// authorizedKey accepts one public host key in authorized_keys/known_hosts form.
type authorizedKey struct{}

func (authorizedKey) Description(context.Context) string {
	return "must be one public key in authorized_keys form, such as the content of /etc/ssh/ssh_host_ed25519_key.pub"
}
func (v authorizedKey) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v authorizedKey) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := parseHostKey(req.ConfigValue.ValueString()); err != nil {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a host key",
			fmt.Sprintf("The host key %s (%v). Read it on the host with `cat /etc/ssh/ssh_host_ed25519_key.pub`, or from `ssh-keyscan -t ed25519 HOST`.", v.Description(ctx), err))
	}
}

// parseHostKey accepts "ssh-ed25519 AAAA… comment" and, for keyscan output,
// a leading host field.
func parseHostKey(s string) (ssh.PublicKey, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s))
	if err == nil {
		return key, nil
	}
	_, _, key, _, _, kerr := ssh.ParseKnownHosts([]byte(s))
	if kerr == nil {
		return key, nil
	}
	return nil, err
}

// modelRef accepts a model reference provider/model (MR1).
type modelRef struct{}

func (modelRef) Description(context.Context) string {
	return "must be a model reference provider/model"
}
func (v modelRef) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v modelRef) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := admission.ParseModelRef(req.ConfigValue.ValueString()); err != nil {
		addAttrError(&resp.Diagnostics, req.Path, "INVALID_REQUEST: not a model reference", err.Error()+" (rule MR1)")
	}
}

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
	rule := "."
	if v.rule != "" {
		rule = fmt.Sprintf(" (rule %s).", v.rule)
	}
	addAttrError(&resp.Diagnostics, req.Path, fmt.Sprintf("INVALID_REQUEST: unsupported value %q", s),
		fmt.Sprintf("%q is not supported here; use one of %s%s", s, quotedList(v.values), rule))
}

func quotedList(values []string) string {
	q := make([]string, len(values))
	for i, s := range values {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
