package kubeenv

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FakeLoadBalancer plays a cloud's load balancer controller in namespace
// ns until ctx ends: every Service of type LoadBalancer without an address
// gets addr in its status, as a controller would write it. The address is
// only written, never connected to (use a documentation address such as
// 192.0.2.10). The test clusters run no such controller of their own.
func FakeLoadBalancer(ctx context.Context, cs kubernetes.Interface, ns, addr string) {
	go func() {
		for ctx.Err() == nil {
			list, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range list.Items {
					s := &list.Items[i]
					if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) == 0 {
						s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr}}
						_, _ = cs.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}
