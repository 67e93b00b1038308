package render

import (
	"encoding/json"
	"strings"
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

func openShell() *admission.SandboxDriver {
	return &admission.SandboxDriver{Name: admission.DriverOpenShell, Facets: admission.Facets, RequiredProfile: "gpu-a"}
}

// nativeInput: dedicated native OpenClaw under OpenShell, openai/gpt-5.
func nativeInput(t *testing.T, method string) admission.Input {
	in := embeddedInput(t, "openai/gpt-5")
	in.Agent = admission.Agent{Name: "native", Harness: admission.HarnessOpenClaw, ExecutionMode: admission.ModeDedicated}
	in.Compute.SandboxDriver = openShell()
	if method == admission.MethodCredentialSource {
		in.Compute.CredentialGateway = &admission.CredentialGateway{Name: "cg-main"}
		in.Source = admission.CredentialSource{ID: "openai", Name: "openai", Method: admission.MethodCredentialSource, Generation: 1, SourceType: admission.SourceTypeOpenAIAPIKey}
	}
	return in
}

func sandboxedCodexInput(t *testing.T) admission.Input {
	in := codexInput(t, admission.MethodCredentialSource)
	in.Compute.SandboxDriver = openShell()
	in.Compute.CredentialGateway = &admission.CredentialGateway{Name: "cg-main"}
	in.Source = admission.CredentialSource{ID: "openai", Name: "openai", Method: admission.MethodCredentialSource, Generation: 1, SourceType: admission.SourceTypeOpenAIAPIKey}
	return in
}

// podJSON is everything a Pod template says, for "never mentions" checks.
func podJSON(t *testing.T, tmpl *corev1ac.PodTemplateSpecApplyConfiguration) string {
	t.Helper()
	b, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rules OS1, HM5, AU3, AU6: sandboxed dedicated Codex: the driver holds the
// harness in one Sandbox per revision; the harness sees a placeholder, no
// Secret is projected, and the Sandbox lists the gateway's attachment.
func TestOS1_SandboxedCodex(t *testing.T) {
	rev := admit(t, sandboxedCodexInput(t))
	objs, err := Kubernetes(rev, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Deployments) != 1 || *objs.Deployments[0].Name != GatewayName("coder") {
		t.Fatalf("deployments: only the gateway runs outside the sandbox, got %d", len(objs.Deployments))
	}
	if len(objs.Sandboxes) != 1 || objs.Sandboxes[0].Name != "coder-harness-r3" || objs.Sandboxes[0].Component != ComponentHarness {
		t.Fatalf("sandboxes = %+v", objs.Sandboxes)
	}
	sb := objs.Sandboxes[0]
	harness := podJSON(t, sb.Template)
	if strings.Contains(harness, "secretKeyRef") && strings.Contains(harness, "OPENAI_API_KEY\",\"valueFrom") {
		t.Error("a model Secret is projected into the sandboxed harness (AU3)")
	}
	env := envOf(&sb.Template.Spec.Containers[0])
	if v := env["OPENAI_API_KEY"]; v.Value == nil || *v.Value != admission.PlaceholderCredential {
		t.Errorf("harness OPENAI_API_KEY = %+v, want the placeholder", v)
	}
	if v := env["CODEX_LOGIN_MODE"]; v.Value == nil || *v.Value != "api_key_stdin" {
		t.Errorf("CODEX_LOGIN_MODE = %+v", v)
	}
	att, err := sandboxapi.DecodeAttachments(sb.Annotations[sandboxapi.AnnotationAttachments])
	if err != nil || len(att) != 1 || att[0].Name != "openai" || att[0].Gateway != "cg-main" || att[0].SourceType != admission.SourceTypeOpenAIAPIKey {
		t.Errorf("attachments = %+v, %v", att, err)
	}
	if sb.Annotations[sandboxapi.AnnotationRequiredProfile] != "gpu-a" || sb.Annotations[sandboxapi.AnnotationFacets] != "filesystem,networking,process" {
		t.Errorf("sandbox annotations = %v", sb.Annotations)
	}
	if sb.Labels[LabelRevision] != "3" || sb.Template.Labels[LabelComponent] != ComponentHarness {
		t.Errorf("identity labels: %v / %v", sb.Labels, sb.Template.Labels)
	}
	if strings.Contains(podJSON(t, objs.Deployments[0].Spec.Template), "OPENAI_API_KEY") { // AU6
		t.Error("the gateway receives the inference credential")
	}
	gw := objs.ConfigMaps[0].Data[ConfigFile]
	if !strings.Contains(gw, "ws://coder-harness-r3:18790") {
		t.Errorf("the gateway does not reach this revision's sandboxed harness: %s", gw)
	}
	obj, err := sb.Object("occ-acme")
	if err != nil {
		t.Fatal(err)
	}
	if obj["apiVersion"] != "agents.x-k8s.io/v1alpha1" || obj["kind"] != "Sandbox" {
		t.Errorf("object header = %v %v", obj["apiVersion"], obj["kind"])
	}
	spec := obj["spec"].(map[string]any)
	if spec["replicas"] != int64(1) || spec["service"] != true {
		t.Errorf("spec = %v", spec)
	}
	pt := spec["podTemplate"].(map[string]any)
	if _, ok := pt["spec"].(map[string]any)["containers"]; !ok {
		t.Errorf("podTemplate without containers: %v", pt)
	}
}

// rules ND1, ND2, ND4, HM4, HM6, AU6: native OpenClaw: the gateway is a
// Deployment with its own ServiceAccount that mounts only the enrollment
// verifier; the node host is in the revision's Sandbox with the one-use
// target (0400), node-local inference and its own storage; the worker gets
// no gateway token.
func TestND2_NativeOpenClawIsolation(t *testing.T) {
	for _, method := range []string{admission.MethodAPIKey, admission.MethodCredentialSource} {
		t.Run(method, func(t *testing.T) {
			rev := admit(t, nativeInput(t, method))
			objs, err := Kubernetes(rev, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.Deployments) != 1 || len(objs.Sandboxes) != 1 || objs.Sandboxes[0].Name != "native-node-r2" || objs.Sandboxes[0].Component != ComponentNode {
				t.Fatalf("objects: %d deployments, sandboxes %+v", len(objs.Deployments), objs.Sandboxes)
			}
			if objs.Enrollment == nil || objs.Enrollment.Target != "native-r2-enrollment" || objs.Enrollment.Gateway != "ws://native-gateway.occ-acme.svc:18789" {
				t.Fatalf("enrollment = %+v", objs.Enrollment)
			}
			if objs.InternalService == nil || *objs.InternalService.Name != "native-gateway" {
				t.Fatalf("internal gateway Service = %+v", objs.InternalService)
			}
			gwPod := objs.Deployments[0].Spec.Template
			nodePod := objs.Sandboxes[0].Template
			// Own ServiceAccounts, no token automount (HM4).
			if *gwPod.Spec.ServiceAccountName == *nodePod.Spec.ServiceAccountName || *gwPod.Spec.AutomountServiceAccountToken || *nodePod.Spec.AutomountServiceAccountToken {
				t.Errorf("service accounts: gateway %s node %s", *gwPod.Spec.ServiceAccountName, *nodePod.Spec.ServiceAccountName)
			}
			gw := podJSON(t, gwPod)
			for _, forbidden := range []string{"OPENAI_API_KEY", "native-r2-enrollment\"", "node-state", "secretKeyRef"} {
				if strings.Contains(gw, forbidden) { // ND2, AU6
					t.Errorf("the gateway Pod mentions %q: %s", forbidden, gw)
				}
			}
			if !strings.Contains(gw, "native-r2-enrollment-verifier") {
				t.Error("the gateway cannot verify the enrollment")
			}
			node := podJSON(t, nodePod)
			for _, forbidden := range []string{"OCC_APP_SERVER_TOKEN", "app-server-token", "enrollment-verifier"} {
				if strings.Contains(node, forbidden) { // ND2: no gateway token in the worker
					t.Errorf("the node Pod mentions %q", forbidden)
				}
			}
			var enrollMode int32
			for _, v := range nodePod.Spec.Volumes {
				if v.Secret != nil && *v.Secret.SecretName == "native-r2-enrollment" {
					enrollMode = *v.Secret.DefaultMode
				}
			}
			if enrollMode != 0o400 {
				t.Errorf("enrollment target mode = %o, want 0400 (a private file)", enrollMode)
			}
			args := strings.Join(nodePod.Spec.Containers[0].Args, " ")
			if !strings.Contains(args, "--connection=ephemeral") || !strings.Contains(args, "--workers=8") {
				t.Errorf("node args = %s", args)
			}
			env := envOf(&nodePod.Spec.Containers[0])
			key := env["OPENAI_API_KEY"]
			switch method {
			case admission.MethodAPIKey:
				if key.ValueFrom == nil || *key.ValueFrom.SecretKeyRef.Name != "llm" {
					t.Errorf("node OPENAI_API_KEY = %+v, want the Secret", key)
				}
			default:
				if key.Value == nil || *key.Value != admission.PlaceholderCredential || strings.Contains(node, "secretKeyRef") {
					t.Errorf("node OPENAI_API_KEY = %+v, want only the placeholder (AU3)", key)
				}
			}
			// Node configuration: node-local inference, placement, workers (ND4, HM6).
			var nodeDoc, gwDoc map[string]any
			for _, cm := range objs.ConfigMaps {
				var d map[string]any
				if err := json.Unmarshal([]byte(cm.Data[ConfigFile]), &d); err != nil {
					t.Fatal(err)
				}
				if *cm.Name == "native-node-r2" {
					nodeDoc = d
				} else {
					gwDoc = d
				}
			}
			if v, _ := occconfig.Lookup(nodeDoc, occconfig.Keys("cloudWorkers", "requiredProfile")); v != "gpu-a" {
				t.Errorf("node requiredProfile = %v", v)
			}
			if v, _ := occconfig.Lookup(nodeDoc, occconfig.Keys("node", "workers", "max")); v != float64(8) {
				t.Errorf("node workers = %v", v)
			}
			apiKey, _ := occconfig.Lookup(nodeDoc, occconfig.Keys("models", "providers", "openai", "apiKey"))
			if method == admission.MethodAPIKey {
				if m, ok := apiKey.(map[string]any); !ok || m["source"] != "env" || m["id"] != "OPENAI_API_KEY" {
					t.Errorf("node apiKey = %v, want an env SecretRef", apiKey)
				}
			} else if apiKey != admission.PlaceholderCredential {
				t.Errorf("node apiKey = %v, want the placeholder (AD2)", apiKey)
			}
			if _, ok := occconfig.Lookup(gwDoc, occconfig.Keys("models", "providers", "openai", "apiKey")); ok {
				t.Error("the gateway configuration holds a model credential reference (ND4)")
			}
		})
	}
}
