package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The agent's state claim (render.StateClaimName): one PersistentVolumeClaim
// per agent, never per revision. Deploy makes sure it exists and has the
// size the revision asks for before any workload is written; the gate
// fails fast when it cannot bind (watchClaim); destroy removes it unless
// the compute retains it.

// ensureClaim makes sure the agent's state claim exists as the revision
// asks. A first deploy creates it (one request; an existing claim of the
// agent, kept by an earlier destroy with retain_on_destroy, is reused); a
// later one reads it and patches only a larger size. What Kubernetes
// cannot change in place (the class, the access mode, a smaller size) is
// refused before anything is written, as is a claim of that name the
// agent does not own.
func (e *Executor) ensureClaim(ctx context.Context, r *rollout) error {
	want, agent, serving := r.objs.StateClaim, r.agent(), r.serving
	if want == nil {
		return nil
	}
	pvcs := e.Client.CoreV1().PersistentVolumeClaims(*want.Namespace)
	create := func() error {
		got, err := pvcs.Create(ctx, claimObject(want), metav1.CreateOptions{FieldManager: render.FieldManager})
		if err == nil {
			r.g.created("PersistentVolumeClaim", got.Name, got.UID, deleteThroughCollection(pvcs, got.Name))
		}
		return err
	}
	cannotCreate := func(err error) error {
		return claimFailure(agent, *want.Name, want, claimProblem{what: "it cannot be created"}, err.Error())
	}
	if serving == 0 {
		switch err := create(); {
		case err == nil:
			e.log.Print("created the state claim", map[string]any{"work.operation": "apply", "claim": *want.Name})
			return nil
		case !apierrors.IsAlreadyExists(err):
			return cannotCreate(err)
		}
	}
	cur, err := pvcs.Get(ctx, *want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Deleted since the last apply (drift): a new, empty claim.
		if err := create(); err != nil {
			return cannotCreate(err)
		}
		e.log.Print("created the state claim again", map[string]any{"work.operation": "apply", "claim": *want.Name, "level": "warn"})
		return nil
	}
	if err != nil {
		return fmt.Errorf("read PersistentVolumeClaim %s: %w", *want.Name, err)
	}
	if serving == 0 && cur.DeletionTimestamp != nil && ownedBy(cur, agent) {
		// A first deploy meets the agent's claim still going: an earlier
		// destroy deleted it and its finalizer has not let go yet (a
		// destroy interrupted before it saw the claim gone). Wait for it,
		// then start on a new, empty claim.
		if err := e.waitClaimGone(ctx, *want.Namespace, agent); err != nil {
			return claimFailure(agent, cur.Name, want, claimProblem{what: "an earlier destroy's deletion of it has not finished",
				next: "A Pod that is not this agent's may still mount the claim (kubectl describe pvc names it); stop it, then apply again. Nothing else was written."}, err.Error())
		}
		if err := create(); err != nil {
			return cannotCreate(err)
		}
		e.log.Print("created the state claim after the earlier one went", map[string]any{"work.operation": "apply", "claim": *want.Name})
		return nil
	}
	if bad := claimMismatch(cur, want, agent); bad.what != "" {
		return claimFailure(agent, cur.Name, want, bad, "")
	}
	if at := cur.Annotations[render.AnnotationRetained]; serving == 0 && at != "" {
		// Kept by an earlier destroy of an agent of this name, from this
		// configuration or any other: its sessions, pairings and memory
		// are mounted only with the compute's consent.
		st := r.c.Kubernetes().State
		if st == nil || !st.AdoptRetained {
			return &Failure{Code: executor.ResourceConflict, Agent: agent,
				Summary: fmt.Sprintf("agent %q would mount the state an earlier agent of its name left", agent),
				Reason: fmt.Sprintf("the state claim %s in namespace %s was kept by a destroy with state.retain_on_destroy (at %s); it holds that agent's sessions, channel pairings, memory and workspace, "+
					"and this agent may belong to another configuration", cur.Name, cur.Namespace, at),
				Next: fmt.Sprintf("To continue that state, set state.adopt_retained = true on the compute and apply again; to start empty, delete the claim (kubectl delete pvc %s -n %s) and apply again. Nothing was written.", cur.Name, cur.Namespace)}
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{render.AnnotationRetained: nil}}})
		if _, err := pvcs.Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: render.FieldManager}); err != nil {
			return claimFailure(agent, cur.Name, want, claimProblem{what: "the retained claim cannot be taken on"}, err.Error())
		}
		e.log.Print("mounting the state an earlier destroy retained (state.adopt_retained)", map[string]any{"work.operation": "apply", "claim": cur.Name, "retained_at": at})
	}
	have := cur.Spec.Resources.Requests[corev1.ResourceStorage]
	size := (*want.Spec.Resources.Requests)[corev1.ResourceStorage]
	if size.Cmp(have) <= 0 {
		return nil
	}
	// A larger size: the one change Kubernetes makes in place, where the
	// claim's class allows expansion (the API server says when not).
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]string{"storage": size.String()}}}})
	if _, err := pvcs.Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: render.FieldManager}); err != nil {
		return claimFailure(agent, cur.Name, want, claimProblem{what: fmt.Sprintf("it cannot grow from %s to %s", have.String(), size.String()),
			next: "The claim's StorageClass must allow volume expansion (allowVolumeExpansion: true) for a larger state.size; set the size back, or use a class that expands."}, err.Error())
	}
	e.log.Print("resized the state claim", map[string]any{"work.operation": "apply", "claim": cur.Name, "from": have.String(), "to": size.String()})
	return nil
}

