package executor

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// One formatter for every executor: the summary, where, what happened, the
// record's PR7 fields, the lines, what to do, and whether anything was
// written, in that order.
func TestFailure_Detail(t *testing.T) {
	held := &Failure{Code: CodeRuntime(runtimerecord.CodeAuthenticationFailed), Op: OpDeploy, Agent: "support", Revision: 2,
		Where: "container gateway", Phase: "model_probe", Reason: "the startup probe held the runtime unready", Wrote: true,
		Record: &runtimerecord.Record{Event: runtimerecord.EventOpenClawProbe, Code: runtimerecord.CodeAuthenticationFailed, FailureClass: "auth", ProviderCode: 401},
		Lines:  []string{"line one"}}
	refused := &Failure{Code: AuthRefused, Op: OpDeploy, Agent: "support", Revision: 1, Summary: "SSH host 10.0.0.5:22 refused the login",
		Reason: "the host accepted none of the offered keys", Next: "add the key to authorized_keys"}
	for _, tc := range []struct {
		name    string
		f       *Failure
		summary string
		parts   []string
		absent  []string
	}{
		{"held code", held, `AUTHENTICATION_FAILED: agent "support" revision 2 did not activate`,
			[]string{`Agent "support", revision 2 (abc), container gateway, phase model_probe.`, "What happened: the startup probe held",
				"code AUTHENTICATION_FAILED", "failureClass auth", "providerCode 401", "Last log lines:\n  line one", "Next: " + runtimerecord.Advice(runtimerecord.CodeAuthenticationFailed)},
			[]string{"Nothing was written"}},
		{"connection refused", refused, "AUTH_REFUSED: SSH host 10.0.0.5:22 refused the login",
			[]string{"What happened: the host accepted none", "Next: add the key to authorized_keys\nNothing was written."}, nil},
		{"catalog advice when none is given", &Failure{Code: Stale, Op: OpRead, Agent: "a"}, `STALE_REVISION: agent "a": read failed`,
			[]string{"Next: Refresh (terraform plan) and apply again."}, []string{"Nothing was written"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.f.Code) + ": " + tc.f.SummaryText(); got != tc.summary {
				t.Errorf("summary %q, want %q", got, tc.summary)
			}
			d := tc.f.Detail("abc")
			last := -1
			for _, p := range tc.parts {
				i := strings.Index(d, p)
				if i < 0 || i < last {
					t.Errorf("detail lacks %q (or out of order):\n%s", p, d)
				}
				last = i
			}
			for _, p := range tc.absent {
				if strings.Contains(d, p) {
					t.Errorf("detail says %q:\n%s", p, d)
				}
			}
		})
	}
}

func TestWrote(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"none":              {nil, false},
		"failure, written":  {&Failure{Wrote: true}, true},
		"failure, nothing":  {&Failure{}, false},
		"admission refusal": {admission.Errors{{Class: admission.ResourceConflict}}, false},
		"anything else":     {errors.New("boom"), true},
	} {
		if got := Wrote(tc.err); got != tc.want {
			t.Errorf("%s: Wrote = %v, want %v", name, got, tc.want)
		}
	}
}

