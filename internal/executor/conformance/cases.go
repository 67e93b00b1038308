package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// heldWithin is how soon a held code or a failed start must fail a deploy:
// at once (PR8), not at the case's deadline. Generous for a loaded
// machine; far below CaseTimeout.
const heldWithin = 90 * time.Second

// Cases is the table of behaviours every executor must show, in the order
// they run.
var Cases = []Case{
	{"DeployAndActivate", deployAndActivate},
	{"HeldCode", heldCode},
	{"FailedUpdateThenFix", failedUpdateThenFix},
	{"RedeploySameRevision", redeploySameRevision},
	{"DriftKinds", driftKinds},
	{"Import", importAgent},
	{"List", list},
	{"DeleteLeavesNothing", deleteLeavesNothing},
	{"KilledOperationConverges", killedOperationConverges},
	{"WritesMarked", writesMarked},
	{"PreflightReadsOnly", preflightReadsOnly},
	{"GatewayAccess", gatewayAccess},
	{"Restart", restart},
}

// longName is an agent name of 30 characters: on SSH its service user
// (occ- and the name) is past useradd's 32 and takes the hashed form.
const longName = "first-with-a-name-past-useradd"

// deployAndActivate: a deploy blocks until the revision is activated and
// says when and where; Read then reports that revision running unchanged,
// with the same activation time and endpoint. rule AC4 (the activation is
// recorded once, durably, where Read finds it), rule AC3 (exactly one
// selected revision). The agent's name is longer than most (longName),
// as a kind's derived names must allow.
func deployAndActivate(r *R) {
	rev := r.rev(longName, 1, Ready)
	res := r.MustDeploy(rev, 1, 0)
	if res.ActivatedAt.IsZero() || res.Endpoint == "" {
		r.Fatalf("deploy result %+v; want an activation time and an endpoint", res)
	}
	o := r.Activated(longName, 1, rev)
	if !o.ActivatedAt.Equal(res.ActivatedAt) || o.Endpoint != res.Endpoint {
		r.Errorf("read activated at %s on %s; the deploy said %s on %s", o.ActivatedAt, o.Endpoint, res.ActivatedAt, res.Endpoint)
	}
	if o.References != References {
		r.Errorf("read references %q; the deploy recorded %q", o.References, References)
	}
}

// heldCode: a revision whose startup probe holds a code fails its deploy
// at once with that code, after writing, and is not activated. rules PR6,
// PR7 (the code from the startup record), PR8 (fails at once on each held
// code).
func heldCode(r *R) {
	rev := r.rev("held", 1, Held)
	start := time.Now()
	_, err := r.Deploy(r.Ctx, rev, 1, 0)
	f := r.Failure(err, r.Kind.HeldCode)
	if f.Op != executor.OpDeploy || !f.Wrote || !executor.Wrote(err) || f.Agent != "held" || f.Revision != 1 {
		r.Errorf("failure op %s wrote %v agent %q revision %d; want deploy, wrote, agent held, revision 1: %v", f.Op, f.Wrote, f.Agent, f.Revision, err)
	}
	if d := time.Since(start); d > heldWithin {
		r.Errorf("the held code failed the deploy after %s: it waited for something else (PR8: at once)", d.Round(time.Second))
	}
	if o := r.Read("held"); !o.Exists || o.Revision != 0 || o.Drift == executor.DriftNone {
		r.Errorf("read after the held revision: %+v; want it present, nothing activated, drifted", o)
	}
}

