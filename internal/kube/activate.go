package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// activate moves the Service to revision n unless it serves a newer one,
// with the Service's resourceVersion as the claim the API server
// arbitrates (AC3); then records one audit Event and retires what earlier
// revisions left (AC4), in that order: retirement removes the earlier
// configuration last, so until both are done an earlier revision's
// ConfigMap remains, and Read reports the activation unretired. The
// activation time is taken here, when the gate has passed. early is the
// Service this apply created before the gate (PR10: a first dedicated
// deploy), or nil.
//
// x is the compute's exposure (outside revision identity): a Service this
// activation writes gets it, and one it patches gets it by one more
// request when it lacks it. The Service as the API server returned it is
// returned, for its load balancer's address.
func (e *Executor) activate(ctx context.Context, r *rollout, early *corev1.Service) (time.Time, *corev1.Service, error) {
	rev, objs, n, serving, x := r.rev, r.objs, r.n, r.serving, r.objs.Exposure
	ns, name := objs.Namespace, *objs.Service.Name
	at := e.now().UTC().Truncate(time.Second)
	svcs := e.Client.CoreV1().Services(ns)
	desired := objs.ExposedService.DeepCopy()
	desired.Annotations = mergeMaps(desired.Annotations, map[string]string{AnnotationActivatedRevision: strconv.FormatInt(n, 10), AnnotationActivatedAt: at.Format(time.RFC3339),
		AnnotationAgentObjects: agentObjects(objs, r.tokens)})
	claim := func(cur *corev1.Service) *corev1.Service {
		upd := cur.DeepCopy()
		upd.Labels, upd.Annotations = desired.Labels, mergeMaps(cur.Annotations, desired.Annotations)
		upd.Spec.Selector, upd.Spec.Ports = desired.Spec.Selector, mergePorts(cur.Spec.Ports, desired.Spec.Ports)
		render.ExposeService(upd, x)
		return upd
	}
	// Fast path: one request. A first deployment creates the Service; a
	// later one patches it under a JSON Patch "test" that it still serves
	// the revision this apply replaces. Anything else falls through to the
	// read-judge-update loop below.
	var err error
	var got *corev1.Service
	switch {
	case early != nil:
		// The Service this apply created: its resourceVersion is the claim.
		got, err = svcs.Update(ctx, claim(early), metav1.UpdateOptions{FieldManager: render.FieldManager})
	case serving == 0:
		got, err = svcs.Create(ctx, desired, metav1.CreateOptions{FieldManager: render.FieldManager})
	case serving < n:
		got, err = svcs.Patch(ctx, name, types.JSONPatchType, guardedPatch(desired, serving), metav1.PatchOptions{FieldManager: render.FieldManager})
	default:
		err = fmt.Errorf("serving revision %d is not older than %d", serving, n)
	}
	if err == nil {
		e.audit(ctx, ns, rev, n, at)
		e.retire(ctx, rev, objs, n)
		got, err = e.expose(ctx, got, rev.Agent, x)
		return at, got, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			got, err = svcs.Create(ctx, desired, metav1.CreateOptions{FieldManager: render.FieldManager})
		case err != nil:
			return at, nil, fmt.Errorf("read Service %s: %w", name, err)
		default:
			if !ownedBy(cur, rev.Agent) {
				return at, nil, foreignService(cur, rev.Agent)
			}
			live := servedRevision(cur)
			if live > n {
				return at, nil, staleFailure(rev.Agent, n, live, "activation", fmt.Sprintf("revision %d is not activated", n))
			}
			if live == n && cur.Annotations[AnnotationActivatedRevision] == strconv.FormatInt(n, 10) && cur.Annotations[render.AnnotationRevisionID] == rev.ID() {
				// AC4: this very revision was activated by an apply that did
				// not get to record it (a crash, a lost connection). Recovery
				// repeats only the safe effects: retiring, and the audit
				// record if it is missing; the activation keeps its time.
				if t, err := time.Parse(time.RFC3339, cur.Annotations[AnnotationActivatedAt]); err == nil {
					at = t
				}
				e.audit(ctx, ns, rev, n, at) // a no-op when it was written
				e.retire(ctx, rev, objs, n)
				got, err := e.expose(ctx, cur, rev.Agent, x)
				return at, got, err
			}
			got, err = svcs.Update(ctx, claim(cur), metav1.UpdateOptions{FieldManager: render.FieldManager})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // someone else moved it: read again and judge again
		}
		if err != nil {
			return at, nil, fmt.Errorf("activate revision %d: %w", n, err)
		}
		e.audit(ctx, ns, rev, n, at)
		e.retire(ctx, rev, objs, n)
		got, err = e.expose(ctx, got, rev.Agent, x)
		return at, got, err
	}
	return at, nil, fmt.Errorf("activate revision %d: the Service kept changing under the claim", n)
}

