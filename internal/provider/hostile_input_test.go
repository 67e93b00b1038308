package provider

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"golang.org/x/crypto/ssh"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Unit tests (no backend) of the plan-time refusals of hostile or
// contradictory input: long agent names, SSH host-key settings, sensitive
// provider settings and model credential Secrets.

// objectValue is a value of object type t with the given attributes and
// every other attribute null.
func objectValue(t tftypes.Object, set map[string]tftypes.Value) tftypes.Value {
	vals := map[string]tftypes.Value{}
	for name, at := range t.AttributeTypes {
		if v, ok := set[name]; ok {
			vals[name] = v
			continue
		}
		vals[name] = tftypes.NewValue(at, nil)
	}
	return tftypes.NewValue(t, vals)
}

func errorAt(diags diag.Diagnostics, at path.Path) diag.Diagnostic {
	for _, d := range diags.Errors() {
		if p, ok := d.(diag.DiagnosticWithPath); ok && p.Path().Equal(at) {
			return d
		}
	}
	return nil
}

// rules LG4, HM4: on a Kubernetes compute an agent's name is at most
// render.MaxAgentNameLength (47) characters, so that every name derived
// from it that Kubernetes holds to 63 characters (its Services, the
// Sandboxes' Services NAME-harness-rN and NAME-node-rN with revision
// numbers of up to six digits, the agent label) fits: refused at plan as
// INVALID_REQUEST at `name`, naming the maximum. An SSH compute keeps the
// DNS-1035 limit of 63; an unknown compute waits for the plan.
func TestValidateAgentNameKubernetesLength(t *testing.T) {
	ctx := context.Background()
	if got := render.MaxAgentNameLength(); got != 47 {
		t.Fatalf("render.MaxAgentNameLength() = %d, want 47 (63 - len(\"-harness-r999999\"))", got)
	}
	kubeType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"namespace": tftypes.String}}
	computeType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"kind": tftypes.String, "kubernetes": kubeType, "ssh": kubeType}}
	s := schema.Schema{Attributes: map[string]schema.Attribute{
		"name": schema.StringAttribute{Required: true},
		"compute": schema.ObjectAttribute{Required: true, AttributeTypes: map[string]attr.Type{
			"kind":       types.StringType,
			"kubernetes": types.ObjectType{AttrTypes: map[string]attr.Type{"namespace": types.StringType}},
			"ssh":        types.ObjectType{AttrTypes: map[string]attr.Type{"namespace": types.StringType}},
		}},
	}}
	settings := tftypes.NewValue(kubeType, map[string]tftypes.Value{"namespace": tftypes.NewValue(tftypes.String, "ns")})
	kind := func(k string) tftypes.Value { return tftypes.NewValue(tftypes.String, k) }
	unknownKind := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	compute := map[string]tftypes.Value{
		"kubernetes":                 objectValue(computeType, map[string]tftypes.Value{"kind": kind("kubernetes"), "kubernetes": settings}),
		"ssh":                        objectValue(computeType, map[string]tftypes.Value{"kind": kind("ssh"), "ssh": settings}),
		"kubernetes, kind not known": objectValue(computeType, map[string]tftypes.Value{"kind": unknownKind, "kubernetes": settings}),
		"ssh, kind not known":        objectValue(computeType, map[string]tftypes.Value{"kind": unknownKind, "ssh": settings}),
		"unknown":                    tftypes.NewValue(computeType, tftypes.UnknownValue),
	}
	name := func(n int) string { return "a" + strings.Repeat("b", n-1) }
	for _, tc := range []struct {
		compute string
		length  int
		refused string // "": accepted; else a phrase of the summary
		agent   string // the name, when not one of length
	}{
		// Issue 27: AGENT-harness-rN and AGENT-node-rN are the Services the
		// sandbox driver makes for agent AGENT's Sandboxes.
		{"kubernetes", 0, "another agent's Sandbox Service", "coder-harness-r1"},
		{"kubernetes, kind not known", 0, "another agent's Sandbox Service", "coder-node-r12"},
		{"ssh", 0, "", "coder-harness-r1"},
		{"kubernetes", 0, "", "coder-harness"},
		{"kubernetes", 0, "", "harness-r1"},
		{"kubernetes", 0, "", "coder-harness-r0"},
		{"kubernetes", 0, "", "coder-harness-r1x"},
		{"kubernetes", 47, "", ""},
		{"kubernetes", 48, "too long for a Kubernetes compute", ""},
		{"kubernetes", 63, "too long for a Kubernetes compute", ""},
		{"kubernetes, kind not known", 48, "too long for a Kubernetes compute", ""},
		{"ssh", 48, "", ""},
		{"ssh", 63, "", ""},
		{"ssh, kind not known", 63, "", ""},
		{"unknown", 63, "", ""},
		{"ssh", 64, "not a valid agent name", ""},
		{"kubernetes", 64, "not a valid agent name", ""},
	} {
		t.Run(tc.compute+"/"+itoa(tc.length)+tc.agent, func(t *testing.T) {
			n := tc.agent
			if n == "" {
				n = name(tc.length)
			}
			raw := tftypes.NewValue(s.Type().TerraformType(ctx), map[string]tftypes.Value{
				"name": tftypes.NewValue(tftypes.String, n), "compute": compute[tc.compute],
			})
			req := validator.StringRequest{Path: path.Root("name"), ConfigValue: types.StringValue(n), Config: tfsdk.Config{Schema: s, Raw: raw}}
			resp := &validator.StringResponse{}
			agentName().ValidateString(ctx, req, resp)
			if tc.refused == "" {
				if resp.Diagnostics.HasError() {
					t.Fatalf("refused: %v", resp.Diagnostics)
				}
				return
			}
			d := errorAt(resp.Diagnostics, path.Root("name"))
			if d == nil || !strings.HasPrefix(d.Summary(), "INVALID_REQUEST: ") || !strings.Contains(d.Summary(), tc.refused) {
				t.Fatalf("diagnostics = %v, want INVALID_REQUEST %q at name", resp.Diagnostics, tc.refused)
			}
			if tc.agent != "" && (!strings.Contains(d.Detail(), `agent "coder"`) || !strings.Contains(d.Detail(), "Attribute name")) {
				t.Errorf("detail %q does not name the other agent and the attribute", d.Detail())
			}
			if tc.agent == "" && tc.length <= 63 && (!strings.Contains(d.Detail(), "at most 47") || !strings.Contains(d.Detail(), "Attribute name")) {
				t.Errorf("detail %q does not name the attribute and the maximum 47", d.Detail())
			}
		})
	}
}

