package provider

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Unit tests (no backend) of the plan-time refusals of a Kubernetes
// compute's Pod settings: pod_labels, node_selector, tolerations,
// priority_class_name, cpu_request, memory_request, image_pull_secrets and
// image_pull_policy. Each runs the compute's whole validation (every
// attribute validator, then ValidateConfig) through the provider's
// protocol server, as Terraform calls it at plan.

func tfStr(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func tfStrMap(m map[string]string) tftypes.Value {
	vals := map[string]tftypes.Value{}
	for k, v := range m {
		vals[k] = tfStr(v)
	}
	return tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, vals)
}

func tfStrList(items ...string) tftypes.Value {
	vals := make([]tftypes.Value, len(items))
	for i, s := range items {
		vals[i] = tfStr(s)
	}
	return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, vals)
}

// kubeAttrType is the type of a kubernetes attribute of occ_compute.
func kubeAttrType(name string) tftypes.Type {
	root := computeSchema().Type().TerraformType(context.Background()).(tftypes.Object)
	return root.AttributeTypes["kubernetes"].(tftypes.Object).AttributeTypes[name]
}

// tfTolerations is a tolerations value; an attribute a toleration leaves
// out is null.
func tfTolerations(ts ...map[string]tftypes.Value) tftypes.Value {
	list := kubeAttrType("tolerations").(tftypes.List)
	vals := make([]tftypes.Value, len(ts))
	for i, t := range ts {
		vals[i] = objectValue(list.ElementType.(tftypes.Object), t)
	}
	return tftypes.NewValue(list, vals)
}

// validateKubeCompute validates an occ_compute whose kubernetes block has
// namespace "occ" and the given attributes.
func validateKubeCompute(t *testing.T, kube map[string]tftypes.Value) []*tfprotov6.Diagnostic {
	t.Helper()
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New("test", "test")())()
	if err != nil {
		t.Fatal(err)
	}
	root := computeSchema().Type().TerraformType(ctx).(tftypes.Object)
	vals := map[string]tftypes.Value{"namespace": tfStr("occ")}
	maps.Copy(vals, kube)
	raw := objectValue(root, map[string]tftypes.Value{"name": tfStr("prod"), "kubernetes": objectValue(root.AttributeTypes["kubernetes"].(tftypes.Object), vals)})
	config, err := tfprotov6.NewDynamicValue(root, raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "occ_compute", Config: &config})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Diagnostics
}

type podSettingCase struct {
	name string
	kube map[string]tftypes.Value
	// at is the attribute the error names ("" for accepted); want are
	// phrases of its summary and detail (the key, the fix).
	at   string
	want []string
}

func runPodSettingCases(t *testing.T, cases []podSettingCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diags := validateKubeCompute(t, tc.kube)
			var errs []*tfprotov6.Diagnostic
			for _, d := range diags {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					errs = append(errs, d)
				}
			}
			if tc.at == "" {
				for _, d := range errs {
					t.Errorf("refused: %s: %s", d.Summary, d.Detail)
				}
				return
			}
			if len(errs) != 1 {
				for _, d := range errs {
					t.Logf("%s: %s", d.Summary, d.Detail)
				}
				t.Fatalf("%d errors, want one at %s", len(errs), tc.at)
			}
			d := errs[0]
			t.Logf("%s: %s", d.Summary, d.Detail)
			if !strings.HasPrefix(d.Summary, "INVALID_REQUEST: ") || !strings.HasPrefix(d.Detail, "Attribute "+tc.at+": ") || d.Attribute == nil {
				t.Errorf("diagnostic %q / %q, want INVALID_REQUEST at %s", d.Summary, d.Detail, tc.at)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Summary+" "+d.Detail, w) {
					t.Errorf("diagnostic %q / %q does not say %q", d.Summary, d.Detail, w)
				}
			}
		})
	}
}

