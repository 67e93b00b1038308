package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Annotations the activation writes on the Service (AC4).
const (
	AnnotationActivatedRevision = "occ-platform.io/activated-revision"
	AnnotationActivatedAt       = "occ-platform.io/activated-at"
	// AnnotationReferences on the agent's Service is the activated
	// revision's executor.Deployment.References: what an import reads back.
	AnnotationReferences = "occ-platform.io/terraform-references"
)

// Failure is the executors' one failure type.
type Failure = executor.Failure

// Executor deploys revisions to one cluster; it implements
// executor.Executor (executor.go). One is shared by every operation of a
// provider process; per-operation values live in the copy op makes.
type Executor struct {
	Client kubernetes.Interface
	// Dynamic writes and watches the sandbox driver's Sandbox objects;
	// nil when no compute of the run needs a sandbox.
	Dynamic dynamic.Interface
	// Metadata lists objects by their metadata only (Secrets, whose values
	// the provider must not read to count them); nil falls back to Client.
	Metadata metadata.Interface
	// Now is the clock; tests may replace it.
	Now func() time.Time

	// log is the current operation's (see op).
	log executor.Log
	// references is the current deploy's Deployment.References, kept on
	// the agent's Service.
	references string
	// prepared is shared by every operation (nil: nothing is remembered).
	prepared *preparedSet
	// grants are the access reviews the API server allowed, shared by
	// every operation (nil: each review is asked again).
	grants *grantSet
	// cfg is the connection, for the streams client-go's typed clients do
	// not make (a turn's port-forward); nil: none.
	cfg *rest.Config
	// preflight is what the plan's preflights read once and share
	// (preflight.go); nil: each preflight reads for itself.
	preflight *preflightCache
	// preflightClient is Client with PreflightQPS (New), for the
	// preflight's and a refresh's reads; nil: Client.
	preflightClient kubernetes.Interface
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

var applyOpts = metav1.ApplyOptions{FieldManager: render.FieldManager, Force: true}

// Deploy applies revision n of an admitted revision, blocks until every
// serving component's Pod is Ready, then activates it: the Service moves to
// revision n only if it does not already serve a newer one (AC3), earlier
// revisions' configuration is retired, and one audit Event is written (AC4).
// A held startup code, a crash loop, an image pull failure or an
// unschedulable Pod fails at once with a *Failure.
//
// serving is the revision the caller believes the Service serves (0 for a
// first deployment): with it, activation is one request in the common case.
//
// Apply is Deploy for a prepared compute: only the revision's own
// requests. Every error is a *executor.Failure whose Wrote says whether
// anything reached the cluster (marked by the client's transport, see
// MarkWrites).
//
// Apply writes the default NetworkPolicies (admission.NetworkPolicy's zero
// value); Deploy writes the compute's (applyOn).
func (e *Executor) Apply(ctx context.Context, rev *admission.Revision, n, serving int64) (executor.Result, error) {
	return e.applyOn(ctx, executor.Deployment{Revision: rev, N: n, Serving: serving})
}

// rollout is one deploy in flight, built once per deploy: what every step
// of apply, the gate and the activation reads, so that none takes the
// revision numbers positionally.
type rollout struct {
	rev *admission.Revision
	// c is the compute: the settings no revision freezes (its
	// NetworkPolicy, exposure, sandbox driver's namespace).
	c admission.Compute
	// n is the revision deployed; serving the one state says serves (0:
	// none, on create).
	n, serving int64
	// objs is revision n rendered; ns its namespace.
	objs *render.Objects
	ns   string
	// g guards every write of the deploy (guard.go); tokens are the
	// agent's token Secrets.
	g      *guard
	tokens []string
	// gated is set when the gate starts: a refusal after it (a stale
	// activation) leaves what was written to retirement.
	gated bool
}

// agent is the agent deployed.
func (r *rollout) agent() string { return r.rev.Agent }

// applyOn is Apply with the compute's settings that no revision freezes
// (its NetworkPolicy and sandbox driver's namespace).
func (e *Executor) applyOn(ctx context.Context, d executor.Deployment) (executor.Result, error) {
	var writes executor.Writes
	res, err := e.apply(executor.WithWrites(ctx, &writes), d)
	return res, executor.Normalize(err, deployExit(d.Revision.Agent, d.N, &writes))
}

func (e *Executor) apply(ctx context.Context, d executor.Deployment) (_ executor.Result, err error) {
	type Result = executor.Result
	rev, c, n, serving := d.Revision, d.Compute, d.N, d.Serving
	objs, err := renderKubernetes(rev, n, c)
	if err != nil {
		return Result{}, err
	}
	if e.references != "" {
		// On the Service the activation writes anyway: no request more.
		// The activation writes ExposedService, rendered from Service
		// before this: both carry it.
		objs.Service.WithAnnotations(map[string]string{AnnotationReferences: e.references})
		objs.ExposedService.Annotations[AnnotationReferences] = e.references
	}
	r := &rollout{rev: rev, c: c, n: n, serving: serving, objs: objs, ns: objs.Namespace, g: newGuard(rev.Agent, objs.Namespace)}
	ns := r.ns
	defer func() {
		// A refusal before any workload ran (a name another object holds),
		// or any refusal of a create (nothing of the agent served yet),
		// leaves the namespace as the deploy found it.
		if err != nil && (!r.gated || serving == 0) && refused(err) && r.g.undo(ctx, e.log) {
			executor.WritesFrom(ctx).Undone()
		}
	}()
	if serving > 0 {
		// AC3: an older retry never overwrites a newer selected revision.
		// The workloads are per Agent, so this is judged before the first
		// write, not only at activation.
		if err := e.checkNotStale(ctx, r); err != nil {
			return Result{}, err
		}
	}
	e.log.Print("applying revision", map[string]any{"work.operation": "apply", "revision": n})
	// The agent's tokens, created once and kept across revisions: the
	// gateway's (every gateway listens beyond loopback only with one) and,
	// for dedicated Codex, the app server's.
	tokens := [][3]string{{render.GatewayTokenSecret(rev.Agent), render.GatewayTokenKey, render.ComponentGateway}}
	if rev.Harness == admission.HarnessCodex {
		tokens = append(tokens, [3]string{render.AppServerTokenSecret(rev.Agent), render.AppServerTokenKey, render.ComponentHarness})
	}
	for _, tk := range tokens {
		r.tokens = append(r.tokens, tk[0])
	}
	for i, tk := range tokens {
		existed, err := e.ensureToken(ctx, r.g, tk[0], tk[1], tk[2])
		if err != nil {
			return Result{}, err
		}
		// A create finds out whether an agent of this name exists: the
		// gateway token is its first object, so an existing one (or a name
		// another agent's Service may hold: one ending like a derived
		// name) is judged before anything is written. The common create
		// pays no request for it.
		derived := strings.HasSuffix(rev.Agent, "-gateway") || strings.HasSuffix(rev.Agent, "-harness")
		if i == 0 && serving == 0 && (existed || derived) {
			if err := e.checkCreate(ctx, rev, ns); err != nil {
				return Result{}, err
			}
		}
	}
	if err := e.ensureClaim(ctx, r); err != nil {
		return Result{}, err
	}
	for _, sa := range objs.ServiceAccounts {
		if err := e.putServiceAccount(ctx, r.g, sa); err != nil {
			return Result{}, err
		}
	}
	for _, cm := range objs.ConfigMaps {
		if err := e.applyConfigMap(ctx, r, cm); err != nil {
			return Result{}, err
		}
	}
	dedicated := rev.ExecutionMode == admission.ModeDedicated
	if dedicated && serving > 0 {
		// AC2: a dedicated replacement first stops every earlier revision,
		// even a healthy one; the Agent is unavailable until the new one is ready.
		e.log.Print("stopping earlier revisions", map[string]any{"work.operation": "stop-earlier", "revision": n})
		if err := e.stopEarlierSandboxes(ctx, ns, rev.Agent, n, len(objs.Sandboxes) > 0); err != nil {
			return Result{}, err
		}
		if err := e.stopEarlier(ctx, ns, rev.Agent, n); err != nil {
			return Result{}, err
		}
	}
	// The agent's NetworkPolicies, per agent and outside revision identity,
	// before any workload of the revision is written.
	if err := e.ensureNetworkPolicies(ctx, r.g, objs, rev.Agent); err != nil {
		return Result{}, err
	}
	if s := objs.HarnessService; s != nil {
		// HM4: the gateway reaches its harness by this name; it selects
		// revision n's harness before either workload exists.
		if !r.g.isKnown("Service", *s.Name) {
			if err := e.checkOwned(ctx, ns, *s.Name, rev.Agent); err != nil {
				return Result{}, err
			}
		}
		if _, err := e.Client.CoreV1().Services(ns).Apply(ctx, s, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply Service %s: %w", *s.Name, err)
		}
	}
	components := map[string]bool{}
	workloads := map[string]string{} // component -> Deployment name
	var sandboxes []string
	if err := e.applySandboxes(ctx, r.g, ns, objs.Sandboxes); err != nil {
		return Result{}, err
	}
	for _, s := range objs.Sandboxes {
		components[s.Component] = true
		sandboxes = append(sandboxes, s.Name)
	}
	for _, d := range objs.Deployments {
		if err := e.putDeployment(ctx, r.g, d, serving == 0); err != nil {
			return Result{}, err
		}
		components[d.Spec.Template.Labels[render.LabelComponent]] = true
		workloads[d.Spec.Template.Labels[render.LabelComponent]] = *d.Name
	}
	var early *corev1.Service
	if dedicated && serving == 0 {
		// PR10: on a first dedicated deploy the Agent's Service selects the
		// gateway from the start and lists it only once it is ready. It
		// claims no activation: that is written when the gate passes.
		created, err := e.Client.CoreV1().Services(ns).Create(ctx, objs.ExposedService.DeepCopy(), metav1.CreateOptions{FieldManager: render.FieldManager})
		switch {
		case err == nil:
			early = created
		case !apierrors.IsAlreadyExists(err):
			return Result{}, fmt.Errorf("create Service %s: %w", *objs.Service.Name, err)
		}
	}
	r.gated = true
	e.log.Print("waiting for the revision's startup probe", map[string]any{"work.operation": "gate", "revision": n})
	phases, err := e.gate(ctx, r.gateFor(), components, workloads, sandboxes)
	if err != nil {
		var f *Failure
		if errors.As(err, &f) && len(f.Lines) > 0 {
			// The quoted log lines are the runtime's own output: withhold
			// every credential its Pods were given (AU7).
			f.Lines = executor.NewRedactor(e.secretValues(ctx, objs)...).Lines(f.Lines)
		}
		return Result{}, err
	}
	at, svc, err := e.activate(ctx, r, early)
	if err != nil {
		return Result{}, err
	}
	return Result{ActivatedAt: at, Endpoint: render.Endpoint(svc, rev.Agent, ns), Phases: phases}, nil
}

// renderKubernetes is render.Kubernetes with a revision that cannot be
// rendered as the INVALID_REQUEST failure of its deploy.
func renderKubernetes(rev *admission.Revision, n int64, c admission.Compute) (*render.Objects, error) {
	objs, err := render.Kubernetes(rev, n, c)
	if err != nil {
		return nil, &executor.Failure{Code: executor.InvalidRequest, Summary: fmt.Sprintf("agent %q revision %d cannot be rendered for Kubernetes", rev.Agent, n), Reason: err.Error(), Err: err}
	}
	return objs, nil
}

// checkNotStale refuses revision r.n when the Agent's Service already
// selects a newer one: someone else activated it since this plan was made.
func (e *Executor) checkNotStale(ctx context.Context, r *rollout) error {
	objs, agent, n := r.objs, r.agent(), r.n
	svc, err := e.Client.CoreV1().Services(objs.Namespace).Get(ctx, *objs.Service.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone (drift): activation creates it again
	case err != nil:
		return fmt.Errorf("read Service %s: %w", *objs.Service.Name, err)
	}
	if live := servedRevision(svc); live > n {
		return staleFailure(agent, n, live, "admission", fmt.Sprintf("nothing of revision %d was written", n))
	}
	if ownedBy(svc, agent) {
		r.g.learn(svc.Annotations)
	}
	return nil
}

// servedRevision is the revision number the Agent's Service selects.
func servedRevision(svc *corev1.Service) int64 {
	n, _ := strconv.ParseInt(svc.Labels[render.LabelRevision], 10, 64)
	return n
}

// staleFailure refuses revision n because the Service serves newer
// revision live (AC3).
func staleFailure(agent string, n, live int64, phase, outcome string) *Failure {
	return executor.StaleFailure(agent, n, live, "the Service already serves", phase, outcome)
}

// stopEarlier scales every earlier revision's workloads of the agent to zero
// and waits, with a watch, until their Pods are gone.
func (e *Executor) stopEarlier(ctx context.Context, ns, agent string, n int64) error {
	deps, err := e.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{render.LabelAgent: agent}).String()})
	if err != nil {
		return fmt.Errorf("list the agent's workloads: %w", err)
	}
	for _, d := range deps.Items {
		if d.Labels[render.LabelRevision] == strconv.FormatInt(n, 10) || (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			continue
		}
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := e.Client.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: render.FieldManager}); err != nil {
			return fmt.Errorf("stop %s: %w", d.Name, err)
		}
	}
	req, _ := labels.NewRequirement(render.LabelRevision, selection.NotEquals, []string{strconv.FormatInt(n, 10)})
	agentReq, _ := labels.NewRequirement(render.LabelAgent, selection.Equals, []string{agent})
	sel := labels.NewSelector().Add(*agentReq, *req).String()
	var backoff relist
	for {
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("list earlier Pods: %w", err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		w, err := e.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: pods.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watch earlier Pods: %w", err)
		}
		gone, events := len(pods.Items), 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			events++
			if ev.Type == watch.Deleted {
				gone--
			}
			if gone <= 0 {
				break
			}
		}
		w.Stop()
		if err := backoff.after(ctx, events); err != nil {
			return fmt.Errorf("waiting for earlier revisions to stop: %w", err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for earlier revisions to stop: %w", ctx.Err())
		}
	}
}

