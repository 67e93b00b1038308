// Package conformance is the executor contract's conformance suite: one
// table of behaviours every executor.Executor must show, run by each
// executor's own tests against a real target of its kind (the Kubernetes
// executor on the kwok control plane, the SSH executor on a systemd-nspawn
// host), in the manner of the CSI sanity suite.
//
// An executor's test describes its kind (Kind): the executor, how to make a
// fresh place for one case (a namespace, a fresh set of agent names on a
// host) and, there, revisions of given behaviours, and the few things the
// suite cannot do through the contract itself (break what runs behind the
// executor's back, list what of an agent is left on the target). The
// suite deploys, reads, lists, imports and deletes only through the
// contract, and fails when an executor does not behave as the contract and
// the rules (../shared/spec/RULES.md) say. Where two kinds differ by
// design, the Kind declares which documented behaviour its executor shows
// (Kind.AfterFailedUpdate, Kind.KeepsActivationTime, …); the suite checks
// the declared one, never "anything".
//
// Only tests import this package.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Behaviour is how a revision's runtime behaves once started.
type Behaviour int

const (
	// Ready: the revision becomes ready at once.
	Ready Behaviour = iota + 1
	// Slow: the revision becomes ready only after several seconds (at
	// least 5): long enough for the suite to interrupt its deploy while
	// it waits, short enough for a deploy to wait it out.
	Slow
	// Held: the revision's startup probe holds a code (Kind.HeldCode) and
	// writes it in its startup record (PR6, PR7); it never becomes ready.
	Held
	// Fails: the revision's process exits before it is ready, again and
	// again.
	Fails
)

func (b Behaviour) String() string {
	switch b {
	case Ready:
		return "ready"
	case Slow:
		return "slow"
	case Held:
		return "held"
	case Fails:
		return "fails"
	}
	return fmt.Sprintf("behaviour(%d)", int(b))
}

// Kind is one compute kind as its executor's test describes it to the
// suite.
type Kind struct {
	// Name names the kind in messages ("kubernetes", "ssh").
	Name string
	// Executor is the executor under test. Its operations must reach the
	// places NewPlace makes.
	Executor executor.Executor
	// NewPlace makes a fresh place for one case; what it creates goes with
	// t (t.Cleanup). The suite deletes, through the executor, every agent
	// it deployed there when the case ends.
	NewPlace func(t *testing.T) *Place

	// HeldCode is the code a Held revision's deploy fails with; FailCode
	// the code a Fails revision's deploy fails with.
	HeldCode, FailCode executor.Code
	// AfterFailedUpdate is what Read reports of an agent whose revision 1
	// was activated and whose revision 2 then failed to start.
	AfterFailedUpdate Observation
	// RemovedDrift is what Read reports after Place.Remove, EditedDrift
	// after Place.Edit.
	RemovedDrift, EditedDrift executor.DriftReason
	// KeepsActivationTime says that a repeated deploy of the activated
	// revision keeps its activation time (AC4: recovery repeats only safe
	// effects). An executor that restarts the revision on a repeat and
	// records a new activation leaves it false.
	KeepsActivationTime bool
	// ForeignIDs are import ids of other kinds; ParseImportID must never
	// read an agent name from one. ClaimsForeignIDs says the executor is
	// asked last and takes every id of its shape as its own (Kubernetes
	// takes every NAMESPACE/NAME): it then refuses a foreign id with an
	// error instead of answering ok=false.
	ForeignIDs       []string
	ClaimsForeignIDs bool
	// InterruptPhase is the deploy phase, as the executor logs it
	// (work.operation), in which the suite interrupts a deploy: one in
	// which the revision is written and the deploy waits for it. Default
	// DefaultInterruptPhase.
	InterruptPhase string
	// GatewayAnswers says that the place's activated agents run a gateway
	// that answers HTTP where OpenGateway reaches it (kwok's Pods run
	// nothing: the Kubernetes port-forward is tried on the real node).
	GatewayAnswers bool
	// CaseTimeout bounds each case (default 4 minutes: a loaded 2-core
	// machine).
	CaseTimeout time.Duration
}

// Observation is an expected Read.
type Observation struct {
	// Revision is the activated revision Read reports (0: none).
	Revision int64
	// Drifts are the drift reasons Read may report, any one of them.
	Drifts []executor.DriftReason
}

