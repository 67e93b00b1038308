package render

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

func admit(t *testing.T, in admission.Input) *admission.Revision {
	t.Helper()
	rev, errs := admission.Admit(in)
	if len(errs) > 0 {
		t.Fatalf("admission refused: %v", errs)
	}
	return rev
}

func doc(t *testing.T, s string) occconfig.Document {
	t.Helper()
	d, err := occconfig.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func k8sCompute() admission.Compute {
	return admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "occ-acme", CPUMillis: 1500, MemoryLimit: "4Gi", LoggingOwnership: admission.LoggingPlatform, LoggingLevel: "debug"}}
}

func embeddedInput(t *testing.T, model string) admission.Input {
	return admission.Input{
		Agent:         admission.Agent{Name: "support"},
		Configuration: admission.Configuration{ID: "support", Name: "support", Generation: 3, Document: doc(t, `{agents: {defaults: {model: "`+model+`"}}}`)},
		Compute:       k8sCompute(),
		Source:        admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "prod", SecretRef: &admission.SecretRef{Name: "llm", Key: "api-key"}},
	}
}

func codexInput(t *testing.T, method string) admission.Input {
	in := embeddedInput(t, "codex/gpt-5-codex")
	in.Agent = admission.Agent{Name: "coder", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated}
	in.Source.Method = method
	return in
}

func envOf(c *corev1ac.ContainerApplyConfiguration) map[string]corev1ac.EnvVarApplyConfiguration {
	out := map[string]corev1ac.EnvVarApplyConfiguration{}
	for _, e := range c.Env {
		out[*e.Name] = e
	}
	return out
}

