package provider

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	kresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestAccAgent_KubernetesPodSettings: an agent on a compute that sets every
// Pod setting activates, and its gateway Deployment's Pod template, read
// back from the cluster, holds each of them beside the identity labels;
// changing one of them deploys a new revision (AD3). The node selector
// names the label every kwok node carries, and the tolerations tolerate
// taints nobody sets, so the test cluster still places the Pod.
func TestAccAgent_KubernetesPodSettings(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	ctx := context.Background()
	// The PriorityClass and the pull Secret the compute names; the
	// provider creates neither.
	priority := "occ-acc-" + env.ns
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: priority}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.SchedulingV1().PriorityClasses().Delete(context.Background(), priority, metav1.DeleteOptions{})
	})
	if _, err := cs.CoreV1().Secrets(env.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	settings := func(team string) string {
		return fmt.Sprintf(`
    cpu_limit           = "1"
    cpu_request         = "250m"
    memory_request      = "512Mi"
    node_selector       = { %q = %q }
    tolerations = [
      { key = "example.com/never-set", operator = "Exists", effect = "NoSchedule" },
      { key = "example.com/never-set-either", value = "agents", effect = "NoExecute", toleration_seconds = 30 },
    ]
    priority_class_name = %q
    pod_labels          = { team = %q, "example.com/cost-center" = "42" }
    image_pull_secrets  = ["regcred"]
    image_pull_policy   = "IfNotPresent"
`, kubeenv.NodeLabel, kubeenv.PlacementKwok, priority, team)
	}
	config := func(team string) string {
		return kubeAgentConfig(env, "\n"+settings(team), anthropicDoc, "")
	}
	secs := int64(30)
	templateHolds := func(team, revision string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			d, err := cs.AppsV1().Deployments(env.ns).Get(ctx, render.GatewayName("support"), metav1.GetOptions{})
			if err != nil {
				return err
			}
			tmpl := d.Spec.Template
			if want := map[string]string{kubeenv.NodeLabel: kubeenv.PlacementKwok}; !maps.Equal(tmpl.Spec.NodeSelector, want) {
				return fmt.Errorf("nodeSelector = %v, want %v", tmpl.Spec.NodeSelector, want)
			}
			wantTol := []corev1.Toleration{
				{Key: "example.com/never-set", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/never-set-either", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
			}
			if !reflect.DeepEqual(tmpl.Spec.Tolerations, wantTol) {
				return fmt.Errorf("tolerations = %+v, want %+v", tmpl.Spec.Tolerations, wantTol)
			}
			if tmpl.Spec.PriorityClassName != priority {
				return fmt.Errorf("priorityClassName = %q, want %q", tmpl.Spec.PriorityClassName, priority)
			}
			if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(tmpl.Spec.ImagePullSecrets, want) {
				return fmt.Errorf("imagePullSecrets = %v", tmpl.Spec.ImagePullSecrets)
			}
			for k, v := range map[string]string{"team": team, "example.com/cost-center": "42", render.LabelAgent: "support", render.LabelRevision: revision,
				render.LabelComponent: render.ComponentGateway, render.LabelManagedBy: render.ManagedBy} {
				if tmpl.Labels[k] != v {
					return fmt.Errorf("Pod template label %s = %q, want %q", k, tmpl.Labels[k], v)
				}
			}
			if _, ok := d.Labels["team"]; ok {
				return fmt.Errorf("pod_labels reached the Deployment's own labels %v", d.Labels)
			}
			c := tmpl.Spec.Containers[0]
			for name, q := range map[string]struct{ got, want kresource.Quantity }{
				"cpu request":    {c.Resources.Requests[corev1.ResourceCPU], kresource.MustParse("250m")},
				"cpu limit":      {c.Resources.Limits[corev1.ResourceCPU], kresource.MustParse("1")},
				"memory request": {c.Resources.Requests[corev1.ResourceMemory], kresource.MustParse("512Mi")},
				"memory limit":   {c.Resources.Limits[corev1.ResourceMemory], kresource.MustParse("4Gi")},
			} {
				if q.got.Cmp(q.want) != 0 {
					return fmt.Errorf("%s = %s, want %s", name, q.got.String(), q.want.String())
				}
			}
			if c.ImagePullPolicy != corev1.PullIfNotPresent {
				return fmt.Errorf("imagePullPolicy = %q", c.ImagePullPolicy)
			}
			// The Pod the cluster placed runs with them.
			pods, err := cs.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support," + render.LabelRevision + "=" + revision})
			if err != nil {
				return err
			}
			if len(pods.Items) != 1 {
				return fmt.Errorf("%d Pods of revision %s, want 1", len(pods.Items), revision)
			}
			p := pods.Items[0]
			if p.Spec.NodeName == "" || p.Spec.PriorityClassName != priority || p.Spec.Priority == nil || *p.Spec.Priority != 1000 || p.Labels["team"] != team {
				return fmt.Errorf("Pod %s on node %q, priority %q/%v, labels %v", p.Name, p.Spec.NodeName, p.Spec.PriorityClassName, p.Spec.Priority, p.Labels)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("support"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("kubernetes").AtMapKey("tolerations").AtSliceIndex(0).AtMapKey("operator"), knownvalue.StringExact("Exists")),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("kubernetes").AtMapKey("tolerations").AtSliceIndex(1).AtMapKey("operator"), knownvalue.StringExact("Equal")),
				},
				Check: templateHolds("support", "1"),
			},
			{
				// Unchanged settings plan nothing.
				Config:   config("support"),
				PlanOnly: true,
			},
			{
				// A changed Pod setting is a new revision (AD3).
				Config: config("billing"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
				},
				Check: templateHolds("billing", "2"),
			},
		},
	})
}
