package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// computeModel is occ_compute's state, and the shape occ_agent,
// occ_credential_source and data.occ_installation take it in: the
// attributes every compute has, and each kind's block (by its name in the
// registry, null when unset). It is read from and written to Terraform as
// one object (computeModelOf, object), since the blocks are the
// registered kinds'.
type computeModel struct {
	ID           types.String
	Name         types.String
	Kind         types.String
	Blocks       map[string]types.Object
	Installation types.Object
	// Settings is occ_compute's computed `settings`, what a by-value
	// reference carries instead of the blocks (compute_settings.go).
	Settings types.String
	// Timeouts is occ_compute's own (a reference has none).
	Timeouts timeouts.Value
}

// computeModelOf reads a whole compute object: occ_compute's value, or a
// reference of the legacy shape (which has no installation). A by-value
// reference ({id, name, settings}) is read with computeRefModel.
func computeModelOf(o types.Object) computeModel {
	attrs := o.Attributes()
	m := computeModel{Blocks: map[string]types.Object{}, Installation: types.ObjectNull(installationAttrTypes), Settings: types.StringNull()}
	m.ID, _ = attrs["id"].(types.String)
	m.Name, _ = attrs["name"].(types.String)
	m.Kind, _ = attrs["kind"].(types.String)
	if s, ok := attrs["settings"].(types.String); ok {
		m.Settings = s
	}
	if inst, ok := attrs["installation"].(types.Object); ok {
		m.Installation = inst
	}
	m.Timeouts, _ = attrs["timeouts"].(timeouts.Value)
	for _, kind := range kindOrder {
		block := executors[kind].block
		if b, ok := attrs[block].(types.Object); ok {
			m.Blocks[block] = b
		}
	}
	return m
}

// getCompute reads occ_compute's plan, state or config.
func getCompute(ctx context.Context, from interface {
	Get(context.Context, any) diag.Diagnostics
}, diags *diag.Diagnostics) computeModel {
	var o types.Object
	diags.Append(from.Get(ctx, &o)...)
	return computeModelOf(o)
}

// object is the model as occ_compute's value.
func (m computeModel) object(diags *diag.Diagnostics) types.Object {
	attrTypes := computeSchema().Type().(basetypes.ObjectType).AttrTypes
	attrs := map[string]attr.Value{"id": m.ID, "name": m.Name, "kind": m.Kind, "installation": m.Installation, "timeouts": m.Timeouts, "settings": m.Settings}
	if tt, ok := attrTypes["timeouts"].(timeouts.Type); ok && !m.Timeouts.Type(context.Background()).Equal(tt) {
		// A reference's model, which has none.
		attrs["timeouts"] = timeouts.Value{Object: types.ObjectNull(tt.AttrTypes)}
	}
	for name, t := range attrTypes {
		if _, ok := attrs[name]; ok {
			continue
		}
		attrs[name] = types.ObjectNull(t.(basetypes.ObjectType).AttrTypes)
		if b, ok := m.Blocks[name]; ok {
			attrs[name] = b
		}
	}
	o, d := types.ObjectValue(attrTypes, attrs)
	diags.Append(d...)
	return o
}

// block returns the compute's set block: its kind's row and value; ok is
// false when none is set (or one is unknown).
func (m computeModel) block() (kind string, row kindRow, o types.Object, ok bool) {
	for _, kind := range kindOrder {
		row := executors[kind]
		if b, set := m.Blocks[row.block]; set && !b.IsNull() && !b.IsUnknown() {
			return kind, row, b, true
		}
	}
	return "", kindRow{}, types.Object{}, false
}

var objectAsOptions = basetypes.ObjectAsOptions{}

// decodeObject decodes a known, non-null object into T; ok is false for a
// null or unknown object.
func decodeObject[T any](ctx context.Context, o types.Object, diags *diag.Diagnostics) (T, bool) {
	var out T
	if o.IsNull() || o.IsUnknown() {
		return out, false
	}
	d := o.As(ctx, &out, objectAsOptions)
	diags.Append(d...)
	return out, !d.HasError()
}