// rules AU1, LG1, LG2, LG4, AC1, MR7, PR1: embedded OpenClaw's objects.
func TestRender_EmbeddedOpenClaw(t *testing.T) {
	for _, tc := range []struct{ model, env string }{{"anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"}, {"openai/gpt-5", "OPENAI_API_KEY"}} {
		t.Run(tc.model, func(t *testing.T) {
			in := embeddedInput(t, tc.model)
			if strings.HasPrefix(tc.model, "openai/") {
				in.Agent.Harness = admission.HarnessOpenClaw
			}
			rev := admit(t, in)
			objs, err := Kubernetes(rev, 4, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.Deployments) != 1 || len(objs.ServiceAccounts) != 1 || len(objs.ConfigMaps) != 1 {
				t.Fatalf("embedded renders one workload: %d deployments, %d service accounts, %d config maps", len(objs.Deployments), len(objs.ServiceAccounts), len(objs.ConfigMaps))
			}
			dep := objs.Deployments[0]
			if *dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType { // rule AC1
				t.Errorf("strategy = %v, want Recreate", *dep.Spec.Strategy.Type)
			}
			if dep.Spec.RevisionHistoryLimit == nil || *dep.Spec.RevisionHistoryLimit != 0 { // rule AC4: nothing of a retired revision stays
				t.Errorf("revisionHistoryLimit = %v, want 0", dep.Spec.RevisionHistoryLimit)
			}
			for k, v := range map[string]string{LabelAgent: "support", LabelRevision: "4", LabelComponent: "gateway", LabelManagedBy: ManagedBy} { // rule LG4
				if dep.Spec.Template.Labels[k] != v || dep.Labels[k] != v {
					t.Errorf("label %s = %q/%q, want %q", k, dep.Labels[k], dep.Spec.Template.Labels[k], v)
				}
			}
			pod := dep.Spec.Template.Spec
			if *pod.AutomountServiceAccountToken || *objs.ServiceAccounts[0].AutomountServiceAccountToken {
				t.Error("service account token is mounted")
			}
			c := pod.Containers[0]
			env := envOf(&c)
			if *env["OPENCLAW_CONFIG_PATH"].Value != "/etc/openclaw/openclaw.json" { // rule LG1
				t.Errorf("OPENCLAW_CONFIG_PATH = %v", *env["OPENCLAW_CONFIG_PATH"].Value)
			}
			cred, ok := env[tc.env] // rule AU1
			if !ok || *cred.ValueFrom.SecretKeyRef.Name != "llm" || *cred.ValueFrom.SecretKeyRef.Key != "api-key" {
				t.Errorf("%s not projected from the source's Secret: %+v", tc.env, cred)
			}
			other := map[string]string{"ANTHROPIC_API_KEY": "OPENAI_API_KEY", "OPENAI_API_KEY": "ANTHROPIC_API_KEY"}[tc.env]
			if _, leaked := env[other]; leaked {
				t.Errorf("%s projected too", other)
			}
			mounted := false
			for _, m := range c.VolumeMounts {
				if *m.MountPath == "/etc/openclaw" && *m.ReadOnly {
					mounted = true
				}
			}
			if !mounted {
				t.Error("configuration not mounted read-only at /etc/openclaw")
			}
			if *env["OPENCLAW_WORKSPACE"].Value != "/home/node/workspace" { // rule MR7
				t.Error("workspace is not /home/node/workspace")
			}
			if c.Resources.Limits.Cpu().MilliValue() != 1500 { // rule PR1: the probe budget follows the limit
				t.Errorf("cpu limit = %v", c.Resources.Limits.Cpu())
			}
			sc := c.SecurityContext
			if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
				t.Error("container is not non-root with a read-only root filesystem")
			}
			if *c.ReadinessProbe.HTTPGet.Path != "/readyz" || *c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Port.IntValue() != 18789 {
				t.Error("probes are not /readyz and /healthz on 18789")
			}
			cm := objs.ConfigMaps[0]
			if !*cm.Immutable || *cm.Name != "support-r4" {
				t.Errorf("config map %s immutable=%v", *cm.Name, *cm.Immutable)
			}
			var gw map[string]any
			if err := json.Unmarshal([]byte(cm.Data["openclaw.json"]), &gw); err != nil {
				t.Fatal(err)
			}
			if got, _ := occconfig.String(gw, occconfig.Keys("logging", "consoleStyle")); got != "json" { // rule LG2
				t.Errorf("console style = %q", got)
			}
			if got, _ := occconfig.String(gw, occconfig.Keys("logging", "level")); got != "debug" {
				t.Errorf("log level = %q", got)
			}
			if got, _ := occconfig.Lookup(gw, occconfig.Keys("diagnostics", "otel", "logs")); got != false {
				t.Error("native OTLP log export not disabled")
			}
			if got, _ := occconfig.String(gw, occconfig.Keys("gateway", "bind")); got != "lan" {
				t.Errorf("gateway bind = %q, want lan (reachable through the Service)", got)
			}
			if objs.Service.Spec.Selector[LabelRevision] != "4" || *objs.Service.Name != "support" {
				t.Errorf("service selects %v", objs.Service.Spec.Selector)
			}
		})
	}
}

