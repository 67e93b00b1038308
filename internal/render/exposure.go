package render

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// AnnotationExposureKeys lists, on an Agent's Service, the annotation keys
// its compute's exposure set (comma-separated, sorted), so that a key
// removed from the compute is removed from the Service while annotations
// other writers set (a cloud's load balancer controller) are never touched.
const AnnotationExposureKeys = PlatformLabelPrefix + "service-annotations"

// ExposeService gives an Agent's Service the exposure x, outside revision
// identity: its type, the load balancer's source ranges, and the
// operator's annotations beside the platform's own (which win). Keys an
// earlier exposure set that x no longer has are removed. Going back to
// ClusterIP clears what only a load balancer has (node ports, health
// check port, traffic policy, source ranges), which the API server would
// refuse on a ClusterIP Service. It reports whether svc changed.
func ExposeService(svc *corev1.Service, x admission.Exposure) bool {
	before := svc.DeepCopy()
	if x.LoadBalancer() {
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		svc.Spec.LoadBalancerSourceRanges = slices.Clone(x.SourceRanges)
	} else {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
		svc.Spec.HealthCheckNodePort = 0
		svc.Spec.AllocateLoadBalancerNodePorts = nil
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.LoadBalancerSourceRanges = nil
	}
	for _, k := range strings.Split(svc.Annotations[AnnotationExposureKeys], ",") {
		if _, keep := x.Annotations[k]; k != "" && !keep && !PlatformLabel(k) {
			delete(svc.Annotations, k)
		}
	}
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(x.Annotations)) {
		if PlatformLabel(k) {
			continue // refused at plan; the platform's own always win
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[k] = x.Annotations[k]
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		delete(svc.Annotations, AnnotationExposureKeys)
	} else {
		svc.Annotations[AnnotationExposureKeys] = strings.Join(keys, ",")
	}
	return !exposureEqual(before, svc)
}

// exposureEqual compares what ExposeService sets; an empty and a nil
// list or map are the same (the API server returns either).
func exposureEqual(a, b *corev1.Service) bool {
	if a.Spec.Type != b.Spec.Type || a.Spec.HealthCheckNodePort != b.Spec.HealthCheckNodePort ||
		a.Spec.ExternalTrafficPolicy != b.Spec.ExternalTrafficPolicy ||
		(a.Spec.AllocateLoadBalancerNodePorts == nil) != (b.Spec.AllocateLoadBalancerNodePorts == nil) ||
		!slices.Equal(a.Spec.LoadBalancerSourceRanges, b.Spec.LoadBalancerSourceRanges) || len(a.Spec.Ports) != len(b.Spec.Ports) {
		return false
	}
	for i := range a.Spec.Ports {
		if a.Spec.Ports[i].NodePort != b.Spec.Ports[i].NodePort {
			return false
		}
	}
	return maps.Equal(a.Annotations, b.Annotations)
}

// ExposureDiffers reports whether a live Service lacks the exposure x (a
// changed compute, or an edit outside Terraform); it does not change svc.
func ExposureDiffers(svc *corev1.Service, x admission.Exposure) bool {
	return ExposeService(svc.DeepCopy(), x)
}

// LoadBalancerAddress is the first address a load balancer controller
// gave the Service (an IP or a host name); "" while it has none.
func LoadBalancerAddress(svc *corev1.Service) string {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return ""
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
		if in.Hostname != "" {
			return in.Hostname
		}
	}
	return ""
}

// Endpoint is the URL of an Agent's gateway: on its load balancer's
// address when the Service has one, otherwise its in-cluster name, which
// only Pods of the cluster resolve.
func Endpoint(svc *corev1.Service, agent, ns string) string {
	if addr := LoadBalancerAddress(svc); addr != "" {
		return "http://" + net.JoinHostPort(addr, strconv.Itoa(GatewayPort))
	}
	return fmt.Sprintf("http://%s.%s.svc:%d", ServiceName(agent), ns, GatewayPort)
}
