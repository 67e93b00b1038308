package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// policiesOf renders a revision's NetworkPolicies as the API objects they
// become, by component.
func policiesOf(t *testing.T, rev *admission.Revision, np admission.NetworkPolicy, driverNS string) map[string]networkingv1.NetworkPolicy {
	t.Helper()
	out := map[string]networkingv1.NetworkPolicy{}
	for _, ac := range NetworkPolicies(rev, np, driverNS) {
		b, err := json.Marshal(ac)
		if err != nil {
			t.Fatal(err)
		}
		var p networkingv1.NetworkPolicy
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		c := p.Labels[LabelComponent]
		if _, dup := out[c]; dup {
			t.Fatalf("two policies for component %q", c)
		}
		out[c] = p
	}
	return out
}

// selector says a label selector in words: "{}" selects everything.
func selector(s *metav1.LabelSelector) string {
	if s == nil {
		return ""
	}
	keys := slices.Sorted(maps.Keys(s.MatchLabels))
	var kv []string
	for _, k := range keys {
		kv = append(kv, k+"="+s.MatchLabels[k])
	}
	return "{" + strings.Join(kv, ",") + "}"
}

func peerWords(p networkingv1.NetworkPolicyPeer) string {
	var parts []string
	if p.NamespaceSelector != nil {
		parts = append(parts, "ns"+selector(p.NamespaceSelector))
	}
	if p.PodSelector != nil {
		parts = append(parts, "pod"+selector(p.PodSelector))
	}
	if b := p.IPBlock; b != nil {
		parts = append(parts, "ip:"+b.CIDR+"-"+strings.Join(b.Except, "-"))
	}
	return strings.Join(parts, "&")
}

func portsWords(ps []networkingv1.NetworkPolicyPort) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
	}
	if len(out) == 0 {
		return "any port"
	}
	return strings.Join(out, ",")
}

func peersWords(ps []networkingv1.NetworkPolicyPeer) string {
	var out []string
	for _, p := range ps {
		out = append(out, peerWords(p))
	}
	if len(out) == 0 {
		return "anywhere"
	}
	return strings.Join(out, "|")
}

// rules says a policy's rules in words, one per rule, sorted.
func rules(p networkingv1.NetworkPolicy) (ingress, egress []string) {
	for _, r := range p.Spec.Ingress {
		ingress = append(ingress, peersWords(r.From)+" -> "+portsWords(r.Ports))
	}
	for _, r := range p.Spec.Egress {
		egress = append(egress, peersWords(r.To)+" -> "+portsWords(r.Ports))
	}
	sort.Strings(ingress)
	sort.Strings(egress)
	return ingress, egress
}

func pods(agent, component string) string {
	return fmt.Sprintf("pod{%s=%s,%s=%s}", LabelAgent, agent, LabelComponent, component)
}

// clients is the default peer of an agent's gateway: only the Pods of its
// namespace labelled as its clients (issue 27: not every Pod there).
func clients(agent string) string { return "pod{client.occ-platform.io/" + agent + "=true}" }

var (
	dns   = "ns{" + LabelNamespaceName + "=kube-system} -> UDP/53,TCP/53"
	https = "anywhere -> TCP/443"
)

