package startup

import (
	"context"
	"slices"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// rule PR9: the wrapper writes a runtime.startup_phase record for each
// phase it performs, in order, for every container (skipped where a phase
// does not apply to it: login without a Codex login, peer status without
// a peer); process_spawn follows once the runtime is exec'd
// (cmd/occ-runtime). It performs no plugin install (the pinned images
// bundle their plugins) and no state migration, so it writes no record for
// them, rather than one that is always "skipped" (docs: startup-probe).
func TestPR9_WrapperWritesThePhasesItPerforms(t *testing.T) {
	want := []runtimerecord.Phase{runtimerecord.PhaseLogin, runtimerecord.PhaseModelProbe, runtimerecord.PhasePeerStatus, runtimerecord.PhaseWorkspaceSetup}
	if !slices.Equal(runtimerecord.Phases, append(slices.Clone(want), runtimerecord.PhaseProcessSpawn)) {
		t.Fatalf("runtimerecord.Phases = %v, want %v then process_spawn", runtimerecord.Phases, want)
	}
	for _, o := range []Options{
		{Container: "gateway", Harness: HarnessOpenClaw},
		{Container: "harness", Harness: HarnessCodex},
		{Container: "node", Harness: HarnessOpenClaw},
	} {
		var out syncBuffer
		dir := t.TempDir()
		env := map[string]string{"OPENCLAW_STATE_DIR": dir + "/state", "CODEX_HOME": dir + "/codex"}
		o.Command, o.Records, o.Getenv = []string{"sh"}, &out, func(k string) string { return env[k] }
		res, _, err := Run(context.Background(), o)
		if err != nil || res.Held != "" {
			t.Fatalf("%s: Run = %+v, %v", o.Container, res, err)
		}
		recs, _ := outputOf(t, out.String())
		var got []runtimerecord.Phase
		for _, r := range recs {
			if r.Event == runtimerecord.EventStartupPhase {
				got = append(got, r.Phase)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: phases %v, want %v", o.Container, got, want)
		}
	}
}