// rules HM4, AU1, AU2, AU6, LG3: dedicated Codex's gateway and harness.
func TestRender_DedicatedCodex(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   map[string]string // env var -> "" for a Secret reference, or its literal value
	}{
		{admission.MethodAPIKey, map[string]string{"OPENAI_API_KEY": "", "CODEX_LOGIN_MODE": "api_key_stdin"}},
		{admission.MethodCodexPAT, map[string]string{"CODEX_ACCESS_TOKEN": "", "CODEX_LOGIN_MODE": "codex_pat"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			rev := admit(t, codexInput(t, tc.method))
			objs, err := Kubernetes(rev, 1, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.Deployments) != 2 || len(objs.ServiceAccounts) != 2 { // rule HM4
				t.Fatalf("dedicated renders two workloads with their own service accounts")
			}
			byComponent := map[string]int{}
			for i, d := range objs.Deployments {
				byComponent[d.Spec.Template.Labels[LabelComponent]] = i
			}
			harness := objs.Deployments[byComponent["harness"]].Spec.Template.Spec
			gateway := objs.Deployments[byComponent["gateway"]].Spec.Template.Spec
			if *harness.ServiceAccountName == *gateway.ServiceAccountName {
				t.Error("gateway and harness share a service account")
			}
			hEnv := envOf(&harness.Containers[0])
			for name, want := range tc.want {
				got, ok := hEnv[name]
				switch {
				case !ok:
					t.Errorf("harness lacks %s", name)
				case want == "" && (got.ValueFrom == nil || got.ValueFrom.SecretKeyRef == nil):
					t.Errorf("%s is not a Secret reference", name)
				case want != "" && *got.Value != want:
					t.Errorf("%s = %q, want %q", name, *got.Value, want)
				}
			}
			if *hEnv["LOG_FORMAT"].Value != "json" || *hEnv["RUST_LOG"].Value != "debug,codex_otel=off" { // rule LG3
				t.Errorf("codex logging env = %s / %s", *hEnv["LOG_FORMAT"].Value, *hEnv["RUST_LOG"].Value)
			}
			// rule AU6: the gateway Pod holds no model credential.
			for _, e := range gateway.Containers[0].Env {
				switch *e.Name {
				case "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CODEX_ACCESS_TOKEN":
					t.Errorf("gateway receives %s", *e.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && *e.ValueFrom.SecretKeyRef.Name == "llm" {
					t.Errorf("gateway reads the model credential's Secret through %s", *e.Name)
				}
			}
			var toml string
			for _, cm := range objs.ConfigMaps {
				if s, ok := cm.Data["config.toml"]; ok {
					toml = s
				}
			}
			if !strings.Contains(toml, `exporter = "none"`) || !strings.Contains(toml, "log_user_prompt = false") { // rule LG3
				t.Errorf("codex config = %q", toml)
			}
			gw, err := GatewayDocument(rev, 1)
			if err != nil {
				t.Fatal(err)
			}
			if tr, _ := occconfig.String(gw, occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "transport")); tr != "websocket" {
				t.Errorf("gateway does not reach the harness over websocket: %q", tr)
			}
		})
	}
}

func TestRender_RefusesOtherTopologies(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*admission.Revision)
		want string
	}{
		// Not for Kubernetes at all: refused before the topology.
		{"ssh compute", func(r *admission.Revision) { r.ComputeSettings.Kind = admission.KindSSH }, "not for a Kubernetes compute"},
		{"no namespace", func(r *admission.Revision) {
			r.ComputeSettings = r.ComputeSettings.WithKubernetes(func(k *admission.KubernetesSettings) { k.Namespace = "" })
		}, "not for a Kubernetes compute"},
		// For Kubernetes, with a harness and mode this version renders no
		// topology of.
		{"embedded codex", func(r *admission.Revision) {
			r.Harness, r.ExecutionMode = admission.HarnessCodex, admission.ModeEmbedded
		}, "codex embedded is not rendered"},
		{"unknown harness", func(r *admission.Revision) { r.Harness = "hermes" }, "hermes dedicated is not rendered"},
		{"unknown mode", func(r *admission.Revision) { r.ExecutionMode = "shared" }, "codex shared is not rendered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := admit(t, codexInput(t, admission.MethodAPIKey))
			if _, err := Kubernetes(rev, 1, admission.Compute{}); err != nil {
				t.Fatalf("the unedited revision does not render: %v", err)
			}
			tc.edit(rev)
			objs, err := Kubernetes(rev, 1, admission.Compute{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Kubernetes = %v, %v; want an error saying %q", objs, err, tc.want)
			}
		})
	}
}