// fullyKnown reports whether a value and everything inside it is known. It
// walks the framework values directly: converting to tftypes first costs
// more than the whole admission on large plans.
func fullyKnown(v attr.Value) bool {
	if v == nil {
		return true
	}
	if v.IsUnknown() {
		return false
	}
	if v.IsNull() {
		return true
	}
	var elems []attr.Value
	switch t := v.(type) {
	case basetypes.ObjectValue:
		for _, a := range t.Attributes() {
			if !fullyKnown(a) {
				return false
			}
		}
		return true
	case basetypes.ListValue:
		elems = t.Elements()
	case basetypes.SetValue:
		elems = t.Elements()
	case basetypes.MapValue:
		for _, e := range t.Elements() {
			if !fullyKnown(e) {
				return false
			}
		}
		return true
	}
	for _, e := range elems {
		if !fullyKnown(e) {
			return false
		}
	}
	return true
}

// computeFromObject converts a by-value compute reference into
// admission's Compute; known is false when anything admission needs is
// still unknown. occ_compute's own value goes through computeFromModel.
func computeFromObject(ctx context.Context, o types.Object, diags *diag.Diagnostics) (admission.Compute, bool) {
	if o.IsNull() || o.IsUnknown() {
		return admission.Compute{}, false
	}
	m, ok := computeRefModel(ctx, o, diags)
	if !ok {
		return admission.Compute{}, false
	}
	return computeFromModel(ctx, m, diags)
}

// computeRefModel reads a by-value reference ({id, name, settings}) into
// the model its compute has; ok is false while its settings are unknown,
// or when they are not a compute's (an error says so).
func computeRefModel(ctx context.Context, o types.Object, diags *diag.Diagnostics) (computeModel, bool) {
	attrs := o.Attributes()
	m := computeModel{Blocks: map[string]types.Object{}, Installation: types.ObjectNull(installationAttrTypes), Kind: types.StringNull()}
	m.ID, _ = attrs["id"].(types.String)
	m.Name, _ = attrs["name"].(types.String)
	m.Settings, _ = attrs["settings"].(types.String)
	switch {
	case m.Settings.IsUnknown():
		return m, false
	case m.Settings.IsNull():
		diags.AddError("INVALID_REQUEST: the compute reference has no settings",
			"Pass the occ_compute resource whole (compute = occ_compute.NAME), whose computed settings the reference carries; do not write its attributes out.")
		return m, false
	}
	blocks, err := decodeSettings(ctx, m.Settings.ValueString())
	if err != nil {
		diags.AddError("INVALID_REQUEST: the compute reference's settings are not a compute's",
			fmt.Sprintf("The settings %v. Pass the occ_compute resource whole (compute = occ_compute.NAME); do not write its attributes out.", err))
		return m, false
	}
	for k, b := range blocks {
		m.Blocks[k] = b
	}
	if kind, _, _, ok := m.block(); ok {
		m.Kind = types.StringValue(kind)
	}
	return m, true
}

func computeFromModel(ctx context.Context, m computeModel, diags *diag.Diagnostics) (admission.Compute, bool) {
	if !fullyKnown(m.Name) {
		return admission.Compute{}, false
	}
	for _, b := range m.Blocks {
		if !fullyKnown(b) {
			return admission.Compute{}, false
		}
	}
	c := admission.Compute{ID: m.Name.ValueString(), Name: m.Name.ValueString()}
	if !m.ID.IsNull() && !m.ID.IsUnknown() {
		c.ID = m.ID.ValueString()
	}
	kind, row, o, ok := m.block()
	if !ok {
		return c, false
	}
	c.Kind, c.Settings = kind, row.settings(ctx, o, diags)
	return c, true
}

func installationObject(inst admission.Installation, diags *diag.Diagnostics) types.Object {
	modes, d := types.ListValueFrom(context.Background(), types.StringType, inst.ExecutionModes)
	diags.Append(d...)
	obj, d := types.ObjectValue(installationAttrTypes, map[string]attr.Value{
		"execution_modes": modes,
		// rule ND6: no runtime supports native workers; kept for configurations that read it.
		"native_workers_support":     types.StringNull(),
		"sandbox_driver_unavailable": types.BoolValue(inst.SandboxDriverUnavailable),
	})
	diags.Append(d...)
	return obj
}

// setTopLevel replaces top-level attributes of an object value in place.
func setTopLevel(ctx context.Context, raw *tftypes.Value, values map[string]attr.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	var attrs map[string]tftypes.Value
	if err := raw.As(&attrs); err != nil {
		diags.AddError("Internal error: unexpected plan shape", err.Error())
		return diags
	}
	for name, v := range values {
		tv, err := v.ToTerraformValue(ctx)
		if err != nil {
			diags.AddError("Internal error: cannot encode "+name, err.Error())
			return diags
		}
		attrs[name] = tv
	}
	*raw = tftypes.NewValue(raw.Type(), attrs)
	return diags
}