// failedUpdateThenFix: revision 2 fails to start over an activated
// revision 1; its failure says so, after writing; Read then reports what
// the kind documents (Kind.AfterFailedUpdate: on Kubernetes revision 1
// keeps serving, AC1; on SSH the unit was restarted on revision 2 and
// nothing is restored, PR8). The fix is deployed as revision 2 again:
// a failed update keeps the previous state, so the next plan's number is
// the same (INTERFACE.md, Diagnostics); it activates, and Read reports it;
// revision 3 then activates over it. rules AC1, AC3, PR8.
func failedUpdateThenFix(r *R) {
	rev1 := r.rev("update", 1, Ready)
	r.MustDeploy(rev1, 1, 0)
	start := time.Now()
	_, err := r.Deploy(r.Ctx, r.rev("update", 2, Fails), 2, 1)
	f := r.Failure(err, r.Kind.FailCode)
	if f.Op != executor.OpDeploy || !f.Wrote || f.Revision != 2 {
		r.Errorf("failure op %s wrote %v revision %d; want deploy, wrote, revision 2: %v", f.Op, f.Wrote, f.Revision, err)
	}
	if d := time.Since(start); d > heldWithin {
		r.Errorf("the failed start failed the deploy after %s: it waited for something else", d.Round(time.Second))
	}
	o := r.Read("update")
	want := r.Kind.AfterFailedUpdate
	if !o.Exists || o.Revision != want.Revision || !slices.Contains(want.Drifts, o.Drift) || o.DriftDetail == "" {
		r.Fatalf("read after the failed update: %+v; want revision %d and drift among %q, explained", o, want.Revision, want.Drifts)
	}
	if want.Revision == 1 && o.RevisionID != rev1.ID() {
		r.Errorf("read revision id %s after the failed update; want revision 1's %s", o.RevisionID, rev1.ID())
	}
	fix := r.rev("update", 3, Ready)
	r.MustDeploy(fix, 2, 1)
	r.Activated("update", 2, fix)
	// And the agent moves on from the fix as from any revision.
	next := r.rev("update", 4, Ready)
	r.MustDeploy(next, 3, 2)
	r.Activated("update", 3, next)
}

// redeploySameRevision: the activated revision deployed again, as the
// apply after a crash that activated it but never recorded it does (a
// create again: nothing serves as far as state knows), is taken on: the
// same revision id stays activated, without drift; the activation time is
// kept where the kind says so. rule AC4 (recovery repeats only safe
// effects).
func redeploySameRevision(r *R) {
	rev := r.rev("again", 1, Ready)
	first := r.MustDeploy(rev, 1, 0)
	// A new activation would get a later second.
	time.Sleep(1100 * time.Millisecond)
	again := r.MustDeploy(rev, 1, 0)
	o := r.Activated("again", 1, rev)
	if r.Kind.KeepsActivationTime && (!again.ActivatedAt.Equal(first.ActivatedAt) || !o.ActivatedAt.Equal(first.ActivatedAt)) {
		r.Errorf("the repeat moved the activation time from %s to %s (read %s)", first.ActivatedAt, again.ActivatedAt, o.ActivatedAt)
	}
	if !o.ActivatedAt.Equal(again.ActivatedAt) {
		r.Errorf("read activation time %s; the repeat said %s", o.ActivatedAt, again.ActivatedAt)
	}
}

// driftKinds: an agent never deployed reads gone; one whose workload was
// removed out of band, or whose configuration was edited, reads drifted
// with the reason the kind declares, explained; the next apply deploys a
// new revision (the plan does on drift) and Read is clean again. The
// contract: executor.Observed.Drift; rule AC3 (the new revision is the
// one selected).
func driftKinds(r *R) {
	if o := r.Read("never"); o.Exists || o.Drift != executor.DriftGone || o.Revision != 0 {
		r.Errorf("read of an agent never deployed: %+v; want not there, %q", o, executor.DriftGone)
	}
	rev := r.rev("drift", 1, Ready)
	r.MustDeploy(rev, 1, 0)
	r.Place.Remove(r.Ctx, r.T, "drift")
	if o := r.Read("drift"); !o.Exists || o.Drift != r.Kind.RemovedDrift || o.DriftDetail == "" {
		r.Fatalf("read after removing the workload: %+v; want drift %q, explained", o, r.Kind.RemovedDrift)
	}
	r.MustDeploy(rev, 2, 1)
	r.Activated("drift", 2, rev)

	r.Place.Edit(r.Ctx, r.T, "drift")
	if o := r.Read("drift"); !o.Exists || o.Drift != r.Kind.EditedDrift || o.DriftDetail == "" {
		r.Fatalf("read after editing what runs: %+v; want drift %q, explained", o, r.Kind.EditedDrift)
	}
	r.MustDeploy(rev, 3, 2)
	r.Activated("drift", 3, rev)
}