func TestNetworkPolicy_RulesOfEveryTopology(t *testing.T) {
	gw := fmt.Sprintf("TCP/%d", GatewayPort)
	app := fmt.Sprintf("TCP/%d", AppServerPort)
	driver := fmt.Sprintf("ns{%s=openshell} -> any port", LabelNamespaceName)
	type want struct{ ingress, egress []string }
	cases := []struct {
		name string
		in   admission.Input
		want map[string]want
	}{
		{"embedded", embeddedInput(t, "anthropic/claude-sonnet-4-5"), map[string]want{
			ComponentGateway: {ingress: []string{clients("support") + " -> " + gw}, egress: []string{dns, https}},
		}},
		{"dedicated codex", codexInput(t, admission.MethodAPIKey), map[string]want{
			ComponentGateway: {ingress: []string{clients("coder") + " -> " + gw}, egress: []string{dns, https, pods("coder", ComponentHarness) + " -> " + app}},
			ComponentHarness: {ingress: []string{pods("coder", ComponentGateway) + " -> " + app}, egress: []string{dns, https}},
		}},
		{"sandboxed codex", sandboxedCodexInput(t), map[string]want{
			ComponentGateway: {ingress: []string{clients("coder") + " -> " + gw}, egress: []string{dns, https, pods("coder", ComponentHarness) + " -> " + app}},
			// The Credential Gateway's egress proxy runs in the driver's namespace (AU3).
			ComponentHarness: {ingress: []string{pods("coder", ComponentGateway) + " -> " + app}, egress: []string{dns, driver, https}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev := admit(t, tc.in)
			got := policiesOf(t, rev, admission.NetworkPolicy{}, "openshell")
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(tc.want))) {
				t.Fatalf("policies for components %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(tc.want)))
			}
			for c, w := range tc.want {
				p := got[c]
				// Per agent, not per revision: agent and component labels only.
				if want := map[string]string{LabelAgent: rev.Agent, LabelComponent: c, LabelManagedBy: ManagedBy}; !maps.Equal(p.Labels, want) {
					t.Errorf("%s labels = %v, want %v", c, p.Labels, want)
				}
				if p.Name != NetworkPolicyName(rev.Agent, c) || p.Namespace != rev.ComputeSettings.Kubernetes().Namespace {
					t.Errorf("%s is %s/%s", c, p.Namespace, p.Name)
				}
				if !maps.Equal(p.Spec.PodSelector.MatchLabels, Selector(rev.Agent, c)) {
					t.Errorf("%s selects %v, want every revision's %v", c, p.Spec.PodSelector.MatchLabels, Selector(rev.Agent, c))
				}
				if types := fmt.Sprint(p.Spec.PolicyTypes); types != "[Ingress Egress]" {
					t.Errorf("%s policy types %s: both directions must be isolated", c, types)
				}
				in, eg := rules(p)
				sort.Strings(w.ingress)
				sort.Strings(w.egress)
				if !slices.Equal(in, w.ingress) {
					t.Errorf("%s ingress:\n got %q\nwant %q", c, in, w.ingress)
				}
				if !slices.Equal(eg, w.egress) {
					t.Errorf("%s egress:\n got %q\nwant %q", c, eg, w.egress)
				}
			}
		})
	}
}

