package render

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// A compute's Pod settings (node_selector, tolerations,
// priority_class_name, pod_labels, cpu_request, memory_request,
// image_pull_secrets, image_pull_policy) reach every runtime Pod template
// of every topology, and the revision freezes them (AD3). Unset, they
// render what the topologies always rendered (unset_test.go).

// podTopologies are the four Kubernetes topologies' inputs, with the Pod
// templates each renders: the gateway's, and the harness's or node's.
func podTopologies(t *testing.T) []struct {
	name string
	in   admission.Input
	pods int
} {
	return []struct {
		name string
		in   admission.Input
		pods int
	}{
		{"embedded", embeddedInput(t, "anthropic/claude-sonnet-4-5"), 1},
		{"dedicated codex", codexInput(t, admission.MethodAPIKey), 2},
		{"sandboxed codex", sandboxedCodexInput(t), 2},
	}
}

// renderedPod is one Pod template as the API server receives it: a
// Deployment's template, or the podTemplate of a Sandbox object.
type renderedPod struct {
	owner       string // "deployment/NAME" or "sandbox/NAME"
	ownerLabels map[string]string
	tmpl        corev1.PodTemplateSpec
}

func renderedPods(t *testing.T, objs *Objects) []renderedPod {
	t.Helper()
	decode := func(v any) corev1.PodTemplateSpec {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var tmpl corev1.PodTemplateSpec
		if err := json.Unmarshal(b, &tmpl); err != nil {
			t.Fatal(err)
		}
		return tmpl
	}
	var out []renderedPod
	for _, d := range objs.Deployments {
		out = append(out, renderedPod{"deployment/" + *d.Name, d.Labels, decode(d.Spec.Template)})
	}
	for _, s := range objs.Sandboxes {
		o, err := s.Object(objs.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, renderedPod{"sandbox/" + s.Name, s.Labels, decode(o["spec"].(map[string]any)["podTemplate"])})
	}
	return out
}

func int64p(v int64) *int64 { return &v }

func TestAD3_PodSettingsReachEveryRuntimePod(t *testing.T) {
	for _, setting := range []struct {
		name  string
		set   func(*admission.Compute)
		check func(t *testing.T, p renderedPod)
	}{
		{"node_selector", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) {
				k.NodeSelector = map[string]string{"occ-platform.io/node": "kwok", "example.com/pool": "agents"}
			})
		}, func(t *testing.T, p renderedPod) {
			if want := map[string]string{"occ-platform.io/node": "kwok", "example.com/pool": "agents"}; !maps.Equal(p.tmpl.Spec.NodeSelector, want) {
				t.Errorf("%s: nodeSelector = %v, want %v", p.owner, p.tmpl.Spec.NodeSelector, want)
			}
		}},
		{"tolerations", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) {
				k.Tolerations = []admission.Toleration{
					{Key: "example.com/dedicated", Operator: "Equal", Value: "agents", Effect: "NoSchedule"},
					{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: int64p(30)},
					{Operator: "Exists"},
				}
			})
		}, func(t *testing.T, p renderedPod) {
			want := []corev1.Toleration{
				{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: int64p(30)},
				{Operator: corev1.TolerationOpExists},
			}
			if !reflect.DeepEqual(p.tmpl.Spec.Tolerations, want) {
				t.Errorf("%s: tolerations = %+v, want %+v", p.owner, p.tmpl.Spec.Tolerations, want)
			}
		}},
		{"priority_class_name", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.PriorityClassName = "agents-high" })
		}, func(t *testing.T, p renderedPod) {
			if p.tmpl.Spec.PriorityClassName != "agents-high" {
				t.Errorf("%s: priorityClassName = %q", p.owner, p.tmpl.Spec.PriorityClassName)
			}
		}},
		{"pod_labels", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) {
				k.PodLabels = map[string]string{"team": "support", "example.com/cost-center": "42"}
			})
		}, func(t *testing.T, p renderedPod) {
			for k, v := range map[string]string{"team": "support", "example.com/cost-center": "42"} {
				if p.tmpl.Labels[k] != v {
					t.Errorf("%s: Pod label %s = %q, want %q", p.owner, k, p.tmpl.Labels[k], v)
				}
				if _, ok := p.ownerLabels[k]; ok {
					t.Errorf("%s: pod label %s is on the workload too; pod_labels are for Pod templates only", p.owner, k)
				}
			}
		}},
		{"cpu_request", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.CPURequestMillis = 500 })
		}, func(t *testing.T, p renderedPod) {
			for _, c := range p.tmpl.Spec.Containers {
				req, limit := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceCPU]
				if req.MilliValue() != 500 || limit.MilliValue() != 1500 {
					t.Errorf("%s/%s: cpu request %s limit %s, want 500m and 1500m", p.owner, c.Name, req.String(), limit.String())
				}
				if mem := c.Resources.Requests[corev1.ResourceMemory]; mem.Cmp(c.Resources.Limits[corev1.ResourceMemory]) != 0 {
					t.Errorf("%s/%s: memory request %s moved with the cpu request", p.owner, c.Name, mem.String())
				}
			}
		}},
		{"memory_request", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.MemoryRequest = "1Gi" })
		}, func(t *testing.T, p renderedPod) {
			for _, c := range p.tmpl.Spec.Containers {
				req, limit := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
				if req.Cmp(resource.MustParse("1Gi")) != 0 || limit.Cmp(resource.MustParse("4Gi")) != 0 {
					t.Errorf("%s/%s: memory request %s limit %s, want 1Gi and 4Gi", p.owner, c.Name, req.String(), limit.String())
				}
				if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.MilliValue() != 1500 {
					t.Errorf("%s/%s: cpu request %s moved with the memory request", p.owner, c.Name, cpu.String())
				}
			}
		}},
		{"image_pull_secrets", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.ImagePullSecrets = []string{"regcred", "mirror.example"} })
		}, func(t *testing.T, p renderedPod) {
			want := []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror.example"}}
			if !reflect.DeepEqual(p.tmpl.Spec.ImagePullSecrets, want) {
				t.Errorf("%s: imagePullSecrets = %v, want %v", p.owner, p.tmpl.Spec.ImagePullSecrets, want)
			}
		}},
		{"image_pull_policy", func(c *admission.Compute) {
			*c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.ImagePullPolicy = "Always" })
		}, func(t *testing.T, p renderedPod) {
			for _, c := range p.tmpl.Spec.Containers {
				if c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("%s/%s: imagePullPolicy = %q, want Always", p.owner, c.Name, c.ImagePullPolicy)
				}
			}
		}},
	} {
		for _, topo := range podTopologies(t) {
			t.Run(setting.name+"/"+topo.name, func(t *testing.T) {
				unset := admit(t, topo.in)
				in := topo.in
				setting.set(&in.Compute)
				rev := admit(t, in)
				if rev.ID() == unset.ID() {
					t.Errorf("setting %s kept revision id %s: the revision does not freeze it", setting.name, rev.ID())
				}
				objs, err := Kubernetes(rev, 2, admission.Compute{})
				if err != nil {
					t.Fatal(err)
				}
				pods := renderedPods(t, objs)
				if len(pods) != topo.pods {
					t.Fatalf("%d Pod templates, want %d", len(pods), topo.pods)
				}
				for _, p := range pods {
					setting.check(t, p)
				}
			})
		}
	}
}

