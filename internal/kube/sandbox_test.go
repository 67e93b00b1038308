package kube

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

func sandboxWith(attachments string, conds ...map[string]any) *unstructured.Unstructured {
	raw := make([]any, len(conds))
	for i, c := range conds {
		raw[i] = c
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "coder-harness-r1", "labels": map[string]any{render.LabelComponent: render.ComponentHarness}},
		"status":   map[string]any{"conditions": raw},
	}}
	if attachments != "" {
		u.SetAnnotations(map[string]string{sandboxapi.AnnotationAttachments: attachments})
	}
	return u
}

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": "2026-11-29T00:00:00Z"}
}

// rules AU3, OS1: a sandboxed revision activates only when the driver
// reports its Sandbox Ready and every attachment attached; a failed
// attachment or a refusal by the driver fails at once.
func TestAU3_SandboxVerdict(t *testing.T) {
	att := sandboxapi.EncodeAttachments([]sandboxapi.Attachment{{Name: "openai", Gateway: "cg-main", SourceType: "openai_api_key"}})
	attached := cond(sandboxapi.AttachmentCondition("openai"), "True", "Attached", "")
	tests := []struct {
		name     string
		sb       *unstructured.Unstructured
		ready    bool
		waiting  string
		failCode executor.Code
	}{
		{"no status yet", sandboxWith(att), false, "the driver has not reported the Sandbox ready", ""},
		{"ready, attachment pending", sandboxWith(att, cond("Ready", "True", "PodReady", "")), false, "waiting for credential attachments: openai", ""},
		{"ready and attached", sandboxWith(att, cond("Ready", "True", "PodReady", ""), attached), true, "", ""},
		{"ready without attachments", sandboxWith("", cond("Ready", "True", "PodReady", "")), true, "", ""},
		{"attached, pod not ready", sandboxWith(att, cond("Ready", "False", "PodNotReady", "starting"), attached), false, "the driver has not reported the Sandbox ready (PodNotReady: starting)", ""},
		{"attachment failed", sandboxWith(att, cond("Ready", "True", "PodReady", ""), cond(sandboxapi.AttachmentCondition("openai"), "False", "KeyNotFound", "no key")), false, "", CodeAttachmentFailed},
		{"driver refuses", sandboxWith(att, cond("Ready", "False", "Unsupported", "projected tokens are not supported")), false, "", CodeSandboxRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready, waiting, f := sandboxVerdict(tc.sb)
			if ready != tc.ready || waiting != tc.waiting {
				t.Errorf("verdict = %v %q, want %v %q", ready, waiting, tc.ready, tc.waiting)
			}
			switch {
			case tc.failCode == "" && f != nil:
				t.Errorf("failure %+v", f)
			case tc.failCode != "" && (f == nil || f.Code != tc.failCode || f.Next == "" || f.Reason == ""):
				t.Errorf("failure = %+v, want code %s with reason and next step", f, tc.failCode)
			}
		})
	}
}

// nativeRevision admits dedicated native OpenClaw in namespace ns.
func nativeRevision(t *testing.T, ns string) *admission.Revision {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "openai/gpt-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "native", Harness: admission.HarnessOpenClaw, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute: admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Namespace: ns, CPUMillis: 1000, MemoryLimit: "1Gi",
			SandboxDriver: &admission.SandboxDriver{Name: admission.DriverOpenShell, Facets: admission.Facets, RequiredProfile: "p"}},
		Source: admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rev
}

// rule ND2: a native revision's enrollment: the node's Secret holds the
// broker's URL and the one-use token, the broker's only the token's
// digest, and no other Secret holds the token; the agent's gateway token
// is made once and outlives revisions. A repeated deploy keeps them all,
// and the internal gateway Service gets the broker's port even where an
// earlier version made it without.
func TestND2_EnrollmentSecrets(t *testing.T) {
	c := testkube.Shared(t)
	ns := c.TestNamespace(t)
	ctx := context.Background()
	cs := c.Clientset
	rev := nativeRevision(t, ns)
	objs, err := render.Kubernetes(rev, 1)
	if err != nil {
		t.Fatal(err)
	}
	// An internal Service as an earlier version created it: the gateway's port only.
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: render.GatewayInternalName("native"), Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: render.Selector("native", render.ComponentGateway), Ports: []corev1.ServicePort{{Name: "http", Port: render.GatewayPort}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, old, metav1.CreateOptions{FieldManager: render.FieldManager}); err != nil {
		t.Fatal(err)
	}
	e := &Executor{Client: cs}
	read := func() (target enrollment.Target, digest, gwToken string) {
		t.Helper()
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, objs.Enrollment.Target, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Immutable == nil || !*s.Immutable {
			t.Error("the enrollment target is mutable")
		}
		if target, err = enrollment.Decode(s.Data[render.EnrollmentFile]); err != nil {
			t.Fatal(err)
		}
		v, err := cs.CoreV1().Secrets(ns).Get(ctx, objs.Enrollment.Verifier, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v.Immutable == nil || !*v.Immutable || len(v.Data) != 1 {
			t.Errorf("verifier Secret: immutable %v, keys %d", v.Immutable, len(v.Data))
		}
		g, err := cs.CoreV1().Secrets(ns).Get(ctx, render.GatewayTokenSecret("native"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := g.Labels[render.LabelRevision]; ok {
			t.Error("the gateway token carries a revision: retiring would remove it")
		}
		return target, string(v.Data[render.VerifierFile]), string(g.Data[render.GatewayTokenKey])
	}
	for i := 0; i < 2; i++ {
		// Deploy creates the gateway's token (every gateway has one) before
		// the enrollment.
		if _, err := e.ensureToken(ctx, ns, "native", render.GatewayTokenSecret("native"), render.GatewayTokenKey, render.ComponentGateway); err != nil {
			t.Fatal(err)
		}
		if err := e.ensureEnrollment(ctx, ns, rev, 1, objs.Enrollment); err != nil {
			t.Fatal(err)
		}
		if err := e.ensureInternalService(ctx, objs); err != nil {
			t.Fatal(err)
		}
	}
	target, digest, gwToken := read()
	if target.URL != objs.Enrollment.URL || len(target.Token) != 64 {
		t.Errorf("target = %s with a %d-character token", target.URL, len(target.Token))
	}
	if !enrollment.Verify(target.Token, digest) || digest == target.Token {
		t.Error("the verifier does not verify the token, or is the token")
	}
	if len(gwToken) != 64 || gwToken == target.Token {
		t.Errorf("gateway token of %d characters", len(gwToken))
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if s.Name != objs.Enrollment.Target && strings.Contains(string(v), target.Token) {
				t.Errorf("Secret %s/%s holds the node's token", s.Name, k)
			}
		}
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, render.GatewayInternalName("native"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p.Port
	}
	if ports["http"] != render.GatewayPort || ports["enrollment"] != render.EnrollPort || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("internal gateway Service ports = %v, not-ready addresses published: %v", ports, svc.Spec.PublishNotReadyAddresses)
	}
}