// The policy pod selectors match the Pods the revision renders: every
// workload's and every Sandbox's Pod template carries its component's
// selector labels.
func TestNetworkPolicy_SelectsTheRenderedPods(t *testing.T) {
	for _, tc := range topologyCases(t) {
		objs, err := Kubernetes(tc.rev, 4, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		templates := map[string]map[string]string{}
		for _, d := range objs.Deployments {
			templates[d.Spec.Template.Labels[LabelComponent]] = d.Spec.Template.Labels
		}
		for _, s := range objs.Sandboxes {
			templates[s.Component] = s.Template.Labels
		}
		for c, p := range policiesOf(t, tc.rev, admission.NetworkPolicy{}, "openshell") {
			labels, ok := templates[c]
			if !ok {
				t.Errorf("%s: a policy for %s, which the revision does not run", tc.name, c)
				continue
			}
			for k, v := range p.Spec.PodSelector.MatchLabels {
				if labels[k] != v {
					t.Errorf("%s: policy %s selects %s=%s, the Pod has %q", tc.name, p.Name, k, v, labels[k])
				}
			}
		}
		if n := len(policiesOf(t, tc.rev, admission.NetworkPolicy{}, "openshell")); n != len(templates) {
			t.Errorf("%s: %d policies for %d components", tc.name, n, len(templates))
		}
	}
}

func TestNetworkPolicy_IngressFromReplacesTheDefault(t *testing.T) {
	np := admission.NetworkPolicy{IngressFrom: []admission.NetworkPeer{
		{NamespaceSelector: map[string]string{"team": "edge"}, PodSelector: map[string]string{"app": "ingress"}},
		{IPBlock: &admission.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
	}}
	gw := fmt.Sprintf("TCP/%d", GatewayPort)
	for _, tc := range topologyCases(t) {
		got := policiesOf(t, tc.rev, np, "openshell")
		in, _ := rules(got[ComponentGateway])
		if !slices.Contains(in, "ns{team=edge}&pod{app=ingress}|ip:10.0.0.0/8-10.1.0.0/16 -> "+gw) || slices.Contains(in, clients(tc.rev.Agent)+" -> "+gw) {
			t.Errorf("%s: gateway ingress %q: ingress_from must replace the namespace default", tc.name, in)
		}
		// The harness and node stay reachable only from their own gateway.
		for c, p := range got {
			if c == ComponentGateway {
				continue
			}
			in, _ := rules(p)
			if len(in) != 1 || !strings.HasPrefix(in[0], pods(tc.rev.Agent, ComponentGateway)+" ->") {
				t.Errorf("%s: %s ingress %q", tc.name, c, in)
			}
		}
	}
}

func TestNetworkPolicy_ExtraEgressReachesEveryComponent(t *testing.T) {
	np := admission.NetworkPolicy{ExtraEgress: []admission.EgressRule{
		{To: []admission.NetworkPeer{{IPBlock: &admission.IPBlock{CIDR: "192.0.2.0/24"}}}, Ports: []admission.NetworkPort{{Port: 8443}, {Port: 5353, Protocol: "UDP"}}},
		{Ports: []admission.NetworkPort{{Port: 9000, Protocol: "SCTP"}}},
	}}
	for _, tc := range topologyCases(t) {
		for c, p := range policiesOf(t, tc.rev, np, "openshell") {
			_, eg := rules(p)
			for _, want := range []string{"ip:192.0.2.0/24- -> TCP/8443,UDP/5353", "anywhere -> SCTP/9000", dns, https} {
				if !slices.Contains(eg, want) {
					t.Errorf("%s: %s egress %q lacks %q", tc.name, c, eg, want)
				}
			}
		}
	}
}

// Issue 27: DNS egress reaches only the DNS namespace's Pods (not any Pod
// that listens on 53), and the rule to TCP 443 anywhere can be removed;
// nothing else changes with either.
func TestNetworkPolicy_DNSNamespaceAndHTTPSEgress(t *testing.T) {
	np := admission.NetworkPolicy{NoHTTPSEgress: true, DNSNamespace: "dns-system",
		ExtraEgress: []admission.EgressRule{{To: []admission.NetworkPeer{{IPBlock: &admission.IPBlock{CIDR: "192.0.2.10/32"}}}, Ports: []admission.NetworkPort{{Port: 8443}}}}}
	for _, tc := range topologyCases(t) {
		for c, p := range policiesOf(t, tc.rev, np, "openshell") {
			_, eg := rules(p)
			if !slices.Contains(eg, "ns{"+LabelNamespaceName+"=dns-system} -> UDP/53,TCP/53") {
				t.Errorf("%s: %s egress %q lacks DNS to the dns-system namespace only", tc.name, c, eg)
			}
			for _, e := range eg {
				if strings.Contains(e, "TCP/443") || strings.HasPrefix(e, "ns{} ") {
					t.Errorf("%s: %s egress still has %q", tc.name, c, e)
				}
			}
			if !slices.Contains(eg, "ip:192.0.2.10/32- -> TCP/8443") {
				t.Errorf("%s: %s egress %q lacks the extra rule", tc.name, c, eg)
			}
		}
		// The defaults: kube-system's Pods on 53, and HTTPS anywhere.
		for c, p := range policiesOf(t, tc.rev, admission.NetworkPolicy{}, "openshell") {
			if _, eg := rules(p); !slices.Contains(eg, dns) || !slices.Contains(eg, https) {
				t.Errorf("%s: %s default egress %q", tc.name, c, eg)
			}
		}
	}
}

func TestNetworkPolicy_DisabledRendersNone(t *testing.T) {
	for _, tc := range topologyCases(t) {
		if got := NetworkPolicies(tc.rev, admission.NetworkPolicy{Disabled: true, IngressFrom: []admission.NetworkPeer{{PodSelector: map[string]string{}}}}, "openshell"); got != nil {
			t.Errorf("%s: disabled rendered %d policies", tc.name, len(got))
		}
	}
}

// The policy is not part of the revision: another policy is the same
// revision (no restart), however it changes.
func TestNetworkPolicy_IsOutsideRevisionIdentity(t *testing.T) {
	in := embeddedInput(t, "anthropic/claude-sonnet-4-5")
	base := admit(t, in).ID()
	for _, np := range []admission.NetworkPolicy{
		{Disabled: true},
		{IngressFrom: []admission.NetworkPeer{{PodSelector: map[string]string{"app": "x"}}}},
		{ExtraEgress: []admission.EgressRule{{Ports: []admission.NetworkPort{{Port: 80}}}}},
	} {
		in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.NetworkPolicy = np })
		if id := admit(t, in).ID(); id != base {
			t.Errorf("network policy %+v changed the revision id %s to %s", np, base, id)
		}
	}
}

