package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/unset from what render produces now; only right when a change is meant to change what existing agents run")

// pinnedRevisionIDs are the revision ids of topologyCases' revisions as
// this provider has always admitted them: a new compute setting that is
// left unset must change none of them, or every existing agent would plan
// a new revision (and a Recreate restart) on upgrade (rule AD3). The ids
// change only with a change meant to change what existing agents run, noted
// in CHANGELOG.md (embedded: maxConcurrent is dedicated Codex's; all: the
// admitted document holds the platform's wiring; all: the default images
// moved to ghcr.io/occ-platform/runtime). The rendering changes only with
// a change meant to change what existing agents run at their next
// revision, noted there too (all: the ephemeral-storage limit and the
// emptyDir size limits, issue 27).
var pinnedRevisionIDs = map[string]string{
	"embedded":        "2cd6b8225d4c2971",
	"dedicated codex": "30bdcdb44d9cde2c",
	"sandboxed codex": "6fced8b3526511ce",
}

// rule AD3: with no new setting set, every topology renders exactly what
// it rendered before the settings existed (the Deployments and Sandboxes
// in testdata/unset) under the same revision id.
func TestAD3_UnsetSettingsRenderWhatTheyAlwaysRendered(t *testing.T) {
	for _, tc := range topologyCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := tc.rev.ID(), pinnedRevisionIDs[tc.name]; got != want {
				t.Errorf("revision id = %s, want %s: an unset setting changed the revision of every existing agent", got, want)
			}
			objs, err := Kubernetes(tc.rev, 7, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]any{}
			for _, d := range objs.Deployments {
				out["deployment/"+*d.Name] = d
			}
			for _, s := range objs.Sandboxes {
				o, err := s.Object(objs.Namespace)
				if err != nil {
					t.Fatal(err)
				}
				out["sandbox/"+s.Name] = o
			}
			got, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join("testdata", "unset", strings.ReplaceAll(tc.name, " ", "-")+".json")
			if *updateGolden {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s renders differently from %s:\n%s", tc.name, file, got)
			}
		})
	}
}
