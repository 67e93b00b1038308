package kube

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// The log follower reads each line once across reconnects (the kubelet's
// timestamps say where the last stream stopped), skips a line too long to
// be a record instead of reading the log again, and keeps only the last
// record.
func TestReadRecords_ResumesAndSkipsLongLines(t *testing.T) {
	rec := func(phase runtimerecord.Phase, code runtimerecord.Code) string {
		b, err := runtimerecord.Marshal(runtimerecord.Record{Event: runtimerecord.EventOpenClawProbe, Phase: phase, Code: code, Final: code != ""})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	newState := func() *gateState {
		return &gateState{agent: "bench", n: 1, components: map[string]bool{"gateway": true}, followed: map[string]bool{}, failures: make(chan *Failure, 8), phase: "scheduling"}
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	stamp := func(d time.Duration, s string) string { return t0.Add(d).Format(time.RFC3339Nano) + " " + s + "\n" }
	first := stamp(0, "starting") + stamp(100*time.Millisecond, rec(runtimerecord.PhaseModelProbe, "")) +
		stamp(200*time.Millisecond, strings.Repeat("x", maxRecordLine+10)) + stamp(300*time.Millisecond, "still going")
	st := newState()
	held, pos := readRecords(strings.NewReader(first), "gateway", st, logPosition{})
	if held || !pos.at.Equal(t0.Add(300*time.Millisecond)) || pos.n != 1 || st.last == nil || st.last.Phase != runtimerecord.PhaseModelProbe {
		t.Fatalf("first stream: held=%v pos=%+v last=%+v", held, pos, st.last)
	}
	// The reconnect starts at the whole second (SinceTime): the lines read
	// already come again and are skipped; the held code after them fails.
	second := first + stamp(400*time.Millisecond, rec(runtimerecord.PhaseModelProbe, runtimerecord.CodeAuthenticationFailed))
	st.last = nil
	held, pos = readRecords(strings.NewReader(second), "gateway", st, pos)
	if !held || !pos.at.Equal(t0.Add(400*time.Millisecond)) || st.last == nil || st.last.Code != runtimerecord.CodeAuthenticationFailed {
		t.Fatalf("second stream: held=%v pos=%+v last=%+v", held, pos, st.last)
	}
	select {
	case f := <-st.failures:
		if f.Code != "AUTHENTICATION_FAILED" {
			t.Fatalf("failure %v", f)
		}
	default:
		t.Fatal("the held code did not fail the gate")
	}
	// Lines without timestamps (a log source that ignores them) are read.
	st = newState()
	if held, _ := readRecords(strings.NewReader(rec(runtimerecord.PhaseModelProbe, runtimerecord.CodeModelProbeTimeout)+"\n"), "gateway", st, logPosition{}); !held {
		t.Fatal("an unstamped held record was not read")
	}

	// Lines within one tick of the clock bear the same timestamp: each is
	// read once, in one stream and across a reconnect that ends between
	// them.
	tick := t0.Add(time.Second)
	same := stamp(time.Second, rec(runtimerecord.PhaseModelProbe, "")) + stamp(time.Second, "a second line in the same tick")
	st = newState()
	_, pos = readRecords(strings.NewReader(same), "gateway", st, logPosition{})
	if !pos.at.Equal(tick) || pos.n != 2 {
		t.Fatalf("two lines in one tick: pos=%+v, want both read", pos)
	}
	st = newState()
	again := same + stamp(time.Second, rec(runtimerecord.PhaseModelProbe, runtimerecord.CodeModelProbeTimeout))
	if held, _ := readRecords(strings.NewReader(again), "gateway", st, pos); !held {
		t.Fatal("a held record in the same tick as the lines read before the reconnect was skipped")
	}
}

// rule AU7: a startup record whose free field holds a credential (a
// runtime outside the contract, or one that echoes a provider message)
// fails the gate as INVALID_STARTUP_RECORD without quoting the value.
func TestAU7_BadStartupRecordQuotesNoValue(t *testing.T) {
	const sentinel = "sk-SENTINEL-9f3c2a7e-do-not-leak"
	st := &gateState{agent: "bench", n: 1, components: map[string]bool{"gateway": true}, followed: map[string]bool{}, failures: make(chan *Failure, 8), phase: "scheduling"}
	line := `{"event":"` + string(runtimerecord.EventOpenClawProbe) + `","phase":"model_probe","outcome":"failed","causeDetail":"Incorrect API key provided: ` + sentinel + `"}`
	if held := readRecord([]byte(line), "gateway", st); !held {
		t.Fatal("a record outside its closed set passed")
	}
	f := <-st.failures
	if f.Code != executor.BadRecord {
		t.Fatalf("code %s, want %s", f.Code, executor.BadRecord)
	}
	if text := f.Error() + f.Detail(""); strings.Contains(text, "SENTINEL") || !strings.Contains(text, "causeDetail") {
		t.Fatalf("diagnostic %q: must name the field, never its value", text)
	}
}

// rule PR9: the startup phases the gate read are kept by container and
// phase, the latest of each (a restarted container writes its phases
// again), in the order first seen; other records do not count.
func TestPR9_GateKeepsThePhasesItRead(t *testing.T) {
	st := &gateState{agent: "bench", n: 1, components: map[string]bool{"gateway": true, "harness": true}, followed: map[string]bool{}, failures: make(chan *Failure, 8)}
	phase := func(container string, p runtimerecord.Phase, outcome runtimerecord.Outcome, ms int64) string {
		b, err := runtimerecord.Marshal(runtimerecord.Record{Event: runtimerecord.EventStartupPhase, Container: container, Phase: p, Outcome: outcome, DurationMS: ms})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	probe, err := runtimerecord.Marshal(runtimerecord.Record{Event: runtimerecord.EventCodexProbe, Container: "harness", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	readRecords(strings.NewReader(phase("harness", runtimerecord.PhaseLogin, runtimerecord.OutcomeOK, 40)+string(probe)+"\n"+
		phase("harness", runtimerecord.PhaseModelProbe, runtimerecord.OutcomeOK, 900)), "harness", st, logPosition{})
	readRecords(strings.NewReader(phase("gateway", runtimerecord.PhasePeerStatus, runtimerecord.OutcomeOK, 1200)+
		phase("harness", runtimerecord.PhaseModelProbe, runtimerecord.OutcomeOK, 700)), "gateway", st, logPosition{})
	got := st.timings()
	want := []string{"harness/login=ok 40", "harness/model_probe=ok 700", "gateway/peer_status=ok 1200"}
	if len(got) != len(want) {
		t.Fatalf("phases %+v, want %v", got, want)
	}
	for i, p := range got {
		if s := fmt.Sprintf("%s/%s=%s %d", p.Component, p.Phase, p.Outcome, p.DurationMS); s != want[i] {
			t.Errorf("phase %d: %s, want %s", i, s, want[i])
		}
	}
}

// Each startup phase record is handed to the operation's log as it is
// read, at level info (TF_LOG=INFO shows where a long apply is); other
// records are not.
func TestGate_StartupPhasesLoggedAsRead(t *testing.T) {
	type line struct {
		msg    string
		fields map[string]any
	}
	var got []line
	st := &gateState{agent: "bench", n: 3, components: map[string]bool{"gateway": true}, followed: map[string]bool{}, failures: make(chan *Failure, 8),
		log: func(msg string, f map[string]any) { got = append(got, line{msg, f}) }}
	st.record(runtimerecord.Record{Event: runtimerecord.EventStartupPhase, Container: "gateway", Phase: runtimerecord.PhaseWorkspaceSetup, Outcome: runtimerecord.OutcomeOK, DurationMS: 12, ElapsedMS: 12})
	st.record(runtimerecord.Record{Event: runtimerecord.EventOpenClawProbe, Container: "gateway"})
	st.record(runtimerecord.Record{Event: runtimerecord.EventStartupPhase, Container: "gateway", Phase: runtimerecord.PhaseModelProbe, Outcome: runtimerecord.OutcomeOK, DurationMS: 40, ElapsedMS: 52})
	if len(got) != 2 {
		t.Fatalf("logged %d lines, want the two phases: %+v", len(got), got)
	}
	for i, p := range []runtimerecord.Phase{runtimerecord.PhaseWorkspaceSetup, runtimerecord.PhaseModelProbe} {
		f := got[i].fields
		if f["level"] != "info" || f["phase"] != string(p) || f["component"] != "gateway" || f["revision"] != int64(3) || !strings.Contains(got[i].msg, string(p)) {
			t.Errorf("line %d: %q %v; want phase %s at info", i, got[i].msg, f, p)
		}
	}
}
