package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

var _ executor.Executor = (*Executor)(nil)

// New builds the executor for a cluster: its clients go through
// MarkWrites, so every operation knows whether it wrote anything.
func New(cfg *rest.Config) (*Executor, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(MarkWrites)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes metadata client: %w", err)
	}
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = max(fast.QPS, PreflightQPS), max(fast.Burst, PreflightBurst)
	preflightClient, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Executor{Client: client, Dynamic: dyn, Metadata: meta, prepared: &preparedSet{done: map[string]bool{}}, grants: &grantSet{allowed: map[string]bool{}}, cfg: cfg, preflight: newPreflightCache(),
		preflightClient: preflightClient}, nil
}

// MarkWrites wraps a client's transport so that every request that may
// change the cluster marks the executor.Writes its context carries: a
// write the API server accepted, or one whose outcome is unknown (no
// answer, a 5xx). A refusal (4xx) wrote nothing; access reviews are
// questions, not writes. Because the transport marks, no write can be
// forgotten by hand.
func MarkWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		w := executor.WritesFrom(req.Context())
		if w == nil || !isWrite(req) {
			return resp, err
		}
		if err != nil || resp.StatusCode < 400 || resp.StatusCode >= 500 {
			w.Mark()
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	if req.URL.Query().Get("dryRun") != "" {
		return false // a preflight's dry run stores nothing
	}
	return !strings.HasPrefix(req.URL.Path, "/apis/authorization.k8s.io/")
}

// Kind is admission.KindKubernetes.
func (e *Executor) Kind() string { return admission.KindKubernetes }

// AgentID is a Kubernetes agent's id, NAMESPACE/NAME.
func AgentID(c admission.Compute, agent string) string { return c.Kubernetes().Namespace + "/" + agent }

// SplitAgentID reads an agent id, NAMESPACE/NAME, into its parts; ok is
// false without a slash. The parts are not checked (ParseImportID does).
func SplitAgentID(id string) (namespace, name string, ok bool) {
	return strings.Cut(id, "/")
}

// ParseImportID reads NAMESPACE/NAME; every id with one slash is taken as
// one, so it is asked last.
func (e *Executor) ParseImportID(id string) (string, bool, error) {
	ns, name, ok := SplitAgentID(id)
	if !ok {
		return "", false, nil
	}
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1035Label(name)) > 0 {
		return "", true, fmt.Errorf("import ID %q must be NAMESPACE/NAME, such as occ-acme/support", id)
	}
	return name, true, nil
}

// preparedSet remembers the computes prepared in this provider process,
// so that a deploy costs only its own requests.
type preparedSet struct {
	mu   sync.Mutex
	done map[string]bool
}

// op is the executor for one operation: the shared clients with the
// operation's own log. Operations never share mutable state.
func (e *Executor) op(log executor.Log) *Executor {
	c := *e
	c.log = log
	return &c
}

// reads makes e, an operation's executor (op), read through
// preflightClient (PreflightQPS): for operations that only read or
// dry-run.
func (e *Executor) reads() *Executor {
	if e.preflightClient != nil {
		e.Client = e.preflightClient
	}
	return e
}

// Prepare makes sure the tenant namespace exists (creating it when
// missing) and that the provider's identity holds every permission it will
// use there; with a sandbox driver, also the Sandbox permissions and the
// read of the driver's gateway. It is checked once per namespace per
// executor. A namespace this call created for a compute it cannot use
// goes again: lose nothing, leave nothing.
func (e *Executor) Prepare(ctx context.Context, p executor.Prepare) (executor.Prepared, error) {
	var out executor.Prepared
	created, err := e.op(p.Log).prepare(ctx, p.Compute)
	if err != nil {
		return out, prepareFailure(p.Compute, err)
	}
	out.Created = created
	if p.ReadInstallation && p.Compute.Kubernetes().SandboxDriver != nil {
		inst, _, err := e.Inspect(ctx, p.Compute)
		if err != nil {
			if created {
				_ = e.DeleteNamespace(ctx, p.Compute.Kubernetes().Namespace)
			}
			return executor.Prepared{}, prepareFailure(p.Compute, err)
		}
		out.Installation = &inst
	}
	return out, nil
}

