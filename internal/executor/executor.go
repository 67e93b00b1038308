// Package executor is the one contract between the provider and the
// places agents run: a Kubernetes cluster (internal/kube) and a systemd
// host over SSH (internal/sshexec). It holds types only, no I/O.
//
// An executor prepares a compute, deploys revision n of an admitted
// revision beside the one that serves, reads an agent back, deletes it,
// lists the agents a target holds and recognises its import ids.
// Everything that goes wrong comes back as a *Failure with a Code from the
// one catalog (catalog.go), made at each operation's exit by Normalize
// (failure.go); the provider turns a Failure into a diagnostic
// with one formatter, and the docs' failure-code table is generated from
// the catalog.
//
// # Adding a compute kind
//
// A new kind (Docker, Nomad, …) is:
//  1. its settings: a type of its own that admission.Compute.Settings
//     holds, and the type a revision freezes of it
//     (admission.ComputeSettings.Settings, which must encode as a JSON
//     object: it is hashed into the revision id).
//  2. an admission row (admission.KindSupport): what the kind runs and
//     accepts, what a revision freezes of its compute, its platform keys
//     and whether gateway.port is the user's; registered with
//     admission.RegisterKind (the bundled kinds are rows of kinds.go).
//  3. its rendering, pure (values in, values or errors out), using
//     render.Topology for which components the revision runs.
//  4. an executor implementing Executor (and SecretStore when the kind
//     keeps credential sources' values on its target): it writes only
//     through helpers that mark Writes, returns *Failure with catalog
//     codes through Normalize at each operation's exit (add any new code
//     to catalog.go and run `make generate`), and honours the context's
//     deadline in every call. Its tests run the conformance suite
//     (internal/executor/conformance) against a real target.
//  5. for Terraform: its row in the provider's registry: occ_compute's
//     block for the kind, its schema and its conversion into the kind's
//     settings, its static checks, its executor, agent ids, and the
//     target attributes that locate its agents without their compute,
//     which join the agent's resource identity, the occ_agent list block
//     and data.occ_agent (target.go). A kind outside the provider
//     registers with one provider.RegisterKind call; the bundled kinds
//     are rows of internal/provider/executors.go, their blocks
//     compute_kubernetes.go and compute_ssh.go.
//
// No step needs an edit outside the kind's own files:
// internal/testenv/memkind is a kind that exists only in tests, with its
// own settings types and a target attribute of its own; it passes the
// conformance suite, and its agents are deployed, listed with `terraform
// query`, imported by identity and read by data.occ_agent through the real
// Terraform CLI, from one registration statement in its TestMain.
package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// Executor runs agents on one compute kind.
type Executor interface {
	// Kind is the compute kind served (admission.KindKubernetes, …).
	Kind() string
	// Prepare makes a compute usable before its first agent, and checks
	// that it is (the namespace and permissions on Kubernetes). It is
	// idempotent and cheap to repeat within one provider process.
	Prepare(ctx context.Context, p Prepare) (Prepared, error)
	// Inspect reads what a compute offers (its installation) from the
	// target; live is false when nothing is read live, the installation
	// then following from the settings alone.
	Inspect(ctx context.Context, c admission.Compute) (inst admission.Installation, live bool, err error)
	// Release undoes what Prepare created for a compute that is being
	// removed, when nothing else needs it.
	Release(ctx context.Context, p Release) (Released, error)
	// Deploy installs revision N and blocks until it is activated or has
	// failed; it returns *Failure on failure.
	Deploy(ctx context.Context, d Deployment) (Result, error)
	// Read observes an agent.
	Read(ctx context.Context, a Agent) (Observed, error)
	// List names the agents on one compute's target, in name order. Only
	// the settings that locate the target are read (a Kubernetes
	// compute's Namespace, an SSH compute's Host and Port); the provider's
	// list resource sets nothing else. It reads only; a target that holds
	// none gives an empty list, not an error.
	List(ctx context.Context, on admission.Compute) ([]Listed, error)
	// Delete removes every object of an agent.
	Delete(ctx context.Context, a Agent) error
	// Turn sends one message to the agent's activated revision through
	// its gateway's own client surface and returns the answer; it writes
	// nothing. A turn that does not answer is a *Failure (TURN_FAILED, or
	// UNAVAILABLE / NOT_FOUND when the gateway cannot be reached).
	Turn(ctx context.Context, t Turn) (turn.Answer, error)
	// GatewayToken reads the token the agent's activated gateway takes
	// from what the target runs ("" for a gateway that takes none); it
	// writes nothing. No activated revision is NOT_FOUND.
	GatewayToken(ctx context.Context, a Agent) (string, error)
	// OpenGateway opens a loopback address on the provider's machine that
	// reaches the agent's activated gateway (a port-forward, an SSH local
	// forward) and keeps it open until Close or until ctx ends; it writes
	// nothing. No activated revision is NOT_FOUND; a gateway that cannot
	// be reached is UNAVAILABLE.
	OpenGateway(ctx context.Context, a Agent) (*Gateway, error)
	// Restart restarts what runs of the agent's activated revision, one
	// component at a time, and blocks until each is ready again behind
	// the same readiness the deploy gated on (its startup probe). It
	// deploys and activates nothing: the revision, its activation time
	// and everything Read reports stay. Only an activated revision that
	// runs unchanged is restarted (Restartable); a component that does
	// not come back is a *Failure with the code a deploy would give it
	// (Op OpRestart).
	Restart(ctx context.Context, r Restart) (Restarted, error)
	// ParseImportID recognises an import id of this kind; ok is false for
	// ids of other kinds, err set for an id of this kind that is malformed.
	ParseImportID(id string) (name string, ok bool, err error)
	// Preflight reads, and writes nothing, what a deploy of d (revision N
	// in ModeActivate) would meet on the target, so that the plan shows
	// it: each certain failure as the *Failure the deploy would return
	// (its code and next step; Op OpPreflight), each probable one as a
	// warning. It reads what does not depend on the agent once per target
	// per executor and shares it between agents. err is a preflight that
	// could not look (the target does not answer): the plan then says
	// that it was not checked, and the apply decides.
	Preflight(ctx context.Context, d Deployment) (Preflighted, error)
}

