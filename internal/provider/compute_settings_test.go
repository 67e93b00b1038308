package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// v0Kubernetes is a kubernetes block as a version 0 state holds it, with
// a value of every shape: maps, a list, a set, a list of objects, numbers,
// booleans and nulls.
const v0Kubernetes = `{"namespace":"occ-acme","runtime_image":"ghcr.io/occ-platform/runtime/openclaw:2026.9.6","native_worker_support":false,
"codex_image":"ghcr.io/occ-platform/runtime/codex:0.169.0","cpu_limit":"2","memory_limit":"4Gi","cpu_request":null,"node_workers":8,
"pod_labels":{"team":"support","tier":"a"},"node_selector":{"pool":"agents"},"image_pull_secrets":["regcred","other"],
"tolerations":[{"key":"dedicated","operator":"Equal","value":"agents","effect":"NoSchedule","toleration_seconds":300}],
"state":{"enabled":true,"size":"10Gi","storage_class":null,"access_mode":"ReadWriteOnce","retain_on_destroy":true,"adopt_retained":false},
"logging":{"ownership":"platform","level":"debug"},
"sandbox_driver":{"name":"openshell","facets":["gpu","net"],"required_profile":"strict","gateway_namespace":"openshell","gateway_service":"openshell-gateway"}}`

// v0SSH is an ssh block as a version 0 state holds it.
const v0SSH = `{"host":"10.0.0.5","port":2222,"user":"occ","insecure_ignore_host_key":false,"bastion":{"host":"jump","port":22,"user":null,"host_key":"ssh-ed25519 AAAA"}}`

// upgrade runs the provider's UpgradeResourceState on a version 0 state, as
// Terraform does when it reads a state an earlier provider wrote, and
// returns the upgraded state.
func upgradeV0(t *testing.T, typeName, v0 string) map[string]tftypes.Value {
	t.Helper()
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New("test", "")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{TypeName: typeName, Version: 0, RawState: &tfprotov6.RawState{JSON: []byte(v0)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Fatalf("%s: %s: %s", typeName, d.Summary, d.Detail)
	}
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := resp.UpgradedState.Unmarshal(schemas.ResourceSchemas[typeName].ValueType())
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		t.Fatal(err)
	}
	return attrs
}

