package kubeenv_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// The cluster serves the agent-sandbox module's own Sandbox CRD: its
// schema is upstream's (what the provider writes must pass it).
func TestSandboxCRDInstallIsIdempotentAndValidates(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := sandboxTestCtx(t, time.Minute)

	// Concurrent installs all succeed.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = c.InstallSandboxCRD(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("InstallSandboxCRD #%d: %v", i, err)
		}
	}
	resources, err := c.Clientset.Discovery().ServerResourcesForGroupVersion(sandboxapi.GroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	var served *metav1.APIResource
	for i := range resources.APIResources {
		if resources.APIResources[i].Name == sandboxapi.Resource {
			served = &resources.APIResources[i]
		}
	}
	if served == nil || served.Kind != sandboxapi.Kind || !served.Namespaced {
		t.Fatalf("discovery of %s: %+v, want namespaced %s", sandboxapi.GroupVersion, resources.APIResources, sandboxapi.Kind)
	}

	// The schema refuses what the API refuses …
	client := sandboxes(c, ns)
	strict := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	for name, mutate := range map[string]func(obj map[string]any){
		"bad-policy":   func(o map[string]any) { _ = unstructured.SetNestedField(o, "Explode", "spec", "shutdownPolicy") },
		"bad-mode":     func(o map[string]any) { _ = unstructured.SetNestedField(o, "Paused", "spec", "operatingMode") },
		"no-template":  func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "podTemplate") },
		"bad-time":     func(o map[string]any) { _ = unstructured.SetNestedField(o, "tomorrow", "spec", "shutdownTime") },
		"v1alpha1-ish": func(o map[string]any) { _ = unstructured.SetNestedField(o, int64(1), "spec", "replicas") }, // not in v1beta1
	} {
		sb := sandboxObject(ns, name, sandboxTemplate{})
		mutate(sb.Object)
		if _, err := client.Create(ctx, sb, strict); !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			t.Errorf("create %s: err = %v, want Invalid or BadRequest", name, err)
		}
	}

	// … and defaults operatingMode to Running.
	sb := sandboxObject(ns, "ok", sandboxTemplate{})
	_ = unstructured.SetNestedField(sb.Object, "Retain", "spec", "shutdownPolicy")
	_ = unstructured.SetNestedField(sb.Object, true, "spec", "service")
	got, err := client.Create(ctx, sb, strict)
	if err != nil {
		t.Fatal(err)
	}
	if m, _, _ := unstructured.NestedString(got.Object, "spec", "operatingMode"); m != "Running" {
		t.Errorf("spec.operatingMode = %q, want the default Running", m)
	}
	containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "podTemplate", "spec", "containers")
	if len(containers) != 1 {
		t.Errorf("containers = %v", containers)
	}
}