// Place is where one case deploys: a compute of its own, or one shared
// with nothing else the case looks at.
type Place struct {
	Compute admission.Compute
	// Where names the target of Compute in messages: its namespace, its
	// host.
	Where string
	// ID is the id of agent name as List writes it and an import takes it.
	ID func(name string) string
	// Revision returns a revision of agent name for Compute whose runtime
	// behaves as b. Revisions of one name with another variant or
	// behaviour differ in content (another revision id); with the same
	// ones they are equal.
	Revision func(t *testing.T, name string, variant int, b Behaviour) *admission.Revision
	// Remove removes, behind the executor's back, what runs of the agent
	// (its workload, its unit), leaving the rest.
	Remove func(ctx context.Context, t *testing.T, name string)
	// Edit changes, behind the executor's back, what the agent runs.
	Edit func(ctx context.Context, t *testing.T, name string)
	// LookAlike makes by hand, on the target, something that looks like
	// an agent next to name (a similar name, the same prefix) but that the
	// provider did not create.
	LookAlike func(ctx context.Context, t *testing.T, name string)
	// Leftovers lists what of agent name is on the target, one line per
	// object, file, unit or user, every executor-written object the kind
	// knows of; empty when nothing is.
	Leftovers func(ctx context.Context, t *testing.T, name string) []string
	// Incarnation names what runs of agent name now, so that a start of it
	// is a new name (its Pods' UIDs, its unit's invocation id); "" when
	// nothing runs.
	Incarnation func(ctx context.Context, t *testing.T, name string) string
	// Unreachable is an executor and compute that point at this place
	// through a target that does not answer (a closed port).
	Unreachable func(t *testing.T) (executor.Executor, admission.Compute)
}

// DefaultInterruptPhase is the phase in which both executors wait for a
// written revision to become ready, as they log it (work.operation).
const DefaultInterruptPhase = "gate"

// Run runs every case against k, each as a subtest of t.
func Run(t *testing.T, k Kind) {
	if k.CaseTimeout == 0 {
		k.CaseTimeout = 4 * time.Minute
	}
	if k.InterruptPhase == "" {
		k.InterruptPhase = DefaultInterruptPhase
	}
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			start := time.Now()
			r := newRun(t, k)
			c.Run(r)
			t.Logf("%s on %s: %s", c.Name, k.Name, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// Case is one behaviour of the table.
type Case struct {
	Name string
	Run  func(r *R)
}

// R is one case's run: the kind, its place, a context that ends with the
// case's deadline, and helpers that go through the contract only.
type R struct {
	*testing.T
	Kind  Kind
	Place *Place
	Ctx   context.Context
	// revs is the last revision deployed per agent, for Read.
	revs map[string]*admission.Revision
}

func newRun(t *testing.T, k Kind) *R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), k.CaseTimeout)
	t.Cleanup(cancel)
	r := &R{T: t, Kind: k, Ctx: ctx, revs: map[string]*admission.Revision{}}
	r.Place = k.NewPlace(t)
	// Registered after NewPlace's cleanups, so run before them: the
	// agents go before their place does.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for name := range r.revs {
			if err := k.Executor.Delete(ctx, r.agent(name)); err != nil {
				t.Logf("cleanup: delete %s: %v", name, err)
			}
		}
	})
	return r
}

// rev is the place's revision of name, remembered for Read.
func (r *R) rev(name string, variant int, b Behaviour) *admission.Revision {
	r.Helper()
	rev := r.Place.Revision(r.T, name, variant, b)
	if rev == nil || rev.Agent != name {
		r.Fatalf("the place's revision of %s (%v, variant %d) is %v", name, b, variant, rev)
	}
	return rev
}

// deployment is the one place the suite builds an executor.Deployment: a
// plain deploy of revision n while serving is active (0 on create). The
// suite never asks for a mode beside it (finish, network only): those are
// repairs of one kind's drifts, tested by that kind.
func deployment(rev *admission.Revision, c admission.Compute, n, serving int64, log executor.Log) executor.Deployment {
	return executor.Deployment{Revision: rev, Compute: c, N: n, Serving: serving, References: References, Log: log}
}

// References is what every deploy of the suite records (Deployment.References).
const References = "occ-conformance-references-v1"

// Deploy deploys revision n of rev, serving being the active revision.
func (r *R) Deploy(ctx context.Context, rev *admission.Revision, n, serving int64) (executor.Result, error) {
	r.revs[rev.Agent] = rev
	return r.Kind.Executor.Deploy(ctx, deployment(rev, r.Place.Compute, n, serving, r.log(rev.Agent)))
}

