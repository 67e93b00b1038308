package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// A by-value compute reference (occ_agent's and occ_credential_source's
// `compute`, the data sources' and actions') is {id, name, settings}:
// settings is occ_compute's computed `settings`, the compute's one kind
// block with every default filled in (and its unset attributes left out),
// as canonical JSON keyed by the block's name ({"kubernetes": {...}}).
// One string rather than the block's tree of attributes: Terraform and
// the plugin framework handle every leaf of every agent's planned object
// several times per plan, and the compute's block was most of an agent's
// leaves (issue 28). The block is read back with its own schema type, so
// a kind registered outside this package (RegisterKind) travels the same
// way.

// computeRefType is the attribute type of a by-value compute reference.
// The compute's live installation is not part of it, so that a driver
// outage read on refresh changes no Agent's plan (deploy reads the driver
// itself).
func computeRefType() map[string]attr.Type {
	return map[string]attr.Type{"id": types.StringType, "name": types.StringType, "settings": types.StringType}
}

// legacyComputeRefType is the shape references had up to schema version 0
// of occ_agent and occ_credential_source (and references records
// occ-references-v1): the whole compute without installation and
// timeouts. Only the state upgraders and the reader of old records use it.
func legacyComputeRefType() map[string]attr.Type {
	return refType(computeSchema(), []string{"installation", "timeouts", "settings"}, nil)
}

// legacyComputeAttribute is a version 0 `compute` attribute.
func legacyComputeAttribute(optional bool) schema.ObjectAttribute {
	return schema.ObjectAttribute{Required: !optional, Optional: optional, AttributeTypes: legacyComputeRefType()}
}

// computeSettings is the canonical `settings` of a compute model: known
// when its one set block is fully known, unknown while it is not, null
// when no block is set.
func computeSettings(ctx context.Context, m computeModel, diags *diag.Diagnostics) types.String {
	for _, b := range m.Blocks {
		if !fullyKnown(b) {
			return types.StringUnknown()
		}
	}
	_, row, o, ok := m.block()
	if !ok {
		return types.StringNull()
	}
	s, err := encodeBlock(ctx, row.block, o)
	if err != nil {
		diags.AddError("Internal error: cannot encode the compute's settings", err.Error())
		return types.StringUnknown()
	}
	return types.StringValue(s)
}

// computeRef is the by-value reference of a whole compute model (occ_compute's
// value, or a reference of the legacy shape).
func computeRef(ctx context.Context, m computeModel, diags *diag.Diagnostics) types.Object {
	settings := m.Settings
	if settings.IsNull() || settings.IsUnknown() {
		settings = computeSettings(ctx, m, diags)
	}
	o, d := types.ObjectValue(computeRefType(), map[string]attr.Value{"id": m.ID, "name": m.Name, "settings": settings})
	diags.Append(d...)
	return o
}

// encodeBlock is {"BLOCK": value} as canonical JSON: object keys sorted,
// unset (null) attributes left out, numbers in their shortest exact form.
func encodeBlock(ctx context.Context, block string, o types.Object) (string, error) {
	tv, err := o.ToTerraformValue(ctx)
	if err != nil {
		return "", err
	}
	v, err := jsonOf(tv)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{block: v}); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// jsonOf is a known value as encoding/json encodes it (maps sort their