// importAgent: the kind's id of an agent is recognised as naming it; an id
// of another kind never is; Read by the id alone, without a compute (an
// import before the compute is in state), finds the activated revision
// and the references its deploy recorded. The contract:
// Executor.ParseImportID, executor.Agent.ImportID, Deployment.References.
func importAgent(r *R) {
	rev := r.rev("imported", 1, Ready)
	r.MustDeploy(rev, 1, 0)
	id := r.Place.ID("imported")
	name, ok, err := r.Kind.Executor.ParseImportID(id)
	if name != "imported" || !ok || err != nil {
		r.Errorf("ParseImportID(%q) = %q, %v, %v; want imported, true, nil", id, name, ok, err)
	}
	for _, other := range r.Kind.ForeignIDs {
		name, ok, err := r.Kind.Executor.ParseImportID(other)
		switch {
		case name != "":
			r.Errorf("ParseImportID(%q), another kind's id, named agent %q", other, name)
		case ok && !r.Kind.ClaimsForeignIDs:
			r.Errorf("ParseImportID(%q), another kind's id, was taken as this kind's", other)
		case ok && err == nil:
			r.Errorf("ParseImportID(%q), another kind's id, was taken without an error", other)
		}
	}
	o, err := r.Kind.Executor.Read(r.Ctx, executor.Agent{Name: "imported", ImportID: id, Harness: rev.Harness, ExecutionMode: rev.ExecutionMode, Log: r.log("imported")})
	if err != nil {
		r.Fatalf("read by import id %s: %v", id, err)
	}
	if !o.Exists || o.Revision != 1 || o.RevisionID != rev.ID() || o.Drift != executor.DriftNone || o.References != References {
		r.Errorf("read by import id %s: %+v; want revision 1 (%s) activated with references %q", id, o, rev.ID(), References)
	}
}

// list: List of the place names exactly the agents deployed there, once
// each however many revisions they had, in name order, with their ids,
// each as Read reads it; not a look-alike made by hand. The contract:
// Executor.List, executor.Listed.
func list(r *R) {
	a1 := r.rev("lister-a", 1, Ready)
	r.MustDeploy(a1, 1, 0)
	a2 := r.rev("lister-a", 2, Ready)
	r.MustDeploy(a2, 2, 1)
	r.MustDeploy(r.rev("lister-b", 1, Ready), 1, 0)
	r.Place.LookAlike(r.Ctx, r.T, "lister-a")
	got, err := r.Kind.Executor.List(r.Ctx, r.Place.Compute)
	if err != nil {
		r.Fatalf("List(%s): %v", r.Place.Where, err)
	}
	var names []string
	for _, l := range got {
		names = append(names, l.Name)
	}
	if !slices.Equal(names, []string{"lister-a", "lister-b"}) {
		r.Fatalf("List(%s) names %q; want lister-a, lister-b", r.Place.Where, names)
	}
	for _, l := range got {
		if want := r.Place.ID(l.Name); l.ID != want {
			r.Errorf("listed %s with id %q; want %q", l.Name, l.ID, want)
		}
		if o := r.Read(l.Name); l.Observed != o {
			r.Errorf("listed %s as %+v; Read reads %+v", l.Name, l.Observed, o)
		}
	}
	if got[0].Revision != 2 || got[0].RevisionID != a2.ID() || got[1].Revision != 1 {
		r.Errorf("listed revisions %d (%s) and %d; want 2 (%s) and 1", got[0].Revision, got[0].RevisionID, got[1].Revision, a2.ID())
	}
}

