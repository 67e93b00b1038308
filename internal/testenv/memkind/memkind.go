// Package memkind is a compute kind that exists only in tests: agents
// "run" in memory, in a Target the test makes, so that the executor
// contract can be exercised by a third kind beside Kubernetes and SSH.
// It proves the plug-in contract: the kind is this package alone, its
// admission row (Row) registered with one call, and its executor passes
// the conformance suite (internal/executor/conformance) without an edit to
// any other package.
//
// What runs is simulated from the revision itself: the compute's
// openclaw_path, which the kind freezes into every revision, names the
// runtime's behaviour as /memkind/BEHAVIOUR/vN (ready, slow, held,
// fails), the way the SSH conformance host names its fake gateway.
//
// Only tests import this package.
package memkind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// Kind is the kind's name, as a compute's kind.
const Kind = "memory"

// Row is the kind's admission row: it runs embedded OpenClaw with a model
// key (api_key) and freezes the target's name and the runtime's path.
var Row = admission.KindSupport{
	Kind:        Kind,
	Runs:        []admission.HarnessMode{{Harness: admission.HarnessOpenClaw, Mode: admission.ModeEmbedded}},
	AuthMethods: []string{admission.MethodAPIKey},
	Settings: func(c admission.Compute) admission.ComputeSettings {
		s := settingsOf(c)
		return admission.ComputeSettings{Kind: c.Kind, Name: c.Name, Settings: Frozen(s)}
	},
	PlatformKeys: func(_, _ string) []admission.PlatformKey {
		return []admission.PlatformKey{{Path: admission.PathGatewayBind, Value: "loopback", Why: "an agent in memory listens nowhere else"}}
	},
	Words: admission.KindWords{Title: "Memory", Noun: "a memory compute", Is: "in memory",
		BindingsInstead: "a memory compute takes no channel credentials"},
}

// Settings are a memory compute's own settings: which target its agents
// run in, and the runtime behaviour they start with (see behaviourOf).
type Settings struct {
	Target  string
	Runtime string
}

// Frozen is what a revision freezes of a memory compute.
type Frozen struct {
	Target  string `json:"target"`
	Runtime string `json:"runtime,omitempty"`
}

// Compute is a memory compute named name on target, starting runtime.
func Compute(name, target, runtime string) admission.Compute {
	return admission.Compute{ID: "m-" + name, Name: name, Kind: Kind, Settings: Settings{Target: target, Runtime: runtime}}
}

// settingsOf returns a memory compute's settings; the zero value on
// another kind.
func settingsOf(c admission.Compute) Settings { return admission.SettingsOf[Settings](c.Settings) }

// SlowFor is how long a slow runtime takes to become ready.
const SlowFor = 6 * time.Second

// Target is one place agents run in memory: what the executor writes
// there, and things made by hand (LookAlike) that it did not write.
type Target struct {
	mu     sync.Mutex
	agents map[string]*agent
}

// NewTarget is an empty target.
func NewTarget() *Target { return &Target{agents: map[string]*agent{}} }

// agent is what a target holds of one agent.
type agent struct {
	// managed is false for a look-alike made by hand.
	managed bool
	// written are the revisions written: revision number → revision id.
	written map[int64]string
	// running is the revision whose workload runs (0: none), edited
	// whether what runs was changed by hand.
	running int64
	edited  bool
	// The activated revision, and what its deploy recorded.
	activated   int64
	activatedID string
	at          time.Time
	references  string
	// starts counts the starts of what runs: one per deploy that wrote,
	// one per restart.
	starts int
}

// Starts is how many times what runs of agent name was started (0: never).
func (t *Target) Starts(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.agents[name]; a != nil {
		return a.starts
	}
	return 0
}

// Remove stops what runs of agent name, behind the executor's back.
func (t *Target) Remove(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.agents[name]; a != nil {
		a.running = 0
	}
}

