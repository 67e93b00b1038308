package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestAccAgent_KubernetesServiceExposure: the gateway Service's type and
// annotations on the real control plane, with a stand-in for a cloud's
// load balancer controller (the test cluster has none). A LoadBalancer
// agent's endpoint is the load balancer's address once apply returns;
// changing the annotations, or going back to ClusterIP, is an in-place
// update with the same revision and the same Pods, and the plan leaves the
// endpoint unknown while it may change; an edit outside Terraform is
// drift the next apply writes back; settings a ClusterIP Service cannot
// have are refused at plan.
func TestAccAgent_KubernetesServiceExposure(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	kubeenv.FakeLoadBalancer(ctx, cs, env.ns, "192.0.2.10")
	lb := `, service = {
      type = "LoadBalancer"
      annotations = { "service.beta.kubernetes.io/aws-load-balancer-internal" = "true" }
      load_balancer_source_ranges = ["10.0.0.0/8"]
    }`
	lb2 := `, service = {
      type = "LoadBalancer"
      annotations = { "networking.gke.io/load-balancer-type" = "Internal" }
    }`
	service := func() (*corev1.Service, error) {
		return cs.CoreV1().Services(env.ns).Get(ctx, render.ServiceName("support"), metav1.GetOptions{})
	}
	untouched := gatewayUntouched(cs, env.ns, "support", "an exposure change")
	exposed := func(typ corev1.ServiceType, key string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			s, err := service()
			if err != nil {
				return err
			}
			if s.Spec.Type != typ {
				return fmt.Errorf("Service type %s, want %s", s.Spec.Type, typ)
			}
			if key != "" && s.Annotations[key] == "" {
				return fmt.Errorf("Service annotations %v: want %s", s.Annotations, key)
			}
			for _, other := range []string{"service.beta.kubernetes.io/aws-load-balancer-internal", "networking.gke.io/load-balancer-type"} {
				if other != key && s.Annotations[other] != "" {
					return fmt.Errorf("Service annotations %v: %s was removed from the compute", s.Annotations, other)
				}
			}
			return untouched(nil)
		}
	}
	lbEndpoint := statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("endpoint"), knownvalue.StringExact("http://192.0.2.10:18789"))
	revision1 := statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1))
	inPlace := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
		plancheck.ExpectUnknownValue("occ_agent.a", tfjsonpath.New("endpoint")),
	}}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Settings only a load balancer has are refused at plan.
				Config:      kubeAgentConfig(env, `, service = { load_balancer_source_ranges = ["10.0.0.0/8"] }`, anthropicDoc, ""),
				ExpectError: regexp.MustCompile(`source ranges need a load balancer`),
			},
			{
				Config:      kubeAgentConfig(env, `, service = { type = "LoadBalancer", annotations = { "occ-platform.io/revision-id" = "x" } }`, anthropicDoc, ""),
				ExpectError: regexp.MustCompile(`is the platform's annotation`),
			},
			{
				// A load balancer: apply returns with its address.
				Config:            kubeAgentConfig(env, lb, anthropicDoc, ""),
				ConfigStateChecks: []statecheck.StateCheck{revision1, lbEndpoint},
				Check:             exposed(corev1.ServiceTypeLoadBalancer, "service.beta.kubernetes.io/aws-load-balancer-internal"),
			},
			{
				// Other annotations: the same revision, the same Pods.
				Config:            kubeAgentConfig(env, lb2, anthropicDoc, ""),
				ConfigPlanChecks:  inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1, lbEndpoint},
				Check:             exposed(corev1.ServiceTypeLoadBalancer, "networking.gke.io/load-balancer-type"),
			},
			{
				// An annotation removed by hand is drift, written back in
				// place.
				PreConfig: func() {
					s, err := service()
					if err != nil {
						t.Fatal(err)
					}
					delete(s.Annotations, "networking.gke.io/load-balancer-type")
					if _, err := cs.CoreV1().Services(env.ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:            kubeAgentConfig(env, lb2, anthropicDoc, ""),
				ConfigPlanChecks:  inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1, lbEndpoint, statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active"))},
				Check:             exposed(corev1.ServiceTypeLoadBalancer, "networking.gke.io/load-balancer-type"),
			},
			{
				// Back to ClusterIP: the endpoint is the in-cluster URL.
				Config:           kubeAgentConfig(env, "", anthropicDoc, ""),
				ConfigPlanChecks: inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1,
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("endpoint"), knownvalue.StringExact("http://support."+env.ns+".svc:18789"))},
				Check: exposed(corev1.ServiceTypeClusterIP, ""),
			},
			{
				Config:   kubeAgentConfig(env, "", anthropicDoc, ""),
				PlanOnly: true,
			},
		},
	})
}