// Preflighted is what a Preflight found.
type Preflighted struct {
	// Refusals are the failures the deploy would certainly meet, each as
	// the deploy would word it: a *Failure, or an admission refusal of
	// what the target offers (admission.Errors).
	Refusals []error
	// Warnings are what the deploy may meet (capacity another apply may
	// take first), and the checks the preflight could not make.
	Warnings []Warning
}

// Refuse adds a certain failure; a *Failure is worded as a preflight's
// (Op OpPreflight, nothing written, agent and revision named).
func (p *Preflighted) Refuse(err error, agent string, n int64) {
	var f *Failure
	var es admission.Errors
	var one *admission.Error
	switch {
	case errors.As(err, &f):
	case errors.As(err, &es) || errors.As(err, &one):
		p.Refusals = append(p.Refusals, err) // admission's own words
		return
	default:
		// A write the target's dry run refused: what the deploy says of
		// the same refusal.
		f = &Failure{Code: DeploymentFailed, Reason: err.Error(), Err: err, Next: "Fix what the quoted error names and plan again."}
		err = f
	}
	f.Op, f.Wrote = OpPreflight, false
	if f.Agent == "" || f.Revision == 0 {
		f.Agent, f.Revision = agent, n
	}
	p.Refusals = append(p.Refusals, err)
}

// Warn adds a probable failure or a check not made.
func (p *Preflighted) Warn(summary, detail string) {
	p.Warnings = append(p.Warnings, Warning{Summary: summary, Detail: detail})
}

// Log receives an operation's phase messages; never secrets. Each
// operation carries its own, so concurrent operations never mix fields.
type Log func(msg string, fields map[string]any)

// Print calls l when it is set.
func (l Log) Print(msg string, fields map[string]any) {
	if l != nil {
		l(msg, fields)
	}
}