// Edit changes what agent name runs, behind the executor's back.
func (t *Target) Edit(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.agents[name]; a != nil {
		a.edited = true
	}
}

// LookAlike puts, by hand, entries named like agent name (its name with
// a suffix) that the executor did not write.
func (t *Target) LookAlike(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range []string{name + "x", name + "-gateway"} {
		t.agents[n] = &agent{written: map[int64]string{1: "by-hand"}, running: 1, activated: 1, activatedID: "by-hand"}
	}
}

// Leftovers lists what of agent name the target holds, one line each.
func (t *Target) Leftovers(name string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.agents[name]
	if a == nil || !a.managed {
		return nil
	}
	var out []string
	for n, id := range a.written {
		out = append(out, fmt.Sprintf("revision %s r%d %s", name, n, id))
	}
	if a.activated > 0 {
		out = append(out, fmt.Sprintf("activation %s r%d %s", name, a.activated, a.activatedID))
	}
	slices.Sort(out)
	return out
}

// Executor runs agents on the targets it knows, by name (a compute's
// host). A compute whose host names no target is a target that does not
// answer.
type Executor struct {
	Targets map[string]*Target
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

var _ executor.Executor = (*Executor)(nil)

// AgentID is an agent's id: memory://HOST/NAME.
func AgentID(c admission.Compute, name string) string {
	return "memory://" + settingsOf(c).Target + "/" + name
}

func (e *Executor) Kind() string { return Kind }

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// target is the target a compute names, or an UNAVAILABLE error.
func (e *Executor) target(host string) (*Target, error) {
	if t := e.Targets[host]; t != nil {
		return t, nil
	}
	return nil, &executor.Failure{Code: executor.Unavailable, Summary: fmt.Sprintf("memory target %q does not answer", host),
		Reason: "no target of that name", Next: "Name a target the executor knows."}
}

func (e *Executor) Prepare(_ context.Context, p executor.Prepare) (executor.Prepared, error) {
	_, err := e.target(settingsOf(p.Compute).Target)
	return executor.Prepared{}, executor.Normalize(err, executor.Exit{Op: executor.OpPrepare})
}

func (e *Executor) Inspect(_ context.Context, c admission.Compute) (admission.Installation, bool, error) {
	return admission.ComputeInstallation(c), false, nil
}

func (e *Executor) Release(context.Context, executor.Release) (executor.Released, error) {
	return executor.Released{}, nil
}

// Preflight judges, writing nothing, what Deploy judges before its first
// write: a target that does not answer, an entry the provider did not
// write, a newer activated revision, a runtime path it cannot run.
func (e *Executor) Preflight(_ context.Context, d executor.Deployment) (executor.Preflighted, error) {
	var out executor.Preflighted
	rev, n, name := d.Revision, d.N, d.Revision.Agent
	t, err := e.target(settingsOf(d.Compute).Target)
	if err != nil {
		return out, executor.Normalize(err, executor.Exit{Op: executor.OpPreflight, Agent: name, Revision: n})
	}
	if _, err := behaviourOf(frozenOf(rev.ComputeSettings).Runtime); err != nil {
		out.Refuse(&executor.Failure{Code: executor.InvalidRequest, Reason: err.Error()}, name, n)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch a := t.agents[name]; {
	case a != nil && !a.managed:
		out.Refuse(&executor.Failure{Code: executor.ResourceConflict, Reason: fmt.Sprintf("an entry named %s was not written by the provider", name)}, name, n)
	case a != nil && a.activated > n:
		out.Refuse(&executor.Failure{Code: executor.Stale, Reason: fmt.Sprintf("revision %d is activated; revision %d is older", a.activated, n)}, name, n)
	}
	return out, nil
}

// Deploy writes revision N, starts it as its runtime path says, and
// activates it once ready; the revision that served keeps serving until
// then (AC1). A repeat of the activated revision keeps its activation
// (AC4); an older revision than the activated one is STALE_REVISION (AC3).
func (e *Executor) Deploy(ctx context.Context, d executor.Deployment) (executor.Result, error) {
	var writes executor.Writes
	res, err := e.deploy(ctx, d, &writes)
	return res, executor.Normalize(err, executor.Exit{Op: executor.OpDeploy, Agent: d.Revision.Agent, Revision: d.N, Writes: &writes})
}

func (e *Executor) deploy(ctx context.Context, d executor.Deployment, writes *executor.Writes) (executor.Result, error) {
	rev, n, name := d.Revision, d.N, d.Revision.Agent
	if err := ctx.Err(); err != nil {
		return executor.Result{}, err
	}
	if d.Mode != executor.ModeActivate {
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Summary: fmt.Sprintf("agent %q: a memory compute has no %s deploy", name, d.Mode)}
	}
	t, err := e.target(settingsOf(d.Compute).Target)
	if err != nil {
		return executor.Result{}, err
	}
	behaviour, err := behaviourOf(frozenOf(rev.ComputeSettings).Runtime)
	if err != nil {
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Reason: err.Error()}
	}
	endpoint := AgentID(d.Compute, name)
	d.Log.Print("writing revision", map[string]any{"work.operation": "apply", "revision": n})
	t.mu.Lock()
	a := t.agents[name]
	switch {
	case a != nil && !a.managed:
		t.mu.Unlock()
		return executor.Result{}, &executor.Failure{Code: executor.ResourceConflict, Reason: fmt.Sprintf("an entry named %s was not written by the provider", name)}
	case a != nil && a.activated > n:
		live := a.activated
		t.mu.Unlock()
		return executor.Result{}, &executor.Failure{Code: executor.Stale, Reason: fmt.Sprintf("revision %d is activated; revision %d is older", live, n)}
	case a != nil && a.activated == n && a.activatedID == rev.ID() && a.running == n && !a.edited:
		at := a.at
		a.references = d.References
		t.mu.Unlock()
		writes.Mark()
		return executor.Result{ActivatedAt: at, Endpoint: endpoint}, nil
	case a == nil:
		a = &agent{managed: true, written: map[int64]string{}}
		t.agents[name] = a
	}
	writes.Mark()
	a.written[n], a.running, a.edited = rev.ID(), n, false
	a.starts++
	t.mu.Unlock()

	d.Log.Print("waiting for the revision's startup", map[string]any{"work.operation": "gate", "revision": n})
	switch behaviour {
	case "held":
		c := runtimerecord.CodeModelProbeTimeout
		return executor.Result{}, &executor.Failure{Code: executor.CodeRuntime(c), Where: "memory runtime", Phase: "model probe", Reason: "the startup probe held " + string(c)}
	case "fails":
		return executor.Result{}, &executor.Failure{Code: executor.DeploymentFailed, Where: "memory runtime", Reason: "the gateway exited before it was ready"}
	case "slow":
		select {
		case <-time.After(SlowFor):
		case <-ctx.Done():
			return executor.Result{}, &executor.Failure{Code: executor.Deadline, Reason: "the revision was not ready before the deploy ended: " + ctx.Err().Error()}
		}
	}

	d.Log.Print("activating the revision", map[string]any{"work.operation": "activate", "revision": n})
	at := e.now().UTC().Truncate(time.Second)
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.activated > n {
		return executor.Result{}, &executor.Failure{Code: executor.Stale, Reason: fmt.Sprintf("revision %d was activated meanwhile", a.activated)}
	}
	a.activated, a.activatedID, a.at, a.references = n, rev.ID(), at, d.References
	for m := range a.written { // earlier revisions retire (AC4)
		if m != n {
			delete(a.written, m)
		}
	}
	return executor.Result{ActivatedAt: at, Endpoint: endpoint}, nil
}