// guardedPatch moves the Service to desired only if it still carries the
// activated revision expected: the API server applies all or nothing.
func guardedPatch(desired *corev1.Service, expected int64) []byte {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/annotations/" + jsonPointerEscape(AnnotationActivatedRevision), "value": strconv.FormatInt(expected, 10)},
		{"op": "replace", "path": "/metadata/labels", "value": desired.Labels},
		{"op": "replace", "path": "/spec/selector", "value": desired.Spec.Selector},
	}
	for k, v := range desired.Annotations {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(k), "value": v})
	}
	b, _ := json.Marshal(ops)
	return b
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// mergePorts is the desired ports with the node ports the API server
// allocated to the live ones of the same name kept: a load balancer keeps
// its node ports across activations.
func mergePorts(live, desired []corev1.ServicePort) []corev1.ServicePort {
	out := slices.Clone(desired)
	for i := range out {
		for _, p := range live {
			if p.Name == out[i].Name {
				out[i].NodePort = p.NodePort
			}
		}
	}
	return out
}

// ownedBy reports whether an object is the agent's: labelled by the
// provider with the agent's name. Another agent's object that happens to
// bear a name this agent derives, or an object made by hand, is not.
func ownedBy(obj metav1.Object, agent string) bool {
	l := obj.GetLabels()
	return l[render.LabelManagedBy] == render.ManagedBy && l[render.LabelAgent] == agent
}

