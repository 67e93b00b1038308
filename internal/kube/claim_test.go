package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

func wantClaim(size, class, mode string) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	spec := corev1ac.PersistentVolumeClaimSpec().WithAccessModes(corev1.PersistentVolumeAccessMode(mode)).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}))
	if class != "" {
		spec.WithStorageClassName(class)
	}
	return corev1ac.PersistentVolumeClaim(render.StateClaimName("web"), "occ-acme").
		WithLabels(map[string]string{render.LabelAgent: "web", render.LabelManagedBy: render.ManagedBy}).WithSpec(spec)
}

func liveClaim(size, class, mode string, labels map[string]string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: render.StateClaimName("web"), Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(mode)},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if class != "" {
		c.Spec.StorageClassName = &class
	}
	return c
}

// An existing claim serves the agent's state only as the revision asks:
// the agent's own, not being deleted, in the class and access mode asked
// for, no larger than asked (a larger size is a resize, not a mismatch).
func TestClaimMismatch(t *testing.T) {
	ours := map[string]string{render.LabelAgent: "web", render.LabelManagedBy: render.ManagedBy}
	deleting := liveClaim("10Gi", "fast", "ReadWriteOnce", ours)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, tc := range []struct {
		name string
		cur  *corev1.PersistentVolumeClaim
		want *corev1ac.PersistentVolumeClaimApplyConfiguration
		bad  string // in the mismatch; "" for none
	}{
		{"the same", liveClaim("10Gi", "fast", "ReadWriteOnce", ours), wantClaim("10Gi", "fast", "ReadWriteOnce"), ""},
		{"grows", liveClaim("10Gi", "fast", "ReadWriteOnce", ours), wantClaim("20Gi", "fast", "ReadWriteOnce"), ""},
		{"default class, bound in one", liveClaim("10Gi", "standard", "ReadWriteOnce", ours), wantClaim("10Gi", "", "ReadWriteOnce"), ""},
		{"another agent's", liveClaim("10Gi", "fast", "ReadWriteOnce", map[string]string{render.LabelAgent: "web-x", render.LabelManagedBy: render.ManagedBy}), wantClaim("10Gi", "fast", "ReadWriteOnce"), `not agent "web"'s`},
		{"made by hand", liveClaim("10Gi", "fast", "ReadWriteOnce", nil), wantClaim("10Gi", "fast", "ReadWriteOnce"), `not agent "web"'s`},
		{"being deleted", deleting, wantClaim("10Gi", "fast", "ReadWriteOnce"), "being deleted"},
		{"another class", liveClaim("10Gi", "fast", "ReadWriteOnce", ours), wantClaim("10Gi", "slow", "ReadWriteOnce"), `class "fast"; a claim's class cannot change`},
		{"another access mode", liveClaim("10Gi", "fast", "ReadWriteOnce", ours), wantClaim("10Gi", "fast", "ReadWriteMany"), "access mode cannot change"},
		{"shrinks", liveClaim("20Gi", "fast", "ReadWriteOnce", ours), wantClaim("10Gi", "fast", "ReadWriteOnce"), "cannot shrink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := claimMismatch(tc.cur, tc.want, "web")
			got := p.what
			if (tc.bad == "") != (got == "") || !strings.Contains(got, tc.bad) {
				t.Fatalf("mismatch %q, want one with %q", got, tc.bad)
			}
			if got == "" {
				return
			}
			f := claimFailure("web", tc.cur.Name, tc.want, p, "")
			if f.Code != executor.StateClaim || !strings.Contains(f.Reason, "web-state") || f.Next == "" {
				t.Errorf("failure %+v: STATE_CLAIM_FAILED naming the claim, with advice", f)
			}
		})
	}
}

// A claim's Warning Events fail the gate at once when the claim can never
// bind as it is: no class and no volume, a class that does not exist; a
// provisioner's failure only from its third time (often transient).
func TestClaimEventFailure(t *testing.T) {
	ev := func(typ, reason, msg string, count int32) *corev1.Event {
		return &corev1.Event{Type: typ, Reason: reason, Message: msg, Count: count, InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Name: "web-state"}}
	}
	for _, tc := range []struct {
		name string
		ev   *corev1.Event
		fail bool
	}{
		{"no class, no volume", ev("Warning", "FailedBinding", "no persistent volumes available for this claim and no storage class is set", 1), true},
		{"a class that does not exist", ev("Warning", "ProvisioningFailed", `storageclass.storage.k8s.io "nope" not found`, 1), true},
		{"a provisioner's first failure", ev("Warning", "ProvisioningFailed", "rpc error: code = DeadlineExceeded", 1), false},
		{"a provisioner's third failure", ev("Warning", "ProvisioningFailed", "rpc error: code = DeadlineExceeded", 3), true},
		{"waiting for the provisioner", ev("Normal", "ExternalProvisioning", "Waiting for a volume to be created", 4), false},
		{"provisioned", ev("Normal", "ProvisioningSucceeded", "Successfully provisioned volume pvc-1", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := claimEventFailure(tc.ev, "web", wantClaim("10Gi", "nope", "ReadWriteOnce"))
			if (f != nil) != tc.fail {
				t.Fatalf("failure %v, want a failure: %v", f, tc.fail)
			}
			if f != nil && (f.Code != executor.StateClaim || !strings.Contains(f.Reason, tc.ev.Message) || !strings.Contains(f.Reason, `StorageClass "nope"`) || !strings.Contains(f.Next, "state.storage_class")) {
				t.Errorf("failure %+v: STATE_CLAIM_FAILED quoting the Event, naming the class and the fix", f)
			}
		})
	}
}