// behaviourOf reads a runtime path /memkind/BEHAVIOUR/vN.
func behaviourOf(path string) (string, error) {
	parts := strings.Split(path, "/")
	if len(parts) != 4 || parts[1] != "memkind" || !slices.Contains([]string{"ready", "slow", "held", "fails"}, parts[2]) {
		return "", fmt.Errorf("openclaw_path %q is not /memkind/BEHAVIOUR/vN", path)
	}
	return parts[2], nil
}

// locate is an agent's target and the compute naming it: from its
// compute, or its id.
func (e *Executor) locate(a executor.Agent) (*Target, admission.Compute, error) {
	if a.Compute != nil {
		t, err := e.target(settingsOf(*a.Compute).Target)
		return t, *a.Compute, err
	}
	rest, ok := strings.CutPrefix(a.ImportID, "memory://")
	if !ok {
		return nil, admission.Compute{}, fmt.Errorf("import id %q is not memory://HOST/NAME", a.ImportID)
	}
	host, _, _ := strings.Cut(rest, "/")
	t, err := e.target(host)
	return t, admission.Compute{Kind: Kind, Settings: Settings{Target: host}}, err
}

// observe is what a target says of agent name; the caller holds t.mu.
func observe(t *Target, c admission.Compute, name string) executor.Observed {
	a := t.agents[name]
	if a == nil || !a.managed {
		return executor.Observed{Drift: executor.DriftGone, DriftDetail: "nothing of the agent is on the target"}
	}
	o := executor.Observed{Exists: true, Revision: a.activated, RevisionID: a.activatedID, ActivatedAt: a.at, References: a.references}
	if a.activated > 0 {
		o.Endpoint = AgentID(c, name)
	}
	switch {
	case a.activated == 0:
		o.Drift, o.DriftDetail = executor.DriftUnfinished, "a revision was written but never activated"
	case a.running == 0:
		o.Drift, o.DriftDetail = executor.DriftWorkload, fmt.Sprintf("nothing runs; revision %d is activated", a.activated)
	case a.edited:
		o.Drift, o.DriftDetail = executor.DriftEdited, "what runs was changed outside Terraform"
	case a.running != a.activated:
		o.Drift, o.DriftDetail = executor.DriftUnfinished, fmt.Sprintf("revision %d runs, but revision %d is activated", a.running, a.activated)
	}
	return o
}