// rule PR10: the dedicated Codex gateway's wrapper waits for its harness
// (--wait-peer=harness); no other gateway waits.
func TestPR10_OnlyTheDedicatedCodexGatewayWaitsForItsPeer(t *testing.T) {
	for _, tc := range topologyCases(t) {
		objs, err := Kubernetes(tc.rev, 1, admission.Compute{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, c := range containersOf(objs) {
			var waits []string
			for _, a := range c.Args {
				if a == "--" {
					break
				}
				if strings.HasPrefix(a, "--wait-peer") {
					waits = append(waits, a)
				}
			}
			var want []string
			if *c.Name == "gateway" && tc.rev.Harness == admission.HarnessCodex {
				want = []string{"--wait-peer=harness"}
			}
			if !slices.Equal(waits, want) {
				t.Errorf("%s: the %s container's wrapper has %q, want %q", tc.name, *c.Name, waits, want)
			}
		}
	}
}

// rule AU6: the configuration's secret bindings reach the gateway
// container, and no dedicated harness.
func TestAU6_SecretBindingsReachOnlyTheGateway(t *testing.T) {
	bindings := map[string]admission.SecretRef{"telegram": {Name: "tg-bot", Key: "token"}}
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
	} {
		in.Configuration.SecretBindings = bindings
		objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		containers := containersOf(objs)
		gateways := 0
		for _, c := range containers {
			e, ok := envOf(&c)["TELEGRAM"]
			if *c.Name != "gateway" {
				if ok {
					t.Errorf("%s/%s: receives the gateway's binding TELEGRAM", name, *c.Name)
				}
				continue
			}
			gateways++
			if !ok || e.ValueFrom == nil || *e.ValueFrom.SecretKeyRef.Name != "tg-bot" || *e.ValueFrom.SecretKeyRef.Key != "token" {
				t.Errorf("%s/gateway: TELEGRAM = %+v, want Secret tg-bot key token", name, e)
			}
		}
		if gateways != 1 {
			t.Errorf("%s: %d gateway containers", name, gateways)
		}
	}
}

// rule LG4: every workload and its Pods carry the runtime identity as
// labels the provider sets: service name, version, component, Agent,
// revision number and id (the namespace is the object's own).
func TestLG4_IdentityLabels(t *testing.T) {
	custom := codexInput(t, admission.MethodAPIKey)
	custom.Compute = custom.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.CodexImage = "registry.example/codex:dev" })
	for name, tc := range map[string]struct {
		in   admission.Input
		want map[string][2]string // component -> service name, version
	}{
		"embedded":           {embeddedInput(t, "anthropic/claude-sonnet-4-5"), map[string][2]string{"gateway": {"openclaw-gateway", admission.PinnedOpenClawVersion}}},
		"dedicated codex":    {codexInput(t, admission.MethodAPIKey), map[string][2]string{"gateway": {"openclaw-gateway", admission.PinnedOpenClawVersion}, "harness": {"codex-app-server", admission.PinnedCodexVersion}}},
		"custom codex image": {custom, map[string][2]string{"gateway": {"openclaw-gateway", admission.PinnedOpenClawVersion}, "harness": {"codex-app-server", "custom-image"}}},
	} {
		rev := admit(t, tc.in)
		objs, err := Kubernetes(rev, 4, admission.Compute{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seen := map[string]map[string]string{}
		for _, d := range objs.Deployments {
			seen[d.Spec.Template.Labels[LabelComponent]] = d.Spec.Template.Labels
			if d.Labels[LabelRevisionID] != rev.ID() {
				t.Errorf("%s: Deployment %s labels %v lack the revision id", name, *d.Name, d.Labels)
			}
		}
		for _, s := range objs.Sandboxes {
			seen[s.Component] = s.Template.Labels
			if s.Labels[LabelRevisionID] != rev.ID() {
				t.Errorf("%s: Sandbox %s labels %v lack the revision id", name, s.Name, s.Labels)
			}
		}
		for component, id := range tc.want {
			l := seen[component]
			if l[LabelName] != id[0] || l[LabelVersion] != id[1] || l[LabelAgent] != rev.Agent || l[LabelRevision] != "4" ||
				l[LabelRevisionID] != rev.ID() || l[LabelComponent] != component || l[LabelManagedBy] != ManagedBy {
				t.Errorf("%s/%s: Pod labels %v, want service %s version %s", name, component, l, id[0], id[1])
			}
		}
		if len(seen) != len(tc.want) {
			t.Errorf("%s: components %v, want %v", name, seen, tc.want)
		}
	}
}

// rule MR7: the dedicated Codex harness works in its own writable
// workspace, not the gateway's; the gateway never mounts it.
func TestMR7_HarnessWorkspaceIsSeparate(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
	} {
		objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		harnesses := 0
		for _, c := range containersOf(objs) {
			mounted := map[string]string{}
			for _, m := range c.VolumeMounts {
				if m.ReadOnly == nil || !*m.ReadOnly {
					mounted[*m.MountPath] = *m.Name
				}
			}
			switch *c.Name {
			case "harness":
				harnesses++
				if c.WorkingDir == nil || *c.WorkingDir != HarnessWorkspace || mounted[HarnessWorkspace] == "" || HarnessWorkspace == Workspace {
					t.Errorf("%s: harness works in %v with writable mounts %v, want its own %s", name, c.WorkingDir, mounted, HarnessWorkspace)
				}
			case "gateway":
				if _, ok := mounted[HarnessWorkspace]; ok {
					t.Errorf("%s: the gateway mounts the harness workspace", name)
				}
			}
		}
		if harnesses != 1 {
			t.Errorf("%s: %d harness containers", name, harnesses)
		}
	}
}

