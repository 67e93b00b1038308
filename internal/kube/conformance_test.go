package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/executor/conformance"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestConformance runs the executor contract's conformance suite against
// the Kubernetes executor on the shared kwok control plane: a namespace
// per case, the runtimes' behaviours simulated by kwok (kubeenv.Behavior),
// a held code written into the gateway container's log as the runtime
// writes its startup record.
//
//	go test ./internal/kube -run '^TestConformance$' -v
func TestConformance(t *testing.T) {
	c := kubeenv.Shared(t)
	exec, err := New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, conformance.Kind{
		Name:     "kubernetes",
		Executor: exec,
		NewPlace: func(t *testing.T) *conformance.Place { return kubePlace(t, c) },
		HeldCode: executor.CodeRuntime(runtimerecord.CodeModelProbeTimeout),
		FailCode: executor.CrashLoop,
		// AC1: the failed revision's Pod never became ready, so the rolling
		// update kept revision 1's Pod; the Service still selects it, and
		// the gateway Deployment runs revision 2, written but never
		// activated.
		AfterFailedUpdate: conformance.Observation{Revision: 1, Drifts: []executor.DriftReason{executor.DriftUnfinished}},
		RemovedDrift:      executor.DriftWorkload,
		EditedDrift:       executor.DriftEdited,
		// AC4: the Service keeps the activation time of the revision it
		// already serves.
		KeepsActivationTime: true,
		// NAMESPACE/NAME is asked last and takes every id with a slash.
		ForeignIDs:       []string{"10.0.0.5/support", "127.0.0.1:2222/support", "ssh://edge/support", "[fe80::1]:22/support"},
		ClaimsForeignIDs: true,
	})
}

// The annotations by which a revision's Pods are told apart: a content
// variant, and the held code the test writes into their log.
const (
	annotationVariant = "conformance.occ.dev/variant"
	annotationHeld    = "conformance.occ.dev/held"
)

// heldRecord is the startup record of a probe that timed out (PR6, PR7).
const heldRecord = `{"event":"openclaw.model_probe","container":"gateway","code":"MODEL_PROBE_TIMEOUT","final":true}`

