package admission

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