// The real controller runs the Sandbox's Pod and reports Ready; the test
// driver's extension reports the attachments beside it.
func TestSandboxDriverAttachesBesideTheRealController(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := sandboxTestCtx(t, 2*time.Minute)
	d := c.StartSandboxDriver(t, kubeenv.SandboxDriverOptions{Namespaces: []string{ns}})

	// The gateway: a selector-less Service and a ready endpoint.
	if d.GatewayService() != sandboxapi.DefaultGatewayService || !strings.HasPrefix(d.GatewayNamespace(), "openshell-") {
		t.Fatalf("gateway %s/%s, want openshell-*/%s", d.GatewayNamespace(), d.GatewayService(), sandboxapi.DefaultGatewayService)
	}
	svc, err := c.Clientset.CoreV1().Services(d.GatewayNamespace()).Get(ctx, d.GatewayService(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Selector) != 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "grpc" || svc.Spec.Ports[0].Port != 8080 {
		t.Fatalf("gateway Service spec %+v", svc.Spec)
	}
	if ready := gatewayReady(t, ctx, c, d); !ready {
		t.Fatal("gateway endpoint not ready at start")
	}

	attachments := []sandboxapi.Attachment{
		{Name: "openai", Gateway: "cg-main", SourceType: "openai_api_key", Env: "OPENAI_API_KEY"},
		{Name: "codex", Gateway: "cg-main", SourceType: "codex_oauth"},
	}
	tmpl := sandboxTemplate{
		labels:         map[string]string{"app.kubernetes.io/name": "agent", "occ-platform.io/agent": "a1"},
		podAnnotations: map[string]string{"example.com/note": "copied"},
		annotations:    map[string]string{sandboxapi.AnnotationAttachments: sandboxapi.EncodeAttachments(attachments)},
		service:        true,
	}
	created, err := sandboxes(c, ns).Create(ctx, sandboxObject(ns, "agent", tmpl), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	st := waitSandbox(t, c, ns, "agent", 30*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionTrue, sandboxapi.ReasonDependenciesReady) &&
			conditionIs(st, sandboxapi.AttachmentCondition("openai"), metav1.ConditionTrue, kubeenv.SandboxReasonAttached) &&
			conditionIs(st, sandboxapi.AttachmentCondition("codex"), metav1.ConditionTrue, kubeenv.SandboxReasonAttached)
	})
	if len(st.PodIPs) == 0 || st.Service != "agent" || st.ServiceFQDN != "agent."+ns+".svc.cluster.local" || st.Selector == "" {
		t.Errorf("status %+v", st)
	}
	ready := meta.FindStatusCondition(st.Conditions, sandboxapi.ConditionReady)
	if ready.ObservedGeneration != created.GetGeneration() {
		t.Errorf("Ready observedGeneration = %d, want %d", ready.ObservedGeneration, created.GetGeneration())
	}
	if msg := meta.FindStatusCondition(st.Conditions, sandboxapi.AttachmentCondition("codex")).Message; msg != "credential gateway cg-main attached codex_oauth" {
		t.Errorf("codex attachment message = %q", msg)
	}

	// The Pod, the controller's: named like the Sandbox, the template's
	// labels and annotations, controlled by the Sandbox.
	pod, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.APIVersion != sandboxapi.GroupVersion || owner.Kind != sandboxapi.Kind || owner.Name != "agent" || owner.UID != created.GetUID() {
		t.Errorf("pod owner references %+v", pod.OwnerReferences)
	}
	for k, v := range tmpl.labels {
		if pod.Labels[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Annotations["example.com/note"] != "copied" || len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != sandboxImage {
		t.Errorf("pod annotations %v containers %+v", pod.Annotations, pod.Spec.Containers)
	}

	// A failing attachment turns False; the others and Ready keep their
	// lastTransitionTime.
	d.FailAttachment("openai", "KeyUnavailable", "the key of cg-main is not readable")
	st2 := waitSandbox(t, c, ns, "agent", 10*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.AttachmentCondition("openai"), metav1.ConditionFalse, "KeyUnavailable")
	})
	if cond := meta.FindStatusCondition(st2.Conditions, sandboxapi.AttachmentCondition("openai")); cond.Message != "the key of cg-main is not readable" {
		t.Errorf("failed attachment message = %q", cond.Message)
	}
	for _, typ := range []string{sandboxapi.ConditionReady, sandboxapi.AttachmentCondition("codex")} {
		before, after := meta.FindStatusCondition(st.Conditions, typ), meta.FindStatusCondition(st2.Conditions, typ)
		if after == nil || after.Status != metav1.ConditionTrue || !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
			t.Errorf("%s: before %+v after %+v, want unchanged", typ, before, after)
		}
	}

	// Dropping an attachment drops its condition; a malformed annotation
	// replaces them all with the invalid condition.
	setAnnotation(t, ctx, c, ns, "agent", sandboxapi.AnnotationAttachments, sandboxapi.EncodeAttachments(attachments[1:]))
	waitSandbox(t, c, ns, "agent", 10*time.Second, func(st sandboxStatus) bool {
		return meta.FindStatusCondition(st.Conditions, sandboxapi.AttachmentCondition("openai")) == nil &&
			conditionIs(st, sandboxapi.AttachmentCondition("codex"), metav1.ConditionTrue, kubeenv.SandboxReasonAttached)
	})
	setAnnotation(t, ctx, c, ns, "agent", sandboxapi.AnnotationAttachments, `[{"name":`)
	waitSandbox(t, c, ns, "agent", 10*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, kubeenv.ConditionInvalidAttachments, metav1.ConditionFalse, kubeenv.SandboxReasonInvalidAnnotation) &&
			meta.FindStatusCondition(st.Conditions, sandboxapi.AttachmentCondition("codex")) == nil &&
			conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionTrue, sandboxapi.ReasonDependenciesReady)
	})

	// The Pod deleted (what a restart does): the controller makes it again
	// and the Sandbox is Ready again.
	if err := c.Clientset.CoreV1().Pods(ns).Delete(ctx, "agent", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err == nil && p.UID != pod.UID && kubeenv.PodReady(p) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new ready Pod after deleting the Sandbox's: %v\n--- agent-sandbox-controller log ---\n%s", err, c.LogTail(kubeenv.BinAgentSandbox, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Deleting the Sandbox: the garbage collector deletes its Pod.
	if err := sandboxes(c, ns).Delete(ctx, "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, c, ns, "agent", 30*time.Second)
}

// An outage: the gateway's endpoint turns unready and the extension writes
// nothing; the controller, upstream's, goes on. After it the driver
// catches up.
func TestSandboxDriverOutageHoldsAttachmentsAndFlipsTheEndpoint(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := sandboxTestCtx(t, 2*time.Minute)
	d := c.StartSandboxDriver(t, kubeenv.SandboxDriverOptions{Namespaces: []string{ns}})
	withAttachment := sandboxTemplate{annotations: map[string]string{sandboxapi.AnnotationAttachments: sandboxapi.EncodeAttachments(
		[]sandboxapi.Attachment{{Name: "openai", Gateway: "cg-main", SourceType: "openai_api_key", Env: "OPENAI_API_KEY"}})}}

	if err := d.SetOutage(ctx, true); err != nil {
		t.Fatal(err)
	}
	if gatewayReady(t, ctx, c, d) {
		t.Fatal("gateway endpoint still ready during the outage")
	}
	if _, err := sandboxes(c, ns).Create(ctx, sandboxObject(ns, "during", withAttachment), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitSandbox(t, c, ns, "during", 30*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionTrue, sandboxapi.ReasonDependenciesReady)
	})
	time.Sleep(time.Second)
	if st = readSandbox(t, ctx, c, ns, "during"); meta.FindStatusCondition(st.Conditions, sandboxapi.AttachmentCondition("openai")) != nil {
		t.Fatalf("attachment written during the outage: %+v", st)
	}

	if err := d.SetOutage(ctx, false); err != nil {
		t.Fatal(err)
	}
	if !gatewayReady(t, ctx, c, d) {
		t.Fatal("gateway endpoint not ready after the outage")
	}
	waitSandbox(t, c, ns, "during", 20*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.AttachmentCondition("openai"), metav1.ConditionTrue, kubeenv.SandboxReasonAttached) &&
			conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionTrue, sandboxapi.ReasonDependenciesReady)
	})
}

