package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"slices"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// DNSPort is the cluster DNS's port (kube-system's CoreDNS, any namespace).
const DNSPort = 53

// LabelNamespaceName is the label the API server sets on every namespace
// to its name.
const LabelNamespaceName = "kubernetes.io/metadata.name"

// NetworkPolicyName is the NetworkPolicy of an agent's component: named
// like the component's own ServiceAccount and workload (NAME-gateway,
// NAME-harness, and NAME-node of an agent deployed as dedicated OpenClaw
// before ND6, which a refresh still looks for). Only the provider's per-component policies
// carry these names, and no component suffix ends with "-" and another
// one, so agent "web"'s gateway policy (web-gateway) can never be agent
// "web-gateway"'s (web-gateway-gateway), whichever names agents have.
func NetworkPolicyName(agent, component string) string {
	switch component {
	case ComponentHarness:
		return HarnessName(agent)
	case ComponentNode:
		return NodeName(agent)
	}
	return GatewayName(agent)
}

// NetworkPolicies are the agent's NetworkPolicies for the components a
// revision runs (none when np is disabled). Each selects its component's
// Pods of every revision (agent and component labels) and isolates them
// both ways:
//
//   - the gateway accepts connections on GatewayPort only from the Pods
//     of its namespace labelled as its clients (GatewayClientLabel = "true";
//     np.IngressFrom, when set, replaces that default);
//   - the dedicated Codex harness accepts connections only from its own
//     agent's gateway, on AppServerPort;
//   - every component may reach the cluster DNS (UDP and TCP 53, Pods of
//     np.DNSNamespace only) and, unless np.NoHTTPSEgress, TCP 443 anywhere
//     (model providers, channels); the
//     gateway its dedicated Codex harness on AppServerPort; a sandboxed
//     component the sandbox driver's gateway namespace driverNamespace on
//     any port (the egress proxy, which inserts a Credential Gateway's
//     key, runs there: AU3); and every component np.ExtraEgress and, with
//     HTTPS egress on, TCP to each model endpoint the document names on
//     another port (np.EndpointEgress).
func NetworkPolicies(rev *admission.Revision, np admission.NetworkPolicy, driverNamespace string) []*networkingv1ac.NetworkPolicyApplyConfiguration {
	if np.Disabled {
		return nil
	}
	a, ns := rev.Agent, rev.ComputeSettings.Kubernetes().Namespace
	top := TopologyOf(rev.Harness, rev.ExecutionMode, Sandboxed(rev))
	peer := ""
	if len(top.Deployments) > 1 {
		peer = top.Deployments[1]
	}
	if top.Sandbox != "" {
		peer = top.Sandbox
	}
	own := func(component string) *networkingv1ac.NetworkPolicyPeerApplyConfiguration {
		return networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(Selector(a, component)))
	}
	base := func(component string) *networkingv1ac.NetworkPolicyApplyConfiguration {
		return networkingv1ac.NetworkPolicy(NetworkPolicyName(a, component), ns).WithLabels(AgentLabels(a, component))
	}
	sandboxed := top.Sandbox != "" && driverNamespace != ""

	// The gateway.
	gwIngress := networkingv1ac.NetworkPolicyIngressRule().WithPorts(tcp(GatewayPort))
	if len(np.IngressFrom) == 0 {
		gwIngress.WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().
			WithMatchLabels(map[string]string{GatewayClientLabel(a): "true"})))
	} else {
		gwIngress.WithFrom(peers(np.IngressFrom)...)
	}
	ingress := []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration{gwIngress}
	// Every component's extra egress: the compute's, and the model
	// endpoints' on ports other than 443.
	extra := append(slices.Clone(np.ExtraEgress), np.EndpointEgress(admission.ModelEndpoints(rev.AdmittedDocument, rev.PrimaryModel))...)
	egress := defaultEgress(np)
	if peer == ComponentHarness {
		egress = append(egress, networkingv1ac.NetworkPolicyEgressRule().WithTo(own(ComponentHarness)).WithPorts(tcp(AppServerPort)))
	}
	out := []*networkingv1ac.NetworkPolicyApplyConfiguration{
		base(ComponentGateway).WithSpec(spec(Selector(a, ComponentGateway), ingress, append(egress, extraEgress(extra)...))),
	}

	// The dedicated harness: reached only by its gateway.
	if peer != "" {
		in := networkingv1ac.NetworkPolicyIngressRule().WithFrom(own(ComponentGateway))
		eg := defaultEgress(np)
		if peer == ComponentHarness {
			in.WithPorts(tcp(AppServerPort))
		}
		if sandboxed {
			eg = append(eg, networkingv1ac.NetworkPolicyEgressRule().WithTo(networkingv1ac.NetworkPolicyPeer().
				WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelNamespaceName: driverNamespace}))))
		}
		out = append(out, base(peer).WithSpec(spec(Selector(a, peer),
			[]*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration{in}, append(eg, extraEgress(extra)...))))
	}
	return out
}

