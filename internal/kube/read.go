package kube

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Observe reads an agent: the Service's activated revision, whether every
// workload of that revision exists and runs it, and whether the apply
// that activated it finished retiring earlier revisions. top says which
// Deployments (gateway, harness) the agent runs and which component a
// Sandbox per revision holds (render.TopologyOf).
func (e *Executor) Observe(ctx context.Context, ns, agent string, top render.Topology) (executor.Observed, error) {
	o, _, err := e.observe(ctx, ns, agent, top)
	return o, err
}

// observe is Observe that also returns the agent's Service (nil when
// there is none). The endpoint is the Service's: its load balancer's
// address once it has one, otherwise the in-cluster URL.
func (e *Executor) observe(ctx context.Context, ns, agent string, top render.Topology) (executor.Observed, *corev1.Service, error) {
	var o executor.Observed
	drift := func(r executor.DriftReason, format string, args ...any) {
		if o.Drift == executor.DriftNone {
			o.Drift, o.DriftDetail = r, fmt.Sprintf(format, args...)
		}
	}
	components, sandbox := top.Deployments, top.Sandbox
	svc, err := e.Client.CoreV1().Services(ns).Get(ctx, render.ServiceName(agent), metav1.GetOptions{})
	svcMissing := apierrors.IsNotFound(err)
	switch {
	case svcMissing:
		svc = nil
	case err != nil:
		return o, nil, fmt.Errorf("read Service %s/%s: %w", ns, render.ServiceName(agent), err)
	default:
		o = serviceObserved(svc, agent, ns)
	}
	for _, c := range components {
		name := render.GatewayName(agent)
		if c == render.ComponentHarness {
			name = render.HarnessName(agent)
		}
		d, err := e.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if o.Exists {
				drift(executor.DriftWorkload, "Deployment %s was deleted", name)
			}
			continue
		}
		if err != nil {
			return o, nil, fmt.Errorf("read Deployment %s/%s: %w", ns, name, err)
		}
		o.Exists = true
		if got := d.Spec.Template.Annotations[render.AnnotationRevisionID]; o.RevisionID != "" && got != o.RevisionID {
			if r, err := strconv.ParseInt(d.Spec.Template.Labels[render.LabelRevision], 10, 64); err == nil && r > o.Revision {
				// Written by an apply that stopped before activating it
				// (killed, or its deadline passed): the next apply deploys
				// again.
				drift(executor.DriftUnfinished, "Deployment %s runs revision %d, which an apply wrote but never activated (it stopped half-way)", name, r)
				continue
			}
			drift(executor.DriftEdited, "Deployment %s runs revision %s, not the activated %s (edited outside Terraform)", name, got, o.RevisionID)
		}
	}
	if sandbox != "" && o.Exists && o.Revision > 0 {
		name := render.HarnessSandboxName(agent, o.Revision)
		if sandbox == render.ComponentNode {
			name = render.NodeSandboxName(agent, o.Revision)
		}
		ok, err := e.sandboxExists(ctx, ns, name)
		if err != nil {
			return o, nil, err
		}
		if !ok {
			drift(executor.DriftWorkload, "Sandbox %s was deleted", name)
		}
	}
	switch {
	case !o.Exists:
		drift(executor.DriftGone, "no objects of the agent were found")
	case svcMissing:
		// The workloads run, but nothing serves them: the revision numbers
		// state holds stay (the next revision is the next number).
		drift(executor.DriftWorkload, "%s", serviceDeleted(agent))
	case o.Drift == executor.DriftNone && o.Revision > 1:
		// The activated revision runs; did its apply finish? Retirement
		// removes the earlier configuration last (AC4).
		left, err := e.unretired(ctx, ns, agent, o.Revision)
		switch {
		case apierrors.IsForbidden(err):
			// A Role from before this check (no list on ConfigMaps): the
			// refresh works as it did, without telling unfinished
			// retirement.
			e.log.Print("cannot tell whether the last activation retired earlier revisions: the provider's identity may not list ConfigMaps (see the Kubernetes permissions guide)", map[string]any{"work.operation": "read", "level": "warn"})
			return o, svc, nil
		case err != nil:
			return o, nil, err
		}
		if left != "" {
			drift(executor.DriftUnretired, "revision %d serves, but the apply that activated it stopped before retiring earlier revisions (%s remains); the next apply finishes that without deploying again", o.Revision, left)
		}
	}
	return o, svc, nil
}

// serviceObserved is what an agent's Service says: the activated revision,
// its id and time, the endpoint (its load balancer's address once it has
// one, otherwise the in-cluster URL), and DriftEdited when the Service
// selects another revision than the one it says is activated.
func serviceObserved(svc *corev1.Service, agent, ns string) executor.Observed {
	o := executor.Observed{Exists: true}
	o.Revision, _ = strconv.ParseInt(svc.Annotations[AnnotationActivatedRevision], 10, 64)
	o.RevisionID = svc.Annotations[render.AnnotationRevisionID]
	o.ActivatedAt, _ = time.Parse(time.RFC3339, svc.Annotations[AnnotationActivatedAt])
	o.Endpoint = render.Endpoint(svc, agent, ns)
	o.References = svc.Annotations[AnnotationReferences]
	if sel := svc.Spec.Selector[render.LabelRevision]; sel != strconv.FormatInt(o.Revision, 10) {
		o.Drift, o.DriftDetail = executor.DriftEdited, fmt.Sprintf("the Service selects revision %q, not the activated revision %d", sel, o.Revision)
	}
	return o
}

