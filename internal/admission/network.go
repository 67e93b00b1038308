package admission

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// NetworkPolicy is a Kubernetes Compute's network isolation of its Agents:
// one NetworkPolicy per component of each Agent (render.NetworkPolicies).
// It is applied per Agent on every deploy, outside revision identity:
// ComputeSettings leaves it out, so a change gives no Agent a new revision
// (no restart). The zero value is the default: enabled, ingress to the
// gateway from the Agent's own namespace, no extra egress.
type NetworkPolicy struct {
	// Disabled renders no policies; the executor deletes the Agent's.
	Disabled bool
	// IngressFrom, when set, replaces the default peers (every Pod of the
	// namespace) allowed to reach the gateway's port.
	IngressFrom []NetworkPeer
	// ExtraEgress are egress rules every component gets beside the
	// defaults (DNS, HTTPS, its own agent's peers).
	ExtraEgress []EgressRule
	// NoHTTPSEgress leaves out the default rule to TCP 443 anywhere: model
	// endpoints and channels are then named in ExtraEgress.
	NoHTTPSEgress bool
	// DNSNamespace is the namespace whose Pods serve the cluster DNS, the
	// only ones reached on port 53; "": DefaultDNSNamespace.
	DNSNamespace string
}

// DefaultDNSNamespace is where the cluster DNS runs (CoreDNS, kube-dns).
const DefaultDNSNamespace = "kube-system"

// NetworkPeer is a Kubernetes NetworkPolicyPeer: Pods matched by labels
// (in namespaces matched by labels), or an IP block.
type NetworkPeer struct {
	// NamespaceSelector and PodSelector are match labels; an empty,
	// non-nil map matches everything, nil leaves the selector out.
	NamespaceSelector map[string]string
	PodSelector       map[string]string
	IPBlock           *IPBlock
}

// IPBlock is a CIDR and the CIDRs inside it that are excluded.
type IPBlock struct {
	CIDR   string
	Except []string
}

// EgressRule is a Kubernetes NetworkPolicyEgressRule: to peers (none: any
// destination) on ports (none: every port).
type EgressRule struct {
	To    []NetworkPeer
	Ports []NetworkPort
}

// NetworkPort is a port and its protocol ("TCP", "UDP" or "SCTP"; empty
// means TCP).
type NetworkPort struct {
	Port     int32
	Protocol string
}

// Network protocols a NetworkPort takes.
var NetworkProtocols = []string{"TCP", "UDP", "SCTP"}

// ModelEndpoint is where a model provider the admitted document names is
// called: the host and port of its literal baseUrl, or, for the primary
// model's built-in provider without one, its default endpoint (HTTPS).
type ModelEndpoint struct {
	Provider string
	// Host is a host name or an IP literal; "" for a built-in default.
	Host string
	Port int32
	// At is the baseUrl's path in the document, or the primary model's.
	At occconfig.Path
}

// String names the endpoint as a diagnostic does.
func (e ModelEndpoint) String() string {
	if e.Host == "" {
		return fmt.Sprintf("provider %q's default endpoint (TCP %d)", e.Provider, e.Port)
	}
	return fmt.Sprintf("provider %q's endpoint %s", e.Provider, net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
}

// ModelEndpoints lists, sorted by provider, the endpoint of every model
// provider the document defines with a literal http(s) baseUrl, and the
// primary model's built-in default endpoint when its provider has none.
// Loopback endpoints are left out: a Pod's own loopback is never subject
// to a NetworkPolicy. A baseUrl that refers to the environment or does not
// parse is left to the rules that judge it (PR11).
func ModelEndpoints(doc occconfig.Document, primary *ModelRef) []ModelEndpoint {
	providers := occconfig.Object(doc, occconfig.Keys("models", "providers"))
	var out []ModelEndpoint
	for _, name := range slices.Sorted(maps.Keys(providers)) {
		at := occconfig.Keys("models", "providers", name, "baseUrl")
		base, ok := occconfig.String(doc, at)
		if !ok || strings.Contains(base, "${") {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(base))
		if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			continue
		}
		port := int32(443)
		if u.Scheme == "http" {
			port = 80
		}
		if p := u.Port(); p != "" {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				continue
			}
			port = int32(n)
		}
		host := u.Hostname()
		if ip, err := netip.ParseAddr(host); (err == nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
			continue
		}
		out = append(out, ModelEndpoint{Provider: name, Host: host, Port: port, At: at})
	}
	if primary != nil {
		if _, has := occconfig.String(doc, occconfig.Keys("models", "providers", primary.Provider, "baseUrl")); !has {
			out = append(out, ModelEndpoint{Provider: primary.Provider, Port: 443, At: pathDefaultModel})
		}
	}
	return out
}

