package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// applySandboxes provisions the revision's Sandboxes through the driver:
// server-side apply of agents.x-k8s.io Sandbox objects, one field manager.
// Each is named for its revision and written under the guard g (guard.go):
// a first write creates it; the agent's own of that name (an earlier
// attempt's) is applied; any other is RESOURCE_CONFLICT.
func (e *Executor) applySandboxes(ctx context.Context, g *guard, ns string, sandboxes []*render.Sandbox) error {
	if len(sandboxes) == 0 {
		return nil
	}
	if e.Dynamic == nil {
		return fmt.Errorf("the executor has no dynamic client for %s", sandboxapi.GVR)
	}
	client := e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns)
	for _, s := range sandboxes {
		obj, err := s.Object(ns)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: obj}
		err = put(ctx, g, "Sandbox", s.Name,
			func(ctx context.Context) (*unstructured.Unstructured, error) {
				// Strict: a field the served Sandbox API does not define is
				// an error, not silently dropped.
				return client.Create(ctx, u.DeepCopy(), metav1.CreateOptions{FieldManager: render.FieldManager, FieldValidation: metav1.FieldValidationStrict})
			},
			func(ctx context.Context) (*unstructured.Unstructured, error) {
				return client.Get(ctx, s.Name, metav1.GetOptions{})
			},
			func(ctx context.Context, _ *unstructured.Unstructured) error {
				if _, err := client.Apply(ctx, s.Name, u, applyOpts); err != nil {
					return fmt.Errorf("apply Sandbox %s: %w", s.Name, err)
				}
				return nil
			},
			func(ctx context.Context, o metav1.DeleteOptions) error { return client.Delete(ctx, s.Name, o) })
		if err != nil {
			return err
		}
	}
	return nil
}

// stopEarlierSandboxes deletes every earlier revision's Sandbox of an agent
// (AC2); the driver's garbage collection removes their Pods, which
// stopEarlier then waits for.
//
// sandboxed says the new revision is itself sandboxed. When it is not, an
// earlier one may still have been (the compute's driver was removed); an
// identity without the Sandbox permissions, or a cluster without the API,
// cannot have provisioned any, so Forbidden and NotFound are not errors then.
func (e *Executor) stopEarlierSandboxes(ctx context.Context, ns, agent string, n int64, sandboxed bool) error {
	if e.Dynamic == nil {
		return nil
	}
	req, _ := labels.NewRequirement(render.LabelRevision, selection.NotEquals, []string{strconv.FormatInt(n, 10)})
	agentReq, _ := labels.NewRequirement(render.LabelAgent, selection.Equals, []string{agent})
	sel := labels.NewSelector().Add(*agentReq, *req).String()
	foreground := metav1.DeletePropagationForeground
	err := e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &foreground}, metav1.ListOptions{LabelSelector: sel})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case !sandboxed && apierrors.IsForbidden(err):
		return nil
	}
	return fmt.Errorf("stop earlier Sandboxes: %w", err)
}

