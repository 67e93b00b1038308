package provider

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

var updateSchema = flag.Bool("update-schema", false, "record the resources' state shapes in testdata/schema")

// stateShape is what a resource's state looks like to a state upgrader:
// its schema version and the type of every leaf, by path ("compute.kubernetes.namespace",
// "startup_phases[*].phase").
type stateShape struct {
	Version int64             `json:"version"`
	Leaves  map[string]string `json:"leaves"`
}

func flatten(prefix string, t attr.Type, out map[string]string) {
	switch t := t.(type) {
	case attr.TypeWithElementType:
		flatten(prefix+"[*]", t.ElementType(), out)
		return
	case attr.TypeWithAttributeTypes:
		for k, at := range t.AttributeTypes() {
			flatten(join(prefix, k), at, out)
		}
		return
	}
	out[prefix] = t.String()
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// Before the first release the resources are at schema version 0, and
// from then on a state written by any release must stay readable: a
// change that removes or retypes a leaf of a resource's state needs the
// next schema Version and a state upgrader (resource.ResourceWithUpgradeState).
// Added leaves are compatible (older states read them as null) and are
// recorded with -update-schema. This test holds each resource's shape to
// testdata/schema/<type>.json.
func TestSchemaVersion_StateShapeChangesNeedAVersion(t *testing.T) {
	ctx := context.Background()
	p := New("test", "")()
	for _, newResource := range p.Resources(ctx) {
		r := newResource()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "occ"}, &meta)
		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		leaves := map[string]string{}
		for name, a := range sr.Schema.Attributes {
			flatten(name, a.GetType(), leaves)
		}
		for name, b := range sr.Schema.Blocks {
			flatten(name, b.Type(), leaves)
		}
		cur := stateShape{Version: sr.Schema.Version, Leaves: leaves}
		file := filepath.Join("testdata", "schema", meta.TypeName+".json")
		if *updateSchema {
			b, _ := json.MarshalIndent(cur, "", "  ")
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: no recorded state shape (%v); run go test ./internal/provider -run TestSchemaVersion -update-schema", meta.TypeName, err)
			continue
		}
		var was stateShape
		if err := json.Unmarshal(b, &was); err != nil {
			t.Fatal(err)
		}
		var broken, added []string
		for _, k := range slices.Sorted(maps.Keys(was.Leaves)) {
			if got, ok := leaves[k]; !ok {
				broken = append(broken, k+" removed")
			} else if got != was.Leaves[k] {
				broken = append(broken, fmt.Sprintf("%s retyped %s → %s", k, was.Leaves[k], got))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(leaves)) {
			if _, ok := was.Leaves[k]; !ok {
				added = append(added, k)
			}
		}
		switch {
		case len(broken) > 0 && cur.Version <= was.Version:
			t.Errorf("%s: the state shape changed incompatibly (%v) at schema version %d: bump the schema's Version and add a state upgrader from version %d, then run with -update-schema",
				meta.TypeName, broken, cur.Version, was.Version)
		case cur.Version < was.Version:
			t.Errorf("%s: schema version %d is below the recorded %d", meta.TypeName, cur.Version, was.Version)
		case len(added) > 0 || cur.Version != was.Version || len(broken) > 0:
			t.Errorf("%s: the state shape has new leaves %v (compatible) or a new version; record it: go test ./internal/provider -run TestSchemaVersion -update-schema", meta.TypeName, added)
		}
	}
}