// The settings the acceptance test applies, all accepted.
func TestValidatePodSettings_Accepted(t *testing.T) {
	runPodSettingCases(t, []podSettingCase{
		{name: "every setting", kube: map[string]tftypes.Value{
			"pod_labels":    tfStrMap(map[string]string{"team": "support", "example.com/cost-center": "42", "empty": ""}),
			"node_selector": tfStrMap(map[string]string{"occ-platform.io/node": "kwok"}),
			"tolerations": tfTolerations(
				map[string]tftypes.Value{"key": tfStr("example.com/dedicated"), "value": tfStr("agents"), "effect": tfStr("NoSchedule")},
				map[string]tftypes.Value{"key": tfStr("node.kubernetes.io/unreachable"), "operator": tfStr("Exists"), "effect": tfStr("NoExecute"),
					"toleration_seconds": tftypes.NewValue(tftypes.Number, 30)},
				map[string]tftypes.Value{"operator": tfStr("Exists")},
				map[string]tftypes.Value{"key": tfStr("k"), "effect": tfStr("")},
			),
			"priority_class_name": tfStr("occ-agents"),
			"cpu_limit":           tfStr("2"), "cpu_request": tfStr("500m"),
			"memory_request":     tfStr("1Gi"),
			"image_pull_secrets": tfStrList("regcred", "mirror.example.com"),
			"image_pull_policy":  tfStr("IfNotPresent"),
		}},
		{name: "requests equal to the limits", kube: map[string]tftypes.Value{
			"cpu_limit": tfStr("1500m"), "cpu_request": tfStr("1.5"), "memory_limit": tfStr("4Gi"), "memory_request": tfStr("4096Mi")}},
		{name: "requests up to the default limits", kube: map[string]tftypes.Value{"cpu_request": tfStr("2"), "memory_request": tfStr("4Gi")}},
		{name: "request not known yet", kube: map[string]tftypes.Value{"cpu_request": tftypes.NewValue(tftypes.String, tftypes.UnknownValue)}},
		{name: "limit not known yet", kube: map[string]tftypes.Value{"cpu_request": tfStr("64"), "cpu_limit": tftypes.NewValue(tftypes.String, tftypes.UnknownValue)}},
	})
}

// rule LG4: the identity labels are the platform's; pod_labels may not set
// one, nor any key under occ-platform.io/. Keys and values are Kubernetes
// label keys and values.
func TestValidatePodLabels(t *testing.T) {
	var cases []podSettingCase
	for _, key := range []string{"occ-platform.io/agent", "occ-platform.io/revision", "occ-platform.io/revision-id", "occ-platform.io/component",
		"occ-platform.io/anything", "app.kubernetes.io/managed-by", "app.kubernetes.io/name", "app.kubernetes.io/version"} {
		cases = append(cases, podSettingCase{name: "LG4 " + key, kube: map[string]tftypes.Value{"pod_labels": tfStrMap(map[string]string{key: "x", "team": "a"})},
			at: `kubernetes.pod_labels["` + key + `"]`, want: []string{`"` + key + `" is the platform's label`, "rule LG4", "Remove", "kubernetes.pod_labels", "example.com/team"}})
	}
	cases = append(cases,
		podSettingCase{name: "key with a space", kube: map[string]tftypes.Value{"pod_labels": tfStrMap(map[string]string{"my team": "a"})},
			at: `kubernetes.pod_labels["my team"]`, want: []string{"not a valid label key", `"my team"`, "such as"}},
		podSettingCase{name: "prefix not a subdomain", kube: map[string]tftypes.Value{"pod_labels": tfStrMap(map[string]string{"Example_com/team": "a"})},
			at: `kubernetes.pod_labels["Example_com/team"]`, want: []string{"not a valid label key"}},
		podSettingCase{name: "value too long", kube: map[string]tftypes.Value{"pod_labels": tfStrMap(map[string]string{"team": strings.Repeat("a", 64)})},
			at: `kubernetes.pod_labels["team"]`, want: []string{"not a valid label value", `of key "team"`, "63"}},
		podSettingCase{name: "value with a slash", kube: map[string]tftypes.Value{"pod_labels": tfStrMap(map[string]string{"team": "a/b"})},
			at: `kubernetes.pod_labels["team"]`, want: []string{"not a valid label value", `"a/b"`}},
	)
	runPodSettingCases(t, cases)
}

// node_selector: keys and values are Kubernetes label keys and values (the
// platform's node label is a fine key to select on).
func TestValidateNodeSelector(t *testing.T) {
	runPodSettingCases(t, []podSettingCase{
		{name: "platform node label", kube: map[string]tftypes.Value{"node_selector": tfStrMap(map[string]string{"occ-platform.io/node": "kwok"})}},
		{name: "bad key", kube: map[string]tftypes.Value{"node_selector": tfStrMap(map[string]string{"-pool": "a"})},
			at: `kubernetes.node_selector["-pool"]`, want: []string{"not a valid label key", `"-pool"`}},
		{name: "bad value", kube: map[string]tftypes.Value{"node_selector": tfStrMap(map[string]string{"pool": "gpu nodes"})},
			at: `kubernetes.node_selector["pool"]`, want: []string{"not a valid label value", `"gpu nodes"`, `of key "pool"`}},
	})
}