// containersOf is every container of a rendered revision: its Deployments'
// and its Sandboxes' Pod templates.
func containersOf(objs *Objects) []corev1ac.ContainerApplyConfiguration {
	var out []corev1ac.ContainerApplyConfiguration
	for _, d := range objs.Deployments {
		out = append(out, d.Spec.Template.Spec.Containers...)
	}
	for _, s := range objs.Sandboxes {
		out = append(out, s.Template.Spec.Containers...)
	}
	return out
}

// harnessOf is the harness container and Pod spec of a dedicated Codex
// revision (its Deployment's or its Sandbox's), and the gateway's.
func harnessOf(t *testing.T, objs *Objects) (harness, gateway *corev1ac.PodSpecApplyConfiguration) {
	t.Helper()
	var specs []*corev1ac.PodTemplateSpecApplyConfiguration
	for _, d := range objs.Deployments {
		specs = append(specs, d.Spec.Template)
	}
	for _, s := range objs.Sandboxes {
		specs = append(specs, s.Template)
	}
	for _, tmpl := range specs {
		switch tmpl.Labels[LabelComponent] {
		case ComponentHarness:
			harness = tmpl.Spec
		case ComponentGateway:
			gateway = tmpl.Spec
		}
	}
	if harness == nil || gateway == nil {
		t.Fatalf("no harness (%v) or gateway (%v) Pod", harness != nil, gateway != nil)
	}
	return harness, gateway
}

// appServerURL is where the gateway's Codex plugin connects.
func appServerURL(t *testing.T, objs *Objects) string {
	t.Helper()
	for _, cm := range objs.ConfigMaps {
		if cm.Labels[LabelComponent] != ComponentGateway {
			continue
		}
		var gw map[string]any
		if err := json.Unmarshal([]byte(cm.Data[ConfigFile]), &gw); err != nil {
			t.Fatal(err)
		}
		u, _ := occconfig.String(gw, occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "url"))
		return u
	}
	t.Fatal("no gateway configuration")
	return ""
}

