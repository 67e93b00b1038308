package render

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
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
// Deployment with its own ServiceAccount; beside it the enrollment broker
// alone mounts the verifier; the node host is in the revision's Sandbox
// with the one-use target (0440, read through the fsGroup), node-local inference and its own
// storage; the worker gets no gateway token.
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
			want := Enrollment{Target: "native-r2-enrollment", Verifier: "native-r2-enrollment-verifier",
				URL: "http://native-gateway.occ-acme.svc.cluster.local:18791/v1/enroll"}
			if objs.Enrollment == nil || *objs.Enrollment != want {
				t.Fatalf("enrollment = %+v, want %+v", objs.Enrollment, want)
			}
			if objs.InternalService == nil || *objs.InternalService.Name != "native-gateway" {
				t.Fatalf("internal gateway Service = %+v", objs.InternalService)
			}
			ports := map[string]int32{}
			for _, p := range objs.InternalService.Spec.Ports {
				ports[*p.Name] = *p.Port
			}
			if ports["http"] != GatewayPort || ports["enrollment"] != EnrollPort {
				t.Errorf("internal gateway Service ports = %v", ports)
			}
			// The gateway's Pod is ready only once the node has connected
			// through this Service (ND3): it must list the Pod before.
			if p := objs.InternalService.Spec.PublishNotReadyAddresses; p == nil || !*p {
				t.Error("the internal gateway Service lists only ready gateways: the node could never enroll")
			}
			gwPod := objs.Deployments[0].Spec.Template
			nodePod := objs.Sandboxes[0].Template
			// Own ServiceAccounts, no token automount (HM4).
			if *gwPod.Spec.ServiceAccountName == *nodePod.Spec.ServiceAccountName || *gwPod.Spec.AutomountServiceAccountToken || *nodePod.Spec.AutomountServiceAccountToken {
				t.Errorf("service accounts: gateway %s node %s", *gwPod.Spec.ServiceAccountName, *nodePod.Spec.ServiceAccountName)
			}
			gw := podJSON(t, gwPod)
			for _, forbidden := range []string{"OPENAI_API_KEY", "native-r2-enrollment\"", "node-state"} {
				if strings.Contains(gw, forbidden) { // ND2, AU6
					t.Errorf("the gateway Pod mentions %q: %s", forbidden, gw)
				}
			}
			byName := map[string]corev1ac.ContainerApplyConfiguration{}
			for _, c := range gwPod.Spec.Containers {
				byName[*c.Name] = c
			}
			gateway, broker := byName["gateway"], byName["enrollment"]
			if len(byName) != 2 || gateway.Name == nil || broker.Name == nil {
				t.Fatalf("gateway Pod containers: %v", byName)
			}
			for name, c := range map[string]corev1ac.ContainerApplyConfiguration{"gateway": gateway, "enrollment": broker} {
				tok := envOf(&c)[GatewayTokenEnv]
				if tok.ValueFrom == nil || *tok.ValueFrom.SecretKeyRef.Name != "native-gateway-token" {
					t.Errorf("%s: %s = %+v, want the gateway token Secret", name, GatewayTokenEnv, tok)
				}
			}
			for _, m := range gateway.VolumeMounts {
				if *m.MountPath == VerifierDir {
					t.Error("the gateway container mounts the verifier; only the broker does")
				}
			}
			verifier := false
			for _, m := range broker.VolumeMounts {
				verifier = verifier || (*m.MountPath == VerifierDir && *m.ReadOnly)
			}
			if !verifier || !strings.Contains(gw, "native-r2-enrollment-verifier") {
				t.Error("the broker cannot verify the enrollment")
			}
			if broker.ReadinessProbe == nil || broker.ReadinessProbe.HTTPGet.Port.IntValue() != int(EnrollPort) || *broker.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("broker readiness = %+v: the gateway Pod must turn ready only with its node (ND3)", broker.ReadinessProbe)
			}
			node := podJSON(t, nodePod)
			for _, forbidden := range []string{"OCC_APP_SERVER_TOKEN", "app-server-token", "enrollment-verifier", GatewayTokenEnv, "gateway-token"} {
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
			// A private file of the runtime user: root's, read through the
			// Pod's fsGroup, as the kubelet writes it (0440 root:1000 on the
			// real node, TestAccAgent_RealNodeNativeOpenClaw).
			sc := nodePod.Spec.Containers[0].SecurityContext
			if fsGroup := nodePod.Spec.SecurityContext.FSGroup; enrollMode != 0o440 || fsGroup == nil || *fsGroup != 1000 || *sc.RunAsUser != 1000 {
				t.Errorf("enrollment target mode = %o, user %d: want 0440 read by the runtime user through the Pod's fsGroup 1000", enrollMode, *sc.RunAsUser)
			}
			nc := nodePod.Spec.Containers[0]
			if nc.ReadinessProbe != nil || nc.LivenessProbe != nil || nc.StartupProbe != nil || len(nc.Ports) != 0 {
				t.Errorf("the node host listens on no port, yet its container has probes or ports: %+v", nc)
			}
			env := envOf(&nc)
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
			// Node configuration: node-local inference and workers (ND4, HM6).
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
			if v, _ := occconfig.Lookup(nodeDoc, occconfig.Keys("nodeHost", "workerRuns", "capacity")); v != float64(8) {
				t.Errorf("node worker capacity = %v", v)
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
			if sb := objs.Sandboxes[0]; sb.Annotations[sandboxapi.AnnotationRequiredProfile] != "gpu-a" {
				t.Errorf("enforced worker placement: Sandbox annotations %v (ND4)", sb.Annotations)
			}
		})
	}
}