// deleteLeavesNothing: Delete of an agent with two revisions removes
// every object, file, unit and user of it that the kind knows of; Read
// then reports it gone; a second Delete is fine and leaves nothing
// either. The contract: Executor.Delete ("removes every object of an
// agent").
func deleteLeavesNothing(r *R) {
	r.MustDeploy(r.rev("doomed", 1, Ready), 1, 0)
	r.MustDeploy(r.rev("doomed", 2, Ready), 2, 1)
	if l := r.Leftovers("doomed"); len(l) == 0 {
		r.Fatal("the leftovers check finds nothing of a deployed agent: it checks nothing")
	}
	for i := range 2 {
		if err := r.Kind.Executor.Delete(r.Ctx, r.agent("doomed")); err != nil {
			r.Fatalf("delete %d: %v", i+1, err)
		}
		if l := r.Leftovers("doomed"); len(l) > 0 {
			r.Errorf("after delete %d, left on the target: %q", i+1, l)
		}
		if o := r.Read("doomed"); o.Exists || o.Drift != executor.DriftGone {
			r.Errorf("read after delete %d: %+v; want not there, %q", i+1, o, executor.DriftGone)
		}
	}
}

// killedOperationConverges: a deploy of revision 2 interrupted (its
// context cancelled) while it waits for the revision fails; the next
// deploy of it, with a fresh context, activates it; and what is then on
// the target is what an agent deployed the same way without an
// interruption has, nothing more (per the kind's leftovers check). rule
// AC4 (recovery after a crash repeats only safe effects).
func killedOperationConverges(r *R) {
	ref1, ref2 := r.rev("reference", 1, Ready), r.rev("reference", 2, Slow)
	r.MustDeploy(ref1, 1, 0)
	r.MustDeploy(ref2, 2, 1)

	rev1, rev2 := r.rev("interrupted", 1, Ready), r.rev("interrupted", 2, Slow)
	r.MustDeploy(rev1, 1, 0)
	ctx, cancel := context.WithCancel(r.Ctx)
	defer cancel()
	reached := make(chan struct{})
	r.revs[rev2.Agent] = rev2
	d := deployment(rev2, r.Place.Compute, 2, 1, func(msg string, fields map[string]any) {
		r.log("interrupted")(msg, fields)
		if fields["work.operation"] == r.Kind.InterruptPhase {
			select {
			case <-reached:
			default:
				close(reached)
				// Mid-wait, not at its first instant.
				time.AfterFunc(time.Second, cancel)
			}
		}
	})
	_, err := r.Kind.Executor.Deploy(ctx, d)
	select {
	case <-reached:
	default:
		r.Fatalf("the deploy never reached its %q phase (it returned %v): nothing was interrupted", r.Kind.InterruptPhase, err)
	}
	if err == nil {
		r.Fatal("the interrupted deploy activated: the Slow revision was ready within a second, nothing was interrupted")
	}
	r.Failure(err, "")
	r.Logf("the interrupted deploy: %v; read then: %+v", err, r.Read("interrupted"))

	r.MustDeploy(rev2, 2, 1)
	r.Activated("interrupted", 2, rev2)
	want := normalized(r.Leftovers("reference"), "reference", ref1, ref2)
	if len(want) == 0 {
		r.Fatal("the leftovers check finds nothing of the reference agent: it compares nothing")
	}
	r.Logf("what an agent deployed without an interruption leaves: %q", want)
	r.Eventually(time.Minute, "what the interrupted agent leaves equals what the reference leaves", func() (bool, string) {
		got := normalized(r.Leftovers("interrupted"), "interrupted", rev1, rev2)
		return slices.Equal(got, want), fmt.Sprintf("interrupted %q, reference %q", got, want)
	})
}

// writesMarked: a deploy that fails after writing says it wrote; one
// that fails before writing says it wrote nothing (a target that does not
// answer; a context ended before it began, on a place already prepared by
// the first deploy, so that it reaches the deploy's own write path), and
// nothing of its agent is there. A create that fails after writing stays
// in state (tainted) so that the next apply converges; one that wrote
// nothing does not (INTERFACE.md, Diagnostics). The contract:
// executor.Failure.Wrote, executor.Wrote.
func writesMarked(r *R) {
	_, err := r.Deploy(r.Ctx, r.rev("written", 1, Fails), 1, 0)
	if f := r.Failure(err, r.Kind.FailCode); !f.Wrote || !executor.Wrote(err) {
		r.Errorf("a deploy that failed after writing says it wrote nothing: %v", err)
	}

	rev := r.rev("unwritten", 1, Ready)
	ex, c := r.Place.Unreachable(r.T)
	_, err = ex.Deploy(r.Ctx, deployment(rev, c, 1, 0, r.log("unwritten")))
	if f := r.Failure(err, ""); f.Wrote || executor.Wrote(err) {
		r.Errorf("a deploy to a target that does not answer says it wrote: %v", err)
	}
	r.Logf("a deploy to a target that does not answer: %v", err)
	ended, cancel := context.WithCancel(r.Ctx)
	cancel()
	_, err = r.Deploy(ended, rev, 1, 0)
	if f := r.Failure(err, ""); f.Wrote || executor.Wrote(err) {
		r.Errorf("a deploy whose context had ended says it wrote: %v", err)
	}
	r.Logf("a deploy whose context had ended: %v", err)
	if o := r.Read("unwritten"); o.Exists {
		r.Errorf("read after two deploys that wrote nothing: %+v; want not there", o)
	}
	if l := r.Leftovers("unwritten"); len(l) > 0 {
		r.Errorf("left on the target by two deploys that wrote nothing: %q", l)
	}
}

