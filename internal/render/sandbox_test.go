package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

func openShell() *admission.SandboxDriver {
	return &admission.SandboxDriver{Name: admission.DriverOpenShell, Facets: admission.Facets, RequiredProfile: "gpu-a"}
}

func sandboxedCodexInput(t *testing.T) admission.Input {
	in := codexInput(t, admission.MethodCredentialSource)
	in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.SandboxDriver = openShell() })
	in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) {
		k.CredentialGateway = &admission.CredentialGateway{Name: "cg-main"}
	})
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
	objs, err := Kubernetes(rev, 3, admission.Compute{})
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
	if obj["apiVersion"] != "agents.x-k8s.io/v1beta1" || obj["kind"] != "Sandbox" {
		t.Errorf("object header = %v %v", obj["apiVersion"], obj["kind"])
	}
	spec := obj["spec"].(map[string]any)
	// v1beta1 has no replicas: operatingMode defaults to Running.
	if _, has := spec["replicas"]; has || spec["service"] != true || len(spec) != 2 {
		t.Errorf("spec = %v, want podTemplate and service only", spec)
	}
	pt := spec["podTemplate"].(map[string]any)
	if _, ok := pt["spec"].(map[string]any)["containers"]; !ok {
		t.Errorf("podTemplate without containers: %v", pt)
	}
}

// Every Pod names each port once: a second "http" is refused by nothing
// but warned about by the API server (seen on the real node), and a probe
// or Service that named it would reach another container instead.
func TestRender_PortNamesAreUniqueInEveryPod(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
	} {
		objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		var pods []*corev1ac.PodTemplateSpecApplyConfiguration
		for _, d := range objs.Deployments {
			pods = append(pods, d.Spec.Template)
		}
		for _, s := range objs.Sandboxes {
			pods = append(pods, s.Template)
		}
		for _, p := range pods {
			seen := map[string]string{}
			for _, c := range p.Spec.Containers {
				for _, port := range c.Ports {
					if port.Name == nil {
						continue
					}
					if other, dup := seen[*port.Name]; dup {
						t.Errorf("%s: containers %s and %s both name a port %q", name, other, *c.Name, *port.Name)
					}
					seen[*port.Name] = *c.Name
				}
			}
		}
	}
}

// rule AU7: the Secret keys quoted log lines are redacted against are
// every key a Pod of the revision receives, the Sandboxes' Pods included:
// a rendered sandboxed harness's token volume, and a Sandbox-only Secret
// in each form a Pod can take it (env, envFrom, Secret and projected
// volumes, init containers).
func TestAU7_SecretRefsIncludeSandboxes(t *testing.T) {
	rev := admit(t, sandboxedCodexInput(t))
	objs, err := Kubernetes(rev, 3, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	harnessOnly := &Objects{Sandboxes: objs.Sandboxes}
	if refs := harnessOnly.SecretRefs(); !refs[AppServerTokenSecret("coder")][AppServerTokenKey] {
		t.Errorf("the sandboxed harness's app-server token is not learnt: %v", refs)
	}

	secretEnv := corev1ac.EnvVar().WithName("K").WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(corev1ac.SecretKeySelector().WithName("env-secret").WithKey("k")))
	tmpl := corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
		WithInitContainers(corev1ac.Container().WithName("init").WithEnv(corev1ac.EnvVar().WithName("I").WithValueFrom(
			corev1ac.EnvVarSource().WithSecretKeyRef(corev1ac.SecretKeySelector().WithName("init-secret").WithKey("i"))))).
		WithContainers(corev1ac.Container().WithName("c").WithEnv(secretEnv).
			WithEnvFrom(corev1ac.EnvFromSource().WithSecretRef(corev1ac.SecretEnvSource().WithName("envfrom-secret")))).
		WithVolumes(
			corev1ac.Volume().WithName("whole").WithSecret(corev1ac.SecretVolumeSource().WithSecretName("volume-secret")),
			corev1ac.Volume().WithName("items").WithSecret(corev1ac.SecretVolumeSource().WithSecretName("items-secret").
				WithItems(corev1ac.KeyToPath().WithKey("a").WithPath("a"))),
			corev1ac.Volume().WithName("projected").WithProjected(corev1ac.ProjectedVolumeSource().WithSources(
				corev1ac.VolumeProjection().WithSecret(corev1ac.SecretProjection().WithName("projected-secret"))))))
	got := (&Objects{Sandboxes: []*Sandbox{{Name: "s", Template: tmpl}}}).SecretRefs()
	want := map[string]map[string]bool{
		"env-secret": {"k": true}, "init-secret": {"i": true}, "envfrom-secret": {"": true},
		"volume-secret": {"": true}, "items-secret": {"a": true}, "projected-secret": {"": true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("SecretRefs = %v, want %v", got, want)
	}
}