// rule HM4: the gateway and an unsandboxed harness are separate Pods, so
// the gateway reaches the harness through a Service: the host of its
// appServer.url is a rendered ClusterIP Service on the app server's port
// that selects this revision's harness Pod, and only it, with the identity
// labels of the other objects (LG4). A sandboxed harness is reached at its
// Sandbox's own Service, and no such Service is rendered.
func TestHM4_GatewayReachesTheHarnessThroughItsService(t *testing.T) {
	objs, err := Kubernetes(admit(t, codexInput(t, admission.MethodAPIKey)), 3, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	svc := objs.HarnessService
	if want := "ws://coder-harness:18790"; appServerURL(t, objs) != want {
		t.Fatalf("appServer.url = %q, want %q", appServerURL(t, objs), want)
	}
	if svc == nil || *svc.Name != "coder-harness" || *svc.Namespace != "occ-acme" {
		t.Fatalf("harness Service = %+v, want coder-harness in occ-acme, the host the gateway connects to", svc)
	}
	if svc.Spec.Type == nil || *svc.Spec.Type != "ClusterIP" || len(svc.Spec.Ports) != 1 ||
		*svc.Spec.Ports[0].Port != 18790 || svc.Spec.Ports[0].TargetPort.IntValue() != 18790 {
		t.Errorf("harness Service spec = %+v, want ClusterIP 18790 -> 18790", svc.Spec)
	}
	harness, gateway := 0, 0
	for _, d := range objs.Deployments {
		l := d.Spec.Template.Labels
		matches := len(svc.Spec.Selector) > 0
		for k, v := range svc.Spec.Selector {
			matches = matches && l[k] == v
		}
		switch {
		case matches && l[LabelComponent] == ComponentHarness && l[LabelRevision] == "3":
			harness++
		case matches:
			gateway++
		}
	}
	if harness != 1 || gateway != 0 || svc.Spec.Selector[LabelRevision] != "3" {
		t.Errorf("selector %v selects %d harness and %d other Pod templates, want revision 3's harness only", svc.Spec.Selector, harness, gateway)
	}
	rev := admit(t, codexInput(t, admission.MethodAPIKey))
	for k, v := range Labels(rev, 3, ComponentHarness) { // rule LG4
		if svc.Labels[k] != v {
			t.Errorf("harness Service label %s = %q, want %q", k, svc.Labels[k], v)
		}
	}

	sandboxed, err := Kubernetes(admit(t, sandboxedCodexInput(t)), 3, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	if sandboxed.HarnessService != nil || appServerURL(t, sandboxed) != "ws://coder-harness-r3:18790" {
		t.Errorf("sandboxed: harness Service %v, url %q: want none, and the Sandbox's Service", sandboxed.HarnessService, appServerURL(t, sandboxed))
	}
	embedded, err := Kubernetes(admit(t, embeddedInput(t, "anthropic/claude-sonnet-4-5")), 3, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	if embedded.HarnessService != nil {
		t.Error("embedded renders a harness Service")
	}
}

// rule AU6: the harness holds the model credential, so its app server
// takes only clients that present the app-server token: codex's
// capability-token mode, with the token read from the AppServerTokenSecret
// mounted read-only into the harness alone (never an environment variable
// there: codex reads none). The gateway gets the same Secret's token as the
// variable its Codex plugin resolves for appServer.authToken and sends as a
// bearer token.
func TestAU6_AppServerTakesOnlyTheGatewaysToken(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
	} {
		objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		harness, gateway := harnessOf(t, objs)
		h := harness.Containers[0]
		_, runtime, _ := strings.Cut(strings.Join(h.Args, " "), " -- ")
		want := "codex app-server --listen ws://0.0.0.0:18790 --ws-auth capability-token --ws-token-file " + AppServerTokenDir + "/token"
		if runtime != want {
			t.Errorf("%s: harness runs %q, want %q", name, runtime, want)
		}
		// The token file is the Secret's "token" key on a read-only mount.
		var tokenVolume string
		for _, m := range h.VolumeMounts {
			if *m.MountPath == AppServerTokenDir {
				if m.ReadOnly == nil || !*m.ReadOnly {
					t.Errorf("%s: %s is writable", name, AppServerTokenDir)
				}
				tokenVolume = *m.Name
			}
		}
		found := false
		for _, v := range harness.Volumes {
			if *v.Name != tokenVolume || v.Secret == nil {
				continue
			}
			found = *v.Secret.SecretName == "coder-app-server-token" && len(v.Secret.Items) == 1 &&
				*v.Secret.Items[0].Key == "token" && *v.Secret.Items[0].Path == "token" && *v.Secret.DefaultMode&0o007 == 0
		}
		if !found {
			t.Errorf("%s: %s is not the app-server token Secret's key, private to the Pod: volumes %s", name, AppServerTokenDir, podJSON(t, &corev1ac.PodTemplateSpecApplyConfiguration{Spec: harness}))
		}
		for _, e := range h.Env {
			if *e.Name == AppServerTokenEnv || (e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && *e.ValueFrom.SecretKeyRef.Name == "coder-app-server-token") {
				t.Errorf("%s: the harness gets the token as %s, which codex never reads", name, *e.Name)
			}
		}
		// The gateway: authToken names an env SecretRef whose variable
		// comes from the token Secret; no token file in the gateway.
		var gw map[string]any
		for _, cm := range objs.ConfigMaps {
			if cm.Labels[LabelComponent] == ComponentGateway {
				if err := json.Unmarshal([]byte(cm.Data[ConfigFile]), &gw); err != nil {
					t.Fatal(err)
				}
			}
		}
		ref, _ := occconfig.String(gw, occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "authToken"))
		envName := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
		e, ok := envOf(&gateway.Containers[0])[envName]
		if !strings.HasPrefix(ref, "${") || !ok || e.ValueFrom == nil || *e.ValueFrom.SecretKeyRef.Name != "coder-app-server-token" || *e.ValueFrom.SecretKeyRef.Key != "token" {
			t.Errorf("%s: appServer.authToken = %q, gateway env %s = %+v: want the token Secret's key", name, ref, envName, e)
		}
		if strings.Contains(podJSON(t, &corev1ac.PodTemplateSpecApplyConfiguration{Spec: gateway}), AppServerTokenDir) {
			t.Errorf("%s: the gateway mounts the harness's token file", name)
		}
	}
}

// rule PR9: every runtime container starts tini as PID 1, which runs the
// wrapper (the container command replaces the image's entrypoint): the
// runtime the wrapper execs has an init that reaps and forwards signals.
func TestPR9_TiniIsPID1OfEveryRuntimeContainer(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
	} {
		objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range containersOf(objs) {
			if got := strings.Join(c.Command, " "); got != "/usr/bin/tini -s -- /usr/local/bin/occ-runtime" {
				t.Errorf("%s/%s: command %q, want tini running the wrapper", name, *c.Name, got)
			}
		}
	}
}

