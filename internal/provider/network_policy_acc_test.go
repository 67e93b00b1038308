package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// TestAccAgent_KubernetesNetworkPolicy: an agent's NetworkPolicy on the
// real control plane (whose CNI bridge does not enforce it: this checks
// the objects, not the traffic). It is created with the agent; changing
// ingress_from and extra_egress rewrites it without a new revision or a
// restart; a deleted policy is drift the next apply writes back, again
// without a new revision; enabled = false deletes it; destroy leaves
// none. A malformed CIDR is refused at plan.
func TestAccAgent_KubernetesNetworkPolicy(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	ctx := context.Background()
	name := render.NetworkPolicyName("support", render.ComponentGateway)
	custom := `, network_policy = {
      ingress_from = [{ namespace_selector = { "kubernetes.io/metadata.name" = "edge" }, pod_selector = { app = "proxy" } }]
      extra_egress = [{ to = [{ ip_block = { cidr = "192.0.2.0/24", except = ["192.0.2.128/25"] } }], ports = [{ port = 8443 }, { port = 5353, protocol = "UDP" }] }]
    }`
	policy := func() (*networkingv1.NetworkPolicy, error) {
		return cs.NetworkingV1().NetworkPolicies(env.ns).Get(ctx, name, metav1.GetOptions{})
	}
	gatewayUntouched := gatewayUntouched(cs, env.ns, "support", "a policy change")
	defaults := func(*terraform.State) error {
		p, err := policy()
		if err != nil {
			return fmt.Errorf("the agent's NetworkPolicy: %w", err)
		}
		if p.Labels[render.LabelAgent] != "support" || p.Labels[render.LabelComponent] != render.ComponentGateway || p.Labels[render.LabelRevision] != "" {
			return fmt.Errorf("labels %v: want the agent's and component's, no revision", p.Labels)
		}
		if len(p.Spec.Ingress) != 1 || len(p.Spec.Ingress[0].From) != 1 || p.Spec.Ingress[0].From[0].PodSelector == nil ||
			!maps.Equal(p.Spec.Ingress[0].From[0].PodSelector.MatchLabels, map[string]string{render.GatewayClientLabel("support"): "true"}) ||
			p.Spec.Ingress[0].From[0].NamespaceSelector != nil || p.Spec.Ingress[0].Ports[0].Port.IntValue() != render.GatewayPort {
			return fmt.Errorf("ingress %+v: want the namespace's Pods labelled as the agent's clients, on port %d", p.Spec.Ingress, render.GatewayPort)
		}
		if len(p.Spec.Egress) != 2 || !slices.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress", "Egress"}) {
			return fmt.Errorf("egress %+v, types %v: want DNS and HTTPS, both directions", p.Spec.Egress, p.Spec.PolicyTypes)
		}
		return gatewayUntouched(nil)
	}
	customised := func(*terraform.State) error {
		p, err := policy()
		if err != nil {
			return fmt.Errorf("the agent's NetworkPolicy: %w", err)
		}
		from := p.Spec.Ingress[0].From
		if len(p.Spec.Ingress) != 1 || len(from) != 1 || from[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "edge" || from[0].PodSelector.MatchLabels["app"] != "proxy" {
			return fmt.Errorf("ingress %+v: ingress_from must replace the default", p.Spec.Ingress)
		}
		if len(p.Spec.Egress) != 3 {
			return fmt.Errorf("egress %+v: want DNS, HTTPS and the extra rule", p.Spec.Egress)
		}
		extra := p.Spec.Egress[2]
		if extra.To[0].IPBlock == nil || extra.To[0].IPBlock.CIDR != "192.0.2.0/24" || !slices.Equal(extra.To[0].IPBlock.Except, []string{"192.0.2.128/25"}) ||
			len(extra.Ports) != 2 || *extra.Ports[0].Protocol != "TCP" || extra.Ports[0].Port.IntValue() != 8443 || *extra.Ports[1].Protocol != "UDP" {
			return fmt.Errorf("extra egress %+v", extra)
		}
		return gatewayUntouched(nil)
	}
	gone := func(*terraform.State) error {
		list, err := cs.NetworkingV1().NetworkPolicies(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d NetworkPolicies of the agent left", len(list.Items))
		}
		return nil
	}
	revision1 := statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1))
	inPlace := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
	}}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// On by default.
				Config:            kubeAgentConfig(env, "", anthropicDoc, ""),
				ConfigStateChecks: []statecheck.StateCheck{revision1},
				Check:             defaults,
			},
			{
				// Another policy: the same revision, the same Pods.
				Config:            kubeAgentConfig(env, custom, anthropicDoc, ""),
				ConfigPlanChecks:  inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1, statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active"))},
				Check:             customised,
			},
			{
				// A deleted policy is drift; the next apply writes it back,
				// without a new revision.
				PreConfig: func() {
					if err := cs.NetworkingV1().NetworkPolicies(env.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:            kubeAgentConfig(env, custom, anthropicDoc, ""),
				ConfigPlanChecks:  inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1, statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active"))},
				Check:             customised,
			},
			{
				// Disabled: the policy goes, the agent keeps running.
				Config:            kubeAgentConfig(env, ", network_policy = { enabled = false }", anthropicDoc, ""),
				ConfigPlanChecks:  inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1},
				Check:             resource.ComposeTestCheckFunc(gone, gatewayUntouched),
			},
			{
				// Validated at plan, naming the attribute and the fix.
				Config:      kubeAgentConfig(env, `, network_policy = { ingress_from = [{ ip_block = { cidr = "10.1.2.3/8" } }] }`, anthropicDoc, ""),
				ExpectError: mustRegexp(`INVALID_REQUEST: not a CIDR[\s\S]*kubernetes.network_policy.ingress_from\[0\].ip_block.cidr[\s\S]*10.0.0.0/8`),
			},
			{
				// Enabled again, then destroyed with the agent.
				Config:            kubeAgentConfig(env, "", anthropicDoc, ""),
				ConfigPlanChecks:  inPlace,
				ConfigStateChecks: []statecheck.StateCheck{revision1},
				Check:             defaults,
			},
		},
		CheckDestroy: func(s *terraform.State) error {
			if _, err := policy(); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the agent's NetworkPolicy after destroy: %v", err)
			}
			return gone(s)
		},
	})
}
