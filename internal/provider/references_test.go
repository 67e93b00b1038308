package provider

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// testReferencesModel is an agent whose references are set, as an apply
// holds them.
func testReferencesModel(t *testing.T) agentModel {
	t.Helper()
	ctx := context.Background()
	s := agentSchema(ctx)
	obj := func(name string, set map[string]attr.Value) types.Object {
		typ := s.Attributes[name].GetType().(types.ObjectType)
		vals := map[string]attr.Value{}
		for k, at := range typ.AttrTypes {
			if v, ok := set[k]; ok {
				vals[k] = v
				continue
			}
			v, err := at.ValueFromTerraform(ctx, nullOf(ctx, at))
			if err != nil {
				t.Fatal(err)
			}
			vals[k] = v
		}
		o, d := types.ObjectValue(typ.AttrTypes, vals)
		if d.HasError() {
			t.Fatal(d)
		}
		return o
	}
	return agentModel{
		Name:          types.StringValue("support"),
		Compute:       obj("compute", map[string]attr.Value{"id": types.StringValue("prod"), "name": types.StringValue("prod"), "kind": types.StringValue("kubernetes")}),
		Configuration: obj("configuration", map[string]attr.Value{"name": types.StringValue("support"), "canonical_document": types.StringValue(`{"agents":{}}`)}),
		HarnessAuth:   obj("harness_auth", nil),
		Harness:       types.StringValue("openclaw"),
		ExecutionMode: types.StringValue("embedded"),
	}
}

// TestReferences_RoundTrip: the record an apply leaves reads back into the
// same references, exactly (nulls included).
func TestReferences_RoundTrip(t *testing.T) {
	ctx := context.Background()
	in := testReferencesModel(t)
	rec, err := encodeReferences(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec, referencesVersion) {
		t.Fatalf("record %q lacks its version", rec)
	}
	var out agentModel
	if err := decodeReferences(ctx, rec, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Compute.Equal(in.Compute) || !out.Configuration.Equal(in.Configuration) || !out.HarnessAuth.Equal(in.HarnessAuth) ||
		!out.Harness.Equal(in.Harness) || !out.ExecutionMode.Equal(in.ExecutionMode) {
		t.Fatalf("read back %+v, want %+v", out, in)
	}
}

// TestReferences_Refusals: no record for values not known yet or one too
// large for a Service's annotations; a record of another version, damaged
// or of another shape is not read, saying why, and changes nothing.
func TestReferences_Refusals(t *testing.T) {
	ctx := context.Background()
	unknown := testReferencesModel(t)
	unknown.Harness = types.StringUnknown()
	if _, err := encodeReferences(ctx, unknown); err == nil || !strings.Contains(err.Error(), "harness is not known") {
		t.Errorf("unknown harness: %v", err)
	}
	big := testReferencesModel(t)
	big.Configuration = testReferencesModelWithDocument(t, strings.Repeat("x", maxReferences))
	if _, err := encodeReferences(ctx, big); err == nil || !strings.Contains(err.Error(), "KiB") {
		t.Errorf("large record: %v", err)
	}
	for rec, want := range map[string]string{
		"v0:abc":                  "another provider version",
		referencesVersion + "!!!": "damaged",
		referencesVersion + base64.StdEncoding.EncodeToString([]byte{0x92, 0x01, 0x02}): "does not fit",
	} {
		var m agentModel
		if err := decodeReferences(ctx, rec, &m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decode %q: %v, want %q", rec, err, want)
		}
		if !m.Compute.IsNull() || !m.Harness.IsNull() {
			t.Errorf("decode %q changed the model: %+v", rec, m)
		}
	}
}

func testReferencesModelWithDocument(t *testing.T, doc string) types.Object {
	m := testReferencesModel(t)
	attrs := m.Configuration.Attributes()
	attrs["canonical_document"] = types.StringValue(doc)
	o, d := types.ObjectValue(m.Configuration.AttributeTypes(context.Background()), attrs)
	if d.HasError() {
		t.Fatal(d)
	}
	return o
}

func nullOf(ctx context.Context, t attr.Type) tftypes.Value {
	return tftypes.NewValue(t.TerraformType(ctx), nil)
}