// tolerations are judged as Kubernetes judges them.
func TestValidateTolerations(t *testing.T) {
	tol := func(m map[string]tftypes.Value) map[string]tftypes.Value {
		return map[string]tftypes.Value{"tolerations": tfTolerations(m)}
	}
	runPodSettingCases(t, []podSettingCase{
		{name: "unknown operator", kube: tol(map[string]tftypes.Value{"key": tfStr("k"), "operator": tfStr("In")}),
			at: "kubernetes.tolerations[0].operator", want: []string{`unsupported value "In"`, `"Equal", "Exists"`}},
		{name: "unknown effect", kube: tol(map[string]tftypes.Value{"key": tfStr("k"), "effect": tfStr("NoRun")}),
			at: "kubernetes.tolerations[0].effect", want: []string{`unsupported value "NoRun"`, `"NoSchedule", "PreferNoSchedule", "NoExecute"`}},
		{name: "no key with Equal", kube: tol(map[string]tftypes.Value{"value": tfStr("v")}),
			at: "kubernetes.tolerations[0].operator", want: []string{`without a key must use operator "Exists"`, "Set key"}},
		{name: "Exists with a value", kube: tol(map[string]tftypes.Value{"key": tfStr("k"), "operator": tfStr("Exists"), "value": tfStr("v")}),
			at: "kubernetes.tolerations[0].value", want: []string{`operator "Exists" has no value`, "Remove value"}},
		{name: "seconds without NoExecute", kube: tol(map[string]tftypes.Value{"key": tfStr("k"), "effect": tfStr("NoSchedule"), "toleration_seconds": tftypes.NewValue(tftypes.Number, 60)}),
			at: "kubernetes.tolerations[0].toleration_seconds", want: []string{`needs effect "NoExecute"`, `"NoSchedule"`}},
		{name: "bad key", kube: tol(map[string]tftypes.Value{"key": tfStr("bad key")}),
			at: "kubernetes.tolerations[0].key", want: []string{"not a valid toleration key", `"bad key"`}},
		{name: "bad value", kube: tol(map[string]tftypes.Value{"key": tfStr("k"), "value": tfStr("a b")}),
			at: "kubernetes.tolerations[0].value", want: []string{"not a valid toleration value", `"a b"`}},
	})
}

// A request above its limit is refused, naming both attributes; a request
// is a Kubernetes quantity (the limits' validator).
func TestValidateRequests(t *testing.T) {
	runPodSettingCases(t, []podSettingCase{
		{name: "cpu above the limit", kube: map[string]tftypes.Value{"cpu_limit": tfStr("1"), "cpu_request": tfStr("1500m")},
			at: "kubernetes.cpu_request", want: []string{"kubernetes.cpu_request is greater than kubernetes.cpu_limit", `"1500m"`, `"1"`, "Lower kubernetes.cpu_request"}},
		{name: "cpu above the default limit", kube: map[string]tftypes.Value{"cpu_request": tfStr("3")},
			at: "kubernetes.cpu_request", want: []string{"greater than kubernetes.cpu_limit", `kubernetes.cpu_limit = "2"`}},
		{name: "memory above the limit", kube: map[string]tftypes.Value{"memory_limit": tfStr("1Gi"), "memory_request": tfStr("1025Mi")},
			at: "kubernetes.memory_request", want: []string{"kubernetes.memory_request is greater than kubernetes.memory_limit", `"1Gi"`}},
		{name: "memory above the default limit", kube: map[string]tftypes.Value{"memory_request": tfStr("8Gi")},
			at: "kubernetes.memory_request", want: []string{"greater than kubernetes.memory_limit", `"4Gi"`}},
		{name: "cpu not a quantity", kube: map[string]tftypes.Value{"cpu_request": tfStr("lots")},
			at: "kubernetes.cpu_request", want: []string{"not a valid quantity", `"lots"`, `"500m"`}},
		{name: "memory zero", kube: map[string]tftypes.Value{"memory_request": tfStr("0")},
			at: "kubernetes.memory_request", want: []string{"not a valid quantity", "greater than zero"}},
	})
}

// image_pull_secrets name Secrets (DNS-1123 subdomains) once each;
// image_pull_policy is one of Kubernetes' policies; priority_class_name
// names a PriorityClass.
func TestValidatePullSettingsAndPriorityClass(t *testing.T) {
	runPodSettingCases(t, []podSettingCase{
		{name: "secret name not a subdomain", kube: map[string]tftypes.Value{"image_pull_secrets": tfStrList("regcred", "Reg_Cred")},
			at: "kubernetes.image_pull_secrets[1]", want: []string{"not a valid Secret name", `"Reg_Cred"`, "lowercase"}},
		{name: "secret listed twice", kube: map[string]tftypes.Value{"image_pull_secrets": tfStrList("regcred", "regcred")},
			at: "kubernetes.image_pull_secrets[1]", want: []string{`"regcred" is listed twice`}},
		{name: "unknown pull policy", kube: map[string]tftypes.Value{"image_pull_policy": tfStr("Sometimes")},
			at: "kubernetes.image_pull_policy", want: []string{`unsupported value "Sometimes"`, `"Always", "IfNotPresent", "Never"`}},
		{name: "priority class not a subdomain", kube: map[string]tftypes.Value{"priority_class_name": tfStr("High Priority")},
			at: "kubernetes.priority_class_name", want: []string{"not a valid PriorityClass name", `"High Priority"`}},
	})
}