// observeClaim reports a state claim that was deleted (or is being
// deleted: a Pod still holds it) as drift; the next apply creates it again.
func (e *Executor) observeClaim(ctx context.Context, ns, agent string, o *executor.Observed) error {
	name := render.StateClaimName(agent)
	pvc, err := e.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		o.Drift, o.DriftDetail = executor.DriftWorkload, fmt.Sprintf("the state claim %s was deleted", name)
	case err != nil:
		return fmt.Errorf("read PersistentVolumeClaim %s/%s: %w", ns, name, err)
	case pvc.DeletionTimestamp != nil:
		o.Drift, o.DriftDetail = executor.DriftWorkload, fmt.Sprintf("the state claim %s is being deleted (a Pod still uses it)", name)
	}
	return nil
}

// claimProblem is what is wrong with the agent's claim and, where it
// differs from the general advice, what to do about it.
type claimProblem struct{ what, next string }

// claimMismatch says why an existing claim cannot serve as the agent's
// state as the revision asks (a zero claimProblem when it can).
func claimMismatch(cur *corev1.PersistentVolumeClaim, want *corev1ac.PersistentVolumeClaimApplyConfiguration, agent string) claimProblem {
	const fixed = "A claim's class and access mode are fixed once it exists: set the compute's state back, or move the agent's data to a new claim yourself (destroying the agent deletes the claim unless state.retain_on_destroy is set)."
	switch {
	case !ownedBy(cur, agent):
		return claimProblem{fmt.Sprintf("a PersistentVolumeClaim %s exists that is not agent %q's (it lacks the labels %s=%s and %s=%s)", cur.Name, agent, render.LabelAgent, agent, render.LabelManagedBy, render.ManagedBy),
			"Delete or rename that claim if it is nobody's, or give this agent another name. Nothing was written."}
	case cur.DeletionTimestamp != nil:
		return claimProblem{"it is being deleted (someone deleted it while a Pod still uses it)",
			"A deleted claim goes, with its state, once the agent's Pods stop using it, and a deletion cannot be undone: replace the agent (terraform apply -replace=<address>), which stops its Pods and starts it again on a new, empty claim."}
	}
	if c := want.Spec.StorageClassName; c != nil && ptr.Deref(cur.Spec.StorageClassName, "") != *c {
		return claimProblem{fmt.Sprintf("the claim exists in class %q; a claim's class cannot change (state.storage_class = %q)", ptr.Deref(cur.Spec.StorageClassName, ""), *c), fixed}
	}
	if len(want.Spec.AccessModes) > 0 && (len(cur.Spec.AccessModes) != 1 || cur.Spec.AccessModes[0] != want.Spec.AccessModes[0]) {
		return claimProblem{fmt.Sprintf("the claim's access modes are %v; a claim's access mode cannot change (state.access_mode = %q)", cur.Spec.AccessModes, want.Spec.AccessModes[0]), fixed}
	}
	have := cur.Spec.Resources.Requests[corev1.ResourceStorage]
	if size := (*want.Spec.Resources.Requests)[corev1.ResourceStorage]; size.Cmp(have) < 0 {
		return claimProblem{fmt.Sprintf("the claim holds %s; a claim cannot shrink (state.size = %q)", have.String(), size.String()),
			"Set the compute's state.size back to at least the claim's size; Kubernetes never shrinks a claim."}
	}
	return claimProblem{}
}

// claimObject is the typed claim of an apply configuration, for Create.
func claimObject(ac *corev1ac.PersistentVolumeClaimApplyConfiguration) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: *ac.Name, Namespace: *ac.Namespace, Labels: ac.Labels}}
	pvc.Spec.AccessModes = slices.Clone(ac.Spec.AccessModes)
	pvc.Spec.StorageClassName = ac.Spec.StorageClassName
	pvc.Spec.Resources.Requests = maps.Clone(*ac.Spec.Resources.Requests)
	return pvc
}