// Fields is a and b merged, b winning: an operation's log fields with a
// phase's.
func Fields(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Prepare asks an executor to make a compute usable.
type Prepare struct {
	Compute admission.Compute
	// ReadInstallation asks for what the compute's sandbox driver offers,
	// read live.
	ReadInstallation bool
	Log              Log
}

// Prepared is what Prepare did and found.
type Prepared struct {
	// Created is true when this call created something the compute owns
	// (the tenant namespace), so that Release may remove it.
	Created bool
	// Installation is the live installation, when asked for and known.
	Installation *admission.Installation
}

// Release asks an executor to undo what Prepare created for a compute.
type Release struct {
	Compute admission.Compute
	// Created is what the compute's Prepare reported.
	Created bool
	Log     Log
}

// Released says what Release did; Kept explains what it left and why.
type Released struct {
	Kept []Warning
}

// Mode is what a Deployment asks of an executor.
type Mode int

const (
	// ModeActivate deploys revision N beside the one that serves and
	// activates it: the deploy of a create or of a new revision.
	ModeActivate Mode = iota
	// ModeFinish says revision N is already activated (a Read found it
	// DriftUnretired): complete what its activation left undone, the
	// retirement of earlier revisions and the audit record, and deploy
	// nothing. N equals Serving.
	ModeFinish
	// ModeSettings says revision N already serves and does not change:
	// write only what the compute applies per agent outside revision
	// identity (on Kubernetes, the agent's NetworkPolicies and its
	// Service's exposure), because those settings changed or a Read found
	// them drifted (DriftNetworkPolicy, DriftExposure), and deploy
	// nothing. N equals Serving. A kind with no such settings refuses it.
	ModeSettings
)

var modeNames = [...]string{ModeActivate: "activate", ModeFinish: "finish", ModeSettings: "settings"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Deployment is one deploy: revision N of Revision on Compute, while
// revision Serving (0: none, on create) is the one state says is active,
// in the Mode asked.
type Deployment struct {
	Revision *admission.Revision
	Compute  admission.Compute
	Mode     Mode
	// N is the revision deployed; Serving the one state says serves.
	N, Serving int64
	// References is the agent's record of what Terraform passed it (its
	// compute, configuration and credential source as the references hold
	// them, its harness and execution mode), opaque to the executor and
	// never secret. The executor keeps it beside the activated revision
	// (a ModeSettings deploy refreshes it) and Read reports it
	// (Observed.References), so that an imported agent reads its
	// references back. Empty: nothing is recorded.
	References string
	Log        Log
}

// Result is an activated revision.
type Result struct {
	ActivatedAt time.Time
	Endpoint    string
	// Phases are the startup phases the revision's runtime recorded
	// (PR9), as read by the time its gate passed, in the order first seen;
	// nil when the runtime writes none (the pinned gateway on SSH).
	Phases []PhaseTiming
	// Warnings are facts the user should see although the deploy worked
	// (an outage the deploy waited through).
	Warnings []Warning
}

// PhaseTiming is one startup phase of one component of an activated
// revision: its outcome and how long it took.
type PhaseTiming struct {
	Component  string
	Phase      string
	Outcome    string
	DurationMS int64
}

// Warning is a diagnostic warning.
type Warning struct {
	Summary, Detail string
}

// Agent names an agent to read or delete: from its compute in state, or,
// for an import whose compute is not in state yet, from its import id.
type Agent struct {
	Name string
	// Compute is nil for an agent imported by id.
	Compute                *admission.Compute
	ImportID               string
	Harness, ExecutionMode string
	Log                    Log
}

// Turn is one message to an agent (the occ_agent_turn action).
type Turn struct {
	// Agent names the agent and its compute (Compute is required). Where
	// the gateway listens and how it authenticates are read from what the
	// target runs, not from Terraform.
	Agent   Agent
	Message string
	Log     Log
}

// Restart asks an executor to restart an agent (the occ_agent_restart
// action).
type Restart struct {
	// Agent names the agent and its compute (Compute is required).
	Agent Agent
	Log   Log
}

// Restarted is a restart that came back.
type Restarted struct {
	// Revision is the activated revision restarted.
	Revision int64
	// Components are what was restarted, in the order restarted (a
	// container's component, a unit).
	Components []string
	// Phases are the startup phases the restarted runtime recorded, as
	// Result.Phases.
	Phases []PhaseTiming
}

// Restartable is nil when o, what a Read found of agent, is an activated
// revision that runs unchanged, which a restart may restart; otherwise the
// Failure that says why not and that an apply is what restores it. Every
// executor's Restart asks it first: a restart never runs something
// Terraform did not activate, nor replaces what an apply must redeploy.
func Restartable(agent string, o Observed) error {
	f := &Failure{Code: NotFound, Op: OpRestart, Agent: agent, Revision: o.Revision}
	switch o.Drift {
	case DriftNone, DriftUnretired, DriftNetworkPolicy, DriftExposure:
		if o.Revision > 0 {
			return nil
		}
		f.Reason = "no revision of the agent is activated"
		f.Next = "apply the agent; a restart restarts only an activated revision"
	case DriftGone, DriftWorkload:
		f.Reason = "the activated revision does not run: " + o.DriftDetail
		f.Next = "apply the agent: the plan shows the drift and the apply deploys the revision again (a restart does not redeploy)"
	default: // edited, unfinished
		f.Code = ResourceConflict
		f.Reason = "what runs is not the activated revision: " + o.DriftDetail
		f.Next = "apply the agent to run its activated revision again (terraform plan shows the drift); a restart would only restart what was changed"
	}
	return f
}

// Gateway is an open way from the provider's machine into an agent's
// activated gateway (Executor.OpenGateway).
type Gateway struct {
	// Addr is the loopback host:port that reaches the gateway while the
	// Gateway is open.
	Addr string
	// Token is the gateway token ("" for a gateway that takes none).
	Token string
	// Where names the gateway in messages: its Pod, its host and port.
	Where string
	close func()
	once  sync.Once
}

// NewGateway is an open Gateway at addr; stop ends what keeps it open.
func NewGateway(addr, token, where string, stop func()) *Gateway {
	return &Gateway{Addr: addr, Token: token, Where: where, close: stop}
}

// URL is the gateway's base URL (http://127.0.0.1:PORT).
func (g *Gateway) URL() string { return "http://" + g.Addr }

// Close ends the way in; it may be called more than once.
func (g *Gateway) Close() {
	if g != nil && g.close != nil {
		g.once.Do(g.close)
	}
}

// Forward serves ln, a loopback listener, until ctx ends: each connection
// accepted is joined to a new one dial opens to addr (the SSH local
// forward of an agent's gateway). It returns the stop that closes the
// listener and every joined connection and waits for them.
func Forward(ctx context.Context, ln net.Listener, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	open, closed := map[net.Conn]struct{}{}, false
	// track adds the joined pair, false once the forward is closing;
	// untrack removes it.
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		for _, c := range cs {
			open[c] = struct{}{}
		}
		return true
	}
	untrack := func(cs ...net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			delete(open, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		ln.Close()
		mu.Lock()
		closed = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				out, err := dial(ctx, "tcp", addr)
				if err != nil {
					return
				}
				defer out.Close()
				if !track(in, out) {
					return
				}
				defer untrack(in, out)
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if cw, ok := dst.(interface{ CloseWrite() error }); ok {
						_ = cw.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(out, in)
				go pipe(in, out)
				<-done
				<-done
			}()
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// SendTurn sends r with c and words a turn that did not answer as a
// Failure (TurnFailure): what both executors do once they reach the
// gateway.
func SendTurn(ctx context.Context, c *http.Client, agent, where string, r turn.Request) (turn.Answer, error) {
	ans, err := turn.Send(ctx, c, r)
	if err != nil {
		return turn.Answer{}, TurnFailure(agent, where, err)
	}
	return ans, nil
}

// TurnFailure words a turn that did not answer (turn.Send's error) as a
// Failure: the gateway's refusal or the run's failure is TURN_FAILED,
// with the gateway's own bounded words; a gateway that cannot be reached
// is UNAVAILABLE.
func TurnFailure(agent, where string, err error) *Failure {
	f := &Failure{Code: TurnFailed, Op: OpTurn, Agent: agent, Where: where, Err: err}
	var te *turn.Error
	switch {
	case errors.As(err, &te) && te.NotEnabled():
		f.Reason = "the gateway does not serve its chat completions endpoint (" + te.Error() + ")"
		f.Next = "set gateway.http.endpoints.chatCompletions.enabled = true in the agent's configuration document and apply (a new revision), then send the turn again"
	case errors.As(err, &te) && te.Unauthorized():
		f.Reason = "the gateway refused the gateway token (" + te.Error() + ")"
		f.Next = "the gateway runs with another token than the one the provider sent: apply the agent again (a restart with its token), then send the turn again"
	case errors.As(err, &te):
		f.Reason = te.Error()
		f.Next = "read the agent's status and its gateway's log; a model that refuses the key or cannot be reached fails the turn the same way it would fail the startup probe"
	case errors.Is(err, context.DeadlineExceeded):
		f.Code = Deadline
		f.Reason = "the turn did not answer before the action's timeout"
		f.Next = "raise the action's timeout, or check the model endpoint the configuration names"
	default:
		f.Code = Unavailable
		f.Reason = "the gateway did not answer: " + err.Error()
		f.Next = "check that the agent is active (terraform plan refreshes its status), then send the turn again"
	}
	return f
}

// RetainsState reports whether destroying the agent keeps its state claim
// (Kubernetes): only when its compute says so (state.retain_on_destroy).
func (a Agent) RetainsState() bool {
	return a.Compute != nil && a.Compute.Kubernetes().State != nil && a.Compute.Kubernetes().State.RetainOnDestroy
}

// DriftReason says why what runs is not the activated revision.
type DriftReason string

const (
	// DriftNone: the activated revision runs.
	DriftNone DriftReason = ""
	// DriftGone: nothing of the agent is on the target.
	DriftGone DriftReason = "gone"
	// DriftWorkload: a workload, unit or Sandbox was deleted or stopped.
	DriftWorkload DriftReason = "workload"
	// DriftEdited: what runs was changed outside Terraform.
	DriftEdited DriftReason = "edited"
	// DriftUnfinished: an apply stopped half-way (a revision selected but
	// never activated).
	DriftUnfinished DriftReason = "unfinished"
	// DriftUnretired: the activated revision runs, but the apply that
	// activated it stopped before it retired what earlier revisions left
	// (their configuration, workloads, credentials) or wrote its audit
	// record. Nothing needs deploying again: a Deployment in ModeFinish
	// completes it.
	DriftUnretired DriftReason = "unretired"
	// DriftNetworkPolicy: the activated revision runs, but a NetworkPolicy
	// the compute asks for was deleted. Nothing needs deploying again: a
	// Deployment in ModeSettings writes it back without a new revision.
	DriftNetworkPolicy DriftReason = "network-policy"
	// DriftExposure: the activated revision runs, but its Service lacks
	// the exposure (type, annotations, source ranges) the compute asks
	// for. A Deployment in ModeSettings writes it back without a new
	// revision.
	DriftExposure DriftReason = "exposure"
)

// Observed is what the target says about an agent.
type Observed struct {
	// Exists is false when nothing of the agent is on the target.
	Exists bool
	// Revision, RevisionID, ActivatedAt and Endpoint are the activated
	// revision (0, "" and zero when none).
	Revision    int64
	RevisionID  string
	ActivatedAt time.Time
	Endpoint    string
	// Drift is why what runs is not the activated revision; Detail says
	// it in words for the status attribute.
	Drift       DriftReason
	DriftDetail string
	// References is the Deployment.References recorded with the activated
	// revision ("" when none was).
	References string
}

// Listed is one agent a List found: its name, its id (as the executor's
// AgentID writes it for the target listed) and what the reading code of
// the executor's Read observed of it in the listing, so that a listing and
// a refresh never judge an agent by two rules. A listing reads less than a
// Read may (an agent listed without drift may still read drifted).
type Listed struct {
	Name string
	ID   string
	Observed
}

// Writes records whether an operation wrote anything to its target. The
// executors' write paths mark it themselves (the Kubernetes client's
// transport, the SSH executor's write helpers) for every request that may
// have changed the target, so that "nothing was written" is never tracked
// by hand. Safe for concurrent use.
type Writes struct{ n atomic.Int64 }

// Mark records a write (attempted or done).
func (w *Writes) Mark() {
	if w != nil {
		w.n.Add(1)
	}
}

// Undone records that every write so far was undone: an operation
// refused part-way deleted, under their UIDs, exactly the objects it had
// created, and wrote to nothing that existed before.
func (w *Writes) Undone() {
	if w != nil {
		w.n.Store(0)
	}
}

// Any reports whether anything was written.
func (w *Writes) Any() bool { return w != nil && w.n.Load() > 0 }

type writesKey struct{}

// WithWrites carries an operation's Writes in its context, for write paths
// that see only the context (an HTTP transport).
func WithWrites(ctx context.Context, w *Writes) context.Context {
	return context.WithValue(ctx, writesKey{}, w)
}

// WritesFrom is the Writes a context carries, or nil.
func WritesFrom(ctx context.Context) *Writes {
	w, _ := ctx.Value(writesKey{}).(*Writes)
	return w
}

// Wrote reports whether a failed operation may have written to its
// target: what its Failure says; nothing for an admission refusal; and,
// for an error that is neither (an executor bug), that it may have.
func Wrote(err error) bool {
	if err == nil {
		return false
	}
	var f *Failure
	if errors.As(err, &f) {
		return f.Wrote
	}
	var es admission.Errors
	var one *admission.Error
	if errors.As(err, &es) || errors.As(err, &one) {
		return false
	}
	return true
}