// Normalize: one rule for every executor's exit.
func TestNormalize(t *testing.T) {
	var wrote Writes
	wrote.Mark()
	if Normalize(nil, Exit{Op: OpDeploy}) != nil {
		t.Error("nil did not stay nil")
	}
	refusal := admission.Errors{{Class: admission.ResourceConflict}}
	if got := Normalize(refusal, Exit{Op: OpDeploy, Writes: &wrote}); !errors.As(got, new(admission.Errors)) {
		t.Errorf("an admission refusal became %T", got)
	}
	one := &admission.Error{Class: admission.InvalidRequest}
	if got := Normalize(one, Exit{Op: OpDeploy}); got != error(one) {
		t.Errorf("an admission error became %T", got)
	}

	kept := &Failure{Code: CrashLoop, Component: "gateway"}
	got := Normalize(fmt.Errorf("wrapped: %w", kept), Exit{Op: OpDeploy, Agent: "a", Revision: 3, Writes: &wrote, Summary: "unused",
		Classify: func(*Failure, error) { t.Error("Classify saw a failure") },
		Finish:   func(f *Failure) { f.Where = "container " + f.Component }})
	if got != error(kept) || kept.Code != CrashLoop || kept.Op != OpDeploy || !kept.Wrote || kept.Agent != "a" || kept.Revision != 3 || kept.Summary != "" || kept.Where != "container gateway" {
		t.Errorf("kept failure: %+v", kept)
	}
	named := &Failure{Code: Stale, Agent: "b", Revision: 2}
	Normalize(named, Exit{Op: OpDeploy, Agent: "a", Revision: 3})
	if named.Agent != "b" || named.Revision != 2 || named.Wrote {
		t.Errorf("a failure naming its agent: %+v", named)
	}

	boom := errors.New("boom")
	for op, code := range map[Op]Code{OpDeploy: DeploymentFailed, OpDelete: DeleteFailed, OpRead: Unavailable, OpList: Unavailable, OpPrepare: Unavailable, OpTurn: Unavailable} {
		var f *Failure
		if !errors.As(Normalize(boom, Exit{Op: op, Agent: "a", Summary: "s", Next: "x"}), &f) || f.Code != code || f.Op != op || f.Agent != "a" ||
			f.Summary != "s" || f.Next != "x" || f.Reason != "boom" || f.Err != boom || f.Wrote {
			t.Errorf("%s: %+v, want %s", op, f, code)
		}
	}
	var f *Failure
	errors.As(Normalize(boom, Exit{Op: OpDelete, Code: Unavailable, Writes: &wrote, Classify: func(f *Failure, err error) {
		if !f.Wrote || f.Code != Unavailable || err != boom {
			t.Errorf("Classify saw %+v", f)
		}
		f.Code, f.Next = AuthRefused, "n"
	}}), &f)
	if f.Code != AuthRefused || f.Next != "n" || !f.Wrote {
		t.Errorf("classified: %+v", f)
	}
}

// Issue 30: a restart restarts only an activated revision that runs
// unchanged; what an apply must repair is refused with the code that says
// so, and the advice to apply.
func TestRestartable(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Observed
		want Code
	}{
		{"running", Observed{Exists: true, Revision: 3}, ""},
		{"unretired", Observed{Exists: true, Revision: 3, Drift: DriftUnretired}, ""},
		{"network policy", Observed{Exists: true, Revision: 3, Drift: DriftNetworkPolicy}, ""},
		{"exposure", Observed{Exists: true, Revision: 3, Drift: DriftExposure}, ""},
		{"never activated", Observed{Exists: true}, NotFound},
		{"gone", Observed{Drift: DriftGone, DriftDetail: "no objects"}, NotFound},
		{"workload deleted", Observed{Exists: true, Revision: 3, Drift: DriftWorkload, DriftDetail: "Deployment a-gateway was deleted"}, NotFound},
		{"edited", Observed{Exists: true, Revision: 3, Drift: DriftEdited, DriftDetail: "edited outside Terraform"}, ResourceConflict},
		{"unfinished", Observed{Exists: true, Revision: 3, Drift: DriftUnfinished, DriftDetail: "revision 4 was written"}, ResourceConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Restartable("a", c.o)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Restartable: %v; want nil", err)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) || f.Code != c.want || f.Op != OpRestart || f.Wrote || !strings.Contains(f.Next, "apply") {
				t.Fatalf("Restartable: %#v; want %s, op restart, nothing written, advice to apply", err, c.want)
			}
			if c.o.DriftDetail != "" && !strings.Contains(f.Reason, c.o.DriftDetail) {
				t.Errorf("reason %q does not say what the read found (%q)", f.Reason, c.o.DriftDetail)
			}
		})
	}
}

// Issue 30: a failure the deploy's checks found during a restart tells the
// user to restart again (or apply), not only to apply.
func TestFailure_AsRestart(t *testing.T) {
	for next, want := range map[string]string{
		"Fix what refuses the Pod, then apply again.": "Fix what refuses the Pod, then restart again (or apply).",
		"Create it on the host and apply again.":      "Create it on the host and restart again (or apply).",
		"Fix the image. Apply again.":                 "Fix the image. Restart again (or apply).",
		"Read the journal lines above.":               "Read the journal lines above.",
	} {
		f := &Failure{Next: next}
		f.AsRestart()
		if f.Next != want {
			t.Errorf("AsRestart(%q) = %q, want %q", next, f.Next, want)
		}
	}
}