// preflightReadsOnly: a plan's preflight of a revision the target would
// run refuses nothing and leaves nothing of the agent; after the agent
// runs, a preflight of its next revision is clear too, and the agent still
// runs unchanged; a target that does not answer is the preflight's error
// (the plan says it was not checked), never a refusal. The contract:
// executor.Executor.Preflight (issue 31).
func preflightReadsOnly(r *R) {
	rev := r.rev("preflighted", 1, Ready)
	d := deployment(rev, r.Place.Compute, 1, 0, r.log("preflighted"))
	out, err := r.Kind.Executor.Preflight(r.Ctx, d)
	if err != nil || len(out.Refusals) > 0 {
		r.Fatalf("preflight of a revision the target runs: %v, refusals %v", err, out.Refusals)
	}
	if l := r.Leftovers("preflighted"); len(l) > 0 {
		r.Fatalf("left on the target by a preflight: %q", l)
	}
	r.MustDeploy(rev, 1, 0)
	next := r.rev("preflighted", 2, Ready)
	out, err = r.Kind.Executor.Preflight(r.Ctx, deployment(next, r.Place.Compute, 2, 1, r.log("preflighted")))
	if err != nil || len(out.Refusals) > 0 {
		r.Fatalf("preflight of the next revision: %v, refusals %v", err, out.Refusals)
	}
	r.Activated("preflighted", 1, rev)

	ex, c := r.Place.Unreachable(r.T)
	out, err = ex.Preflight(r.Ctx, deployment(r.rev("unreached", 1, Ready), c, 1, 0, r.log("unreached")))
	var f *executor.Failure
	if len(out.Refusals) > 0 || !errors.As(err, &f) || f.Code != executor.Unavailable || f.Op != executor.OpPreflight {
		r.Fatalf("preflight of a target that does not answer: %v, refusals %v; want an UNAVAILABLE preflight error", err, out.Refusals)
	}
	r.Logf("a preflight of a target that does not answer: %v", err)
}

