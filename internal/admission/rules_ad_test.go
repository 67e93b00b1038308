package admission

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// credentialGatewayCodexInput: dedicated Codex behind the OpenShell sandbox
// and its Credential Gateway, with a credential_source binding.
func credentialGatewayCodexInput() Input {
	in := dedicatedCodexInput()
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
	in.Source = credSource(SourceTypeOpenAIAPIKey)
	return in
}

// rule AD1
func TestAD1_SourceMustLiveInAgentCompute(t *testing.T) {
	inCompute := func(in Input, computeID string) Input {
		in.Source.ComputeID = computeID
		return in
	}
	tests := []struct {
		name string
		in   Input
		want *refusal
	}{
		{"secret source in the agent's compute", k8sEmbeddedInput(), nil},
		{"source not tied to a compute", inCompute(k8sEmbeddedInput(), ""), nil},
		{"runtime source on its ssh host", sshInput(), nil},
		{"credential_source is not bound to a compute", func() Input { in := credentialGatewayCodexInput(); in.Source.ComputeID = "cmp-other"; return in }(), nil},
		{"secret source in another compute", inCompute(k8sEmbeddedInput(), "cmp-other"), &refusal{ResourceConflict, "AD1", attrSource, ""}},
		{"service account in another compute", func() Input { in := dedicatedCodexInput(); in.Source = saPATSource("cmp-other"); return in }(), &refusal{ResourceConflict, "AD1", attrSource, ""}},
		{"runtime source of another host", inCompute(sshInput(), "cmp-ssh-2"), &refusal{ResourceConflict, "AD1", attrSource, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				// The revision authorizes exactly this source, at its generation.
				if rev.Source.ID != tc.in.Source.ID || rev.Source.Method != tc.in.Source.Method || rev.Source.Generation != tc.in.Source.Generation {
					t.Errorf("frozen source = %+v", rev.Source)
				}
				if rev.ConfigurationID != "cfg-1" || rev.ConfigurationGeneration != 3 || rev.Agent != tc.in.Agent.Name {
					t.Errorf("frozen identity = %s@%d for %s", rev.ConfigurationID, rev.ConfigurationGeneration, rev.Agent)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}
}

// rule AD2
func TestAD2_DriverTransformLeavesSourceUnchanged(t *testing.T) {
	in := credentialGatewayCodexInput()
	stored := canon(in.Configuration.Document)
	rev := admitOK(t, in)
	if key, _ := occconfig.String(rev.AdmittedDocument, occconfig.Keys("models", "providers", "codex", "apiKey")); key != PlaceholderCredential {
		t.Errorf("admitted apiKey = %q, want the placeholder %q", key, PlaceholderCredential)
	}
	if canon(in.Configuration.Document) != stored {
		t.Errorf("stored configuration changed: %s", canon(in.Configuration.Document))
	}
	if _, ok := occconfig.Lookup(in.Configuration.Document, occconfig.Keys("models")); ok {
		t.Errorf("stored configuration gained models")
	}
	// The transform runs before validation: the transformed document is
	// what is resolved and frozen (the placeholder reaches the gateway copy too).
	if key, _ := occconfig.String(rev.GatewayDocument, occconfig.Keys("models", "providers", "codex", "apiKey")); key != PlaceholderCredential {
		t.Errorf("gateway apiKey = %q", key)
	}

	// No transform without the driver's credential path.
	noTransform := []struct {
		name string
		in   Input
	}{
		{"api_key with the driver", func() Input {
			in := dedicatedCodexInput()
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
			return in
		}()},
		{"no sandbox driver", dedicatedCodexInput()},
	}
	for _, tc := range noTransform {
		t.Run(tc.name, func(t *testing.T) {
			rev := admitOK(t, tc.in)
			if _, ok := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("models", "providers")); ok {
				t.Errorf("admitted document was transformed: %s", canon(rev.AdmittedDocument))
			}
		})
	}
	d := modelDoc(codexModel)
	if out := DriverTransform("other-driver", d, in.Compute, in.Source); canon(out) != canon(modelDoc(codexModel)) {
		t.Errorf("unknown driver transformed the document: %s", canon(out))
	}

	// Refused side: a refused admission leaves the stored document as it was,
	// even when the transform ran (embedded OpenClaw cannot use credential_source).
	refused := credentialGatewayCodexInput()
	refused.Agent = Agent{Name: "support", Harness: HarnessOpenClaw, ExecutionMode: ModeEmbedded}
	refused.Configuration.Document = modelDoc(anthropicModel)
	before := canon(refused.Configuration.Document)
	_, errs := Admit(refused)
	checkRefusal(t, errs, refusal{InvalidRequest, "AU3", attrSource, ""})
	if canon(refused.Configuration.Document) != before {
		t.Errorf("refused admission changed the stored configuration: %s", canon(refused.Configuration.Document))
	}
}

// rule AD3
func TestAD3_RevisionFreezesIdentity(t *testing.T) {
	base := admitOK(t, dedicatedCodexInput())
	id := base.ID()
	if len(id) != 16 {
		t.Fatalf("ID() = %q, want 16 hex digits", id)
	}
	if base.HarnessVersion != "codex@"+PinnedCodexVersion {
		t.Errorf("HarnessVersion = %q", base.HarnessVersion)
	}
	if base.ComputeID != k8sComputeID || base.ConfigurationID != "cfg-1" || base.ConfigurationGeneration != 3 || base.Source.Generation != 1 || base.Source.SecretName != "model-key" || base.Source.SecretKey != "api-key" {
		t.Errorf("frozen identity = %+v", base)
	}

	mutate := func(f func(*Input)) Input {
		in := dedicatedCodexInput()
		f(&in)
		return in
	}
	changes := []struct {
		name string
		in   Input
	}{
		{"configuration generation", mutate(func(in *Input) { in.Configuration.Generation++ })},
		{"configuration identity", mutate(func(in *Input) { in.Configuration.ID = "cfg-2" })},
		{"document content", mutate(func(in *Input) {
			in.Configuration.Document = mustDoc(`{agents: {defaults: {model: "codex/gpt-5-codex", maxConcurrent: 2}}}`)
		})},
		{"source generation", mutate(func(in *Input) { in.Source.Generation++ })},
		{"source identity", mutate(func(in *Input) { in.Source.ID = "src-other" })},
		{"source secret key", mutate(func(in *Input) { in.Source.SecretRef = &SecretRef{Name: "model-key", Key: "other"} })},
		{"compute cpu limit", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CPUMillis = 2500 })
		})},
		{"compute memory limit", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.MemoryLimit = "8Gi" })
		})},
		{"compute namespace", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.Namespace = "other" })
		})},
		{"compute identity", mutate(func(in *Input) { in.Compute.ID = "cmp-k8s-2"; in.Source.ComputeID = "cmp-k8s-2" })},
		{"harness version (codex image)", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CodexImage = "registry.example/codex:0.170.0" })
		})},
		{"runtime image", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.RuntimeImage = "registry.example/openclaw:2026.9.7" })
		})},
		{"logging level", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingLevel = "debug" })
		})},
		{"sandbox binding", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
		})},
		{"agent", mutate(func(in *Input) { in.Agent.Name = "coder-2" })},
	}
	for _, tc := range changes {
		t.Run("changes with "+tc.name, func(t *testing.T) {
			rev := admitOK(t, tc.in)
			if rev.ID() == id {
				t.Errorf("revision ID %s did not change", id)
			}
		})
	}
	if v := admitOK(t, mutate(func(in *Input) {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CodexImage = "registry.example/codex:0.170.0" })
	})).HarnessVersion; v != "codex@image:registry.example/codex:0.170.0" {
		t.Errorf("custom image harness version = %q", v)
	}

	stays := []struct {
		name string
		in   Input
	}{
		{"identical inputs", dedicatedCodexInput()},
		{"same document spelled differently", mutate(func(in *Input) {
			in.Configuration.Document = mustDoc("{\n  // same\n  'agents': {defaults: {model: 'codex/gpt-5-codex',},},\n}")
		})},
		{"source display name", mutate(func(in *Input) { in.Source.Name = "renamed" })},
		{"configuration display name", mutate(func(in *Input) { in.Configuration.Name = "renamed" })},
		{"pinned image spelled out", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CodexImage = PinnedCodexImage })
		})},
		{"default logging level spelled out", mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingLevel = "info" })
		})},
	}
	for _, tc := range stays {
		t.Run("stays with "+tc.name, func(t *testing.T) {
			rev := admitOK(t, tc.in)
			if rev.ID() != id {
				t.Errorf("revision ID changed: %s, want %s", rev.ID(), id)
			}
		})
	}

	// The revision is a value: admitting twice gives equal, independent revisions.
	in := dedicatedCodexInput()
	a := admitOK(t, in)
	b := admitOK(t, in)
	a.AdmittedDocument["extra"] = true
	if b.ID() != id || canon(in.Configuration.Document) != canon(modelDoc(codexModel)) {
		t.Errorf("revisions share state with each other or with the input")
	}
}