// tokenSecret is an agent's token Secret: value under key, labelled with
// the agent and component only.
func tokenSecret(ns, agent, name, key, component, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: render.AgentLabels(agent, component)},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{key: value},
	}
}

// ensureToken creates an agent's token Secret once: 32 random bytes, hex,
// under key, labelled with the agent and component only (no revision: it
// outlives them; destroy removes it with the agent's Secrets). The agent's
// existing Secret is kept, so a token never changes under a running Pod;
// a Secret of that name that is not the agent's (planted, or another
// application's) is never adopted: its token would be one somebody else
// knows.
func (e *Executor) ensureToken(ctx context.Context, g *guard, name, key, component string) (existed bool, err error) {
	if g.isKnown("Secret", name) {
		return true, nil // the activated revision's: no request
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return false, err
	}
	s := tokenSecret(g.ns, g.agent, name, key, component, hex.EncodeToString(buf))
	secrets := e.Client.CoreV1().Secrets(g.ns)
	err = put(ctx, g, "Secret", name,
		func(ctx context.Context) (*corev1.Secret, error) {
			return secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: render.FieldManager})
		},
		func(ctx context.Context) (*corev1.Secret, error) {
			existed = true
			return secrets.Get(ctx, name, metav1.GetOptions{})
		},
		func(context.Context, *corev1.Secret) error { return nil }, // the agent's: kept as it is
		deleteThroughCollection(secrets, name))
	if err != nil {
		return false, err
	}
	return existed, nil
}