// sandboxVerdict judges a Sandbox's status: ready when the driver reports
// Ready and every attachment attached; a failed attachment is a Failure.
func sandboxVerdict(obj *unstructured.Unstructured) (ready bool, waiting string, f *Failure) {
	var attachments []sandboxapi.Attachment
	if a, err := sandboxapi.DecodeAttachments(obj.GetAnnotations()[sandboxapi.AnnotationAttachments]); err == nil {
		attachments = a
	}
	conds := map[string]metav1.Condition{}
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range sandboxapi.Conditions(raw) {
		conds[c.Type] = c
	}
	var pending []string
	for _, a := range attachments {
		c, ok := conds[sandboxapi.AttachmentCondition(a.Name)]
		switch {
		case ok && c.Status == metav1.ConditionFalse:
			return false, "", &Failure{Code: executor.AttachmentFailed, Component: obj.GetLabels()[render.LabelComponent], Phase: "credential attachment",
				Reason: fmt.Sprintf("credential gateway %q could not attach %q (%s) to Sandbox %s: %s: %s", a.Gateway, a.Name, a.SourceType, obj.GetName(), c.Reason, c.Message),
				Next:   fmt.Sprintf("Make credential gateway %q hold a %s credential for source %q (see the OpenShell provider setup), bump the credential source's generation or apply again.", a.Gateway, a.SourceType, a.Name)}
		case !ok || c.Status != metav1.ConditionTrue:
			pending = append(pending, a.Name)
		}
	}
	sort.Strings(pending)
	placed, isPlaced := conds[sandboxapi.ConditionPlaced]
	if isPlaced && placed.Status == metav1.ConditionFalse {
		return false, "", &Failure{Code: executor.SandboxProvisioning, Component: obj.GetLabels()[render.LabelComponent], Phase: "sandbox placement",
			Reason: fmt.Sprintf("the sandbox driver will not place Sandbox %s (facets %q, profile %q): %s: %s", obj.GetName(),
				obj.GetAnnotations()[sandboxapi.AnnotationFacets], obj.GetAnnotations()[sandboxapi.AnnotationRequiredProfile], placed.Reason, placed.Message),
			Next: "Set the compute's sandbox_driver facets and required_profile to what the driver provides (or configure the driver to provide them), then apply again."}
	}
	r, ok := conds[sandboxapi.ConditionReady]
	if ok && r.Status == metav1.ConditionFalse && sandboxapi.Terminal(r.Reason, r.Message) {
		return false, "", &Failure{Code: executor.SandboxProvisioning, Component: obj.GetLabels()[render.LabelComponent], Phase: "sandbox provisioning",
			Reason: fmt.Sprintf("the sandbox controller cannot run Sandbox %s: %s: %s", obj.GetName(), r.Reason, r.Message),
			Next:   "Its Pod was refused or cannot run as the revision asks (an admission policy, a quota, a field the cluster does not allow). Fix what the message names, or change the Agent, then apply again."}
	}
	switch {
	case !isPlaced || placed.Status != metav1.ConditionTrue:
		return false, "waiting for the sandbox driver to place the Sandbox (facets, required profile)", nil
	case !ok || r.Status != metav1.ConditionTrue:
		msg := "the agent-sandbox controller has not reported the Sandbox Ready"
		if ok && r.Message != "" {
			msg += " (" + r.Reason + ": " + r.Message + ")"
		}
		return false, msg, nil
	case len(pending) > 0:
		return false, "waiting for credential attachments: " + strings.Join(pending, ", "), nil
	}
	return true, "", nil
}

// watchSandboxes watches the revision's Sandboxes until each is ready with
// every attachment attached (closing ready), or an attachment fails (st.fail).
func (e *Executor) watchSandboxes(ctx context.Context, ns string, names []string, st *gateState, ready chan<- struct{}) {
	if len(names) == 0 {
		close(ready)
		return
	}
	res := e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns)
	for _, name := range names {
		opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
		var held *Failure
		err := watchUntil(ctx, res.Watch, opts, func(ev watch.Event) (bool, error) {
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Deleted {
				return false, nil
			}
			ok, waiting, f := sandboxVerdict(obj)
			if f != nil {
				held = f
				return true, nil
			}
			st.setSandboxPhase(waiting)
			return ok, nil
		})
		switch {
		case held != nil:
			st.fail(held)
			return
		case err != nil && ctx.Err() == nil:
			// A refusal waiting cannot cure (a transient one is waited out).
			st.fail(&Failure{Code: executor.Unavailable, Phase: "sandbox", Reason: fmt.Sprintf("cannot watch Sandbox %s: %v", name, err),
				Next: "Check that the provider's identity may watch Sandboxes in the namespace (see Kubernetes permissions), then apply again."})
			return
		case err != nil:
			return
		}
	}
	st.setSandboxPhase("")
	close(ready)
}

// sandboxExists reads whether a Sandbox exists (for drift).
func (e *Executor) sandboxExists(ctx context.Context, ns, name string) (bool, error) {
	if e.Dynamic == nil {
		return true, nil
	}
	_, err := e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read Sandbox %s/%s: %w", ns, name, err)
	}
	return true, nil
}

// deleteSandboxes removes every Sandbox of an agent; a cluster without the
// agent-sandbox API has none.
func (e *Executor) deleteSandboxes(ctx context.Context, ns, agent string) error {
	if e.Dynamic == nil {
		return nil
	}
	sel := agentSelector(agent)
	err := e.Dynamic.Resource(sandboxapi.GVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Sandboxes of %s: %w", agent, err)
	}
	return nil
}