func (e *Executor) prepare(ctx context.Context, c admission.Compute) (created bool, err error) {
	key := c.Kubernetes().Namespace
	if c.Kubernetes().SandboxDriver != nil {
		ns, _ := render.DriverGateway(c.Kubernetes().SandboxDriver)
		key += "+" + ns
	}
	if s := e.prepared; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.done[key] {
			return false, nil
		}
	}
	if created, err = e.EnsureNamespace(ctx, c.Kubernetes().Namespace, c.Name); err != nil {
		if created {
			_ = e.DeleteNamespace(ctx, c.Kubernetes().Namespace)
		}
		return false, err
	}
	err = e.CheckPermissions(ctx, c.Kubernetes().Namespace)
	if err == nil && c.Kubernetes().SandboxDriver != nil {
		err = e.CheckRules(ctx, c.Kubernetes().Namespace, SandboxRules)
		if err == nil {
			ns, _ := render.DriverGateway(c.Kubernetes().SandboxDriver)
			err = e.CheckRules(ctx, ns, DriverGatewayRules)
		}
	}
	if err != nil {
		if created {
			_ = e.DeleteNamespace(ctx, c.Kubernetes().Namespace)
		}
		return false, err
	}
	if s := e.prepared; s != nil {
		s.done[key], s.done[c.Kubernetes().Namespace] = true, true
	}
	return created, nil
}

// prepareFailure says why a compute cannot be used; nothing of an agent
// was written.
func prepareFailure(c admission.Compute, err error) error {
	return executor.Normalize(err, executor.Exit{Op: executor.OpPrepare, Summary: "cannot prepare namespace " + c.Kubernetes().Namespace, Finish: whereContainer,
		Classify: func(f *executor.Failure, err error) {
			var mp *MissingPermissions
			if !errors.As(err, &mp) {
				return
			}
			lines := make([]string, len(mp.Missing))
			for i, m := range mp.Missing {
				lines[i] = "- " + m
			}
			f.Code, f.Summary = executor.ResourceConflict, "missing permissions in namespace "+c.Kubernetes().Namespace
			f.Reason = fmt.Sprintf("the provider's Kubernetes identity lacks %d permission(s)", len(mp.Missing))
			f.LinesTitle, f.Lines = "The provider's Kubernetes identity may not:", lines
			f.Next = "Grant them with the Role in the provider documentation (Kubernetes permissions); in a namespace the compute created, install its ClusterRole " + ProviderClusterRole + ", which the provider binds there. Then apply again."
		}})
}

// Inspect reads the compute's sandbox driver live and derives the
// installation from what the cluster says (ND5); without a driver the
// capabilities follow from the settings and nothing is read.
func (e *Executor) Inspect(ctx context.Context, c admission.Compute) (admission.Installation, bool, error) {
	if c.Kubernetes().SandboxDriver == nil {
		return admission.ComputeInstallation(c), false, nil
	}
	st, err := e.DriverState(ctx, c.Kubernetes().SandboxDriver)
	if err != nil {
		return admission.Installation{}, true, err
	}
	return admission.ComputeInstallation(st.Observed(c)), true, nil
}

// Release removes the tenant namespace when the provider created it for
// this compute (at the compute's create, or re-created by a later deploy)
// and nothing is left in it; otherwise it is kept, with a warning that
// lists what is in it.
func (e *Executor) Release(ctx context.Context, p executor.Release) (executor.Released, error) {
	var out executor.Released
	c := p.Compute
	if !p.Created {
		// The compute found its namespace; only one an Agent's deploy
		// re-created for it since is the provider's to delete. A cluster
		// that does not answer keeps nothing from being forgotten here.
		ours, err := e.CreatedFor(ctx, c.Kubernetes().Namespace, c.Name)
		if err != nil {
			out.Kept = append(out.Kept, executor.Warning{Summary: "Namespace " + c.Kubernetes().Namespace + " was not checked",
				Detail: fmt.Sprintf("The compute was removed, but the cluster could not be asked whether the provider re-created namespace %s for it: %v. If it did (the namespace is annotated %s=%s), delete it yourself.", c.Kubernetes().Namespace, err, render.AnnotationCompute, c.Name)})
		}
		if !ours {
			return out, nil
		}
	}
	left, err := e.Occupants(ctx, c.Kubernetes().Namespace)
	if err != nil {
		return out, executor.Normalize(err, executor.Exit{Op: executor.OpDelete, Code: executor.Unavailable, Summary: "cannot inspect namespace " + c.Kubernetes().Namespace,
			Next: fmt.Sprintf("The namespace %s this compute created was not deleted; run the destroy again.", c.Kubernetes().Namespace), Finish: whereContainer})
	}
	if len(left) > 0 {
		out.Kept = append(out.Kept, executor.Warning{Summary: "Namespace " + c.Kubernetes().Namespace + " was kept",
			Detail: fmt.Sprintf("The provider created this namespace for this compute, but it still holds objects, so it was not deleted with the compute: %s. "+
				"Objects from another configuration belong to Agents or credential sources that another Terraform configuration manages in this namespace; "+
				"destroy those there first. Delete the namespace yourself once nothing in it is needed.", strings.Join(left, ", "))})
		return out, nil
	}
	p.Log.Print("deleting the namespace the compute created", map[string]any{"work.operation": "compute-delete", "namespace": c.Kubernetes().Namespace})
	if err := e.DeleteNamespace(ctx, c.Kubernetes().Namespace); err != nil {
		return out, executor.Normalize(err, executor.Exit{Op: executor.OpDelete, Code: executor.Unavailable, Summary: "cannot delete namespace " + c.Kubernetes().Namespace, Finish: whereContainer})
	}
	return out, nil
}