// putServiceAccount writes one of the revision's ServiceAccounts under the
// guard. Its content is the same for every revision, so one created with
// Create and applied later keeps no field the apply would drop.
func (e *Executor) putServiceAccount(ctx context.Context, g *guard, sa *corev1ac.ServiceAccountApplyConfiguration) error {
	sas := e.Client.CoreV1().ServiceAccounts(g.ns)
	obj, err := asObject[corev1.ServiceAccount](sa)
	if err != nil {
		return err
	}
	return put(ctx, g, "ServiceAccount", *sa.Name,
		func(ctx context.Context) (*corev1.ServiceAccount, error) {
			return sas.Create(ctx, obj, metav1.CreateOptions{FieldManager: render.FieldManager})
		},
		func(ctx context.Context) (*corev1.ServiceAccount, error) {
			return sas.Get(ctx, *sa.Name, metav1.GetOptions{})
		},
		func(ctx context.Context, _ *corev1.ServiceAccount) error {
			if _, err := sas.Apply(ctx, sa, applyOpts); err != nil {
				return fmt.Errorf("apply ServiceAccount %s: %w", *sa.Name, err)
			}
			return nil
		},
		deleteNamed(sas, *sa.Name))
}

// putDeployment applies one of the revision's Deployments. A Deployment
// is applied with server-side apply even when new (its fields change from
// revision to revision, and only an applier's own fields are removed when
// a later revision drops them); one of that name that is not the agent's
// refuses the apply by itself, because its selector differs from the
// agent's and a Deployment's selector cannot change, so nothing is
// written to it.
func (e *Executor) putDeployment(ctx context.Context, g *guard, d *appsv1ac.DeploymentApplyConfiguration, creating bool) error {
	deps, name := e.Client.AppsV1().Deployments(g.ns), *d.Name
	got, err := deps.Apply(ctx, d, applyOpts)
	if err == nil {
		if creating && !g.isKnown("Deployment", name) && got.Generation == 1 && onlyWrittenByUs(got) {
			g.created("Deployment", name, got.UID, deleteThroughCollection(deps, name))
		} else {
			g.wroteExisting()
		}
		return nil
	}
	if apierrors.IsInvalid(err) {
		if cur, gerr := deps.Get(ctx, name, metav1.GetOptions{}); gerr == nil && !ours(cur, g.agent) {
			return foreignObject("Deployment", g.ns, cur, g.agent)
		}
	}
	return fmt.Errorf("apply Deployment %s: %w", name, err)
}