func tfString(t *testing.T, v tftypes.Value) string {
	t.Helper()
	var s string
	if err := v.As(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Version 0 states of occ_compute, occ_agent and occ_credential_source
// upgrade to the same settings, so that after the upgrade neither the
// compute nor an agent or source on it plans a change; the settings read
// back into the compute the version 0 reference was.
func TestComputeSettings_UpgradeKeepsEveryReferenceEqual(t *testing.T) {
	for name, block := range map[string]string{"kubernetes": v0Kubernetes, "ssh": v0SSH} {
		t.Run(name, func(t *testing.T) {
			ref := `{"id":"prod","name":"prod","kind":"` + name + `","` + name + `":` + block + `}`
			compute := upgradeV0(t, "occ_compute", strings.TrimSuffix(ref, "}")+`,"installation":{"execution_modes":["embedded"],"native_workers_support":null,"sandbox_driver_unavailable":false}}`)
			settings := tfString(t, compute["settings"])
			if !strings.HasPrefix(settings, `{"`+name+`":{`) || !json.Valid([]byte(settings)) {
				t.Fatalf("compute settings = %s", settings)
			}
			if tfString(t, compute["kind"]) != name || tfString(t, compute["name"]) != "prod" {
				t.Errorf("the rest of the compute changed: %v", compute)
			}

			agent := upgradeV0(t, "occ_agent", `{"id":"occ-acme/support","name":"support","compute":`+ref+`,"harness":"openclaw","execution_mode":"embedded","revision":3}`)
			var agentRef map[string]tftypes.Value
			if err := agent["compute"].As(&agentRef); err != nil {
				t.Fatal(err)
			}
			if got := tfString(t, agentRef["settings"]); got != settings {
				t.Errorf("agent's compute settings\n %s\nwant the compute's\n %s", got, settings)
			}
			var rev tftypes.Value = agent["revision"]
			if !rev.Equal(tftypes.NewValue(tftypes.Number, 3)) || tfString(t, agent["harness"]) != "openclaw" {
				t.Errorf("the rest of the agent changed: %v", agent)
			}

			source := upgradeV0(t, "occ_credential_source", `{"id":"llm","name":"llm","compute":`+ref+`,"method":"api_key","secret_ref":{"name":"llm","key":"api-key"}}`)
			var sourceRef map[string]tftypes.Value
			if err := source["compute"].As(&sourceRef); err != nil {
				t.Fatal(err)
			}
			if got := tfString(t, sourceRef["settings"]); got != settings {
				t.Errorf("source's compute settings %s, want %s", got, settings)
			}

			// The settings give back the compute the version 0 reference was.
			ctx := context.Background()
			var diags diag.Diagnostics
			legacy, err := tftypes.ValueFromJSONWithOpts([]byte(ref), types.ObjectType{AttrTypes: legacyComputeRefType()}.TerraformType(ctx), tftypes.ValueFromJSONOpts{})
			if err != nil {
				t.Fatal(err)
			}
			lv, err := types.ObjectType{AttrTypes: legacyComputeRefType()}.ValueFromTerraform(ctx, legacy)
			if err != nil {
				t.Fatal(err)
			}
			want, known := computeFromModel(ctx, computeModelOf(lv.(types.Object)), &diags)
			if !known || diags.HasError() {
				t.Fatalf("legacy reference: %v %v", known, diags)
			}
			got, known := computeFromObject(ctx, computeRef(ctx, computeModelOf(lv.(types.Object)), &diags), &diags)
			if !known || diags.HasError() {
				t.Fatalf("reference: %v %v", known, diags)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("settings read back\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

// A compute reference with no settings, or with settings that are not a
// compute's, is refused naming the fix: pass occ_compute whole.
func TestComputeSettings_RefusesWhatIsNotACompute(t *testing.T) {
	ctx := context.Background()
	for settings, want := range map[string]string{
		"":                                   "has no settings",
		`[1]`:                                "not a JSON object",
		`{"kubernetes":{},"ssh":{}}`:         "holds 2 blocks (kubernetes, ssh)",
		`{"vm":{"address":"x"}}`:             `"vm" is no compute kind's block`,
		`{"kubernetes":{"namespace":[7]}}`:   "does not fit",
		`{"kubernetes":{"namespace":"a"}} x`: "not a JSON object",
	} {
		s := types.StringValue(settings)
		if settings == "" {
			s = types.StringNull()
		}
		ref := types.ObjectValueMust(computeRefType(), map[string]attr.Value{"id": types.StringValue("p"), "name": types.StringValue("p"), "settings": s})
		var diags diag.Diagnostics
		if _, known := computeFromObject(ctx, ref, &diags); known || !diags.HasError() ||
			!strings.Contains(diags[0].Detail()+diags[0].Summary(), want) || !strings.Contains(diags[0].Detail(), "compute = occ_compute.NAME") {
			t.Errorf("settings %q: known %v, %v; want %q", settings, known, diags, want)
		}
	}
	// Unknown settings (a compute whose block is not known yet) defer.
	ref := types.ObjectValueMust(computeRefType(), map[string]attr.Value{"id": types.StringValue("p"), "name": types.StringValue("p"), "settings": types.StringUnknown()})
	var diags diag.Diagnostics
	if _, known := computeFromObject(ctx, ref, &diags); known || diags.HasError() {
		t.Errorf("unknown settings: known %v, %v", known, diags)
	}
}

// A references record of version 1 (the compute whole) still reads: its
// compute comes back as the reference an upgraded state holds.
func TestReferences_ReadsVersion1(t *testing.T) {
	ctx := context.Background()
	s := agentSchema(ctx)
	s.Attributes["compute"] = legacyComputeAttribute(false)
	typ := referencesType(ctx, s)
	legacy, err := tftypes.ValueFromJSONWithOpts([]byte(`{"id":"prod","name":"prod","kind":"ssh","ssh":`+v0SSH+`}`),
		types.ObjectType{AttrTypes: legacyComputeRefType()}.TerraformType(ctx), tftypes.ValueFromJSONOpts{})
	if err != nil {
		t.Fatal(err)
	}
	in := testReferencesModel(t)
	parts := map[string]tftypes.Value{"compute": legacy}
	for name, v := range map[string]interface {
		ToTerraformValue(context.Context) (tftypes.Value, error)
	}{"configuration": in.Configuration, "harness_auth": in.HarnessAuth, "harness": in.Harness, "execution_mode": in.ExecutionMode} {
		if parts[name], err = v.ToTerraformValue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, parts))
	if err != nil {
		t.Fatal(err)
	}
	var out agentModel
	if err := decodeReferences(ctx, referencesVersionV1+base64.StdEncoding.EncodeToString(dv.MsgPack), &out); err != nil {
		t.Fatal(err)
	}
	settings, _ := out.Compute.Attributes()["settings"].(types.String)
	if !strings.HasPrefix(settings.ValueString(), `{"ssh":{`) || !strings.Contains(settings.ValueString(), `"host":"10.0.0.5"`) ||
		!out.Configuration.Equal(in.Configuration) || !out.Harness.Equal(in.Harness) {
		t.Errorf("read back compute %v, configuration %v", out.Compute, out.Configuration)
	}
}
