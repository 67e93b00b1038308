package provider

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
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
		identity: func(c admission.Compute, agent string) agentIdentityModel {
			return agentIdentityModel{Name: types.StringValue(agent), Target: agentTarget{"address": types.StringValue(c.Settings.(vmSettings).Address)}}
		},
		identityOfID: func(string) (agentIdentityModel, bool) { return agentIdentityModel{}, false },
		target: []targetAttr{{name: "address", key: true, what: "the VM's address", example: "10.1.1.1",
			identity: "VM: its address.", list: "VM: the address to list.", data: "The VM's address."}},
		noun: "a VM", claim: "address",
		importID: func(m agentIdentityModel) string {
			return "vm://" + m.Target.str("address").ValueString() + "/" + m.Name.ValueString()
		},
		listTarget: func(m agentIdentityModel) (admission.Compute, string) {
			return admission.Compute{Kind: "vm", Settings: vmSettings{Address: m.Target.str("address").ValueString()}}, m.Target.str("address").ValueString()
		},
		lookup: func(address, agent string) (string, string, string) {
			return "vm://" + address + "/" + agent, "vm://" + address + "/" + agent, "on VM " + address
		},
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
	computeTypes := schemaObjectType(computeSchema()).AttrTypes
	vmType, ok := computeTypes["vm"].(basetypes.ObjectType)
	if !ok {
		t.Fatalf("occ_compute's value has no vm object: %v", computeTypes["vm"])
	}
	attrs := map[string]attr.Value{"id": types.StringValue("v1"), "name": types.StringValue("v1"), "kind": types.StringValue("vm")}
	for _, row := range executors {
		attrs[row.block] = types.ObjectNull(computeTypes[row.block].(basetypes.ObjectType).AttrTypes)
	}
	attrs["vm"] = types.ObjectValueMust(vmType.AttrTypes, map[string]attr.Value{"address": types.StringValue("10.1.2.3")})
	whole := computeModel{ID: attrs["id"].(types.String), Name: attrs["name"].(types.String), Kind: attrs["kind"].(types.String), Blocks: map[string]types.Object{}}
	for _, row := range executors {
		whole.Blocks[row.block] = attrs[row.block].(types.Object)
	}

	// A reference carries the vm block in its settings, and gives it back.
	var diags diag.Diagnostics
	ref := computeRef(context.Background(), whole, &diags)
	if got := ref.Attributes()["settings"].(types.String).ValueString(); got != `{"vm":{"address":"10.1.2.3"}}` {
		t.Errorf("settings = %s", got)
	}
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
	m, _ := computeRefModel(context.Background(), ref, &diags)
	m.Installation = types.ObjectNull(installationAttrTypes)
	if o := m.object(&diags); diags.HasError() || !o.Attributes()["vm"].Equal(attrs["vm"]) {
		t.Errorf("object = %v, %v", o, diags)
	}

	// Two blocks, or none, are refused naming the registered kinds.
	two, _ := computeRefModel(context.Background(), ref, &diags)
	two.Blocks["kubernetes"] = types.ObjectUnknown(computeTypes["kubernetes"].(basetypes.ObjectType).AttrTypes)
	var unknownDiags diag.Diagnostics
	if checkOneKind(two, &unknownDiags); unknownDiags.HasError() {
		t.Errorf("an unknown block was judged at once: %v", unknownDiags)
	}
	none, _ := computeRefModel(context.Background(), ref, &diags)
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

// A kind's target attributes join the agent identity, the occ_agent list
// block and data.occ_agent, and one set of checks judges them beside the
// bundled kinds': an identity or a list block that names two kinds'
// targets, another kind's attribute, or an empty key is refused in the
// kinds' own words, and one that names the VM reads the VM's import id,
// list target and lookup.
func TestKindRegistry_TargetJoinsIdentityListAndData(t *testing.T) {
	withKind(t, "vm", vmRow())
	ctx := context.Background()
	if _, ok := agentIdentitySchema().Attributes["address"]; !ok {
		t.Error("the agent identity has no address")
	}
	var ls list.ListResourceSchemaResponse
	(&agentListResource{}).ListResourceConfigSchema(ctx, list.ListResourceSchemaRequest{}, &ls)
	if _, ok := ls.Schema.Attributes["address"]; !ok {
		t.Error("the list block has no address")
	}
	var ds datasource.SchemaResponse
	(&agentDataSource{}).Schema(ctx, datasource.SchemaRequest{}, &ds)
	if _, ok := ds.Schema.Attributes["address"]; !ok {
		t.Error("data.occ_agent has no address")
	}

	s, n := types.StringValue, types.StringNull()
	vm := agentIdentityModel{Name: s("a"), Target: agentTarget{"address": s("10.1.1.1")}}
	if id, err := vm.importID(); err != nil || id != "vm://10.1.1.1/a" {
		t.Errorf("importID() = %q, %v", id, err)
	}
	// The identity Terraform holds names every kind's attributes, null
	// but the VM's, and reads back as it was.
	if o := vm.object(); !o.Attributes()["namespace"].IsNull() || !identityFromObject(o).equal(vm) {
		t.Errorf("object = %v", o)
	}
	for _, c := range []struct {
		in   agentTarget
		want string
	}{
		{agentTarget{"namespace": s("occ-acme"), "address": s("10.1.1.1")}, "identity sets both namespace and address"},
		{agentTarget{"address": s("10.1.1.1"), "port": types.Int64Value(22)}, "identity.port is for an SSH host: remove it, or set host instead of address"},
		{agentTarget{"address": n}, "identity must set namespace for a Kubernetes namespace, or host (and port) for an SSH host, or address for a VM"},
	} {
		if _, err := (agentIdentityModel{Name: s("a"), Target: c.in}).importID(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to say %q", c.in, err, c.want)
		}
	}
	for _, c := range []struct {
		in   agentTarget
		want string
	}{
		{agentTarget{"host": s("10.0.0.5"), "address": s("10.1.1.1")}, "host and address are both set"},
		{agentTarget{"address": s("")}, "address is empty"},
		{agentTarget{"address": s("10.1.1.1"), "port": types.Int64Value(22)}, "port is for an SSH host"},
	} {
		var diags diag.Diagnostics
		c.in.check(&diags)
		if !containsSummary(diags, c.want) {
			t.Errorf("%v: %v, want %q", c.in, diags, c.want)
		}
	}
	on, where, identity := listTarget(agentTarget{"address": s("10.1.1.1")})
	if on.Kind != "vm" || where != "10.1.1.1" || !identity("a").equal(vm) {
		t.Errorf("listTarget = %+v %q %v", on, where, identity("a"))
	}
	lookupID, id, at := agentLookup(agentDataModel{Name: s("a"), Target: agentTarget{"namespace": n, "host": n, "address": s("10.1.1.1")}})
	if lookupID != "vm://10.1.1.1/a" || id != lookupID || at != "on VM 10.1.1.1" {
		t.Errorf("lookup = %q %q %q", lookupID, id, at)
	}

	// A target attribute is one kind's.
	taken := vmRow()
	taken.block, taken.target[0].name = "vm2", "host"
	if err := registerKind("vm2", taken); err == nil || !strings.Contains(err.Error(), `target attribute "host" is taken`) {
		t.Errorf("a second host: %v", err)
	}
}