// onlyWrittenByUs reports whether the provider's field manager is the only
// writer of an object (the API server's own status writes aside).
func onlyWrittenByUs(obj metav1.Object) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager != render.FieldManager && f.Subresource == "" {
			return false
		}
	}
	return true
}

// applyConfigMap writes one of the revision's immutable ConfigMaps under
// the guard (each is named for its revision, so a first write creates
// it). One the agent already has under that name is an earlier attempt's
// at revision r.n: of the same content it is kept as it is; of another
// content (a failed attempt leaves its ConfigMaps under revision number
// r.n, which the next plan reuses, and r.n > r.serving: never the serving
// revision's) it is deleted, with its UID as precondition, and created
// again.
func (e *Executor) applyConfigMap(ctx context.Context, r *rollout, cm *corev1ac.ConfigMapApplyConfiguration) error {
	serving, n, id, name := r.serving, r.n, r.rev.ID(), *cm.Name
	cms := e.Client.CoreV1().ConfigMaps(*cm.Namespace)
	obj, err := asObject[corev1.ConfigMap](cm)
	if err != nil {
		return err
	}
	create := func(ctx context.Context) (*corev1.ConfigMap, error) {
		return cms.Create(ctx, obj, metav1.CreateOptions{FieldManager: render.FieldManager})
	}
	var stale *corev1.ConfigMap
	err = put(ctx, r.g, "ConfigMap", name, create,
		func(ctx context.Context) (*corev1.ConfigMap, error) { return cms.Get(ctx, name, metav1.GetOptions{}) },
		func(ctx context.Context, cur *corev1.ConfigMap) error {
			switch {
			case cur == nil || cur.Annotations[render.AnnotationRevisionID] == id:
				return nil // this revision's, written by an earlier attempt
			case n <= serving:
				return fmt.Errorf("ConfigMap %s holds revision %s, not %s, and revision %d serves", name, cur.Annotations[render.AnnotationRevisionID], id, serving)
			}
			stale = cur
			return nil
		},
		deleteNamed(cms, name))
	if err != nil || stale == nil {
		return err
	}
	e.log.Print("replacing a failed attempt's configuration", map[string]any{"work.operation": "apply", "revision": n, "configmap": name})
	if err := cms.Delete(ctx, stale.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(stale.UID))}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the failed attempt's ConfigMap %s: %w", stale.Name, err)
	}
	got, err := create(ctx)
	if err != nil {
		return fmt.Errorf("create ConfigMap %s: %w", name, err)
	}
	r.g.created("ConfigMap", name, got.UID, deleteNamed(cms, name))
	return nil
}