// Every gateway listens on the Pod network, which OpenClaw 2026.9.6 allows
// only with auth ("Refusing to bind gateway to lan without auth", seen on
// the real node): each gateway container, and no other container, gets the
// agent's token from its own Secret, and the document says token auth with
// no token or password of its own and no Control UI. A configuration's own
// gateway auth is refused at admission (TestAD3_PlatformOwnedKeys), not
// replaced here. rules AU6, PR9
func TestPR9_EveryGatewayHasTokenAuth(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
	} {
		t.Run(name, func(t *testing.T) {
			rev := admit(t, in)
			objs, err := Kubernetes(rev, 1, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			gateways := 0
			for _, c := range containersOf(objs) {
				env := envOf(&c)
				tok, has := env[GatewayTokenEnv]
				isGateway := *c.Name == "gateway"
				if isGateway {
					gateways++
				}
				if has != isGateway {
					t.Errorf("container %s: has the gateway token %v, want %v", *c.Name, has, isGateway)
					continue
				}
				if has && (tok.ValueFrom == nil || *tok.ValueFrom.SecretKeyRef.Name != GatewayTokenSecret(rev.Agent) || *tok.ValueFrom.SecretKeyRef.Key != GatewayTokenKey) {
					t.Errorf("container %s: the token does not come from Secret %s", *c.Name, GatewayTokenSecret(rev.Agent))
				}
			}
			if gateways != 1 {
				t.Fatalf("%d gateway containers", gateways)
			}
			d, err := GatewayDocument(rev, 1)
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]any{"gateway.auth.mode": "token", "gateway.controlUi.enabled": false, "gateway.auth.password": nil, "gateway.auth.token": nil} {
				got, _ := occconfig.Lookup(d, occconfig.Keys(strings.Split(path, ".")...))
				if got != want {
					t.Errorf("%s = %v, want %v", path, got, want)
				}
			}
		})
	}
}