// keys); the block's type gives it back its type on the way in.
func jsonOf(v tftypes.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsKnown() {
		return nil, fmt.Errorf("an unknown value")
	}
	t := v.Type()
	switch {
	case t.Is(tftypes.String):
		var s string
		err := v.As(&s)
		return s, err
	case t.Is(tftypes.Bool):
		var b bool
		err := v.As(&b)
		return b, err
	case t.Is(tftypes.Number):
		n := new(big.Float)
		if err := v.As(&n); err != nil {
			return nil, err
		}
		return json.Number(n.Text('g', -1)), nil
	case t.Is(tftypes.List{}), t.Is(tftypes.Set{}), t.Is(tftypes.Tuple{}):
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(elems))
		for _, e := range elems {
			j, err := jsonOf(e)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		return out, nil
	case t.Is(tftypes.Map{}), t.Is(tftypes.Object{}):
		var attrs map[string]tftypes.Value
		if err := v.As(&attrs); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(attrs))
		for k, e := range attrs {
			if e.IsNull() && t.Is(tftypes.Object{}) {
				continue // an unset attribute reads back as null
			}
			j, err := jsonOf(e)
			if err != nil {
				return nil, err
			}
			out[k] = j
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %s", t)
}

// settingsCache holds decoded settings by their text: the agents of a plan
// share a few computes, and their attribute values are immutable.
var settingsCache = struct {
	sync.Mutex
	blocks map[string]map[string]types.Object
}{blocks: map[string]map[string]types.Object{}}

// maxSettingsCache bounds the cache; past it the cache starts again.
const maxSettingsCache = 256

// decodeSettings reads a reference's settings back into the kinds' blocks
// (every registered block, null but the one set). An error says why the
// text is not a compute's settings.
func decodeSettings(ctx context.Context, s string) (map[string]types.Object, error) {
	settingsCache.Lock()
	cached, ok := settingsCache.blocks[s]
	settingsCache.Unlock()
	if ok {
		return cached, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if len(top) != 1 {
		names := make([]string, 0, len(top))
		for k := range top {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("it holds %d blocks (%s), not one", len(top), strings.Join(names, ", "))
	}
	blocks := map[string]types.Object{}
	found := false
	for _, kind := range kindOrder {
		row := executors[kind]
		t, ok := row.blockSchema().GetType().(types.ObjectType)
		if !ok {
			return nil, fmt.Errorf("the %s block is not an object", row.block)
		}
		raw, set := top[row.block]
		if !set {
			blocks[row.block] = types.ObjectNull(t.AttrTypes)
			continue
		}
		tv, err := tftypes.ValueFromJSONWithOpts(raw, t.TerraformType(ctx), tftypes.ValueFromJSONOpts{})
		if err != nil {
			return nil, fmt.Errorf("its %s block does not fit this provider's schema: %w", row.block, err)
		}
		av, err := t.ValueFromTerraform(ctx, tv)
		if err != nil {
			return nil, fmt.Errorf("its %s block: %w", row.block, err)
		}
		o, ok := av.(types.Object)
		if !ok {
			return nil, fmt.Errorf("its %s block is not an object", row.block)
		}
		blocks[row.block], found = o, true
	}
	if !found {
		for k := range top {
			return nil, fmt.Errorf("%q is no compute kind's block this provider knows", k)
		}
	}
	settingsCache.Lock()
	if len(settingsCache.blocks) >= maxSettingsCache {
		settingsCache.blocks = map[string]map[string]types.Object{}
	}
	settingsCache.blocks[s] = blocks
	settingsCache.Unlock()
	return blocks, nil
}

// computeRefUpgrader upgrades a version 0 state of a resource whose
// `compute` held the legacy reference shape (occ_agent,
// occ_credential_source): the reference becomes {id, name, settings},
// with the settings computed from the block it held, as occ_compute's
// own upgraded state has them; nothing else changes.
func computeRefUpgrader(current schema.Schema, optional bool) resource.StateUpgrader {
	prior := current
	prior.Version = 0
	prior.Attributes = maps.Clone(current.Attributes)
	prior.Attributes["compute"] = legacyComputeAttribute(optional)
	return resource.StateUpgrader{PriorSchema: &prior, StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
		var o types.Object
		resp.Diagnostics.Append(req.State.Get(ctx, &o)...)
		if resp.Diagnostics.HasError() {
			return
		}
		attrs := maps.Clone(o.Attributes())
		ref := types.ObjectNull(computeRefType())
		if old, ok := attrs["compute"].(types.Object); ok && !old.IsNull() {
			ref = computeRef(ctx, computeModelOf(old), &resp.Diagnostics)
		}
		attrs["compute"] = ref
		next, d := types.ObjectValue(schemaObjectType(current).AttrTypes, attrs)
		resp.Diagnostics.Append(d...)
		if resp.Diagnostics.HasError() {
			return
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, next)...)
	}}
}