// claimFailure is STATE_CLAIM_FAILED for the agent's claim: what is wrong
// with it, the class it asks for, and what to do (the problem's own advice,
// or the general one for a claim that cannot be created or bound).
func claimFailure(agent, claim string, want *corev1ac.PersistentVolumeClaimApplyConfiguration, p claimProblem, detail string) *Failure {
	class := "the cluster's default StorageClass"
	if want != nil && want.Spec.StorageClassName != nil {
		class = fmt.Sprintf("StorageClass %q", *want.Spec.StorageClassName)
	}
	reason := fmt.Sprintf("the state claim %s (%s): %s", claim, class, p.what)
	if detail != "" {
		reason += ": " + detail
	}
	next := p.next
	if next == "" {
		next = "Name an existing StorageClass in the compute's state.storage_class (or make one the cluster's default), raise the namespace's storage quota, or set state.enabled = false for a throwaway agent; then apply again."
	}
	return &Failure{Code: executor.StateClaim, Agent: agent, Summary: fmt.Sprintf("agent %q cannot use its state claim %s", agent, claim), Reason: reason, Next: next}
}

// Reasons of the Events the persistent volume controller and provisioners
// write on a claim that does not bind.
const (
	eventFailedBinding      = "FailedBinding"
	eventProvisioningFailed = "ProvisioningFailed"
)

// claimEventFailure judges one Event of the agent's claim: a claim with
// no class and no volume to bind (FailedBinding), a class that does not
// exist, or a provisioner that failed three times fails the gate at once.
// A provisioner's first failures are often transient; they only log.
func claimEventFailure(ev *corev1.Event, agent string, want *corev1ac.PersistentVolumeClaimApplyConfiguration) *Failure {
	if ev.Type != corev1.EventTypeWarning {
		return nil
	}
	switch {
	case ev.Reason == eventFailedBinding,
		ev.Reason == eventProvisioningFailed && strings.Contains(ev.Message, "storageclass") && strings.Contains(ev.Message, "not found"),
		ev.Reason == eventProvisioningFailed && ev.Count >= 3:
		return claimFailure(agent, ev.InvolvedObject.Name, want, claimProblem{what: "it does not bind"}, ev.Reason+": "+ev.Message)
	}
	return nil
}

// watchClaim watches the Events of the agent's state claim while the gate
// waits, and reports a claim that cannot bind as the revision's failure.
// The claim is the agent's, not the revision's, so its Events are judged
// from the time the claim was created; a bound claim writes no more.
func (e *Executor) watchClaim(ctx context.Context, want *corev1ac.PersistentVolumeClaimApplyConfiguration, agent string, st *gateState) {
	sel := fields.SelectorFromSet(fields.Set{"involvedObject.kind": "PersistentVolumeClaim", "involvedObject.name": *want.Name}).String()
	events := e.Client.CoreV1().Events(*want.Namespace)
	bound := func() bool {
		pvc, err := e.Client.CoreV1().PersistentVolumeClaims(*want.Namespace).Get(ctx, *want.Name, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound
	}
	err := watchUntil(ctx, events.Watch, metav1.ListOptions{FieldSelector: sel}, func(ev watch.Event) (bool, error) {
		event, ok := ev.Object.(*corev1.Event)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		if f := claimEventFailure(event, agent, want); f != nil && !bound() {
			st.fail(f)
			return true, nil
		}
		if event.Type == corev1.EventTypeWarning {
			e.log.Print("the state claim does not bind yet", map[string]any{"work.operation": "gate", "claim": *want.Name, "reason": event.Reason})
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil && apierrors.IsForbidden(err) {
		// A Role from before this watch (no list/watch on Events): the
		// gate still ends at its deadline, naming the claim (gateState).
		e.log.Print("cannot watch the state claim's Events: the provider's identity may not list Events (see the Kubernetes permissions guide)", map[string]any{"work.operation": "gate", "level": "warn"})
	}
}

// markRetained marks the agent's kept state claim (render.AnnotationRetained)
// so that a later agent of the name mounts it only with consent. A claim
// that is not the agent's is never touched; an identity that may not
// patch claims (a Role from before this mark) only warns.
func (e *Executor) markRetained(ctx context.Context, ns, agent string) error {
	name := render.StateClaimName(agent)
	pvcs := e.Client.CoreV1().PersistentVolumeClaims(ns)
	cur, err := pvcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read the state claim %s to keep it: %w", name, err)
	case !ownedBy(cur, agent):
		return nil
	}
	at := e.now().UTC().Format(time.RFC3339)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{render.AnnotationRetained: at}}})
	_, err = pvcs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: render.FieldManager})
	if apierrors.IsForbidden(err) {
		e.log.Print("kept the state claim, but cannot mark it retained: the provider's identity may not patch claims (see the Kubernetes permissions guide)", map[string]any{"work.operation": "delete", "claim": name, "level": "warn"})
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark the kept state claim %s: %w", name, err)
	}
	e.log.Print("kept the state claim (retain_on_destroy)", map[string]any{"work.operation": "delete", "claim": name, "retained_at": at})
	return nil
}