// The extension places a Sandbox's gated Pod by its required profile, or
// refuses a facet or a profile it lacks and leaves the Pod gated.
func TestSandboxDriverPlacesByProfileOrRefuses(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := sandboxTestCtx(t, 2*time.Minute)
	d := c.StartSandboxDriver(t, kubeenv.SandboxDriverOptions{Namespaces: []string{ns},
		Facets:   []string{"networking", "filesystem"},
		Profiles: map[string]map[string]string{"first-node": {"kubernetes.io/hostname": c.Nodes[0]}}})

	gated := func(name, facets, profile string) *unstructured.Unstructured {
		ann := map[string]string{sandboxapi.AnnotationFacets: facets}
		if profile != "" {
			ann[sandboxapi.AnnotationRequiredProfile] = profile
		}
		sb := sandboxObject(ns, name, sandboxTemplate{annotations: ann})
		_ = unstructured.SetNestedSlice(sb.Object, []any{map[string]any{"name": sandboxapi.SchedulingGate}}, "spec", "podTemplate", "spec", "schedulingGates")
		if _, err := sandboxes(c, ns).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return sb
	}

	gated("placed", "networking,filesystem", "first-node")
	waitSandbox(t, c, ns, "placed", 30*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.ConditionPlaced, metav1.ConditionTrue, sandboxapi.ReasonPlaced) &&
			conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionTrue, sandboxapi.ReasonDependenciesReady)
	})
	pod, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "placed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.SchedulingGates) != 0 || pod.Spec.NodeSelector["kubernetes.io/hostname"] != c.Nodes[0] || pod.Spec.NodeName != c.Nodes[0] {
		t.Errorf("pod gates %v, node selector %v, node %q; want released onto %s", pod.Spec.SchedulingGates, pod.Spec.NodeSelector, pod.Spec.NodeName, c.Nodes[0])
	}

	for name, want := range map[string]struct{ facets, profile, reason, says string }{
		"no-process": {"networking,filesystem,process", "first-node", sandboxapi.ReasonFacetUnsupported, "not process"},
		"no-profile": {"networking", "gpu-b", sandboxapi.ReasonProfileUnavailable, `no placement profile "gpu-b" (it has first-node)`},
	} {
		gated(name, want.facets, want.profile)
		st := waitSandbox(t, c, ns, name, 30*time.Second, func(st sandboxStatus) bool {
			return conditionIs(st, sandboxapi.ConditionPlaced, metav1.ConditionFalse, want.reason)
		})
		if msg := meta.FindStatusCondition(st.Conditions, sandboxapi.ConditionPlaced).Message; !strings.Contains(msg, want.says) {
			t.Errorf("%s: Placed message %q, want it to say %q", name, msg, want.says)
		}
		time.Sleep(500 * time.Millisecond)
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the controller made no Pod: %v", name, err)
		}
		if len(p.Spec.SchedulingGates) != 1 || p.Spec.NodeName != "" {
			t.Errorf("%s: refused Pod gates %v node %q, want it still gated", name, p.Spec.SchedulingGates, p.Spec.NodeName)
		}
	}
	if got := d.Placed(); len(got) != 1 || got[0] != ns+"/placed" {
		t.Errorf("Placed() = %v", got)
	}
}