// foreignService refuses to take over a Service that is not the agent's.
func foreignService(svc *corev1.Service, agent string) *executor.Failure {
	owner := "was not made by this provider"
	if a := svc.Labels[render.LabelAgent]; a != "" && svc.Labels[render.LabelManagedBy] == render.ManagedBy {
		owner = fmt.Sprintf("belongs to agent %q", a)
	}
	return &executor.Failure{Code: executor.ResourceConflict, Agent: agent,
		Summary: fmt.Sprintf("Service %s/%s is not agent %q's", svc.Namespace, svc.Name, agent),
		Reason:  fmt.Sprintf("the Service agent %q needs %s; the provider never takes over another object", agent, owner),
		Next:    "Rename this agent, or remove or rename what holds the name, then apply again."}
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// retire removes what earlier revisions left: their configuration, and the
// workloads (Deployments, Sandboxes) of components this revision no longer
// runs. It is a safe effect, repeated until done: a crash or a refused
// request before its end leaves an earlier revision's ConfigMap, which Read
// reports (DriftUnretired) and the next apply's finish removes (AC4).
//
// A revision without an unsandboxed harness also removes the harness
// Service an earlier dedicated Codex revision left.
func (e *Executor) retire(ctx context.Context, rev *admission.Revision, objs *render.Objects, n int64) {
	if n <= 1 {
		return // no earlier revision can have left anything behind
	}
	ns, agent := objs.Namespace, rev.Agent
	req, _ := labels.NewRequirement(render.LabelRevision, selection.NotEquals, []string{strconv.FormatInt(n, 10)})
	agentReq, _ := labels.NewRequirement(render.LabelAgent, selection.Equals, []string{agent})
	sel := labels.NewSelector().Add(*agentReq, *req).String()
	// Every workload of this revision was applied with its number, so a
	// Deployment or Sandbox still labelled with another one is a component
	// this revision no longer runs (a dedicated harness after a switch to
	// embedded): it goes, with the credential it holds (AU6).
	bg := metav1.DeletePropagationBackground
	if err := e.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		e.log.Print("retiring earlier workloads failed; the next apply finishes it", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
	}
	if objs.HarnessService == nil {
		if err := e.deleteHarnessService(ctx, ns, agent); err != nil {
			e.log.Print("retiring the earlier harness Service failed; the next apply finishes it", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
		}
	}
	if err := e.retireNetworkPolicies(ctx, ns, agent, objs.Topology()); err != nil {
		e.log.Print("retiring earlier components' network policies failed; destroy removes them", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
	}
	if rev.Sandbox != nil {
		if err := e.stopEarlierSandboxes(ctx, ns, agent, n, false); err != nil {
			e.log.Print("retiring earlier Sandboxes failed; the next apply finishes it", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
		}
	}
	// The configuration goes last: while an earlier revision's ConfigMap
	// remains, Read reports the activation unretired, and the next apply
	// finishes it (executor.ModeFinish).
	if err := e.Client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		e.log.Print("retiring earlier revisions failed; the next apply finishes it", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
	}
}

// deleteHarnessService removes the agent's harness Service (HM4), and
// only it: another agent's Service that happens to bear the name (an Agent
// named "<agent>-harness") lacks this agent's harness labels and is left
// alone. One request when there is none (the common case).
func (e *Executor) deleteHarnessService(ctx context.Context, ns, agent string) error {
	name := render.HarnessServiceName(agent)
	svcs := e.Client.CoreV1().Services(ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read Service %s: %w", name, err)
	}
	if !ownedBy(svc, agent) || svc.Labels[render.LabelComponent] != render.ComponentHarness {
		return nil
	}
	// The UID precondition deletes exactly the Service judged above.
	err = svcs.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(svc.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete Service %s: %w", name, err)
	}
	return nil
}

// audit writes the one activation audit record (AC4): a Kubernetes Event
// on the Service; the Service's annotations carry revision, time and digest.
func (e *Executor) audit(ctx context.Context, ns string, rev *admission.Revision, n int64, at time.Time) {
	ev := &corev1.Event{
		// One name per activation of a revision: a repeated write (recovery)
		// is AlreadyExists, so the record is written once (AC4).
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s-activated-r%d-%s", rev.Agent, n, rev.ID()[:8]), Namespace: ns, Labels: map[string]string{render.LabelAgent: rev.Agent, render.LabelRevision: strconv.FormatInt(n, 10)}},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: ns, Name: render.ServiceName(rev.Agent), APIVersion: "v1"},
		Reason:         "RevisionActivated",
		Message:        fmt.Sprintf("revision %d (%s, %s) activated at %s", n, rev.ID(), rev.HarnessVersion, at.Format(time.RFC3339)),
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: render.ManagedBy},
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
	}
	if _, err := e.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.log.Print("activation audit event not written", map[string]any{"work.operation": "audit", "work.outcome": "failed"})
	}
}

// finish completes the activation of revision n that an earlier apply
// left unretired (executor.ModeFinish; Read reported
// DriftUnretired): the Service must still serve exactly this revision,
// and then only the safe effects are repeated, the audit record (once)
// and the retirement, with the activation's own time. Nothing is
// deployed, so no Pod restarts.
func (e *Executor) finish(ctx context.Context, rev *admission.Revision, objs *render.Objects, n int64) (executor.Result, error) {
	ns := objs.Namespace
	svc, err := e.existingService(ctx, ns, *objs.Service.Name)
	if err != nil {
		return executor.Result{}, err
	}
	if svc != nil && !ownedBy(svc, rev.Agent) {
		return executor.Result{}, foreignService(svc, rev.Agent)
	}
	if svc == nil || svc.Annotations[AnnotationActivatedRevision] != strconv.FormatInt(n, 10) || svc.Annotations[render.AnnotationRevisionID] != rev.ID() {
		live := int64(0)
		if svc != nil {
			live = servedRevision(svc)
		}
		return executor.Result{}, &Failure{Code: executor.Stale, Agent: rev.Agent, Revision: n, Phase: "retirement",
			Reason: fmt.Sprintf("the plan was to finish the retirement after revision %d, but the Service no longer serves it (it serves revision %d)", n, live),
			Next:   "Something changed the agent since the refresh. Refresh (terraform plan) and apply again."}
	}
	at, _ := time.Parse(time.RFC3339, svc.Annotations[AnnotationActivatedAt])
	e.log.Print("finishing an earlier activation: retiring earlier revisions", map[string]any{"work.operation": "retire", "revision": n})
	e.audit(ctx, ns, rev, n, at)
	e.retire(ctx, rev, objs, n)
	left, err := e.unretired(ctx, ns, rev.Agent, n)
	switch {
	case err != nil:
		return executor.Result{}, fmt.Errorf("check the retirement: %w", err)
	case left != "":
		return executor.Result{}, &Failure{Code: executor.DeploymentFailed, Agent: rev.Agent, Revision: n, Phase: "retirement",
			Reason: fmt.Sprintf("revision %d serves, but %s could not be removed", n, left),
			Next:   "Check that the provider's identity may delete ConfigMaps, Deployments and Secrets in the namespace (the Role in the provider documentation), then apply again."}
	}
	return executor.Result{ActivatedAt: at, Endpoint: render.Endpoint(svc, rev.Agent, ns)}, nil
}

// unretired names the first ConfigMap an earlier revision than n left of
// the agent ("" when none): retirement removes the configuration last, so
// one left means retirement did not finish. A failed later attempt's
// ConfigMaps (a number above n, reused by the next attempt) do not count.
func (e *Executor) unretired(ctx context.Context, ns, agent string, n int64) (string, error) {
	req, _ := labels.NewRequirement(render.LabelRevision, selection.NotEquals, []string{strconv.FormatInt(n, 10)})
	agentReq, _ := labels.NewRequirement(render.LabelAgent, selection.Equals, []string{agent})
	managed, _ := labels.NewRequirement(render.LabelManagedBy, selection.Equals, []string{render.ManagedBy})
	sel := labels.NewSelector().Add(*agentReq, *managed, *req).String()
	cms, err := e.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("list the agent's ConfigMaps: %w", err)
	}
	for _, cm := range cms.Items {
		if r, err := strconv.ParseInt(cm.Labels[render.LabelRevision], 10, 64); err == nil && r < n {
			return "ConfigMap " + cm.Name, nil
		}
	}
	return "", nil
}
