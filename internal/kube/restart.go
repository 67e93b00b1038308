package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// AnnotationRestartedAt on a Deployment's Pod template is when the
// occ_agent_restart action last restarted it (RFC 3339): a new value is a
// new Pod template, so the Deployment replaces its Pod under its own
// strategy (Recreate: one gateway at a time, AC1), as `kubectl rollout
// restart` does with its own annotation. It is no part of the revision:
// Read judges a Deployment by its revision id only, so it is no drift.
const AnnotationRestartedAt = "occ-platform.io/restarted-at"

// restartFieldManager writes the restart annotation, apart from the
// deploy's server-side apply, whose next apply leaves it.
const restartFieldManager = render.FieldManager + "-restart"

// Restart restarts the agent's activated revision one component at a time
// (a sandboxed component first, then the Codex harness, the gateway last)
// and blocks, for each, until a Pod made after the restart passes the same
// gate as the deploy (its readiness, which is the startup probe; its
// startup records; a held code, a crash loop, a Pod the API server refuses
// fail at once). A Deployment's Pod template gets AnnotationRestartedAt,
// written only while the template still runs the activated revision (a
// JSON patch that tests its revision label and id first); a Sandbox's Pod,
// which the agent-sandbox controller makes, is deleted by name and UID so
// the controller makes it again (and the driver places it again). Nothing else is written, except one Event that records the
// restart.
func (e *Executor) Restart(ctx context.Context, r executor.Restart) (executor.Restarted, error) {
	var writes executor.Writes
	a := r.Agent
	a.Log = r.Log
	out, n, err := e.op(r.Log).restart(executor.WithWrites(ctx, &writes), a)
	return out, executor.Normalize(err, executor.Exit{Op: executor.OpRestart, Agent: a.Name, Revision: n, Writes: &writes,
		Summary: fmt.Sprintf("agent %q was not restarted", a.Name), Finish: whereContainer})
}

func (e *Executor) restart(ctx context.Context, a executor.Agent) (executor.Restarted, int64, error) {
	if a.Compute == nil {
		return executor.Restarted{}, 0, &executor.Failure{Code: executor.NotFound, Agent: a.Name, Reason: "the agent's compute is not known", Next: "apply the agent first"}
	}
	o, err := e.Read(ctx, a)
	if err != nil {
		return executor.Restarted{}, 0, err
	}
	if err := executor.Restartable(a.Name, o); err != nil {
		return executor.Restarted{}, o.Revision, err
	}
	ns, sandboxed := where(a)
	n, id := o.Revision, o.RevisionID
	top := render.TopologyOf(a.Harness, a.ExecutionMode, sandboxed)
	sel := revisionSelector(a.Name, n, id)
	// The Pods that run now: none of them counts towards the restart.
	before, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return executor.Restarted{}, n, fmt.Errorf("list the agent's Pods: %w", err)
	}
	skip := map[types.UID]bool{}
	pods := map[string]*corev1.Pod{}
	for i := range before.Items {
		p := &before.Items[i]
		skip[p.UID] = true
		pods[p.Name] = p
	}
	g := gateFor{agent: a.Name, ns: ns, n: n, id: id, skip: skip}
	out := executor.Restarted{Revision: n}
	restartOne := func(component string, write func() error, workloads map[string]string, sandboxes []string) error {
		e.log.Print("restarting "+component, map[string]any{"level": "info", "work.operation": "restart", "revision": n, "component": component})
		if err := write(); err != nil {
			return err
		}
		gc := g
		if component == render.ComponentGateway && a.Compute.Kubernetes().State != nil {
			gc.claim = corev1ac.PersistentVolumeClaim(render.StateClaimName(a.Name), ns)
		}
		e.log.Print("waiting for the restarted "+component+"'s startup probe", map[string]any{"level": "info", "work.operation": "gate", "revision": n, "component": component})
		phases, err := e.gate(ctx, gc, map[string]bool{component: true}, workloads, sandboxes)
		if err != nil {
			var f *Failure
			if errors.As(err, &f) {
				f.AsRestart()
				if f.Code == executor.Deadline {
					f.Next = "The last phase is named above. Raise the action's timeout if the runtime is only slow, or fix what holds it, then restart again (or apply)."
				}
			}
			return err
		}
		out.Components = append(out.Components, component)
		out.Phases = append(out.Phases, phases...)
		return nil
	}
	if top.Sandbox != "" {
		name := render.HarnessSandboxName(a.Name, n)
		if top.Sandbox == render.ComponentNode {
			name = render.NodeSandboxName(a.Name, n)
		}
		err := restartOne(top.Sandbox, func() error { return e.deleteSandboxPod(ctx, ns, name, sel, pods[name]) }, nil, []string{name})
		if err != nil {
			return out, n, err
		}
	}
	// The harness before the gateway that reaches it.
	for _, c := range []string{render.ComponentHarness, render.ComponentGateway} {
		if !slices.Contains(top.Deployments, c) {
			continue
		}
		name := render.GatewayName(a.Name)
		if c == render.ComponentHarness {
			name = render.HarnessName(a.Name)
		}
		err := restartOne(c, func() error { return e.restartDeployment(ctx, ns, name, a.Name, n, id) }, map[string]string{c: name}, nil)
		if err != nil {
			return out, n, err
		}
	}
	e.auditRestart(ctx, ns, a.Name, n, out.Components)
	return out, n, nil
}