// What the real controller reports while a Pod is not ready, and for a Pod
// the API server refuses, and how sandboxapi.Terminal reads each.
func TestSandboxControllerReasonsAsTheProviderReadsThem(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := sandboxTestCtx(t, 2*time.Minute)
	c.StartSandboxDriver(t, kubeenv.SandboxDriverOptions{Namespaces: []string{ns}})

	// Not ready yet: progress, not terminal; the attachments the extension
	// wrote survive the controller's status writes.
	tmpl := sandboxTemplate{podAnnotations: kubeenv.Behavior(kubeenv.BehaviorReadyAfter, 3*time.Second),
		annotations: map[string]string{sandboxapi.AnnotationAttachments: sandboxapi.EncodeAttachments(
			[]sandboxapi.Attachment{{Name: "openai", Gateway: "cg-main", SourceType: "openai_api_key", Env: "OPENAI_API_KEY"}})}}
	if _, err := sandboxes(c, ns).Create(ctx, sandboxObject(ns, "slow", tmpl), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitSandbox(t, c, ns, "slow", 20*time.Second, func(st sandboxStatus) bool {
		r := meta.FindStatusCondition(st.Conditions, sandboxapi.ConditionReady)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == sandboxapi.ReasonDependenciesNotReady
	})
	if r := meta.FindStatusCondition(st.Conditions, sandboxapi.ConditionReady); sandboxapi.Terminal(r.Reason, r.Message) {
		t.Errorf("Terminal(%q, %q) = true for a Pod still starting", r.Reason, r.Message)
	}
	waitSandbox(t, c, ns, "slow", 30*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionTrue, sandboxapi.ReasonDependenciesReady) &&
			conditionIs(st, sandboxapi.AttachmentCondition("openai"), metav1.ConditionTrue, kubeenv.SandboxReasonAttached)
	})

	// A template the API server refuses as a Pod: ReconcilerError with the
	// refusal, which Terminal reads as final.
	bad := sandboxObject(ns, "bad", sandboxTemplate{})
	_ = unstructured.SetNestedField(bad.Object, "Sometimes", "spec", "podTemplate", "spec", "restartPolicy")
	if _, err := sandboxes(c, ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st = waitSandbox(t, c, ns, "bad", 20*time.Second, func(st sandboxStatus) bool {
		return conditionIs(st, sandboxapi.ConditionReady, metav1.ConditionFalse, sandboxapi.ReasonReconcilerError)
	})
	r := meta.FindStatusCondition(st.Conditions, sandboxapi.ConditionReady)
	if !sandboxapi.Terminal(r.Reason, r.Message) || !strings.Contains(r.Message, "restartPolicy") {
		t.Errorf("Ready = %s: %s; want a terminal refusal naming restartPolicy", r.Reason, r.Message)
	}
}

// --- helpers ---

const sandboxImage = "registry.example/occ/runtime:1"

func sandboxTestCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func sandboxes(c *kubeenv.Cluster, ns string) dynamic.ResourceInterface {
	return c.Dynamic.Resource(sandboxapi.GVR).Namespace(ns)
}

