package render

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// Issue 27: no runtime Pod can fill the node its neighbours run on. Every
// container of every topology has an ephemeral-storage limit (the
// compute's, else the default) and requests none of it from the scheduler
// (explicitly 0: Kubernetes would default the request to the limit), and
// every emptyDir has that size limit; the default keeps revision ids, and
// another value is part of the revision.
func TestEphemeralStorage_EveryContainerAndEmptyDirIsBounded(t *testing.T) {
	for _, limit := range []string{"", "2048Mi", "512Mi"} {
		for _, tc := range topologyCases(t) {
			t.Run(tc.name+" "+limit, func(t *testing.T) {
				rev := tc.rev
				if limit != "" {
					k := rev.ComputeSettings.Kubernetes()
					k.EphemeralStorageLimit = limit
					cp := *rev
					cp.ComputeSettings.Settings = k
					rev = &cp
				}
				want := resource.MustParse(admission.DefaultEphemeralStorageLimit)
				if limit != "" {
					want = resource.MustParse(limit)
				}
				objs, err := Kubernetes(rev, 4, admission.Compute{})
				if err != nil {
					t.Fatal(err)
				}
				templates := objs.PodTemplates()
				if len(templates) == 0 {
					t.Fatal("no Pod templates")
				}
				for _, pt := range templates {
					b, err := toCore(pt)
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range append(b.Spec.InitContainers, b.Spec.Containers...) {
						l, r := c.Resources.Limits[corev1.ResourceEphemeralStorage], c.Resources.Requests[corev1.ResourceEphemeralStorage]
						if l.Cmp(want) != 0 {
							t.Errorf("container %s: ephemeral-storage limit %s, want %s", c.Name, l.String(), want.String())
						}
						if _, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; !ok || !r.IsZero() {
							t.Errorf("container %s: ephemeral-storage request %v (set: %v), want an explicit 0", c.Name, r.String(), ok)
						}
					}
					n := 0
					for _, v := range b.Spec.Volumes {
						if v.EmptyDir == nil {
							continue
						}
						n++
						if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(want) != 0 {
							t.Errorf("emptyDir %s: size limit %v, want %s", v.Name, v.EmptyDir.SizeLimit, want.String())
						}
					}
					if n == 0 {
						t.Errorf("a Pod template without an emptyDir: %v", b.Spec.Volumes)
					}
				}
			})
		}
	}
	// The default, however spelled, is no setting; another value is.
	base := embeddedInput(t, "anthropic/claude-sonnet-4-5")
	id := admit(t, base).ID()
	for v, same := range map[string]bool{"2Gi": true, "2048Mi": true, "3Gi": false} {
		in := base
		in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.EphemeralStorageLimit = v })
		if got := admit(t, in).ID(); (got == id) != same {
			t.Errorf("ephemeral_storage_limit %s: revision id %s, the default's %s; same = %v wanted", v, got, id, same)
		}
	}
}

// toCore is an apply configuration's Pod template as the API type.
func toCore(pt *corev1ac.PodTemplateSpecApplyConfiguration) (corev1.PodTemplateSpec, error) {
	var out corev1.PodTemplateSpec
	b, err := json.Marshal(pt)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	return out, err
}