// rule AD4
func TestAD4_PlatformLoggingStamp(t *testing.T) {
	const written = `{
		logging: {level: "trace", consoleLevel: "warn", consoleStyle: "pretty", redactSensitive: "off", file: "/var/log/openclaw.log"},
		diagnostics: {otel: {enabled: true, logs: true, endpoint: "http://otel:4318"}},
		agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}},
	}`
	tests := []struct {
		name    string
		doc     string
		level   string
		wantLog string
		wantOTL string
	}{
		{"stamp over written settings", written, "debug",
			`{"consoleLevel":"debug","consoleStyle":"json","file":"/var/log/openclaw.log","level":"debug"}`,
			`{"enabled":true,"endpoint":"http://otel:4318","logs":false}`},
		{"default level info", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "",
			`{"consoleLevel":"info","consoleStyle":"json","level":"info"}`, `{"logs":false}`},
		{"non-object logging replaced", `{logging: "verbose", diagnostics: {otel: true}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "warn",
			`{"consoleLevel":"warn","consoleStyle":"json","level":"warn"}`, `{"logs":false}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := withDoc(k8sEmbeddedInput(), tc.doc)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingLevel = tc.level })
			stored := canon(in.Configuration.Document)
			rev := admitOK(t, in)
			logging, _ := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("logging"))
			if canon(logging) != tc.wantLog {
				t.Errorf("admitted logging = %s, want %s", canon(logging), tc.wantLog)
			}
			otel, _ := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("diagnostics", "otel"))
			if canon(otel) != tc.wantOTL {
				t.Errorf("admitted diagnostics.otel = %s, want %s", canon(otel), tc.wantOTL)
			}
			want := tc.level
			if want == "" {
				want = "info"
			}
			if rev.LoggingOwnership != LoggingPlatform || rev.LoggingLevel != want {
				t.Errorf("ownership %q level %q", rev.LoggingOwnership, rev.LoggingLevel)
			}
			if canon(in.Configuration.Document) != stored {
				t.Errorf("stored configuration changed")
			}
			if len(CheckDocument(rev.AdmittedDocument)) != 0 {
				t.Errorf("stamped document does not validate: %v", CheckDocument(rev.AdmittedDocument))
			}
		})
	}
	// The stamp lands after the driver transform: both are in the admitted document.
	rev := admitOK(t, credentialGatewayCodexInput())
	if l, _ := occconfig.String(rev.AdmittedDocument, occconfig.Keys("logging", "consoleStyle")); l != "json" {
		t.Errorf("stamp missing after transform")
	}
	if k, _ := occconfig.String(rev.AdmittedDocument, occconfig.Keys("models", "providers", "codex", "apiKey")); k != PlaceholderCredential {
		t.Errorf("transform missing next to the stamp")
	}
	// The retired key draws advice, not a refusal.
	in := withDoc(k8sEmbeddedInput(), written)
	rev = admitOK(t, in)
	if len(rev.Warnings) != 1 || rev.Warnings[0].Rule != "AD4" || rev.Warnings[0].DocPath.String() != "logging.redactSensitive" {
		t.Errorf("warnings = %+v", rev.Warnings)
	}
	if ws := DocumentWarnings(modelDoc(anthropicModel)); len(ws) != 0 {
		t.Errorf("warnings without the retired key = %+v", ws)
	}
	// Refused side: the stamp does not hide a document that validation refuses.
	_, errs := Admit(withDoc(k8sEmbeddedInput(), `{logging: {level: "trace"}, loggin: {}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`))
	checkRefusal(t, errs, refusal{InvalidRequest, "MR9", attrConfig, "loggin"})
}