// sandboxTemplate is what a test Sandbox varies.
type sandboxTemplate struct {
	labels         map[string]string // of the Pod template
	podAnnotations map[string]string // of the Pod template
	annotations    map[string]string // of the Sandbox
	service        bool              // spec.service
}

// sandboxObject is a Sandbox with one container in its Pod template.
func sandboxObject(ns, name string, tmpl sandboxTemplate) *unstructured.Unstructured {
	anyMap := func(m map[string]string) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	metadata := map[string]any{"name": name, "namespace": ns}
	if tmpl.annotations != nil {
		metadata["annotations"] = anyMap(tmpl.annotations)
	}
	spec := map[string]any{
		"podTemplate": map[string]any{
			"metadata": map[string]any{"labels": anyMap(tmpl.labels), "annotations": anyMap(tmpl.podAnnotations)},
			"spec": map[string]any{
				"containers": []any{map[string]any{"name": "runtime", "image": sandboxImage}},
			},
		},
	}
	if tmpl.service {
		spec["service"] = true
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sandboxapi.GroupVersion,
		"kind":       sandboxapi.Kind,
		"metadata":   metadata,
		"spec":       spec,
	}}
}

// sandboxStatus is a Sandbox's status, as the tests read it.
type sandboxStatus struct {
	Conditions  []metav1.Condition `json:"conditions"`
	Selector    string             `json:"selector"`
	PodIPs      []string           `json:"podIPs"`
	ServiceFQDN string             `json:"serviceFQDN"`
	Service     string             `json:"service"`
}

func readSandbox(t *testing.T, ctx context.Context, c *kubeenv.Cluster, ns, name string) sandboxStatus {
	t.Helper()
	sb, err := sandboxes(c, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return statusOf(t, sb)
}

func statusOf(t *testing.T, sb *unstructured.Unstructured) sandboxStatus {
	t.Helper()
	var st sandboxStatus
	if m, ok := sb.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
			t.Fatalf("status of %s: %v", sb.GetName(), err)
		}
	}
	return st
}

// waitSandbox polls the Sandbox until cond holds, failing with its last
// status after timeout.
func waitSandbox(t *testing.T, c *kubeenv.Cluster, ns, name string, timeout time.Duration, cond func(sandboxStatus) bool) sandboxStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sb, err := sandboxes(c, ns).Get(context.Background(), name, metav1.GetOptions{})
		var st sandboxStatus
		if err == nil {
			st = statusOf(t, sb)
			if cond(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			state, _ := json.MarshalIndent(st, "", "  ")
			t.Fatalf("sandbox %s/%s: condition not met after %s (get error: %v); status:\n%s", ns, name, timeout, err, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func conditionIs(st sandboxStatus, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(st.Conditions, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

func waitPodGone(t *testing.T, c *kubeenv.Cluster, ns, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := c.Clientset.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s still there after %s (err %v)\n--- kube-controller-manager log ---\n%s",
				ns, name, timeout, err, c.LogTail(kubeenv.BinControllerManager, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func setAnnotation(t *testing.T, ctx context.Context, c *kubeenv.Cluster, ns, name, key, value string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if _, err := sandboxes(c, ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gatewayReady reads the gateway's EndpointSlice: its one endpoint's ready
// condition.
func gatewayReady(t *testing.T, ctx context.Context, c *kubeenv.Cluster, d *kubeenv.SandboxDriver) bool {
	t.Helper()
	list, err := c.Clientset.DiscoveryV1().EndpointSlices(d.GatewayNamespace()).List(ctx, metav1.ListOptions{
		LabelSelector: sandboxapi.LabelServiceName + "=" + d.GatewayService(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d EndpointSlices for the gateway, want 1", len(list.Items))
	}
	s := list.Items[0]
	if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 ||
		s.Endpoints[0].Addresses[0] != "10.0.0.1" || s.Endpoints[0].Conditions.Ready == nil {
		t.Fatalf("gateway EndpointSlice %+v", s)
	}
	if len(s.Ports) != 1 || s.Ports[0].Name == nil || *s.Ports[0].Name != "grpc" || s.Ports[0].Port == nil || *s.Ports[0].Port != 8080 ||
		s.Ports[0].Protocol == nil || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Fatalf("gateway EndpointSlice ports %+v", s.Ports)
	}
	return *s.Endpoints[0].Conditions.Ready
}