// serviceDeleted says that an agent whose other objects exist has lost its
// Service.
func serviceDeleted(agent string) string {
	return fmt.Sprintf("Service %s was deleted", render.ServiceName(agent))
}

// DeleteAgent removes every object of an agent and waits until its Pods
// are gone. sandboxed says the agent's compute has a sandbox driver, so
// that its Sandboxes are removed too (only then may the identity touch
// them). The agent's state claim goes too unless keepClaim (the compute's
// state.retain_on_destroy): it is removed after the Pods that use it,
// whose deletion is what releases it, and waited for until it is gone.
func (e *Executor) DeleteAgent(ctx context.Context, ns, agent string, sandboxed, keepClaim bool) error {
	sel := agentSelector(agent)
	opts, list := metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}
	if err := e.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, opts, list); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Deployments of %s: %w", agent, err)
	}
	if sandboxed {
		if err := e.deleteSandboxes(ctx, ns, agent); err != nil {
			return err
		}
	}
	// Services by their labels, never by a name derived from the agent's:
	// agent "web-gateway"'s Service is not agent "web"'s internal one. The
	// UID precondition deletes exactly the Service listed.
	svcs, err := e.Client.CoreV1().Services(ns).List(ctx, list)
	if err != nil {
		return fmt.Errorf("list Services of %s: %w", agent, err)
	}
	for _, svc := range svcs.Items {
		err := e.Client.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(svc.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete Service %s: %w", svc.Name, err)
		}
	}
	if err := e.Client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, opts, list); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ConfigMaps of %s: %w", agent, err)
	}
	if err := e.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{render.LabelAgent: agent}).String()}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secrets of %s: %w", agent, err)
	}
	if err := e.Client.CoreV1().ServiceAccounts(ns).DeleteCollection(ctx, opts, list); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ServiceAccounts of %s: %w", agent, err)
	}
	// NetworkPolicies by the agent's label. An identity that may not list
	// them (a Role from before network policies) cannot have written any.
	if err := e.deleteNetworkPolicies(ctx, ns, agent); err != nil && !apierrors.IsForbidden(err) {
		return err
	}
	if err := e.waitPodsGone(ctx, ns, agent); err != nil {
		return err
	}
	if keepClaim {
		return e.markRetained(ctx, ns, agent)
	}
	// By label, as the Services: only a claim the provider made for this
	// agent, never one that merely bears the name.
	if err := e.Client.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, opts, list); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the state claim of %s: %w", agent, err)
	}
	err = e.waitClaimGone(ctx, ns, agent)
	if apierrors.IsForbidden(err) {
		// A Role from before this wait (no list/watch on claims): the claim
		// goes by itself once its protection finalizer is removed.
		e.log.Print("cannot watch the state claim go: the provider's identity may not list claims (see the Kubernetes permissions guide)", map[string]any{"work.operation": "delete", "level": "warn"})
		return nil
	}
	return err
}

// waitPodsGone waits, with a watch, until no Pod of the agent is left.
// Remaining Pods were created by the deleted ReplicaSets' controllers; each
// round deletes them directly so that the wait does not depend on GC timing.
func (e *Executor) waitPodsGone(ctx context.Context, ns, agent string) error {
	pods := e.Client.CoreV1().Pods(ns)
	podSel := labels.SelectorFromSet(labels.Set{render.LabelAgent: agent}).String()
	return waitGone(ctx, "the Pods of "+agent, metav1.ListOptions{LabelSelector: podSel},
		func(ctx context.Context, opts metav1.ListOptions) (string, int, error) {
			l, err := pods.List(ctx, opts)
			if err != nil || len(l.Items) == 0 {
				return "", 0, err
			}
			_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
			return l.ResourceVersion, len(l.Items), nil
		}, pods.Watch)
}

// waitClaimGone waits, with a watch, until the agent's state claim that
// destroy deleted is gone: the claim keeps its protection finalizer for a
// moment after its last Pod, and a create of the same agent right after
// the destroy (a replacement) must find no claim being deleted.
func (e *Executor) waitClaimGone(ctx context.Context, ns, agent string) error {
	pvcs := e.Client.CoreV1().PersistentVolumeClaims(ns)
	return waitGone(ctx, "the state claim of "+agent, metav1.ListOptions{LabelSelector: agentSelector(agent)},
		func(ctx context.Context, opts metav1.ListOptions) (string, int, error) {
			l, err := pvcs.List(ctx, opts)
			if err != nil {
				return "", 0, err
			}
			return l.ResourceVersion, len(l.Items), nil
		}, pvcs.Watch)
}

// waitGone waits until list finds nothing for opts: it lists, then watches
// from the list's version and lists again after each change, or after 30 s
// without one (a watch that missed the last deletion).
func waitGone(ctx context.Context, what string, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (string, int, error), open watchFunc) error {
	var backoff relist
	for {
		rv, n, err := list(ctx, opts)
		if err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		if n == 0 {
			return nil
		}
		wopts := opts
		wopts.ResourceVersion = rv
		w, err := open(ctx, wopts)
		if err != nil {
			return fmt.Errorf("watch %s: %w", what, err)
		}
		timer := time.NewTimer(30 * time.Second)
		events := 1 // a change, the timer, or ctx's end
		select {
		case <-ctx.Done():
		case ev, open := <-w.ResultChan():
			if !open || ev.Type == watch.Error {
				events = 0
			}
		case <-timer.C:
		}
		w.Stop()
		timer.Stop()
		if backoff.after(ctx, events) != nil || ctx.Err() != nil {
			return fmt.Errorf("waiting for %s to go: %w", what, ctx.Err())
		}
	}
}