// Unset settings leave every Pod as Kubernetes defaults it: no node
// selector, tolerations, priority class, pull Secrets or pull policy, no
// label beyond the identity, and requests equal to the limits.
func TestAD3_UnsetPodSettingsRenderDefaults(t *testing.T) {
	for _, topo := range podTopologies(t) {
		objs, err := Kubernetes(admit(t, topo.in), 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range renderedPods(t, objs) {
			s := p.tmpl.Spec
			if s.NodeSelector != nil || s.Tolerations != nil || s.PriorityClassName != "" || s.ImagePullSecrets != nil {
				t.Errorf("%s/%s: placement rendered while unset: %v %v %q %v", topo.name, p.owner, s.NodeSelector, s.Tolerations, s.PriorityClassName, s.ImagePullSecrets)
			}
			if got, want := slices.Sorted(maps.Keys(p.tmpl.Labels)), slices.Sorted(maps.Keys(p.ownerLabels)); !slices.Equal(got, want) {
				t.Errorf("%s/%s: Pod labels %v, want only the identity labels %v", topo.name, p.owner, got, want)
			}
			for _, c := range s.Containers {
				if c.ImagePullPolicy != "" {
					t.Errorf("%s/%s/%s: imagePullPolicy %q rendered while unset", topo.name, p.owner, c.Name, c.ImagePullPolicy)
				}
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if req, limit := c.Resources.Requests[r], c.Resources.Limits[r]; req.Cmp(limit) != 0 {
						t.Errorf("%s/%s/%s: %s request %s, want the limit %s", topo.name, p.owner, c.Name, r, req.String(), limit.String())
					}
				}
			}
		}
	}
}

// rule LG4: the identity labels always win over pod_labels, even in a
// revision whose pod_labels hold them (the compute refuses them at plan).
func TestLG4_PodLabelsNeverOverrideIdentity(t *testing.T) {
	for _, topo := range podTopologies(t) {
		in := topo.in
		in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) {
			k.PodLabels = map[string]string{LabelAgent: "other", LabelRevision: "999", LabelComponent: "gateway", LabelRevisionID: "0",
				LabelManagedBy: "someone-else", LabelName: "x", LabelVersion: "0", "team": "support"}
		})
		rev := admit(t, in)
		objs, err := Kubernetes(rev, 3, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range renderedPods(t, objs) {
			component := p.tmpl.Labels[LabelComponent]
			for k, v := range Labels(rev, 3, component) {
				if p.tmpl.Labels[k] != v {
					t.Errorf("%s/%s: label %s = %q, want the identity %q", topo.name, p.owner, k, p.tmpl.Labels[k], v)
				}
			}
			if p.tmpl.Labels["team"] != "support" {
				t.Errorf("%s/%s: the operator's own label is missing", topo.name, p.owner)
			}
		}
	}
}

// rule LG4: every identity label is a platform label, which pod_labels
// may not set; the operator's keys are not.
func TestLG4_PlatformLabels(t *testing.T) {
	rev := admit(t, embeddedInput(t, "anthropic/claude-sonnet-4-5"))
	for _, component := range []string{ComponentGateway, ComponentHarness} {
		for k := range Labels(rev, 1, component) {
			if !PlatformLabel(k) {
				t.Errorf("identity label %s is not a platform label", k)
			}
		}
	}
	for _, k := range []string{"occ-platform.io/anything", "occ-platform.io/node"} {
		if !PlatformLabel(k) {
			t.Errorf("%s is not a platform label", k)
		}
	}
	for _, k := range []string{"team", "app.kubernetes.io/part-of", "example.com/occ-platform.io", "sub.occ-platform.io/x"} {
		if PlatformLabel(k) {
			t.Errorf("%s is a platform label", k)
		}
	}
}
