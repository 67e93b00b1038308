package kubeenv

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// NeighbourManager is the field manager of a neighbour's writes: another
// application in an agent's namespace, in the hostile-neighbour tests.
const NeighbourManager = "neighbour-app"

var NeighbourLabels = map[string]string{"app.kubernetes.io/name": "neighbour"}

// NeighbourObjects are another application's objects, each bearing a
// name agent derives in namespace ns: the gateway token Secret, the
// ServiceAccount, revision 1's ConfigMap, the NetworkPolicy, the
// Deployment and the Service; and a StatefulSet, a Job and an Ingress
// named like the gateway. Key: "Kind/name".
func NeighbourObjects(ns, agent string) map[string]runtime.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: NeighbourLabels}
	}
	gw := render.GatewayName(agent)
	podSpec := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: NeighbourLabels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/neighbour:1"}}}}
	job := podSpec.DeepCopy()
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	sel := &metav1.LabelSelector{MatchLabels: NeighbourLabels}
	return map[string]runtime.Object{
		"Secret/" + render.GatewayTokenSecret(agent):  &corev1.Secret{ObjectMeta: meta(render.GatewayTokenSecret(agent)), StringData: map[string]string{render.GatewayTokenKey: "a token the neighbour knows"}},
		"ServiceAccount/" + gw:                        &corev1.ServiceAccount{ObjectMeta: meta(gw)},
		"ConfigMap/" + render.ConfigMapName(agent, 1): &corev1.ConfigMap{ObjectMeta: meta(render.ConfigMapName(agent, 1)), Data: map[string]string{"k": "v"}},
		"NetworkPolicy/" + gw: &networkingv1.NetworkPolicy{ObjectMeta: meta(gw), Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		"Deployment/" + gw:                     &appsv1.Deployment{ObjectMeta: meta(gw), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: podSpec}},
		"Service/" + render.ServiceName(agent): &corev1.Service{ObjectMeta: meta(render.ServiceName(agent)), Spec: corev1.ServiceSpec{Selector: NeighbourLabels, Ports: []corev1.ServicePort{{Port: 80}}}},
		"StatefulSet/" + gw:                    &appsv1.StatefulSet{ObjectMeta: meta(gw), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: podSpec}},
		"Job/" + gw:                            &batchv1.Job{ObjectMeta: meta(gw), Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: *job}},
		"Ingress/" + gw: &networkingv1.Ingress{ObjectMeta: meta(gw), Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: render.ServiceName(agent), Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
	}
}

// plant creates obj as the neighbour and returns its resourceVersion.
func Plant(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) (string, error) {
	o := metav1.CreateOptions{FieldManager: NeighbourManager}
	var m metav1.Object
	var err error
	switch v := obj.(type) {
	case *corev1.Secret:
		m, err = cs.CoreV1().Secrets(v.Namespace).Create(ctx, v, o)
	case *corev1.ServiceAccount:
		m, err = cs.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, o)
	case *corev1.ConfigMap:
		m, err = cs.CoreV1().ConfigMaps(v.Namespace).Create(ctx, v, o)
	case *corev1.Service:
		m, err = cs.CoreV1().Services(v.Namespace).Create(ctx, v, o)
	case *networkingv1.NetworkPolicy:
		m, err = cs.NetworkingV1().NetworkPolicies(v.Namespace).Create(ctx, v, o)
	case *networkingv1.Ingress:
		m, err = cs.NetworkingV1().Ingresses(v.Namespace).Create(ctx, v, o)
	case *appsv1.Deployment:
		m, err = cs.AppsV1().Deployments(v.Namespace).Create(ctx, v, o)
	case *appsv1.StatefulSet:
		m, err = cs.AppsV1().StatefulSets(v.Namespace).Create(ctx, v, o)
	case *batchv1.Job:
		m, err = cs.BatchV1().Jobs(v.Namespace).Create(ctx, v, o)
	default:
		return "", fmt.Errorf("plant: %T", obj)
	}
	if err != nil {
		return "", fmt.Errorf("plant %T: %w", obj, err)
	}
	return m.GetResourceVersion(), nil
}

// resourceVersions reads the planted objects' versions now. For a kind
// without a controller it is the resourceVersion; a Deployment's,
// StatefulSet's or Job's status is written by its controller whenever it
// likes, so theirs is what only a writer of the object changes: its
// generation (every spec change), labels, and the writers of anything but
// its status other than its controller (which annotates a Deployment).
func ResourceVersions(ctx context.Context, cs kubernetes.Interface, ns string, keys []string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		kind, name, _ := strings.Cut(k, "/")
		var m metav1.Object
		var err error
		g := metav1.GetOptions{}
		switch kind {
		case "Secret":
			m, err = cs.CoreV1().Secrets(ns).Get(ctx, name, g)
		case "ServiceAccount":
			m, err = cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, g)
		case "ConfigMap":
			m, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, name, g)
		case "Service":
			m, err = cs.CoreV1().Services(ns).Get(ctx, name, g)
		case "NetworkPolicy":
			m, err = cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, g)
		case "Ingress":
			m, err = cs.NetworkingV1().Ingresses(ns).Get(ctx, name, g)
		case "Deployment":
			m, err = cs.AppsV1().Deployments(ns).Get(ctx, name, g)
		case "StatefulSet":
			m, err = cs.AppsV1().StatefulSets(ns).Get(ctx, name, g)
		case "Job":
			m, err = cs.BatchV1().Jobs(ns).Get(ctx, name, g)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = m.GetResourceVersion()
		switch kind {
		case "Deployment", "StatefulSet", "Job":
			var writers []string
			for _, f := range m.GetManagedFields() {
				if f.Subresource != "status" && f.Manager != "kube-controller-manager" {
					writers = append(writers, f.Manager+":"+string(f.Operation))
				}
			}
			out[k] = fmt.Sprintf("generation %d, labels %v, written by %v", m.GetGeneration(), m.GetLabels(), writers)
		}
	}
	return out, nil
}

// agentLeftovers lists what of agent is in ns, by the provider's labels.
func AgentLeftovers(ctx context.Context, cs kubernetes.Interface, ns, agent string) ([]string, error) {
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + agent}
	var out []string
	add := func(kind string, n int, err error, name func(int) string) error {
		for i := 0; i < n && err == nil; i++ {
			out = append(out, kind+"/"+name(i))
		}
		return err
	}
	s, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
	if err = add("Secret", len(s.Items), err, func(i int) string { return s.Items[i].Name }); err != nil {
		return nil, err
	}
	sa, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, sel)
	if err = add("ServiceAccount", len(sa.Items), err, func(i int) string { return sa.Items[i].Name }); err != nil {
		return nil, err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err = add("ConfigMap", len(cm.Items), err, func(i int) string { return cm.Items[i].Name }); err != nil {
		return nil, err
	}
	np, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err = add("NetworkPolicy", len(np.Items), err, func(i int) string { return np.Items[i].Name }); err != nil {
		return nil, err
	}
	d, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	if err = add("Deployment", len(d.Items), err, func(i int) string { return d.Items[i].Name }); err != nil {
		return nil, err
	}
	svc, err := cs.CoreV1().Services(ns).List(ctx, sel)
	if err = add("Service", len(svc.Items), err, func(i int) string { return svc.Items[i].Name }); err != nil {
		return nil, err
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	if err = add("PersistentVolumeClaim", len(pvc.Items), err, func(i int) string { return pvc.Items[i].Name }); err != nil {
		return nil, err
	}
	return out, nil
}
