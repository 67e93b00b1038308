package provider

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// vmSettings are a hypothetical kind's own settings: a type neither
// admission nor the provider's glue knows.
type vmSettings struct{ Address string }

// vmRow is a hypothetical compute kind's registration: a block with one
// attribute, converted into its own settings type.
func vmRow() kindRow {
	return kindRow{
		block: "vm",
		blockSchema: func() schema.SingleNestedAttribute {
			return schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "A VM.",
				Attributes: map[string]schema.Attribute{"address": schema.StringAttribute{Required: true, MarkdownDescription: "Its address."}}}
		},
		settings: func(_ context.Context, o types.Object, _ *diag.Diagnostics) any {
			return vmSettings{Address: o.Attributes()["address"].(types.String).ValueString()}
		},
		hint:  `vm = { address = ... } for a VM`,
		where: func(c admission.Compute) string { return "on VM " + c.Settings.(vmSettings).Address },
		build: func(context.Context, *Data) (executor.Executor, error) { return nil, nil },
		agentID: func(c admission.Compute, name string) string {
			return "vm://" + c.Settings.(vmSettings).Address + "/" + name
		},
		identity:     func(admission.Compute, string) agentIdentityModel { return agentIdentityModel{} },
		identityOfID: func(string) (agentIdentityModel, bool) { return agentIdentityModel{}, false },
		claims:       func(agentIdentityModel) bool { return false },
		importID:     func(agentIdentityModel) string { return "" },
		listTarget:   func(agentIdentityModel) (admission.Compute, string) { return admission.Compute{}, "" },
	}
}

// withKind registers a kind for one (sequential) test and restores the
// registry after it.
func withKind(t *testing.T, kind string, row kindRow) {
	t.Helper()
	saved, order, imports := maps.Clone(executors), slices.Clone(kindOrder), slices.Clone(importOrder)
	t.Cleanup(func() { executors, kindOrder, importOrder = saved, order, imports })
	if err := registerKind(kind, row); err != nil {
		t.Fatal(err)
	}
}

// A compute kind is one registration: its block joins occ_compute's
// schema and every by-value compute reference, a compute with it converts
// into the kind's own settings, the one-kind check and the messages name
// it, and its import ids are asked for before Kubernetes'.
func TestKindRegistry_OneRegistrationWiresTheKind(t *testing.T) {
	withKind(t, "vm", vmRow())
	if _, ok := computeSchema().Attributes["vm"]; !ok {
		t.Fatal("occ_compute has no vm block")
	}
	refTypes := computeRefType()
	vmType, ok := refTypes["vm"].(basetypes.ObjectType)
	if !ok {
		t.Fatalf("a compute reference has no vm object: %v", refTypes["vm"])
	}
	attrs := map[string]attr.Value{"id": types.StringValue("v1"), "name": types.StringValue("v1"), "kind": types.StringValue("vm")}
	for name, typ := range refTypes {
		if _, set := attrs[name]; !set {
			attrs[name] = types.ObjectNull(typ.(basetypes.ObjectType).AttrTypes)
		}
	}
	attrs["vm"] = types.ObjectValueMust(vmType.AttrTypes, map[string]attr.Value{"address": types.StringValue("10.1.2.3")})
	ref := types.ObjectValueMust(refTypes, attrs)

	var diags diag.Diagnostics
	c, known := computeFromObject(context.Background(), ref, &diags)
	if !known || diags.HasError() {
		t.Fatalf("known = %v, %v", known, diags)
	}
	if c.Kind != "vm" || c.Settings != (vmSettings{Address: "10.1.2.3"}) {
		t.Errorf("compute = %+v, want kind vm with its own settings", c)
	}
	if got := agentID(c, "a"); got != "vm://10.1.2.3/a" {
		t.Errorf("agent id = %q", got)
	}
	if got := targetWhere(c); got != "on VM 10.1.2.3" {
		t.Errorf("where = %q", got)
	}
	if i, k := slices.Index(importOrder, "vm"), slices.Index(importOrder, admission.KindKubernetes); i < 0 || i > k {
		t.Errorf("import order %v: vm is not asked before kubernetes", importOrder)
	}

	// The model round-trips through occ_compute's value.
	m := computeModelOf(ref)
	m.Installation = types.ObjectNull(installationAttrTypes)
	if o := m.object(&diags); diags.HasError() || !o.Attributes()["vm"].Equal(attrs["vm"]) {
		t.Errorf("object = %v, %v", o, diags)
	}

	// Two blocks, or none, are refused naming the registered kinds.
	two := computeModelOf(ref)
	two.Blocks["kubernetes"] = types.ObjectUnknown(refTypes["kubernetes"].(basetypes.ObjectType).AttrTypes)
	var unknownDiags diag.Diagnostics
	if checkOneKind(two, &unknownDiags); unknownDiags.HasError() {
		t.Errorf("an unknown block was judged at once: %v", unknownDiags)
	}
	none := computeModelOf(ref)
	none.Blocks["vm"] = types.ObjectNull(vmType.AttrTypes)
	var noneDiags diag.Diagnostics
	checkOneKind(none, &noneDiags)
	if !noneDiags.HasError() || !strings.Contains(noneDiags[0].Summary(), "kubernetes or ssh or vm") || !strings.Contains(noneDiags[0].Detail(), "vm = { address = ... } for a VM") {
		t.Errorf("no block: %v", noneDiags)
	}
}

// registerKind refuses a row without what every kind needs, a kind
// registered already, and a block another kind has.
func TestKindRegistry_RegisterKindRefusals(t *testing.T) {
	withKind(t, "vm", vmRow())
	incomplete := vmRow()
	incomplete.identity = nil
	sameBlock := vmRow()
	for name, err := range map[string]error{
		"incomplete":  registerKind("vm2", incomplete),
		"again":       registerKind("vm", vmRow()),
		"ssh's block": func() error { r := vmRow(); r.block = "ssh"; return registerKind("vm3", r) }(),
		"vm's block":  registerKind("vm4", sameBlock),
	} {
		if err == nil {
			t.Errorf("%s: registered", name)
		}
	}
}

// The built-in kinds are registered with everything registerKind asks of
// a kind, and their blocks are occ_compute's.
func TestKindRegistry_BuiltInRowsAreComplete(t *testing.T) {
	for _, kind := range kindOrder {
		row := executors[kind]
		saved, order, imports := maps.Clone(executors), slices.Clone(kindOrder), slices.Clone(importOrder)
		delete(executors, kind)
		kindOrder = slices.DeleteFunc(slices.Clone(kindOrder), func(k string) bool { return k == kind })
		err := registerKind(kind, row)
		executors, kindOrder, importOrder = saved, order, imports
		if err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		if _, ok := computeSchema().Attributes[row.block]; !ok {
			t.Errorf("%s: occ_compute has no %s block", kind, row.block)
		}
	}
}