// rule SS1 (the SSH compute's connection): insecure_ignore_host_key = true
// skips verifying the host key, so together with a configured host_key it
// would silently discard the key: refused at plan, naming both attributes.
// Alone it only warns; a missing key without it is refused.
func TestValidateSSHHostKeyWithInsecure(t *testing.T) {
	ctx := context.Background()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	hostKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	s := computeSchema()
	rootType := s.Type().TerraformType(ctx).(tftypes.Object)
	sshType := rootType.AttributeTypes["ssh"].(tftypes.Object)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	insecure := func(v bool) tftypes.Value { return tftypes.NewValue(tftypes.Bool, v) }
	unknownKey := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	for _, tc := range []struct {
		name    string
		ssh     map[string]tftypes.Value
		refused string // "": no error; else the attribute the error is at
		warned  bool
	}{
		{"host_key only", map[string]tftypes.Value{"host_key": str(hostKey)}, "", false},
		{"host_key, insecure false", map[string]tftypes.Value{"host_key": str(hostKey), "insecure_ignore_host_key": insecure(false)}, "", false},
		{"insecure only", map[string]tftypes.Value{"insecure_ignore_host_key": insecure(true)}, "", true},
		{"both", map[string]tftypes.Value{"host_key": str(hostKey), "insecure_ignore_host_key": insecure(true)}, "insecure_ignore_host_key", false},
		{"host_key not known yet, insecure", map[string]tftypes.Value{"host_key": unknownKey, "insecure_ignore_host_key": insecure(true)}, "", true},
		{"neither", map[string]tftypes.Value{}, "host_key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sshVals := map[string]tftypes.Value{"host": str("10.0.0.5")}
			for k, v := range tc.ssh {
				sshVals[k] = v
			}
			raw := objectValue(rootType, map[string]tftypes.Value{"name": str("edge"), "ssh": objectValue(sshType, sshVals)})
			resp := &resource.ValidateConfigResponse{}
			(&computeResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: tfsdk.Config{Schema: s, Raw: raw}}, resp)
			if tc.refused == "" {
				if resp.Diagnostics.HasError() {
					t.Fatalf("refused: %v", resp.Diagnostics)
				}
			} else {
				d := errorAt(resp.Diagnostics, path.Root("ssh").AtName(tc.refused))
				if d == nil || !strings.HasPrefix(d.Summary(), "INVALID_REQUEST: ") {
					t.Fatalf("diagnostics = %v, want INVALID_REQUEST at ssh.%s", resp.Diagnostics, tc.refused)
				}
				if tc.refused == "insecure_ignore_host_key" {
					for _, want := range []string{"host_key", "insecure_ignore_host_key", "Remove insecure_ignore_host_key"} {
						if !strings.Contains(d.Summary()+d.Detail(), want) {
							t.Errorf("diagnostic %q / %q does not name %q", d.Summary(), d.Detail(), want)
						}
					}
				}
			}
			if got := resp.Diagnostics.WarningsCount() > 0; got != tc.warned {
				t.Errorf("warned = %v, want %v (%v)", got, tc.warned, resp.Diagnostics)
			}
		})
	}
}