func (e *Executor) Read(_ context.Context, a executor.Agent) (executor.Observed, error) {
	t, c, err := e.locate(a)
	if err != nil {
		return executor.Observed{}, executor.Normalize(err, executor.Exit{Op: executor.OpRead, Agent: a.Name})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return observe(t, c, a.Name), nil
}

func (e *Executor) List(_ context.Context, on admission.Compute) ([]executor.Listed, error) {
	t, err := e.target(settingsOf(on).Target)
	if err != nil {
		return nil, executor.Normalize(err, executor.Exit{Op: executor.OpList})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []executor.Listed{}
	for _, name := range slices.Sorted(maps.Keys(t.agents)) {
		if t.agents[name].managed {
			out = append(out, executor.Listed{Name: name, ID: AgentID(on, name), Observed: observe(t, on, name)})
		}
	}
	return out, nil
}

// Delete removes every entry the executor wrote of an agent; a look-alike
// made by hand stays.
func (e *Executor) Delete(_ context.Context, a executor.Agent) error {
	t, _, err := e.locate(a)
	if err != nil {
		return executor.Normalize(err, executor.Exit{Op: executor.OpDelete, Agent: a.Name})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if x := t.agents[a.Name]; x != nil && x.managed {
		delete(t.agents, a.Name)
	}
	return nil
}

// Restart starts what runs of the activated revision again, when it runs
// unchanged (executor.Restartable).
func (e *Executor) Restart(ctx context.Context, r executor.Restart) (executor.Restarted, error) {
	var writes executor.Writes
	out, err := e.restart(ctx, r, &writes)
	return out, executor.Normalize(err, executor.Exit{Op: executor.OpRestart, Agent: r.Agent.Name, Revision: out.Revision, Writes: &writes})
}

func (e *Executor) restart(ctx context.Context, r executor.Restart, writes *executor.Writes) (executor.Restarted, error) {
	if err := ctx.Err(); err != nil {
		return executor.Restarted{}, err
	}
	t, c, err := e.locate(r.Agent)
	if err != nil {
		return executor.Restarted{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	o := observe(t, c, r.Agent.Name)
	if err := executor.Restartable(r.Agent.Name, o); err != nil {
		return executor.Restarted{}, err
	}
	r.Log.Print("restarting", map[string]any{"work.operation": "restart", "revision": o.Revision})
	writes.Mark()
	t.agents[r.Agent.Name].starts++
	return executor.Restarted{Revision: o.Revision, Components: []string{"memory runtime"}}, nil
}

// Turn answers from the activated revision: the memory runtime echoes
// the message.
func (e *Executor) Turn(_ context.Context, tr executor.Turn) (turn.Answer, error) {
	t, c, err := e.locate(tr.Agent)
	if err == nil {
		t.mu.Lock()
		o := observe(t, c, tr.Agent.Name)
		t.mu.Unlock()
		if o.Revision == 0 || o.Drift != executor.DriftNone {
			err = errors.New("no activated revision runs")
		}
	}
	if err != nil {
		return turn.Answer{}, executor.Normalize(err, executor.Exit{Op: executor.OpTurn, Agent: tr.Agent.Name, Code: executor.TurnFailed})
	}
	return turn.Answer{Text: "memory: " + tr.Message}, nil
}

// activated is nil when the agent's activated revision runs unchanged,
// else why no gateway answers for it.
func (e *Executor) activated(a executor.Agent) error {
	t, c, err := e.locate(a)
	if err != nil {
		return err
	}
	t.mu.Lock()
	o := observe(t, c, a.Name)
	t.mu.Unlock()
	if o.Revision == 0 || o.Drift != executor.DriftNone {
		return &executor.Failure{Code: executor.NotFound, Op: executor.OpGateway, Agent: a.Name, Reason: "no activated revision runs", Next: "apply the agent first"}
	}
	return nil
}

// GatewayToken is the memory gateway's token: the agent's name behind a
// fixed prefix (a memory target keeps no secrets).
func (e *Executor) GatewayToken(_ context.Context, a executor.Agent) (string, error) {
	if err := e.activated(a); err != nil {
		return "", executor.Normalize(err, executor.Exit{Op: executor.OpGateway, Agent: a.Name})
	}
	return "memory-" + a.Name, nil
}

// OpenGateway serves the memory runtime's gateway on a loopback port for
// as long as it is open: the chat completions endpoint answers as Turn
// does, to the agent's token only.
func (e *Executor) OpenGateway(ctx context.Context, a executor.Agent) (*executor.Gateway, error) {
	token, err := e.GatewayToken(ctx, a)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, executor.Normalize(err, executor.Exit{Op: executor.OpGateway, Agent: a.Name})
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":{"type":"unauthorized","message":"bad token"}}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != turn.Path {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"type":"invalid_request","message":"no message"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "memory: " + req.Messages[len(req.Messages)-1].Content}}}})
	})}
	go func() { _ = srv.Serve(ln) }()
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	return executor.NewGateway(ln.Addr().String(), token, "memory gateway of "+a.Name, func() {
		stop()
		_ = srv.Close()
	}), nil
}

// ParseImportID reads memory://HOST/NAME; other ids are not this kind's.
func (e *Executor) ParseImportID(id string) (string, bool, error) {
	rest, ok := strings.CutPrefix(id, "memory://")
	if !ok {
		return "", false, nil
	}
	_, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", true, fmt.Errorf("import id %q is not memory://HOST/NAME", id)
	}
	return name, true, nil
}

// frozenOf returns a revision's frozen memory settings.
func frozenOf(s admission.ComputeSettings) Frozen { return admission.SettingsOf[Frozen](s.Settings) }