// rule AD5
func TestAD5_DriverLoggingKeptAsWritten(t *testing.T) {
	const written = `{
		logging: {level: "trace", consoleStyle: "pretty", redactSensitive: "off"},
		diagnostics: {otel: {logs: true}},
		agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}},
	}`
	tests := []struct {
		name      string
		ownership string
		driver    bool
	}{
		{"driver-owned", LoggingDriver, true},
		{"platform-owned", LoggingPlatform, false},
		{"unset is platform-owned", "", false},
		{"unknown is platform-owned", "collector", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := withDoc(k8sEmbeddedInput(), written)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingOwnership = tc.ownership })
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingLevel = "debug" })
			rev := admitOK(t, in)
			logging, _ := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("logging"))
			otel, _ := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("diagnostics", "otel"))
			if tc.driver {
				if canon(logging) != `{"consoleStyle":"pretty","level":"trace","redactSensitive":"off"}` || canon(otel) != `{"logs":true}` {
					t.Errorf("driver-owned logging rewritten: %s %s", canon(logging), canon(otel))
				}
				if rev.LoggingOwnership != LoggingDriver || rev.LoggingLevel != "" {
					t.Errorf("ownership %q level %q", rev.LoggingOwnership, rev.LoggingLevel)
				}
				return
			}
			if canon(logging) != `{"consoleLevel":"debug","consoleStyle":"json","level":"debug"}` || canon(otel) != `{"logs":false}` {
				t.Errorf("platform-owned logging not stamped: %s %s", canon(logging), canon(otel))
			}
			if rev.LoggingOwnership != LoggingPlatform || rev.LoggingLevel != "debug" {
				t.Errorf("ownership %q level %q", rev.LoggingOwnership, rev.LoggingLevel)
			}
		})
	}
	// Ownership is part of the frozen revision.
	p := admitOK(t, k8sEmbeddedInput())
	d := k8sEmbeddedInput()
	d.Compute = d.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingOwnership = LoggingDriver })
	if admitOK(t, d).ID() == p.ID() {
		t.Errorf("logging ownership change kept the revision")
	}
}

