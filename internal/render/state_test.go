package render

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// rules AC1, MR7: the gateway's state (HOME: the state directory and the
// main workspace) is on the agent's own claim in every topology: one claim
// per agent, labelled with the agent and no revision, the same name in
// every revision; without state, an emptyDir and no claim. The dedicated
// harness keeps its state ephemeral.
func TestRender_StateClaim(t *testing.T) {
	state := &admission.State{Size: "20Gi", StorageClass: "fast", AccessMode: "ReadWriteOncePod", RetainOnDestroy: true}
	for _, tc := range []struct {
		name  string
		input func(*testing.T) admission.Input
		agent string
	}{
		{"embedded", func(t *testing.T) admission.Input { return embeddedInput(t, "anthropic/claude-sonnet-4-5") }, "support"},
		{"dedicated codex", func(t *testing.T) admission.Input { return codexInput(t, admission.MethodAPIKey) }, "coder"},
		{"sandboxed codex", sandboxedCodexInput, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input(t)
			in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.State = state })
			with := admit(t, in)
			agent := with.Agent
			byRev := map[int64]string{}
			for _, n := range []int64{1, 7} {
				objs, err := Kubernetes(with, n, admission.Compute{})
				if err != nil {
					t.Fatal(err)
				}
				c := objs.StateClaim
				if c == nil || *c.Name != StateClaimName(agent) || *c.Namespace != "occ-acme" {
					t.Fatalf("revision %d: state claim %v, want %s in occ-acme", n, c, StateClaimName(agent))
				}
				if _, has := c.Labels[LabelRevision]; has || c.Labels[LabelAgent] != agent || c.Labels[LabelManagedBy] != ManagedBy {
					t.Errorf("the claim's labels %v: the agent's, managed by the provider, no revision", c.Labels)
				}
				if q := (*c.Spec.Resources.Requests)[corev1.ResourceStorage]; q.String() != "20Gi" || *c.Spec.StorageClassName != "fast" || c.Spec.AccessModes[0] != corev1.ReadWriteOncePod {
					t.Errorf("claim spec: %s %v %v", q.String(), *c.Spec.StorageClassName, c.Spec.AccessModes)
				}
				for _, d := range objs.Deployments {
					comp := d.Spec.Template.Labels[LabelComponent]
					var claim string
					for _, v := range d.Spec.Template.Spec.Volumes {
						if v.PersistentVolumeClaim != nil {
							claim = *v.PersistentVolumeClaim.ClaimName
						}
					}
					switch {
					case comp == ComponentGateway && claim != StateClaimName(agent):
						t.Errorf("revision %d: the gateway mounts claim %q, want %s", n, claim, StateClaimName(agent))
					case comp != ComponentGateway && claim != "":
						t.Errorf("revision %d: %s mounts claim %q; its state is ephemeral", n, comp, claim)
					}
					if comp == ComponentGateway {
						byRev[n] = claim
						var mounted bool
						for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
							mounted = mounted || (*m.Name == "state" && *m.MountPath == StateMountPath)
						}
						if !mounted {
							t.Errorf("the gateway does not mount its state at %s", StateMountPath)
						}
					}
				}
				for _, s := range objs.Sandboxes {
					for _, v := range s.Template.Spec.Volumes {
						if v.PersistentVolumeClaim != nil {
							t.Errorf("the Sandbox's %s mounts claim %q; its state is ephemeral", s.Component, *v.PersistentVolumeClaim.ClaimName)
						}
					}
				}
			}
			if byRev[1] != byRev[7] {
				t.Errorf("revisions mount different claims: %v", byRev)
			}

			// No state: an emptyDir, no claim; and retain_on_destroy is not
			// part of the revision.
			in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.State = nil })
			without := admit(t, in)
			objs, err := Kubernetes(without, 1, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			if objs.StateClaim != nil {
				t.Errorf("a claim without state: %v", objs.StateClaim)
			}
			for _, d := range objs.Deployments {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.PersistentVolumeClaim != nil {
						t.Errorf("%s mounts a claim without state", *d.Name)
					}
				}
			}
			if with.ID() == without.ID() {
				t.Error("turning state on or off must give a new revision")
			}
			kept := *state
			kept.RetainOnDestroy = false
			in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.State = &kept })
			if admit(t, in).ID() != with.ID() {
				t.Error("retain_on_destroy changed the revision id; it shapes nothing that runs")
			}
			kept.Size = "30Gi"
			if admit(t, in).ID() == with.ID() {
				t.Error("a new size must give a new revision (its apply grows the claim)")
			}
		})
	}
}

// The default class is the cluster's: no storageClassName is rendered.
func TestRender_StateClaimDefaultClass(t *testing.T) {
	in := embeddedInput(t, "anthropic/claude-sonnet-4-5")
	in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) {
		k.State = &admission.State{Size: "10Gi", AccessMode: "ReadWriteOnce"}
	})
	objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	if objs.StateClaim.Spec.StorageClassName != nil {
		t.Errorf("storageClassName %q rendered for the default class", *objs.StateClaim.Spec.StorageClassName)
	}
}
