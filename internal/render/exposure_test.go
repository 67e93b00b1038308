package render

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// liveService is an Agent's Service as the API server returns it.
func liveService(typ corev1.ServiceType, ann map[string]string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "ns", Annotations: ann},
		Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Name: "http", Port: GatewayPort}}}}
	if typ == corev1.ServiceTypeLoadBalancer {
		s.Spec.Ports[0].NodePort = 31000
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
	return s
}

// The exposure of an Agent's Service is outside revision identity and
// must never fight other writers: each case gives a live Service and an
// exposure, and says what ExposeService leaves.
func TestExposeService(t *testing.T) {
	platform := map[string]string{AnnotationRevisionID: "abc", PlatformLabelPrefix + "activated-revision": "3"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range platform {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name    string
		live    *corev1.Service
		x       admission.Exposure
		changed bool
		check   func(t *testing.T, s *corev1.Service)
	}{
		{name: "the default on a ClusterIP Service changes nothing", live: liveService(corev1.ServiceTypeClusterIP, with(nil))},
		{name: "the default on a Service without a type (an earlier provider) sets ClusterIP", live: liveService("", with(nil)), changed: true,
			check: func(t *testing.T, s *corev1.Service) {
				if s.Spec.Type != corev1.ServiceTypeClusterIP {
					t.Errorf("type %q", s.Spec.Type)
				}
			}},
		{name: "a load balancer with annotations and ranges", live: liveService(corev1.ServiceTypeClusterIP, with(nil)), changed: true,
			x: admission.Exposure{Type: admission.ServiceLoadBalancer, Annotations: map[string]string{"b.example/x": "1", "a.example/y": "2"}, SourceRanges: []string{"10.0.0.0/8"}},
			check: func(t *testing.T, s *corev1.Service) {
				if s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.Annotations["b.example/x"] != "1" || s.Annotations[AnnotationExposureKeys] != "a.example/y,b.example/x" ||
					len(s.Spec.LoadBalancerSourceRanges) != 1 || s.Annotations[AnnotationRevisionID] != "abc" {
					t.Errorf("got %s %v %v", s.Spec.Type, s.Annotations, s.Spec.LoadBalancerSourceRanges)
				}
			}},
		{name: "the same load balancer again changes nothing and keeps its node port",
			live: func() *corev1.Service {
				s := liveService(corev1.ServiceTypeLoadBalancer, with(map[string]string{"a.example/y": "2", AnnotationExposureKeys: "a.example/y"}))
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
				return s
			}(),
			x: admission.Exposure{Type: admission.ServiceLoadBalancer, Annotations: map[string]string{"a.example/y": "2"}, SourceRanges: []string{"10.0.0.0/8"}},
			check: func(t *testing.T, s *corev1.Service) {
				if s.Spec.Ports[0].NodePort != 31000 || s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
					t.Errorf("node port %d, policy %q", s.Spec.Ports[0].NodePort, s.Spec.ExternalTrafficPolicy)
				}
			}},
		{name: "a removed key goes; another writer's annotation and the platform's stay",
			live: liveService(corev1.ServiceTypeLoadBalancer, with(map[string]string{"a.example/y": "2", "cloud.example/id": "lb-1", AnnotationExposureKeys: "a.example/y"})),
			x:    admission.Exposure{Type: admission.ServiceLoadBalancer}, changed: true,
			check: func(t *testing.T, s *corev1.Service) {
				if _, ok := s.Annotations["a.example/y"]; ok || s.Annotations["cloud.example/id"] != "lb-1" || s.Annotations[AnnotationRevisionID] != "abc" {
					t.Errorf("annotations %v", s.Annotations)
				}
				if _, ok := s.Annotations[AnnotationExposureKeys]; ok {
					t.Errorf("the key list stays without keys: %v", s.Annotations)
				}
			}},
		{name: "a key list naming the platform's annotation never removes it",
			live: liveService(corev1.ServiceTypeClusterIP, with(map[string]string{AnnotationExposureKeys: AnnotationRevisionID})), changed: true,
			check: func(t *testing.T, s *corev1.Service) {
				if s.Annotations[AnnotationRevisionID] != "abc" {
					t.Errorf("annotations %v", s.Annotations)
				}
			}},
		{name: "a platform key in the exposure is never written",
			live: liveService(corev1.ServiceTypeClusterIP, with(nil)),
			x:    admission.Exposure{Annotations: map[string]string{AnnotationRevisionID: "forged"}},
			check: func(t *testing.T, s *corev1.Service) {
				if s.Annotations[AnnotationRevisionID] != "abc" {
					t.Errorf("annotations %v", s.Annotations)
				}
			}},
		{name: "back to ClusterIP clears what only a load balancer has",
			live: func() *corev1.Service {
				s := liveService(corev1.ServiceTypeLoadBalancer, with(nil))
				s.Spec.LoadBalancerSourceRanges, s.Spec.HealthCheckNodePort = []string{"10.0.0.0/8"}, 32000
				return s
			}(), changed: true,
			check: func(t *testing.T, s *corev1.Service) {
				if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.Ports[0].NodePort != 0 || s.Spec.HealthCheckNodePort != 0 ||
					s.Spec.ExternalTrafficPolicy != "" || s.Spec.AllocateLoadBalancerNodePorts != nil || s.Spec.LoadBalancerSourceRanges != nil {
					t.Errorf("spec %+v", s.Spec)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExposureDiffers(tc.live, tc.x); got != tc.changed {
				t.Errorf("ExposureDiffers = %v, want %v", got, tc.changed)
			}
			s := tc.live.DeepCopy()
			if got := ExposeService(s, tc.x); got != tc.changed {
				t.Errorf("ExposeService reported changed = %v, want %v", got, tc.changed)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
			if ExposeService(s, tc.x) {
				t.Error("a second ExposeService changed the Service again")
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	lb := func(in ...corev1.LoadBalancerIngress) *corev1.Service {
		s := liveService(corev1.ServiceTypeLoadBalancer, nil)
		s.Status.LoadBalancer.Ingress = in
		return s
	}
	cases := []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"no Service", nil, "http://bench.ns.svc:18789"},
		{"ClusterIP", liveService(corev1.ServiceTypeClusterIP, nil), "http://bench.ns.svc:18789"},
		{"a load balancer without an address yet", lb(), "http://bench.ns.svc:18789"},
		{"a load balancer's IP", lb(corev1.LoadBalancerIngress{IP: "192.0.2.10"}), "http://192.0.2.10:18789"},
		{"a load balancer's IPv6 address", lb(corev1.LoadBalancerIngress{IP: "2001:db8::1"}), "http://[2001:db8::1]:18789"},
		{"a load balancer's host name", lb(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), "http://lb.example.com:18789"},
		{"a ClusterIP Service with a stale status", func() *corev1.Service {
			s := liveService(corev1.ServiceTypeClusterIP, nil)
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
			return s
		}(), "http://bench.ns.svc:18789"},
	}
	for _, tc := range cases {
		if got := Endpoint(tc.svc, "bench", "ns"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
