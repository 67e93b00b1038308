package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Annotations the activation writes on the Service (AC4).
const (
	AnnotationActivatedRevision = "occ-platform.io/activated-revision"
	AnnotationActivatedAt       = "occ-platform.io/activated-at"
)

// Failure codes of the executor itself, beside the runtime's held codes.
const (
	CodeCrashLoop       = executor.CrashLoop
	CodeImagePull       = executor.ImagePull
	CodeContainerConfig = executor.ContainerConfig
	CodeUnschedulable   = executor.Unschedulable
	CodeDeadline        = executor.Deadline
	CodeStale           = executor.Stale
	CodeBadRecord       = executor.BadRecord
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
	// Now is the clock; tests may replace it.
	Now func() time.Time

	// log is the current operation's (see op).
	log executor.Log
	// prepared is shared by every operation (nil: nothing is remembered).
	prepared *preparedSet
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
func (e *Executor) Apply(ctx context.Context, rev *admission.Revision, n, serving int64) (executor.Result, error) {
	var writes executor.Writes
	res, err := e.apply(executor.WithWrites(ctx, &writes), rev, n, serving)
	return res, failureOf(rev.Agent, n, &writes, err)
}

func (e *Executor) apply(ctx context.Context, rev *admission.Revision, n, serving int64) (executor.Result, error) {
	type Result = executor.Result
	objs, err := render.Kubernetes(rev, n)
	if err != nil {
		return Result{}, &executor.Failure{Code: executor.InvalidRequest, Summary: fmt.Sprintf("agent %q revision %d cannot be rendered for Kubernetes", rev.Agent, n), Reason: err.Error(), Err: err}
	}
	ns := objs.Namespace
	if serving > 0 {
		// AC3: an older retry never overwrites a newer selected revision.
		// The workloads are per Agent, so this is judged before the first
		// write, not only at activation.
		if err := e.checkNotStale(ctx, objs, rev.Agent, n); err != nil {
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
		if err := e.ensureToken(ctx, ns, rev.Agent, tk[0], tk[1], tk[2]); err != nil {
			return Result{}, err
		}
	}
	if err := e.ensureEnrollment(ctx, ns, rev, n, objs.Enrollment); err != nil {
		return Result{}, err
	}
	for _, sa := range objs.ServiceAccounts {
		if _, err := e.Client.CoreV1().ServiceAccounts(ns).Apply(ctx, sa, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply ServiceAccount %s: %w", *sa.Name, err)
		}
	}
	for _, cm := range objs.ConfigMaps {
		if _, err := e.Client.CoreV1().ConfigMaps(ns).Apply(ctx, cm, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply ConfigMap %s: %w", *cm.Name, err)
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
	if err := e.ensureInternalService(ctx, objs); err != nil {
		return Result{}, err
	}
	if s := objs.HarnessService; s != nil {
		// HM4: the gateway reaches its harness by this name; it selects
		// revision n's harness before either workload exists.
		if _, err := e.Client.CoreV1().Services(ns).Apply(ctx, s, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply Service %s: %w", *s.Name, err)
		}
	}
	components := map[string]bool{}
	workloads := map[string]string{} // component -> Deployment name
	var sandboxes []string
	if err := e.applySandboxes(ctx, ns, objs.Sandboxes); err != nil {
		return Result{}, err
	}
	for _, s := range objs.Sandboxes {
		components[s.Component] = true
		sandboxes = append(sandboxes, s.Name)
	}
	for _, d := range objs.Deployments {
		if _, err := e.Client.AppsV1().Deployments(ns).Apply(ctx, d, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply Deployment %s: %w", *d.Name, err)
		}
		components[d.Spec.Template.Labels[render.LabelComponent]] = true
		workloads[d.Spec.Template.Labels[render.LabelComponent]] = *d.Name
	}
	if dedicated && serving == 0 {
		// PR10: on a first dedicated deploy the Agent's Service selects the
		// gateway from the start and lists it only once it is ready.
		if _, err := e.Client.CoreV1().Services(ns).Create(ctx, serviceFrom(objs, n, time.Time{}), metav1.CreateOptions{FieldManager: render.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return Result{}, fmt.Errorf("create Service %s: %w", *objs.Service.Name, err)
		}
	}
	e.log.Print("waiting for the revision's startup probe", map[string]any{"work.operation": "gate", "revision": n})
	if err := e.gate(ctx, rev.Agent, ns, n, components, workloads, sandboxes); err != nil {
		return Result{}, err
	}
	at, err := e.activate(ctx, rev, objs, n, serving)
	if err != nil {
		return Result{}, err
	}
	return Result{ActivatedAt: at, Endpoint: fmt.Sprintf("http://%s.%s.svc:%d", render.ServiceName(rev.Agent), ns, render.GatewayPort)}, nil
}

// checkNotStale refuses revision n when the Agent's Service already selects
// a newer one: someone else activated it since this plan was made.
func (e *Executor) checkNotStale(ctx context.Context, objs *render.Objects, agent string, n int64) error {
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
	return nil
}

// servedRevision is the revision number the Agent's Service selects.
func servedRevision(svc *corev1.Service) int64 {
	n, _ := strconv.ParseInt(svc.Labels[render.LabelRevision], 10, 64)
	return n
}

// staleFailure refuses revision n because the Service serves newer revision
// live (AC3); outcome says what became of n.
func staleFailure(agent string, n, live int64, phase, outcome string) *Failure {
	return &Failure{Code: CodeStale, Agent: agent, Revision: n, Phase: phase,
		Reason: fmt.Sprintf("the Service already serves newer revision %d; %s", live, outcome),
		Next:   "Another apply activated a newer revision. Refresh (terraform plan) and apply again."}
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
		gone := len(pods.Items)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				gone--
			}
			if gone <= 0 {
				break
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for earlier revisions to stop: %w", ctx.Err())
		}
	}
}

// ensureToken creates an agent's token Secret once: 32 random bytes, hex,
// under key, labelled with the agent and component only (no revision: it
// outlives them; destroy removes it with the agent's Secrets). An existing
// Secret is kept, so a token never changes under a running Pod.
func (e *Executor) ensureToken(ctx context.Context, ns, agent, name, key, component string) error {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{render.LabelAgent: agent, render.LabelComponent: component, render.LabelManagedBy: render.ManagedBy}},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{key: hex.EncodeToString(buf)},
	}
	_, err := e.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: render.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the token Secret %s: %w", name, err)
	}
	return nil
}