// rule AD5: only a compute driver the platform trusts may declare
// driver-managed logging: the Kubernetes compute, in every topology it
// runs. Elsewhere (an SSH host) the declaration is refused with
// RESOURCE_CONFLICT at compute, naming the setting and the fix, instead of
// being turned into platform-owned logging without a word.
func TestAD5_DriverLoggingOnlyFromATrustedComputeDriver(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Input
		trusted bool
	}{
		{"kubernetes embedded", k8sEmbeddedInput(), true},
		{"kubernetes dedicated codex", dedicatedCodexInput(), true},
		{"ssh", sshInput(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingOwnership = LoggingDriver })
			rev, errs := Admit(in)
			if tc.trusted {
				if len(errs) > 0 || rev.LoggingOwnership != LoggingDriver {
					t.Fatalf("driver logging refused on a trusted compute: %v", errs)
				}
				return
			}
			checkRefusal(t, errs, refusal{ResourceConflict, "AD5", attrCompute, ""})
			for _, want := range []string{`logging.ownership = "driver"`, "a Kubernetes compute", "an SSH compute", `set ownership = "platform"`} {
				if !strings.Contains(errs[0].Detail(), want) {
					t.Errorf("refusal %q does not say %q", errs[0].Detail(), want)
				}
			}
			// Platform-owned logging on the same host is admitted.
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingOwnership = LoggingPlatform })
			admitOK(t, in)
		})
	}
}

// rule AD3: a compute's Pod settings are frozen into the revision: each
// one set changes the revision id (a new revision, a Recreate restart),
// each one unset or spelled out as its default keeps it, so that an
// upgrade changes no existing agent's revision.
func TestAD3_PodSettingsAreFrozen(t *testing.T) {
	base := admitOK(t, k8sEmbeddedInput())
	limits := func(in *Input) {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CPUMillis, k.MemoryLimit = 2000, "4Gi" })
	}
	mutate := func(f func(*Input)) Input {
		in := k8sEmbeddedInput()
		f(&in)
		return in
	}
	secs := int64(30)
	for name, in := range map[string]Input{
		"node_selector": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.NodeSelector = map[string]string{"pool": "agents"} })
		}),
		"tolerations": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.Tolerations = []Toleration{{Key: "k", Operator: "Exists"}} })
		}),
		"toleration seconds": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) {
				k.Tolerations = []Toleration{{Key: "k", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}}
			})
		}),
		"priority_class_name": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.PriorityClassName = "high" })
		}),
		"pod_labels": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.PodLabels = map[string]string{"team": "a"} })
		}),
		"cpu_request": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CPURequestMillis = 500 })
		}),
		"memory_request": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.MemoryRequest = "1Gi" })
		}),
		"image_pull_secrets": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.ImagePullSecrets = []string{"regcred"} })
		}),
		"image_pull_policy": mutate(func(in *Input) {
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.ImagePullPolicy = "Always" })
		}),
	} {
		if admitOK(t, in).ID() == base.ID() {
			t.Errorf("%s: the revision id did not change", name)
		}
	}
	withLimits := admitOK(t, mutate(limits)).ID()
	for name, in := range map[string]Input{
		"empty node_selector": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.NodeSelector = map[string]string{} })
		}),
		"empty tolerations": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.Tolerations = []Toleration{} })
		}),
		"empty pod_labels": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.PodLabels = map[string]string{} })
		}),
		"empty image_pull_secrets": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.ImagePullSecrets = []string{} })
		}),
		"cpu_request equal to the limit": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CPURequestMillis = 2000 })
		}),
		"memory_request equal to the limit": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.MemoryRequest = "4Gi" })
		}),
		"memory_request, the limit respelled": mutate(func(in *Input) {
			limits(in)
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.MemoryRequest = "4096Mi" })
		}),
	} {
		rev := admitOK(t, in)
		if rev.ID() != withLimits {
			t.Errorf("%s changed the revision id", name)
		}
		if cs := rev.ComputeSettings; cs.Kubernetes().CPURequestMillis != 0 || cs.Kubernetes().MemoryRequest != "" {
			t.Errorf("%s: frozen requests %d / %q, want the limits (unset)", name, cs.Kubernetes().CPURequestMillis, cs.Kubernetes().MemoryRequest)
		}
	}
}