// Deploy prepares the compute, checks its sandbox driver live before the
// first write of a dedicated revision (AD6, ND5), then applies the
// revision (Apply); in ModeFinish it only finishes the retirement after
// revision d.N, which already serves (finish), and in ModeSettings it
// writes only the agent's NetworkPolicies and exposure. Every error is a *executor.Failure whose Wrote says
// whether anything of the agent reached the cluster, or an admission
// refusal (a driver the cluster does not serve).
func (e *Executor) Deploy(ctx context.Context, d executor.Deployment) (executor.Result, error) {
	op := e.op(d.Log)
	op.references = d.References
	rev, c := d.Revision, d.Compute
	if _, err := op.prepare(ctx, c); err != nil {
		return executor.Result{}, prepareFailure(c, err)
	}
	switch d.Mode {
	case executor.ModeActivate:
	case executor.ModeSettings:
		return op.syncNetworkPolicies(ctx, rev, c, d.N)
	case executor.ModeFinish:
		var writes executor.Writes
		ctx := executor.WithWrites(ctx, &writes)
		objs, err := renderKubernetes(rev, d.N, c)
		var res executor.Result
		if err == nil {
			res, err = op.finish(ctx, rev, objs, d.N)
		}
		if err == nil {
			// A refresh reports one drift at a time: a deleted policy or an
			// edited exposure found beside an unfinished retirement is
			// written back here.
			err = op.ensureNetworkPolicies(ctx, newGuard(rev.Agent, objs.Namespace), objs, rev.Agent)
		}
		if err == nil {
			res.Endpoint, err = op.syncExposure(ctx, rev, objs.Exposure)
		}
		return res, executor.Normalize(err, deployExit(rev.Agent, d.N, &writes))
	default:
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Op: executor.OpDeploy, Agent: rev.Agent, Revision: d.N,
			Summary: fmt.Sprintf("agent %q: unknown deploy mode %s", rev.Agent, d.Mode)}
	}
	var warnings []executor.Warning
	if c.Kubernetes().SandboxDriver != nil && rev.ExecutionMode == admission.ModeDedicated {
		w, err := op.awaitDriver(ctx, rev, c)
		if err != nil {
			return executor.Result{}, err
		}
		warnings = w
	}
	res, err := op.applyOn(ctx, d)
	res.Warnings = append(warnings, res.Warnings...)
	return res, err
}

// awaitDriver checks the sandbox driver live: a driver the cluster does
// not serve is refused with ND5's RESOURCE_CONFLICT; during an outage
// provisioning waits, with a watch, within the apply's deadline (ND5).
func (e *Executor) awaitDriver(ctx context.Context, rev *admission.Revision, c admission.Compute) ([]executor.Warning, error) {
	st, err := e.DriverState(ctx, c.Kubernetes().SandboxDriver)
	if err != nil {
		return nil, &executor.Failure{Code: executor.Unavailable, Op: executor.OpDeploy, Agent: rev.Agent, Summary: "cannot read the sandbox driver", Reason: err.Error(), Err: err}
	}
	if !st.Installed {
		return nil, admission.CheckSandbox(rev.ExecutionMode, st.Observed(c))
	}
	if st.Ready {
		return nil, nil
	}
	e.log.Print("waiting for the sandbox driver", map[string]any{"work.operation": "await-driver", "driver": c.Kubernetes().SandboxDriver.Name, "detail": st.Detail})
	started := time.Now()
	if err := e.WaitForDriver(ctx, c.Kubernetes().SandboxDriver); err != nil {
		return nil, &executor.Failure{Code: executor.Unavailable, Op: executor.OpDeploy, Agent: rev.Agent,
			Summary: fmt.Sprintf("the sandbox driver %q stayed unavailable", c.Kubernetes().SandboxDriver.Name),
			Reason:  fmt.Sprintf("%s; the apply waited for it until its deadline (%v)", st.Detail, err), Err: err,
			Next: "Restore the driver's gateway, or raise timeouts.create/update, and apply again."}
	}
	return []executor.Warning{{Summary: fmt.Sprintf("The sandbox driver %q was unavailable; provisioning waited for it", c.Kubernetes().SandboxDriver.Name),
		Detail: fmt.Sprintf("Agent %q: %s when the apply started; provisioning waited %s for the driver's gateway to be ready again, then went on.", rev.Agent, st.Detail, time.Since(started).Round(time.Second))}}, nil
}