// checkCreate judges, before the first write of a create, what already
// bears the agent's Service name: nothing, or what an unfinished create of
// this agent left (never activated), or the very revision planned (a
// create whose provider was killed after activating it) is taken on; an
// activated agent of other content is another configuration's, and
// another object under the name is not the agent's at all: both are
// RESOURCE_CONFLICT, and nothing is written.
func (e *Executor) checkCreate(ctx context.Context, rev *admission.Revision, ns string) error {
	svc, err := e.existingService(ctx, ns, render.ServiceName(rev.Agent))
	if err != nil || svc == nil {
		return err
	}
	return judgeCreate(svc, rev, ns)
}

// judgeCreate is checkCreate's judgement of the Service svc that holds the
// agent's Service name.
func judgeCreate(svc *corev1.Service, rev *admission.Revision, ns string) error {
	if !ownedBy(svc, rev.Agent) {
		return foreignService(svc, rev.Agent)
	}
	active, id := svc.Annotations[AnnotationActivatedRevision], svc.Annotations[render.AnnotationRevisionID]
	if active == "" || id == rev.ID() {
		return nil
	}
	return &executor.Failure{Code: executor.ResourceConflict, Agent: rev.Agent,
		Summary: fmt.Sprintf("agent %q already runs in namespace %s", rev.Agent, ns),
		Reason:  fmt.Sprintf("its Service serves revision %s (%s), which this configuration did not create: another Terraform configuration, or a state that lost it, manages it", active, id),
		Next:    fmt.Sprintf("Adopt it with `terraform import <address> %s/%s` (it then follows this configuration), or give this agent another name. Nothing of the running agent was touched.", ns, rev.Agent)}
}

// checkOwned refuses to apply a Service the agent derives from its name
// (its harness's, its gateway's internal one) when another agent's Service
// holds that name already: agent "web-harness"'s Service is not agent
// "web"'s harness Service.
func (e *Executor) checkOwned(ctx context.Context, ns, name, agent string) error {
	svc, err := e.existingService(ctx, ns, name)
	if err != nil || svc == nil {
		return err
	}
	return judgeOwned(svc, agent)
}

// judgeOwned is checkOwned's judgement of the Service svc that holds the
// name.
func judgeOwned(svc *corev1.Service, agent string) error {
	switch {
	case ownedBy(svc, agent):
		return nil
	case svc.Labels[render.LabelAgent] == "" && wroteIt(svc):
		return nil // written by an earlier version of the provider, before it labelled it
	}
	return foreignService(svc, agent)
}

// existingService reads a Service; nil when there is none.
func (e *Executor) existingService(ctx context.Context, ns, name string) (*corev1.Service, error) {
	svc, err := e.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read Service %s: %w", name, err)
	}
	return svc, nil
}

// wroteIt reports whether the provider's field manager wrote an object.
func wroteIt(obj metav1.Object) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == render.FieldManager {
			return true
		}
	}
	return false
}