// rule HM4: an agent's policies are named like its components' objects,
// and no agent's names are another's, even for agents named like derived
// names ("web" and "web-gateway").
func TestHM4_NetworkPolicyNamesNeverCollide(t *testing.T) {
	agents := []string{"web", "web-gateway", "web-harness", "web-node", "web-gateway-gateway", "web-node-harness"}
	components := []string{ComponentGateway, ComponentHarness, ComponentNode}
	owner := map[string]string{}
	for _, a := range agents {
		for _, c := range components {
			name := NetworkPolicyName(a, c)
			if o, ok := owner[name]; ok {
				t.Errorf("NetworkPolicy %s is both %s's and %s/%s's", name, o, a, c)
			}
			owner[name] = a + "/" + c
		}
	}
}

// Issue 27: a model endpoint the document names on a port other than 443
// is reached by every component's policy (to its address when the host is
// an IP literal); with HTTPS egress off no such rule is added (admission
// refuses the endpoint unless extra_egress reaches it).
func TestNetworkPolicy_ModelEndpointOnAnotherPort(t *testing.T) {
	for _, tc := range topologyCases(t) {
		rev := *tc.rev
		rev.AdmittedDocument = occconfig.Clone(rev.AdmittedDocument)
		occconfig.Set(rev.AdmittedDocument, occconfig.Keys("models", "providers", "openai", "baseUrl"), "http://10.1.2.3:8080/v1")
		occconfig.Set(rev.AdmittedDocument, occconfig.Keys("models", "providers", "local", "baseUrl"), "https://llm.internal:8443")
		for c, p := range policiesOf(t, &rev, admission.NetworkPolicy{}, "openshell") {
			_, eg := rules(p)
			for _, want := range []string{"ip:10.1.2.3/32- -> TCP/8080", "anywhere -> TCP/8443", https} {
				if !slices.Contains(eg, want) {
					t.Errorf("%s: %s egress %q lacks %q", tc.name, c, eg, want)
				}
			}
		}
		for c, p := range policiesOf(t, &rev, admission.NetworkPolicy{NoHTTPSEgress: true}, "openshell") {
			_, eg := rules(p)
			for _, e := range eg {
				if strings.Contains(e, "8080") || strings.Contains(e, "8443") {
					t.Errorf("%s: %s with HTTPS egress off has %q", tc.name, c, e)
				}
			}
		}
	}
}

// The gateway's client label is a valid label key for every agent name the
// provider accepts, the longest included.
func TestGatewayClientLabel_ValidForEveryName(t *testing.T) {
	for _, name := range []string{"a", "support", strings.Repeat("a", MaxAgentNameLength())} {
		if errs := validation.IsQualifiedName(GatewayClientLabel(name)); len(errs) > 0 {
			t.Errorf("%s: %v", GatewayClientLabel(name), errs)
		}
	}
}