// Read observes an agent through its Service and workloads.
func (e *Executor) Read(ctx context.Context, a executor.Agent) (executor.Observed, error) {
	// Reads only, as the preflight's: a refresh of hundreds of agents
	// waits on the API server, not on the writers' client-side limit.
	e = e.op(e.log).reads()
	ns, sandboxed := where(a)
	top := render.TopologyOf(a.Harness, a.ExecutionMode, sandboxed)
	o, svc, err := e.observe(ctx, ns, a.Name, top)
	if err == nil && a.Compute != nil && o.Exists && o.Drift == executor.DriftNone && svc != nil && render.ExposureDiffers(svc, a.Compute.Kubernetes().Exposure) {
		o.Drift, o.DriftDetail = executor.DriftExposure, fmt.Sprintf("Service %s is not exposed as the compute says (its type, annotations or source ranges were changed outside Terraform); the next apply sets them again without a new revision", svc.Name)
	}
	if err == nil && a.Compute != nil && o.Exists && o.Drift == executor.DriftNone {
		var missing string
		missing, err = e.networkPolicyDrift(ctx, ns, a.Name, top, *a.Compute)
		switch {
		case apierrors.IsForbidden(err):
			// A Role from before network policies: the refresh works as
			// it did; the deploy's permission check names what is missing.
			a.Log.Print("cannot tell whether the agent's NetworkPolicies exist: the provider's identity may not list networkpolicies (see the Kubernetes permissions guide)", map[string]any{"work.operation": "read", "level": "warn"})
			err = nil
		case err == nil && missing != "":
			o.Drift, o.DriftDetail = executor.DriftNetworkPolicy, fmt.Sprintf("NetworkPolicy %s was deleted; the next apply writes it again without a new revision", missing)
		}
	}
	if err == nil && o.Exists && o.Drift == executor.DriftNone && a.Compute != nil && a.Compute.Kubernetes().State != nil {
		err = e.observeClaim(ctx, ns, a.Name, &o)
	}
	if err != nil {
		return executor.Observed{}, executor.Normalize(err, executor.Exit{Op: executor.OpRead, Agent: a.Name, Summary: "cannot refresh the agent", Finish: whereContainer})
	}
	return o, nil
}

// Delete removes every object of an agent and waits until its Pods are
// gone; with a sandbox driver, its Sandboxes too.
func (e *Executor) Delete(ctx context.Context, a executor.Agent) error {
	ns, sandboxed := where(a)
	op := e.op(a.Log)
	var err error
	if a.Compute == nil {
		// An imported agent: whether a sandbox driver runs its harness is
		// not known, so its Sandboxes (by the agent's labels) go too
		// wherever the cluster has any. An identity that may not delete
		// them leaves them, and says so.
		err = op.deleteSandboxes(ctx, ns, a.Name)
		if apierrors.IsForbidden(err) {
			a.Log.Print("cannot delete the agent's Sandboxes, if it has any: the provider's identity may not delete sandboxes (see the Kubernetes permissions guide)", map[string]any{"work.operation": "delete", "level": "warn"})
			err = nil
		}
	}
	if err == nil {
		err = op.DeleteAgent(ctx, ns, a.Name, sandboxed, a.RetainsState())
	}
	return executor.Normalize(err, executor.Exit{Op: executor.OpDelete, Agent: a.Name, Summary: fmt.Sprintf("agent %q", a.Name), Finish: whereContainer})
}

// where is an agent's namespace, from its compute or its import id, and
// whether its compute has a sandbox driver.
func where(a executor.Agent) (ns string, sandboxed bool) {
	if a.Compute != nil {
		return a.Compute.Kubernetes().Namespace, a.Compute.Kubernetes().SandboxDriver != nil
	}
	ns, _, _ = strings.Cut(a.ImportID, "/")
	return ns, false
}

// deployExit is a deploy's exit (executor.Normalize): an error nothing
// classified is DEPLOYMENT_FAILED for "agent A revision N", with Wrote
// from the deploy's Writes.
func deployExit(agent string, n int64, w *executor.Writes) executor.Exit {
	return executor.Exit{Op: executor.OpDeploy, Agent: agent, Revision: n, Writes: w,
		Summary: fmt.Sprintf("agent %q revision %d", agent, n), Finish: whereContainer}
}

// whereContainer says where a failure of a container happened, for
// people: "container gateway".
func whereContainer(f *executor.Failure) {
	if f.Where == "" && f.Component != "" {
		f.Where = "container " + f.Component
	}
}
