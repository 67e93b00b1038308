package provider

import (
	"context"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// rule issue 31: what a deploy changes, for the rollout gate: the
// configuration and the credential source whose generation differs from
// the revision that serves; a create changes both.
func TestRevisionChanges(t *testing.T) {
	rev := func(cfg string, cg int64, src string, sg int64) *admission.Revision {
		return &admission.Revision{ConfigurationID: cfg, ConfigurationGeneration: cg, Source: admission.SourceBinding{ID: src, Generation: sg}}
	}
	for _, c := range []struct {
		name     string
		rev, was *admission.Revision
		want     []string
	}{
		{"create", rev("c", 1, "s", 1), nil, []string{"configuration c generation 1", "credential source s generation 1"}},
		{"rotated key", rev("c", 1, "s", 2), rev("c", 1, "s", 1), []string{"credential source s generation 2"}},
		{"new document", rev("c", 2, "s", 1), rev("c", 1, "s", 1), []string{"configuration c generation 2"}},
		{"another source", rev("c", 1, "t", 1), rev("c", 1, "s", 1), []string{"credential source t generation 1"}},
		{"neither", rev("c", 1, "s", 1), rev("c", 1, "s", 1), nil},
		{"no source", rev("c", 1, "", 0), nil, []string{"configuration c generation 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := revisionChanges(c.rev, c.was); !reflect.DeepEqual(got, c.want) {
				t.Errorf("revisionChanges = %q, want %q", got, c.want)
			}
		})
	}
}

// The rollout setting: unset, no gate; set, its defaults (halt, one
// canary, no bound) unless written.
func TestRolloutGate_Defaults(t *testing.T) {
	ctx := context.Background()
	var diags diag.Diagnostics
	if g := rolloutGate(ctx, types.ObjectNull(rolloutSchema().GetType().(types.ObjectType).AttrTypes), &diags); g != nil {
		t.Fatal("a gate without the setting")
	}
	types_ := rolloutSchema().GetType().(types.ObjectType).AttrTypes
	for _, c := range []struct {
		name  string
		attrs map[string]attr.Value
		halt  bool
		can   int
		par   int
	}{
		{"empty", map[string]attr.Value{"halt_on_failure": types.BoolNull(), "canary": types.Int64Null(), "max_parallel": types.Int64Null()}, true, 1, 0},
		{"written", map[string]attr.Value{"halt_on_failure": types.BoolValue(false), "canary": types.Int64Value(3), "max_parallel": types.Int64Value(5)}, false, 3, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := types.ObjectValueMust(types_, c.attrs)
			g := rolloutGate(ctx, v, &diags)
			if diags.HasError() || g == nil {
				t.Fatalf("gate %v, diags %v", g, diags)
			}
			if s := g.Settings(); s.HaltOnFailure != c.halt || s.Canary != c.can || s.MaxParallel != c.par {
				t.Errorf("settings %+v", s)
			}
		})
	}
}
