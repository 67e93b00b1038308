package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The references record: what an agent's configuration passed it that no
// target can tell (its compute, configuration and credential source as the
// by-value references hold them, its harness and execution mode), kept by
// the executor beside the activated revision (executor.Deployment.
// References: an annotation on the Kubernetes Service, a field of the SSH
// host's activation record). An import reads it back, so that the imported
// state holds the references and `terraform plan -generate-config-out` (or
// `terraform query -generate-config-out`) writes configuration that plans
// as it is: the same revision, nothing deployed. The references hold no
// secret (a credential source's write-only value is not part of them).

// referenceAttributes are the agent attributes the record holds.
var referenceAttributes = []string{"compute", "configuration", "harness_auth", "harness", "execution_mode"}

// referencesVersion starts every record: a record of another shape (a
// provider whose schema differs) is not read, except version 1, whose
// compute reference held the compute whole (legacyComputeRefType); it is
// read and its compute converted as a state upgrade converts it.
const (
	referencesVersion   = "occ-references-v2:"
	referencesVersionV1 = "occ-references-v1:"
)

// maxReferences bounds a record: Kubernetes allows 256 KiB of annotations
// on an object in all. A larger one is not recorded (the apply warns).
const maxReferences = 128 << 10

// referencesType is the record's type, from the agent schema s itself.
func referencesType(ctx context.Context, s schema.Schema) tftypes.Object {
	types := map[string]tftypes.Type{}
	for _, name := range referenceAttributes {
		types[name] = s.Attributes[name].GetType().TerraformType(ctx)
	}
	return tftypes.Object{AttributeTypes: types}
}

// encodeReferences is the record of m's references; err says why there is
// none (a value not known, or a record too large).
func encodeReferences(ctx context.Context, m agentModel) (string, error) {
	vals := map[string]attr.Value{"compute": m.Compute, "configuration": m.Configuration, "harness_auth": m.HarnessAuth,
		"harness": m.Harness, "execution_mode": m.ExecutionMode}
	parts := map[string]tftypes.Value{}
	for name, v := range vals {
		tv, err := v.ToTerraformValue(ctx)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		if !tv.IsFullyKnown() {
			return "", fmt.Errorf("%s is not known", name)
		}
		parts[name] = tv
	}
	typ := referencesType(ctx, agentSchema(ctx))
	// The protocol's own encoding of a value (msgpack), which keeps every
	// null and type exactly.
	dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, parts))
	if err != nil {
		return "", err
	}
	rec := referencesVersion + base64.StdEncoding.EncodeToString(dv.MsgPack)
	if len(rec) > maxReferences {
		return "", fmt.Errorf("the record would be %d KiB, more than the %d KiB a Kubernetes Service's annotations can hold beside the others", len(rec)>>10, maxReferences>>10)
	}
	return rec, nil
}

// decodeReferences fills m's references from rec; err says why it cannot
// (a record of another provider version, or damaged).
func decodeReferences(ctx context.Context, rec string, m *agentModel) error {
	s := agentSchema(ctx)
	body, ok := strings.CutPrefix(rec, referencesVersion)
	legacy := false
	if !ok {
		if body, legacy = strings.CutPrefix(rec, referencesVersionV1); !legacy {
			return fmt.Errorf("the record was written by another provider version")
		}
		s.Attributes = maps.Clone(s.Attributes)
		s.Attributes["compute"] = legacyComputeAttribute(false)
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return fmt.Errorf("the record is damaged: %w", err)
	}
	v, err := (&tfprotov6.DynamicValue{MsgPack: b}).Unmarshal(referencesType(ctx, s))
	if err != nil {
		return fmt.Errorf("the record does not fit this provider's schema: %w", err)
	}
	var parts map[string]tftypes.Value
	if err := v.As(&parts); err != nil {
		return err
	}
	got := map[string]attr.Value{}
	for _, name := range referenceAttributes {
		av, err := s.Attributes[name].GetType().ValueFromTerraform(ctx, parts[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		got[name] = av
	}
	compute, ok1 := got["compute"].(types.Object)
	configuration, ok2 := got["configuration"].(types.Object)
	auth, ok3 := got["harness_auth"].(types.Object)
	harness, ok4 := got["harness"].(types.String)
	mode, ok5 := got["execution_mode"].(types.String)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return fmt.Errorf("the record does not fit this provider's schema")
	}
	if legacy {
		var diags diag.Diagnostics
		if compute = computeRef(ctx, computeModelOf(compute), &diags); diags.HasError() {
			return fmt.Errorf("its compute: %s", diags.Errors()[0].Detail())
		}
	}
	m.Compute, m.Configuration, m.HarnessAuth, m.Harness, m.ExecutionMode = compute, configuration, auth, harness, mode
	return nil
}

// recordReferences is the record an apply hands the executor for plan's
// references, or "" with a warning that says what an import will lack.
func recordReferences(ctx context.Context, plan agentModel, diags *diag.Diagnostics) string {
	rec, err := encodeReferences(ctx, plan)
	if err != nil {
		diags.AddWarning("The agent's references were not recorded on its target",
			fmt.Sprintf("Agent %q: %v. The agent runs; only an import of it (terraform import, an import block, terraform query) will not read its compute, configuration and harness_auth back, and needs them written in its configuration.", plan.Name.ValueString(), err))
		return ""
	}
	return rec
}