// The command lines of the pinned runtime's node host, as
// `openclaw connect --help` and `openclaw node run --help` of OpenClaw
// 2026.9.6 (eb377ac) print them: every option, and whether it takes a
// value.
var pinnedNodeOptions = map[string]map[string]bool{
	"connect": {
		"--all-commands": false, "--commands": true, "--display-name": true, "--ephemeral": false,
		"-h": false, "--help": false, "--service": false, "--session-host": false, "--target-file": true,
	},
	"node run": {
		"--all-commands": false, "--commands": true, "--context-path": true, "--display-name": true,
		"-h": false, "--help": false, "--host": true, "--no-share-installed-apps": false, "--no-tls": false,
		"--node-id": true, "--pair": true, "--pair-if-needed": true, "--port": true, "--session-host": false,
		"--share-installed-apps": false, "--tls": false, "--tls-fingerprint": true,
	},
}

// Keys of the pinned schema (`openclaw config schema` of OpenClaw
// 2026.9.6) a node's configuration may set beyond the admitted sections:
// every other path would make a strict OpenClaw refuse the file.
var pinnedNodeHostKeys = []string{
	"nodeHost.workerRuns.enabled", "nodeHost.workerRuns.capacity", "nodeHost.workerRuns.isolation",
	"nodeHost.workerRuns.containerImage", "nodeHost.autoUpdate.enabled", "update.checkOnStart",
}

// rules ND2, HM6, ND4: the node host runs with options the pinned runtime
// has (ephemeral connection mode, the one-use target from a private file
// that the wrapper writes where OpenClaw consumes it), and its
// configuration has only keys the pinned schema accepts.
func TestND2_NodeRunsWithPinnedRuntimeOptions(t *testing.T) {
	for _, method := range []string{admission.MethodAPIKey, admission.MethodCredentialSource} {
		rev := admit(t, nativeInput(t, method))
		objs, err := Kubernetes(rev, 1)
		if err != nil {
			t.Fatal(err)
		}
		c := objs.Sandboxes[0].Template.Spec.Containers[0]
		i := slices.Index(c.Args, "--")
		if i < 0 || i+2 >= len(c.Args) || c.Args[i+1] != "openclaw" {
			t.Fatalf("%s: node args %q: want the wrapper's options, --, then openclaw", method, c.Args)
		}
		argv := c.Args[i+2:]
		sub := argv[0]
		if sub == "node" && len(argv) > 1 {
			sub, argv = "node "+argv[1], argv[1:]
		}
		options, ok := pinnedNodeOptions[sub]
		if !ok {
			t.Fatalf("%s: `openclaw %s` is not a node host command of the pinned runtime", method, sub)
		}
		seen := map[string]string{}
		for j := 1; j < len(argv); j++ {
			name, value, inline := strings.Cut(argv[j], "=")
			takes, known := options[name]
			if !known {
				t.Errorf("%s: `openclaw %s` of the pinned runtime has no option %s", method, sub, name)
				continue
			}
			if takes && !inline {
				if j+1 >= len(argv) {
					t.Errorf("%s: %s without its value", method, name)
					break
				}
				j++
				value = argv[j]
			}
			seen[name] = value
		}
		target, ok := seen["--target-file"]
		if _, eph := seen["--ephemeral"]; sub != "connect" || !eph || !ok {
			t.Errorf("%s: node command %q: want ephemeral connection mode and the target from a file (ND2)", method, c.Args[i+1:])
		}
		env := envOf(&c)
		value := func(name string) string {
			if e := env[name]; e.Value != nil {
				return *e.Value
			}
			return ""
		}
		if w := value(enrollment.EnvConnectTarget); w != target || !strings.HasPrefix(target, NodeHome+"/") {
			t.Errorf("%s: the wrapper writes the setup code to %q, OpenClaw reads %q: want the same file on the node's own storage", method, w, target)
		}
		if v := value(enrollment.EnvFile); v != EnrollmentDir+"/"+EnrollmentFile {
			t.Errorf("%s: %s = %q", method, enrollment.EnvFile, v)
		}

		var nodeDoc map[string]any
		for _, cm := range objs.ConfigMaps {
			if *cm.Name == NodeConfigMapName("native", 1) {
				if err := json.Unmarshal([]byte(cm.Data[ConfigFile]), &nodeDoc); err != nil {
					t.Fatal(err)
				}
			}
		}
		for k, v := range nodeDoc {
			if !slices.Contains(admission.RootKeys, k) {
				t.Errorf("%s: node configuration root key %q is not in the pinned schema", method, k)
			}
			if k == "nodeHost" || k == "update" {
				for _, p := range leafPaths(k, v) {
					if !slices.Contains(pinnedNodeHostKeys, p) {
						t.Errorf("%s: node configuration key %s is not in the pinned schema", method, p)
					}
				}
			}
		}
		if _, ok := occconfig.Lookup(nodeDoc, occconfig.Keys("cloudWorkers", "requiredProfile")); ok {
			t.Errorf("%s: cloudWorkers.requiredProfile is not in the pinned schema", method)
		}
		if v, _ := occconfig.Lookup(nodeDoc, occconfig.Keys("nodeHost", "workerRuns", "capacity")); v != float64(admission.DefaultNodeWorkers) {
			t.Errorf("%s: node worker capacity = %v, want the default %d (HM6)", method, v, admission.DefaultNodeWorkers)
		}
	}
}

func leafPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{prefix}
	}
	var out []string
	for k, c := range m {
		out = append(out, leafPaths(prefix+"."+k, c)...)
	}
	return out
}

// rules ND2, ND3, ND4, AU6: the native gateway runs as the pinned runtime
// needs beyond loopback (token auth from the environment, no Control UI)
// and pairs nodes only through the platform's setup code; it holds no
// token in its file, and no models.providers: model metadata and the
// credential reference are only in the node's configuration (ND4). The
// model selection, session policy the gateway keeps, stays.
func TestND2_NativeGatewayDocument(t *testing.T) {
	in := nativeInput(t, admission.MethodAPIKey)
	in.Configuration.Document = doc(t, `{agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {
		apiKey: "${OPENAI_API_KEY}", baseUrl: "https://llm.example/v1", api: "openai-responses", models: [{id: "gpt-5", contextWindow: 200000}]}}}}`)
	rev := admit(t, in)
	d, err := NativeGatewayDocument(rev, 1)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"gateway.auth.mode": "token", "gateway.bind": "lan", "gateway.controlUi.enabled": false,
		"gateway.nodes.pairing.autoApproveLocal": false, "gateway.nodes.pairing.sshVerify": false,
	} {
		if v, _ := occconfig.Lookup(d, occconfig.Keys(strings.Split(path, ".")...)); v != want {
			t.Errorf("%s = %v, want %v", path, v, want)
		}
	}
	for _, path := range []string{"gateway.auth.token", "gateway.auth.password"} {
		if v, ok := occconfig.Lookup(d, occconfig.Keys(strings.Split(path, ".")...)); ok {
			t.Errorf("%s = %v: the gateway file holds a secret", path, v)
		}
	}
	if v, ok := occconfig.Lookup(d, occconfig.Keys("models", "providers")); ok {
		t.Errorf("the gateway file holds models.providers = %v; model metadata and the credential reference belong to the node only (ND4)", v)
	}
	if v, _ := occconfig.Lookup(d, occconfig.Keys("models", "catalogRefresh", "enabled")); v != false {
		t.Errorf("models.catalogRefresh.enabled = %v: the platform's key went with the providers", v)
	}
	if v, _ := occconfig.Lookup(d, occconfig.Keys("agents", "defaults", "model")); v != "openai/gpt-5" {
		t.Errorf("agents.defaults.model = %v: the gateway keeps the session's model selection", v)
	}
	node := NodeDocument(rev, 1)
	for path, want := range map[string]any{
		"models.providers.openai.baseUrl": "https://llm.example/v1", "models.providers.openai.api": "openai-responses",
	} {
		if v, _ := occconfig.Lookup(node, occconfig.Keys(strings.Split(path, ".")...)); v != want {
			t.Errorf("node %s = %v, want %v", path, v, want)
		}
	}
	if ref, _ := occconfig.Lookup(node, occconfig.Keys("models", "providers", "openai", "apiKey", "id")); ref != admission.EnvOpenAIAPIKey {
		t.Errorf("node apiKey reference = %v, want the environment's %s", ref, admission.EnvOpenAIAPIKey)
	}
}

// rule ND3: the broker beside the native gateway, whose readiness is the
// node's enrollment, has its own port name, the internal Service's
// "enrollment". Every Pod names each port once: a second "http" is refused
// by nothing but warned about by the API server (seen on the real node),
// and a probe or Service that named it would reach the gateway instead.
func TestND3_PortNamesAreUniqueInEveryPod(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
		"native openclaw": nativeInput(t, admission.MethodAPIKey),
	} {
		objs, err := Kubernetes(admit(t, in), 1)
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
					if *c.Name == "enrollment" && (*port.Name != "enrollment" || *port.ContainerPort != EnrollPort) {
						t.Errorf("%s: the broker's port is %q %d, want the internal Service's \"enrollment\" %d", name, *port.Name, *port.ContainerPort, EnrollPort)
					}
				}
			}
		}
	}
}
