package admission

import (
	"slices"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Shared fixtures: small constructors of valid inputs that tests mutate.

const (
	k8sComputeID = "cmp-k8s-1"
	sshComputeID = "cmp-ssh-1"

	anthropicModel = "anthropic/claude-sonnet-4-5"
	openaiModel    = "openai/gpt-5"
	codexModel     = "codex/gpt-5-codex"
)

// parseDoc parses a JSON5 fixture; fixtures are constants, so a failure is a
// broken test.
func parseDoc(tb testing.TB, src string) occconfig.Document {
	tb.Helper()
	d, err := occconfig.Parse(src)
	if err != nil {
		tb.Fatalf("fixture document %q: %v", src, err)
	}
	return d
}

func mustDoc(src string) occconfig.Document {
	d, err := occconfig.Parse(src)
	if err != nil {
		panic(err)
	}
	return d
}

// modelDoc is the smallest document selecting a primary model.
func modelDoc(model string) occconfig.Document {
	return mustDoc(`{agents: {defaults: {model: "` + model + `"}}}`)
}

func k8sCompute() Compute {
	return Compute{ID: k8sComputeID, Name: "prod", Kind: KindKubernetes, Settings: KubernetesCompute{Namespace: "agents", CPUMillis: 2000, MemoryLimit: "4Gi"}}
}

func sshCompute() Compute {
	return Compute{ID: sshComputeID, Name: "edge", Kind: KindSSH, Settings: SSHCompute{Host: "edge.example.com", Port: 22, OpenClawPath: "/usr/local/bin/openclaw", ConfigDir: "/etc/openclaw"}}
}

func fullDriver() *SandboxDriver {
	return &SandboxDriver{Name: DriverOpenShell, Facets: []string{FacetNetworking, FacetFilesystem, FacetProcess}, RequiredProfile: "occ-native"}
}

func partialDriver() *SandboxDriver {
	return &SandboxDriver{Name: DriverOpenShell, Facets: []string{FacetNetworking, FacetFilesystem}, RequiredProfile: "occ-native"}
}

func gateway() *CredentialGateway { return &CredentialGateway{Name: "cg-main"} }

func apiKeySource(computeID string) CredentialSource {
	return CredentialSource{ID: "src-key", Name: "model-key", Method: MethodAPIKey, Generation: 1, ComputeID: computeID,
		SecretRef: &SecretRef{Name: "model-key", Key: "api-key"}}
}

func patSource(computeID string) CredentialSource {
	return CredentialSource{ID: "src-pat", Name: "codex-pat", Method: MethodCodexPAT, Generation: 1, ComputeID: computeID,
		SecretRef: &SecretRef{Name: "codex-pat", Key: "token"}}
}

func saPATSource(computeID string) CredentialSource {
	return CredentialSource{ID: "src-sa", Name: "codex-account", Method: MethodCodexPAT, Generation: 1, ComputeID: computeID,
		ServiceAccount: "codex-account"}
}

func credSource(sourceType string) CredentialSource {
	return CredentialSource{ID: "src-cg", Name: "gateway-key", Method: MethodCredentialSource, Generation: 1, SourceType: sourceType}
}

func runtimeSource(computeID string) CredentialSource {
	return CredentialSource{ID: "src-rt", Name: "host-env", Method: MethodRuntime, Generation: 1, ComputeID: computeID,
		EnvironmentFile: "/etc/openclaw/model.env"}
}

func configuration(doc occconfig.Document) Configuration {
	return Configuration{ID: "cfg-1", Name: "support", Generation: 3, Document: doc}
}

// k8sEmbeddedInput: Kubernetes, embedded OpenClaw, anthropic model, api_key
// from a Secret in the same compute, harness left to the resolver.
func k8sEmbeddedInput() Input {
	return Input{
		Agent:         Agent{Name: "support", ExecutionMode: ModeEmbedded},
		Configuration: configuration(modelDoc(anthropicModel)),
		Compute:       k8sCompute(),
		Source:        apiKeySource(k8sComputeID),
	}
}

// dedicatedCodexInput: Kubernetes, dedicated Codex, codex/gpt-5-codex, api_key.
func dedicatedCodexInput() Input {
	return Input{
		Agent:         Agent{Name: "coder", Harness: HarnessCodex, ExecutionMode: ModeDedicated},
		Configuration: configuration(modelDoc(codexModel)),
		Compute:       k8sCompute(),
		Source:        apiKeySource(k8sComputeID),
	}
}

// dedicatedOpenClawInput: Kubernetes with a qualifying OpenShell driver,
// dedicated native OpenClaw, openai/gpt-5, api_key.
func dedicatedOpenClawInput() Input {
	c := k8sCompute()
	c = c.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	return Input{
		Agent:         Agent{Name: "native", Harness: HarnessOpenClaw, ExecutionMode: ModeDedicated},
		Configuration: configuration(modelDoc(openaiModel)),
		Compute:       c,
		Source:        apiKeySource(k8sComputeID),
	}
}

// sshInput: SSH, embedded OpenClaw, anthropic model, runtime credentials.
func sshInput() Input {
	return Input{
		Agent:         Agent{Name: "edge", ExecutionMode: ModeEmbedded},
		Configuration: configuration(modelDoc(anthropicModel)),
		Compute:       sshCompute(),
		Source:        runtimeSource(sshComputeID),
	}
}

// refusal is what a refused admission must report first.
type refusal struct {
	Class   Class
	Rule    string
	Attr    []string // nil: not checked
	DocPath string   // "": the error carries no document path
}

func checkRefusal(t *testing.T, errs Errors, want refusal) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("admitted; want %s %s", want.Class, want.Rule)
	}
	e := errs[0]
	if e.Class != want.Class || e.Rule != want.Rule {
		t.Fatalf("errs[0] = %s %s (%s); want %s %s\nall: %v", e.Class, e.Rule, e.Message, want.Class, want.Rule, errs)
	}
	if want.Attr != nil && !slices.Equal(e.Attribute, want.Attr) {
		t.Errorf("errs[0].Attribute = %q, want %q", e.Attribute, want.Attr)
	}
	if got := e.DocPath.String(); got != want.DocPath {
		t.Errorf("errs[0].DocPath = %q, want %q", got, want.DocPath)
	}
	if e.Message == "" {
		t.Errorf("errs[0] has no message")
	}
	if e.Class.HTTPStatus() != map[Class]int{InvalidRequest: 400, ResourceConflict: 409}[e.Class] {
		t.Errorf("HTTPStatus(%s) = %d", e.Class, e.Class.HTTPStatus())
	}
}

func admitOK(t *testing.T, in Input) *Revision {
	t.Helper()
	rev, errs := Admit(in)
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	if rev == nil {
		t.Fatalf("no revision and no errors")
	}
	return rev
}

func canon(v any) string { return string(occconfig.Canonical(v)) }

var (
	attrSource  = []string{"harness_auth", "source"}
	attrConfig  = []string{"configuration"}
	attrCompute = []string{"compute"}
	attrMode    = []string{"execution_mode"}
	attrHarness = []string{"harness"}
)

// admitCase is one row of a table of admissions: the input, and the
// refusal it gets (nil: admitted).
type admitCase struct {
	name string
	in   Input
	want *refusal
}

// runAdmitCases admits each case's input and checks its refusal.
func runAdmitCases(t *testing.T, cases []admitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}
}