// kubePlace is a namespace of the case's own on the shared control plane.
func kubePlace(t *testing.T, c *kubeenv.Cluster) *conformance.Place {
	ns := c.TestNamespace(t)
	compute := admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi"}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var holdOnce sync.Once
	cs := c.Clientset
	return &conformance.Place{
		Compute: compute,
		Where:   ns,
		ID:      func(name string) string { return AgentID(compute, name) },
		Revision: func(t *testing.T, name string, variant int, b conformance.Behaviour) *admission.Revision {
			t.Helper()
			var ann map[string]string
			switch b {
			case conformance.Ready:
				ann = map[string]string{}
			case conformance.Slow:
				ann = kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 8*time.Second)
			case conformance.Held:
				ann = kubeenv.Behavior(kubeenv.BehaviorNeverReady, 0)
				ann[annotationHeld] = "true"
				holdOnce.Do(func() { go holdPods(ctx, c, ns) })
			case conformance.Fails:
				ann = kubeenv.Behavior(kubeenv.BehaviorCrashLoop, 0)
			default:
				t.Fatalf("no behaviour %v on kwok", b)
			}
			ann[annotationVariant] = strconv.Itoa(variant)
			return conformanceRevision(t, name, compute, ann)
		},
		Remove: func(ctx context.Context, t *testing.T, name string) {
			t.Helper()
			if err := cs.AppsV1().Deployments(ns).Delete(ctx, render.GatewayName(name), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete the gateway Deployment by hand: %v", err)
			}
		},
		Edit: func(ctx context.Context, t *testing.T, name string) {
			t.Helper()
			patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"` + render.AnnotationRevisionID + `":"edited-by-hand"}}}}}`)
			if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, render.GatewayName(name), types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
				t.Fatalf("edit the gateway Deployment by hand: %v", err)
			}
		},
		LookAlike: func(ctx context.Context, t *testing.T, name string) {
			t.Helper()
			// A Service named like the agent's, without the provider's
			// labels; one that bears the agent label but not managed-by.
			for _, svc := range []*corev1.Service{
				{ObjectMeta: metav1.ObjectMeta{Name: name + "s"}},
				{ObjectMeta: metav1.ObjectMeta{Name: name + "x", Labels: map[string]string{render.LabelAgent: name + "x"}}},
			} {
				svc.Spec = corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: render.GatewayPort}}}
				if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create look-alike Service %s: %v", svc.Name, err)
				}
			}
		},
		Leftovers: func(ctx context.Context, t *testing.T, name string) []string {
			t.Helper()
			return kubeLeftovers(ctx, t, c, ns, name)
		},
		Incarnation: func(ctx context.Context, t *testing.T, name string) string {
			t.Helper()
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + name})
			if err != nil {
				t.Fatalf("list the agent's Pods: %v", err)
			}
			var uids []string
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					uids = append(uids, string(p.UID))
				}
			}
			slices.Sort(uids)
			return strings.Join(uids, ",")
		},
		Unreachable: func(t *testing.T) (executor.Executor, admission.Compute) {
			t.Helper()
			cfg := rest.CopyConfig(c.Config)
			cfg.Host = "https://127.0.0.1:1" // nothing listens there
			ex, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return ex, compute
		},
	}
}

// conformanceRevision admits an embedded OpenClaw revision of agent name
// whose Pods carry annotations.
func conformanceRevision(t *testing.T, name string, c admission.Compute, annotations map[string]string) *admission.Revision {
	t.Helper()
	c = c.WithKubernetes(func(k *admission.KubernetesCompute) { k.PodAnnotations = annotations })
	return conformance.EmbeddedRevision(t, name, c, admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1,
		SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}}, "")
}

// holdPods writes the held startup record into the gateway log of every
// Pod in ns whose template asks for it, as the runtime would, until ctx
// ends.
func holdPods(ctx context.Context, c *kubeenv.Cluster, ns string) {
	done := map[string]bool{}
	for ctx.Err() == nil {
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if p.Annotations[annotationHeld] != "true" || done[p.Name] {
					continue
				}
				lines := []string{`{"time":"x","level":"info","message":"starting"}`, heldRecord}
				if c.SetPodLogs(ctx, ns, p.Name, render.ComponentGateway, lines) == nil {
					done[p.Name] = true
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kubeLeftovers lists every object of agent name in ns that the executor
// writes (by the agent label, as Delete removes them) and its Pods, each
// with the revision it belongs to. The audit Events are not listed: they
// are the activation record (AC4), kept after the agent as a cluster keeps
// Events, until they expire.
func kubeLeftovers(ctx context.Context, t *testing.T, c *kubeenv.Cluster, ns, name string) []string {
	t.Helper()
	cs := c.Clientset
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + name}
	var out []string
	must := func(kind string, err error) {
		if err != nil {
			t.Fatalf("list the %s of %s: %v", kind, name, err)
		}
	}
	rev := func(m metav1.ObjectMeta) string { return " r" + m.Labels[render.LabelRevision] }
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	must("Deployments", err)
	for _, d := range deps.Items {
		out = append(out, "Deployment "+d.Name+" runs r"+d.Spec.Template.Labels[render.LabelRevision])
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, sel)
	must("Services", err)
	for _, s := range svcs.Items {
		out = append(out, "Service "+s.Name+" selects r"+s.Spec.Selector[render.LabelRevision])
	}
	cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, sel)
	must("ConfigMaps", err)
	for _, o := range cms.Items {
		out = append(out, "ConfigMap "+o.Name+rev(o.ObjectMeta))
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
	must("Secrets", err)
	for _, o := range secrets.Items {
		out = append(out, "Secret "+o.Name)
	}
	sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, sel)
	must("ServiceAccounts", err)
	for _, o := range sas.Items {
		out = append(out, "ServiceAccount "+o.Name)
	}
	nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	must("NetworkPolicies", err)
	for _, o := range nps.Items {
		out = append(out, "NetworkPolicy "+o.Name)
	}
	pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	must("PersistentVolumeClaims", err)
	for _, o := range pvcs.Items {
		out = append(out, "PersistentVolumeClaim "+o.Name)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
	must("Pods", err)
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("Pod of %s%s", p.Labels[render.LabelComponent], rev(p.ObjectMeta)))
	}
	return out
}
