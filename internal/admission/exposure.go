package admission

// Exposure is how a Kubernetes Compute exposes each Agent's gateway: the
// type and annotations of the Agent's Service (render.ExposeService). Like
// NetworkPolicy it is applied per Agent on every deploy, outside revision
// identity: ComputeSettings leaves it out, so a change gives no Agent a new
// revision (no restart). The zero value is the default: a ClusterIP
// Service reachable inside the cluster only.
type Exposure struct {
	// Type is ServiceClusterIP or ServiceLoadBalancer; "" is ClusterIP.
	Type string
	// Annotations are set on the Service beside the platform's own (for
	// example a cloud's internal load balancer annotation).
	Annotations map[string]string
	// LoadBalancerClass selects the load balancer implementation;
	// SourceRanges restricts the clients a cloud load balancer admits.
	// Both apply to ServiceLoadBalancer only.
	LoadBalancerClass string
	SourceRanges      []string
	// NoWait does not wait, after activation, for a load balancer's
	// address; the endpoint is the in-cluster URL until one is assigned.
	NoWait bool
}

// Service types an Exposure takes.
const (
	ServiceClusterIP    = "ClusterIP"
	ServiceLoadBalancer = "LoadBalancer"
)

// ServiceTypes are the Service types a Kubernetes Compute may give its
// Agents' gateways. NodePort is left out: its address is a node's, which
// the provider cannot tell truthfully.
var ServiceTypes = []string{ServiceClusterIP, ServiceLoadBalancer}

// LoadBalancer reports whether the Agents' Services are load balancers.
func (x Exposure) LoadBalancer() bool { return x.Type == ServiceLoadBalancer }