// Reaches reports whether the policy lets every component reach e: always
// when it is disabled; on 443 when HTTPS egress is on; on any other port
// when HTTPS egress is on too (EndpointEgress renders a rule for it); and,
// with HTTPS egress off, when an extra_egress rule takes its port (or
// every port) to a destination that may be it: any destination, a
// selector (the provider cannot tell which addresses it holds), or an IP
// block holding an IP-literal host.
func (np NetworkPolicy) Reaches(e ModelEndpoint) bool {
	if np.Disabled || !np.NoHTTPSEgress {
		return true
	}
	ip, ipErr := netip.ParseAddr(e.Host)
	for _, r := range np.ExtraEgress {
		port := len(r.Ports) == 0 || slices.ContainsFunc(r.Ports, func(p NetworkPort) bool {
			return p.Port == e.Port && (p.Protocol == "" || p.Protocol == "TCP")
		})
		if !port {
			continue
		}
		to := len(r.To) == 0 || slices.ContainsFunc(r.To, func(p NetworkPeer) bool {
			if p.IPBlock == nil || ipErr != nil {
				return true
			}
			block, err := netip.ParsePrefix(p.IPBlock.CIDR)
			if err != nil || !block.Contains(ip) {
				return false
			}
			return !slices.ContainsFunc(p.IPBlock.Except, func(x string) bool {
				ex, err := netip.ParsePrefix(x)
				return err == nil && ex.Contains(ip)
			})
		})
		if to {
			return true
		}
	}
	return false
}

// EndpointEgress are the egress rules the policy adds, with HTTPS egress
// on, for model endpoints on a port other than 443, so that the policy
// lets the agent call the model its document names: TCP to the endpoint's
// port, to the address alone when the host is an IP literal, else to any
// destination (a NetworkPolicy cannot name a host). One rule per distinct
// destination and port, in the order of eps.
func (np NetworkPolicy) EndpointEgress(eps []ModelEndpoint) []EgressRule {
	if np.Disabled || np.NoHTTPSEgress {
		return nil
	}
	var out []EgressRule
	seen := map[string]bool{}
	for _, e := range eps {
		if e.Port == 443 {
			continue
		}
		r := EgressRule{Ports: []NetworkPort{{Port: e.Port, Protocol: "TCP"}}}
		key := fmt.Sprint(e.Port)
		if ip, err := netip.ParseAddr(e.Host); err == nil {
			cidr := netip.PrefixFrom(ip, ip.BitLen()).String()
			r.To = []NetworkPeer{{IPBlock: &IPBlock{CIDR: cidr}}}
			key += "@" + cidr
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, r)
		}
	}
	return out
}

// checkEgress refuses, on a Kubernetes compute whose network policy has
// HTTPS egress off, a model endpoint no extra_egress rule lets the agent
// reach: on a cluster that enforces NetworkPolicy the agent could not
// answer a turn. The RULES are silent on network isolation; this holds the
// provider to serving every topology its plan admits.
func checkEgress(doc occconfig.Document, primary *ModelRef, c Compute) Errors {
	if c.Kind != KindKubernetes {
		return nil
	}
	np := c.Kubernetes().NetworkPolicy
	var errs Errors
	for _, e := range ModelEndpoints(doc, primary) {
		if !np.Reaches(e) {
			errs = append(errs, &Error{Class: InvalidRequest, Attribute: []string{"compute"}, DocPath: e.At,
				Message: fmt.Sprintf("compute %q sets network_policy.https_egress = false and no network_policy.extra_egress rule reaches %s, so on a cluster that enforces NetworkPolicy the agent could not call its model; add an extra_egress rule with port %d (to the endpoint's addresses), or set https_egress = true", c.Name, e, e.Port)})
		}
	}
	return errs
}
