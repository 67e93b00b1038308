package admission

import (
	"fmt"
	"testing"
)

// matrixCell is one combination of the generated admission matrix.
type matrixCell struct {
	harness, mode, kind, method string
	gateway                     bool
	driver                      string // "none", "full", "partial"
}

func (c matrixCell) String() string {
	gw := "no-gateway"
	if c.gateway {
		gw = "gateway"
	}
	return fmt.Sprintf("%s/%s/%s/%s/%s/driver-%s", c.harness, c.mode, c.kind, c.method, gw, c.driver)
}

// expect states the rules of RULES.md independently of the code under test
// and gives the outcome of one cell: accepted, or the class and rule of the
// first refusal. The model is chosen per cell (matrixInput) so that it is
// never the reason for a refusal.
func expect(c matrixCell) (ok bool, class Class, rule string) {
	dedicated := c.mode == ModeDedicated
	ssh := c.kind == KindSSH
	native := c.harness == HarnessOpenClaw && dedicated

	// HM1, judged first and alone: openclaw+embedded (k8s, ssh),
	// codex+dedicated (k8s), openclaw+dedicated (k8s).
	if c.harness == HarnessCodex && !dedicated {
		return false, InvalidRequest, "HM1"
	}
	if dedicated && ssh {
		return false, InvalidRequest, "HM1"
	}
	// ND6, judged next and alone: dedicated OpenClaw cannot serve a turn
	// (its worker's inference runs on the gateway, which holds no key),
	// whatever the driver, gateway or auth method.
	if native {
		return false, InvalidRequest, "ND6"
	}
	// ND4: a sandbox driver needs Kubernetes Compute (the target cannot take it: 409).
	if c.driver != "none" && ssh {
		return false, ResourceConflict, "ND4"
	}
	// AU5: SSH accepts only runtime; Kubernetes rejects runtime; both 409.
	if ssh && c.method != MethodRuntime {
		return false, ResourceConflict, "AU5"
	}
	if !ssh && c.method == MethodRuntime {
		return false, ResourceConflict, "AU5"
	}
	// AU4: while a credential gateway is selected, Secret-backed and account
	// methods are refused (409). On SSH the gateway cannot serve the agent at
	// all (it is paired with the OpenShell sandbox, Kubernetes only), so the
	// only SSH method, runtime, is refused too: the gateway is present (409).
	if c.gateway && c.method != MethodCredentialSource {
		return false, ResourceConflict, "AU4"
	}
	switch c.method {
	case MethodAPIKey:
		// AU1: embedded by provider (anthropic here), dedicated Codex
		// through OPENAI_API_KEY (codex models here).
		return true, "", ""
	case MethodCodexPAT:
		// AU2: dedicated Codex only; an unsupported combination (400).
		if !(c.harness == HarnessCodex && dedicated) {
			return false, InvalidRequest, "AU2"
		}
		return true, "", ""
	case MethodCredentialSource:
		// AU3: a dedicated harness (400 otherwise), a selected credential
		// gateway and the paired OpenShell sandbox (409: missing on the target).
		if !dedicated {
			return false, InvalidRequest, "AU3"
		}
		if !c.gateway {
			return false, ResourceConflict, "AU3"
		}
		if c.driver == "none" {
			return false, ResourceConflict, "AU3"
		}
		return true, "", ""
	case MethodRuntime:
		return true, "", "" // SSH embedded OpenClaw (HM1 left nothing else on SSH)
	}
	panic("unknown method " + c.method)
}

// matrixInput builds the Admit input of one cell.
func matrixInput(c matrixCell) Input {
	compute := k8sCompute()
	if c.kind == KindSSH {
		compute = sshCompute()
	}
	switch c.driver {
	case "full":
		compute = compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	case "partial":
		compute = compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = partialDriver() })
	}
	if c.gateway {
		compute = compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
	}
	model := anthropicModel
	switch {
	case c.harness == HarnessCodex:
		model = codexModel
	case c.mode == ModeDedicated:
		model = openaiModel
	}
	var src CredentialSource
	switch c.method {
	case MethodAPIKey:
		src = apiKeySource(compute.ID)
	case MethodCodexPAT:
		src = patSource(compute.ID)
	case MethodCredentialSource:
		src = credSource(SourceTypeOpenAIAPIKey)
	case MethodRuntime:
		src = runtimeSource(compute.ID)
	}
	return Input{
		Agent:         Agent{Name: "matrix", Harness: c.harness, ExecutionMode: c.mode},
		Configuration: configuration(modelDoc(model)),
		Compute:       compute,
		Source:        src,
	}
}

func matrixCells() []matrixCell {
	var cells []matrixCell
	for _, h := range []string{HarnessOpenClaw, HarnessCodex} {
		for _, m := range []string{ModeEmbedded, ModeDedicated} {
			for _, k := range []string{KindKubernetes, KindSSH} {
				for _, a := range []string{MethodAPIKey, MethodCodexPAT, MethodCredentialSource, MethodRuntime} {
					for _, g := range []bool{false, true} {
						for _, d := range []string{"none", "full", "partial"} {
							cells = append(cells, matrixCell{h, m, k, a, g, d})
						}
					}
				}
			}
		}
	}
	return cells
}

// rules HM1, ND4, ND6, AU1 to AU5 together
func TestMatrix_HarnessModeComputeAuthGatewayDriver(t *testing.T) {
	cells := matrixCells()
	if len(cells) != 2*2*2*4*2*3 {
		t.Fatalf("matrix has %d cells", len(cells))
	}
	accepted := 0
	for _, c := range cells {
		t.Run(c.String(), func(t *testing.T) {
			wantOK, wantClass, wantRule := expect(c)
			rev, errs := Admit(matrixInput(c))
			if wantOK {
				if len(errs) > 0 {
					t.Fatalf("refused with %v; the rules accept this cell", errs)
				}
				accepted++
				if rev.Harness != c.harness || rev.ExecutionMode != c.mode || rev.ComputeKind != c.kind || rev.Credential.Method != c.method {
					t.Errorf("revision %s %s %s %s does not match the cell", rev.Harness, rev.ExecutionMode, rev.ComputeKind, rev.Credential.Method)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("admitted; the rules refuse this cell with %s %s", wantClass, wantRule)
			}
			if rev != nil {
				t.Errorf("refused admission returned a revision")
			}
			if errs[0].Class != wantClass || errs[0].Rule != wantRule {
				t.Errorf("errs[0] = %s %s (%s); want %s %s", errs[0].Class, errs[0].Rule, errs[0].Message, wantClass, wantRule)
			}
			if (wantRule == "HM1" || wantRule == "ND6") && len(errs) != 1 {
				t.Errorf("%s must be judged alone: %v", wantRule, errs)
			}
		})
	}
	// Guard against a degenerate expectation: both sides are exercised.
	if accepted == 0 || accepted == len(cells) {
		t.Errorf("%d of %d cells accepted", accepted, len(cells))
	}
	t.Logf("%d cells, %d accepted", len(cells), accepted)
}