// MustDeploy deploys and fails the case unless the revision activates.
func (r *R) MustDeploy(rev *admission.Revision, n, serving int64) executor.Result {
	r.Helper()
	res, err := r.Deploy(r.Ctx, rev, n, serving)
	var f *executor.Failure
	if errors.As(err, &f) {
		r.Fatalf("deploy %s revision %d (serving %d): %v\n%s", rev.Agent, n, serving, err, f.Detail(rev.ID()))
	}
	if err != nil {
		r.Fatalf("deploy %s revision %d (serving %d): %v", rev.Agent, n, serving, err)
	}
	return res
}

func (r *R) log(name string) executor.Log {
	return func(msg string, fields map[string]any) {
		if testing.Verbose() {
			r.Logf("%s: %s %v", name, msg, fields)
		}
	}
}

// agent names an agent of the place for Read and Delete.
func (r *R) agent(name string) executor.Agent {
	a := executor.Agent{Name: name, Compute: &r.Place.Compute, Log: r.log(name)}
	if rev := r.revs[name]; rev != nil {
		a.Harness, a.ExecutionMode = rev.Harness, rev.ExecutionMode
	}
	return a
}

// Read reads an agent of the place and fails the case on an error.
func (r *R) Read(name string) executor.Observed {
	r.Helper()
	o, err := r.Kind.Executor.Read(r.Ctx, r.agent(name))
	if err != nil {
		r.Fatalf("read %s: %v", name, err)
	}
	return o
}

// Activated fails the case unless Read reports revision n of rev running
// unchanged.
func (r *R) Activated(name string, n int64, rev *admission.Revision) executor.Observed {
	r.Helper()
	o := r.Read(name)
	if !o.Exists || o.Revision != n || o.RevisionID != rev.ID() || o.Drift != executor.DriftNone || o.ActivatedAt.IsZero() || o.Endpoint == "" {
		r.Fatalf("read %s: %+v; want revision %d (%s) activated, without drift, with its time and endpoint", name, o, n, rev.ID())
	}
	return o
}

// Failure fails the case unless err is a *executor.Failure of a deploy
// of code c (any code when c is empty); it returns it.
func (r *R) Failure(err error, c executor.Code) *executor.Failure {
	r.Helper()
	var f *executor.Failure
	if !errors.As(err, &f) {
		r.Fatalf("error %T %v; want a *executor.Failure", err, err)
	}
	if c != "" && f.Code != c {
		r.Fatalf("failure code %s (%v); want %s", f.Code, err, c)
	}
	return f
}

// Leftovers is the place's list of what of name is on the target.
func (r *R) Leftovers(name string) []string {
	r.Helper()
	l := r.Place.Leftovers(r.Ctx, r.T, name)
	slices.Sort(l)
	return l
}

// Eventually polls cond every half second until it holds or d passes,
// then fails the case with what the last poll said.
func (r *R) Eventually(d time.Duration, what string, cond func() (bool, string)) {
	r.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, said := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || r.Ctx.Err() != nil {
			r.Fatalf("%s: not within %s: %s", what, d, said)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// normalized is list with the agent's name and its revisions' ids
// replaced, so that what two agents leave can be compared.
func normalized(list []string, name string, revs ...*admission.Revision) []string {
	out := make([]string, len(list))
	for i, l := range list {
		for _, rev := range revs {
			l = strings.ReplaceAll(l, rev.ID(), "<revision-id>")
		}
		out[i] = strings.ReplaceAll(l, name, "<agent>")
	}
	slices.Sort(out)
	return out
}

// Model is the primary model of the revisions EmbeddedRevision admits.
const Model = "anthropic/claude-sonnet-4-5"

// EmbeddedRevision admits an embedded OpenClaw revision of agent name on
// compute c with credential source src, its document Model's plus extra
// (more top-level keys of the document, "" for none): what a kind's
// Place.Revision builds its revisions from.
func EmbeddedRevision(t *testing.T, name string, c admission.Compute, src admission.CredentialSource, extra string) *admission.Revision {
	t.Helper()
	text := `{agents: {defaults: {model: "` + Model + `"}}`
	if extra != "" {
		text += ", " + extra
	}
	doc, err := occconfig.Parse(text + "}")
	if err != nil {
		t.Fatal(err)
	}
	src.ComputeID = c.ID
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: name},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       c,
		Source:        src,
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev
}