// gatewayAccess: the way into an agent's gateway (the occ_agent_tunnel
// and occ_gateway_token ephemeral resources) reads and writes nothing of
// the agent: before its deploy both are NOT_FOUND; once it is activated
// the token is the same on every read, and, where the place's gateways
// answer HTTP (Kind.GatewayAnswers), the loopback address OpenGateway
// gives answers while it is open, with that token, and no longer once
// it is closed.
func gatewayAccess(r *R) {
	const name = "gateway-access"
	a := r.agent(name)
	_, err := r.Kind.Executor.GatewayToken(r.Ctx, a)
	r.Failure(err, executor.NotFound)
	_, err = r.Kind.Executor.OpenGateway(r.Ctx, a)
	r.Failure(err, executor.NotFound)

	rev := r.rev(name, 1, Ready)
	r.MustDeploy(rev, 1, 0)
	before := r.Leftovers(name)
	a = r.agent(name)
	t1, err := r.Kind.Executor.GatewayToken(r.Ctx, a)
	if err != nil {
		r.Fatalf("the gateway token of an activated agent: %v", err)
	}
	t2, err := r.Kind.Executor.GatewayToken(r.Ctx, a)
	if err != nil || t1 != t2 || t1 == "" {
		r.Fatalf("two reads of the gateway token differ or are empty (%d and %d bytes, %v)", len(t1), len(t2), err)
	}
	if r.Kind.GatewayAnswers {
		gw, err := r.Kind.Executor.OpenGateway(r.Ctx, a)
		if err != nil {
			r.Fatalf("opening the gateway of an activated agent: %v", err)
		}
		if host, _, _ := net.SplitHostPort(gw.Addr); host != "127.0.0.1" || gw.Token != t1 || gw.Where == "" {
			r.Errorf("the open gateway is at %q (%s), its token the same: %v; want a loopback address", gw.Addr, gw.Where, gw.Token == t1)
		}
		get := func() error {
			ctx, cancel := context.WithTimeout(r.Ctx, 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL()+"/readyz", nil)
			req.Header.Set("Authorization", "Bearer "+gw.Token)
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return err
		}
		for i := range 2 { // twice: each connection is joined anew
			if err := get(); err != nil {
				r.Fatalf("request %d through the open gateway %s: %v", i+1, gw.Where, err)
			}
		}
		gw.Close()
		gw.Close()
		if err := get(); err == nil {
			r.Errorf("the gateway's address still answers after Close")
		}
	}
	if after := r.Leftovers(name); !slices.Equal(before, after) {
		r.Errorf("reading the token and opening the gateway changed the target: %q, then %q", before, after)
	}
	r.Activated(name, 1, rev)
}

// restart: a restart of an activated agent starts what runs of it again
// (the place's Incarnation changes) and returns once it is ready; the
// revision, its id, its activation time and its endpoint stay, without
// drift (a restart is no deploy: AC4's record is the activation's).
// Before any deploy it is NOT_FOUND, having written nothing; over what was
// edited behind the executor's back it is RESOURCE_CONFLICT, having
// written nothing: a restart never runs what Terraform did not activate.
func restart(r *R) {
	const name = "restarted"
	restart := func() (executor.Restarted, error) {
		return r.Kind.Executor.Restart(r.Ctx, executor.Restart{Agent: r.agent(name), Log: r.log(name)})
	}
	_, err := restart()
	if f := r.Failure(err, executor.NotFound); f.Op != executor.OpRestart || f.Wrote {
		r.Errorf("restart before any deploy: op %s, wrote %v; want restart, nothing written: %v", f.Op, f.Wrote, err)
	}
	rev := r.rev(name, 1, Ready)
	r.MustDeploy(rev, 1, 0)
	before := r.Activated(name, 1, rev)
	ran := r.Place.Incarnation(r.Ctx, r.T, name)
	if ran == "" {
		r.Fatalf("nothing runs of the activated agent, says the place")
	}
	res, err := restart()
	if err != nil {
		var f *executor.Failure
		if errors.As(err, &f) {
			r.Fatalf("restart: %v\n%s", err, f.Detail(rev.ID()))
		}
		r.Fatalf("restart: %v", err)
	}
	if res.Revision != 1 || len(res.Components) == 0 {
		r.Errorf("restart said %+v; want revision 1 and what it restarted", res)
	}
	if now := r.Place.Incarnation(r.Ctx, r.T, name); now == ran || now == "" {
		r.Errorf("what runs is %q before the restart and %q after it; want a new start", ran, now)
	}
	after := r.Activated(name, 1, rev)
	if !after.ActivatedAt.Equal(before.ActivatedAt) || after.Endpoint != before.Endpoint || after.References != before.References {
		r.Errorf("after the restart the activation reads %s on %s (%q); before it %s on %s (%q): a restart activates nothing",
			after.ActivatedAt, after.Endpoint, after.References, before.ActivatedAt, before.Endpoint, before.References)
	}
	r.Place.Edit(r.Ctx, r.T, name)
	_, err = restart()
	if f := r.Failure(err, executor.ResourceConflict); f.Op != executor.OpRestart || f.Wrote || f.Revision != 0 && f.Revision != 1 {
		r.Errorf("restart of an edited agent: op %s, wrote %v, revision %d; want restart, nothing written: %v", f.Op, f.Wrote, f.Revision, err)
	}
}