// restartDeployment sets AnnotationRestartedAt on the Deployment's Pod
// template, only while that template runs revision n (id): a JSON patch
// whose first operations test the revision label and id, so that a deploy
// of another revision meanwhile is never restarted over.
func (e *Executor) restartDeployment(ctx context.Context, ns, name, agent string, n int64, id string) error {
	tmpl := "/spec/template/metadata/"
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": "/metadata/labels/" + jsonPointerEscape(render.LabelManagedBy), "value": render.ManagedBy},
		{"op": "test", "path": "/metadata/labels/" + jsonPointerEscape(render.LabelAgent), "value": agent},
		{"op": "test", "path": tmpl + "labels/" + jsonPointerEscape(render.LabelRevision), "value": strconv.FormatInt(n, 10)},
		{"op": "test", "path": tmpl + "annotations/" + jsonPointerEscape(render.AnnotationRevisionID), "value": id},
		{"op": "add", "path": tmpl + "annotations/" + jsonPointerEscape(AnnotationRestartedAt), "value": e.now().UTC().Format(time.RFC3339Nano)},
	})
	if err != nil {
		return err
	}
	executor.WritesFrom(ctx).Mark()
	_, err = e.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: restartFieldManager})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		executor.WritesFrom(ctx).Undone()
		return &executor.Failure{Code: executor.NotFound, Where: "namespace " + ns, Reason: fmt.Sprintf("Deployment %s is gone", name),
			Next: "apply the agent: the plan shows the drift and the apply deploys the revision again"}
	case apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsBadRequest(err):
		// A test failed: what the Deployment runs changed since the read.
		executor.WritesFrom(ctx).Undone()
		return &executor.Failure{Code: executor.ResourceConflict, Where: "namespace " + ns,
			Reason: fmt.Sprintf("Deployment %s no longer runs revision %d (an apply changed it meanwhile): %v", name, n, err),
			Next:   "let the other apply finish, then restart again if it is still needed"}
	case apierrors.IsForbidden(err):
		executor.WritesFrom(ctx).Undone()
		return &executor.Failure{Code: executor.ResourceConflict, Where: "namespace " + ns, Reason: "the provider's identity may not patch Deployment " + name + ": " + err.Error(),
			Next: "grant the provider's Role what the Kubernetes permissions guide lists (patch on deployments), then restart again"}
	}
	return fmt.Errorf("restart Deployment %s: %w", name, err)
}

// deleteSandboxPod deletes the Pod the driver made for Sandbox name, by
// its name, the revision's labels (sel) and its UID, so that the driver
// makes it again from the Sandbox's template; a Sandbox that has no Pod
// now is only waited for. (A delete of the collection the field and label
// selectors pick: the Role the provider holds deletes Pods only so.)
func (e *Executor) deleteSandboxPod(ctx context.Context, ns, name, sel string, pod *corev1.Pod) error {
	if pod == nil {
		return nil
	}
	if c := metav1.GetControllerOf(pod); c == nil || c.Kind != "Sandbox" || c.Name != name {
		return &executor.Failure{Code: executor.ResourceConflict, Where: "namespace " + ns,
			Reason: fmt.Sprintf("Pod %s is not controlled by the agent's Sandbox %s", name, name), Next: "remove the Pod that holds the name, then apply the agent"}
	}
	executor.WritesFrom(ctx).Mark()
	opts := metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	err := e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, opts, metav1.ListOptions{
		LabelSelector: sel, FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete Pod %s of Sandbox %s: %w", name, name, err)
	}
	return nil
}

// auditRestart writes one Event on the agent's Service that records the
// restart; a failure to write it is logged, not returned (the restart
// happened).
func (e *Executor) auditRestart(ctx context.Context, ns, agent string, n int64, components []string) {
	at := e.now().UTC()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s-restarted-r%d-%d", agent, n, at.UnixNano()), Namespace: ns, Labels: map[string]string{render.LabelAgent: agent, render.LabelRevision: strconv.FormatInt(n, 10)}},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: ns, Name: render.ServiceName(agent), APIVersion: "v1"},
		Reason:         "RevisionRestarted",
		Message:        fmt.Sprintf("revision %d restarted (%v) at %s", n, components, at.Format(time.RFC3339)),
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: render.ManagedBy},
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
	}
	if _, err := e.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		e.log.Print("restart audit event not written", map[string]any{"work.operation": "audit", "work.outcome": "failed"})
	}
}