// GatewayClientLabel is the label key ("client.occ-platform.io/NAME",
// value "true") of the Pods in an Agent's namespace that its gateway's
// default NetworkPolicy lets connect: any other Pod, a neighbour's
// included, is refused until it is labelled so, or until the compute's
// network_policy.ingress_from names it.
func GatewayClientLabel(agent string) string { return "client.occ-platform.io/" + agent }

func spec(sel map[string]string, in []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration, eg []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration) *networkingv1ac.NetworkPolicySpecApplyConfiguration {
	return networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
		WithPolicyTypes("Ingress", "Egress").
		WithIngress(in...).
		WithEgress(eg...)
}

// defaultEgress is what every component may reach: the cluster DNS (the
// Pods of the DNS namespace, never any Pod that listens on 53), and HTTPS
// anywhere unless the compute turns it off.
func defaultEgress(np admission.NetworkPolicy) []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	dnsNS := np.DNSNamespace
	if dnsNS == "" {
		dnsNS = admission.DefaultDNSNamespace
	}
	out := []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{
		networkingv1ac.NetworkPolicyEgressRule().
			WithTo(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{LabelNamespaceName: dnsNS}))).
			WithPorts(port(corev1.ProtocolUDP, DNSPort), port(corev1.ProtocolTCP, DNSPort)),
	}
	if !np.NoHTTPSEgress {
		out = append(out, networkingv1ac.NetworkPolicyEgressRule().WithPorts(tcp(443)))
	}
	return out
}

func extraEgress(rules []admission.EgressRule) []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	var out []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration
	for _, r := range rules {
		e := networkingv1ac.NetworkPolicyEgressRule().WithTo(peers(r.To)...)
		for _, p := range r.Ports {
			proto := corev1.Protocol(p.Protocol)
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			e.WithPorts(port(proto, p.Port))
		}
		out = append(out, e)
	}
	return out
}

func peers(ps []admission.NetworkPeer) []*networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	out := make([]*networkingv1ac.NetworkPolicyPeerApplyConfiguration, 0, len(ps))
	for _, p := range ps {
		peer := networkingv1ac.NetworkPolicyPeer()
		if p.IPBlock != nil {
			peer.WithIPBlock(networkingv1ac.IPBlock().WithCIDR(p.IPBlock.CIDR).WithExcept(p.IPBlock.Except...))
		}
		if p.NamespaceSelector != nil {
			peer.WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(p.NamespaceSelector))
		}
		if p.PodSelector != nil {
			peer.WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(p.PodSelector))
		}
		out = append(out, peer)
	}
	return out
}

func tcp(p int32) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
	return port(corev1.ProtocolTCP, p)
}

func port(proto corev1.Protocol, p int32) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
	return networkingv1ac.NetworkPolicyPort().WithProtocol(proto).WithPort(intstr.FromInt32(p))
}