// rules SS1, PR9: every gateway starts offline, on Kubernetes as on an SSH
// host: no mDNS, no update check, no model catalog refresh (on the real
// node every Kubernetes gateway looked catalog.openclaw.ai up; the SSH
// gateway never did).
func TestSS1_EveryGatewayStartsOffline(t *testing.T) {
	offline := map[string]any{"discovery.mdns.mode": "off", "update.checkOnStart": false, "models.catalogRefresh.enabled": false}
	docs := map[string]occconfig.Document{}
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
	} {
		rev := admit(t, in)
		objs, err := Kubernetes(rev, 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range objs.ConfigMaps {
			if *cm.Name == ConfigMapName(rev.Agent, 1) {
				d, err := occconfig.Parse(cm.Data[ConfigFile])
				if err != nil {
					t.Fatal(err)
				}
				docs[name] = d
			}
		}
	}
	ssh, err := Systemd(admit(t, sshInput(t, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)), 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := occconfig.Parse(string(ssh.Config))
	if err != nil {
		t.Fatal(err)
	}
	docs["ssh"] = d
	if len(docs) != 3 {
		t.Fatalf("gateway documents of %d topologies, want 3", len(docs))
	}
	for name, d := range docs {
		for p, want := range offline {
			if got, _ := occconfig.Lookup(d, occconfig.Keys(strings.Split(p, ".")...)); got != want {
				t.Errorf("%s: %s = %v, want %v", name, p, got, want)
			}
		}
	}
}

// rule PR3: the harness's host-owned config.toml names the compatible
// endpoint the probe calls (root keys before the first table); with the
// provider's default endpoint it names none.
func TestPR3_HarnessConfigNamesTheProbedEndpoint(t *testing.T) {
	custom := codexInput(t, admission.MethodAPIKey)
	custom.Configuration.Document = doc(t, `{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {codex: {baseUrl: "https://llm.example/v1/", models: [{id: "gpt-5-codex", name: "m"}]}}}}`)
	for name, tc := range map[string]struct {
		in   admission.Input
		want []string
	}{
		"compatible endpoint": {custom, []string{"model = \"gpt-5-codex\"\nmodel_provider = \"openai-compatible\"\n\n[model_providers.openai-compatible]\n", `base_url = "https://llm.example/v1"`, `wire_api = "responses"`, "requires_openai_auth = true", "[otel]"}},
		"default endpoint":    {codexInput(t, admission.MethodAPIKey), []string{"[otel]"}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := codexConfig(admit(t, tc.in))
			for _, w := range tc.want {
				if !strings.Contains(cfg, w) {
					t.Errorf("config.toml lacks %q:\n%s", w, cfg)
				}
			}
			if name == "default endpoint" && strings.Contains(cfg, "model_provider") {
				t.Errorf("a default endpoint needs no provider of OCC's:\n%s", cfg)
			}
			if i, j := strings.Index(cfg, "model_provider"), strings.Index(cfg, "[otel]"); i > j {
				t.Errorf("root keys after a table belong to the table:\n%s", cfg)
			}
		})
	}
}

// The topology read and delete derive from state is the one deploy renders.
func TestTopology_MatchesRenderedObjects(t *testing.T) {
	for _, tc := range topologyCases(t) {
		objs, err := Kubernetes(tc.rev, 1, admission.Compute{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, want := objs.Topology(), TopologyOf(tc.rev.Harness, tc.rev.ExecutionMode, Sandboxed(tc.rev))
		slices.Sort(got.Deployments)
		slices.Sort(want.Deployments)
		if !slices.Equal(got.Deployments, want.Deployments) || got.Sandbox != want.Sandbox {
			t.Errorf("%s: rendered %+v, TopologyOf says %+v", tc.name, got, want)
		}
	}
}

func topologyCases(t *testing.T) []struct {
	name string
	rev  *admission.Revision
} {
	return []struct {
		name string
		rev  *admission.Revision
	}{
		{"embedded", admit(t, embeddedInput(t, "anthropic/claude-sonnet-4-5"))},
		{"dedicated codex", admit(t, codexInput(t, admission.MethodAPIKey))},
		{"sandboxed codex", admit(t, sandboxedCodexInput(t))},
	}
}