// rule AU7: the provider's connection settings that can hold tokens are
// sensitive, so Terraform never shows them: the token, the client key, the
// SSH private key and the exec plugin's environment.
func TestAU7_ProviderConnectionSecretsSensitive(t *testing.T) {
	resp := &provider.SchemaResponse{}
	New("test", "")().Schema(context.Background(), provider.SchemaRequest{}, resp)
	kube := resp.Schema.Attributes["kubernetes"].(pschema.SingleNestedAttribute).Attributes
	sshAttrs := resp.Schema.Attributes["ssh"].(pschema.SingleNestedAttribute).Attributes
	exec := kube["exec"].(pschema.SingleNestedAttribute).Attributes
	for _, tc := range []struct {
		name string
		a    pschema.Attribute
	}{
		{"kubernetes.token", kube["token"]},
		{"kubernetes.client_key", kube["client_key"]},
		{"kubernetes.exec.env", exec["env"]},
		{"ssh.private_key", sshAttrs["private_key"]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.a == nil || !tc.a.IsSensitive() {
				t.Fatalf("%s is not sensitive", tc.name)
			}
		})
	}
}

// rule AU6: the Secret the provider writes for a credential source's
// write-only value carries admission's credential-Secret prefix, so a
// configuration binding that points at it is refused at the
// configuration's plan, at the binding.
func TestAU6_ProviderWrittenCredentialSecretNotBindable(t *testing.T) {
	ctx := context.Background()
	written := secretName(ctx, sourceRefModel{Name: types.StringValue("openai"), ValueWOVersion: types.Int64Value(3)})
	if !strings.HasPrefix(written.ValueString(), admission.CredentialSecretPrefix) {
		t.Fatalf("secret_name = %q, want the prefix %q", written.ValueString(), admission.CredentialSecretPrefix)
	}
	s := configurationSchema()
	rootType := s.Type().TerraformType(ctx).(tftypes.Object)
	bindingsType := rootType.AttributeTypes["secret_bindings"].(tftypes.Map)
	bindingType := bindingsType.ElementType.(tftypes.Object)
	binding := func(secret string) tftypes.Value {
		return tftypes.NewValue(bindingType, map[string]tftypes.Value{
			"secret": tftypes.NewValue(tftypes.String, secret), "key": tftypes.NewValue(tftypes.String, "value"),
		})
	}
	for _, tc := range []struct {
		name, secret string
		refused      bool
	}{
		{"a channel's own Secret", "tg-bot", false},
		{"the provider-written credential Secret", written.ValueString(), true},
		{"another provider-written credential Secret", admission.CredentialSecretPrefix + "other-v1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := objectValue(rootType, map[string]tftypes.Value{
				"name":            tftypes.NewValue(tftypes.String, "support"),
				"document":        tftypes.NewValue(tftypes.String, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`),
				"secret_bindings": tftypes.NewValue(bindingsType, map[string]tftypes.Value{"telegram": binding(tc.secret)}),
			})
			resp := &resource.ValidateConfigResponse{}
			(&configurationResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: tfsdk.Config{Schema: s, Raw: raw}}, resp)
			if !tc.refused {
				if resp.Diagnostics.HasError() {
					t.Fatalf("refused: %v", resp.Diagnostics)
				}
				return
			}
			d := errorAt(resp.Diagnostics, path.Root("secret_bindings").AtMapKey("telegram"))
			if d == nil || !strings.HasPrefix(d.Summary(), "INVALID_REQUEST: ") || !strings.Contains(d.Detail(), "harness_auth") ||
				!strings.Contains(d.Detail(), "Rule AU6") {
				t.Fatalf("diagnostics = %v, want an AU6 INVALID_REQUEST at secret_bindings[\"telegram\"] naming harness_auth", resp.Diagnostics)
			}
		})
	}
}

// Issue 27: an SSH config_dir in the agents' state root is refused at
// plan, naming the attribute; elsewhere it is accepted.
func TestValidateConfigDirOutsideTheState(t *testing.T) {
	for dir, refused := range map[string]bool{
		"/etc/openclaw": false, "/var/lib": false, "/var/lib/occ-agentx": false,
		"/var/lib/occ-agent": true, "/var/lib/occ-agent/web": true, "/var/lib/occ-agent/": true,
	} {
		resp := &validator.StringResponse{}
		configDir{}.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("ssh").AtName("config_dir"), ConfigValue: types.StringValue(dir)}, resp)
		d := errorAt(resp.Diagnostics, path.Root("ssh").AtName("config_dir"))
		if refused != (d != nil) || d != nil && (!strings.HasPrefix(d.Summary(), "INVALID_REQUEST: ") || !strings.Contains(d.Detail(), "Attribute ssh.config_dir")) {
			t.Errorf("config_dir %q: %v, want refused %v at ssh.config_dir", dir, resp.Diagnostics, refused)
		}
	}
}
