package admission

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// checkKindRow states what every row of the kind table must hold for the
// rules that read it to agree with each other.
func checkKindRow(t *testing.T, k KindSupport) {
	t.Helper()
	if k.Kind == "" || strings.ToLower(k.Kind) != k.Kind {
		t.Errorf("row %q: the kind must be a lower-case name", k.Kind)
	}
	if len(k.Runs) == 0 {
		t.Errorf("row %q runs no harness (HM1)", k.Kind)
	}
	for i, hm := range k.Runs {
		if !slices.Contains(Harnesses, hm.Harness) || !slices.Contains(ExecutionModes, hm.Mode) {
			t.Errorf("row %q runs %s %s, not a known harness and mode (HM1)", k.Kind, hm.Harness, hm.Mode)
		}
		if slices.Contains(k.Runs[:i], hm) {
			t.Errorf("row %q lists %s %s twice", k.Kind, hm.Harness, hm.Mode)
		}
	}
	if len(k.AuthMethods) == 0 {
		t.Errorf("row %q takes no auth method (AU5)", k.Kind)
	}
	for i, m := range k.AuthMethods {
		if !slices.Contains(AuthMethods, m) || slices.Contains(k.AuthMethods[:i], m) {
			t.Errorf("row %q: auth method %q is unknown or listed twice (AU5)", k.Kind, m)
		}
	}
	// Cross-rule consistency: a method or mode the row takes must be
	// servable there.
	if k.AcceptsMethod(MethodCredentialSource) && !k.SandboxDriver {
		t.Errorf("row %q takes credential_source but no sandbox driver: AU3 needs the paired OpenShell sandbox", k.Kind)
	}
	if k.RunsHarness(HarnessOpenClaw, ModeDedicated) && !k.SandboxDriver {
		t.Errorf("row %q runs native OpenClaw but takes no sandbox driver (ND4)", k.Kind)
	}
	if k.AcceptsMethod(MethodCodexPAT) && !k.RunsHarness(HarnessCodex, ModeDedicated) {
		t.Errorf("row %q takes codex_pat but runs no dedicated Codex (AU2)", k.Kind)
	}
	if k.RunsHarness(HarnessCodex, ModeEmbedded) {
		t.Errorf("row %q runs codex embedded, which does not exist (HM1)", k.Kind)
	}
	if k.Settings == nil {
		t.Errorf("row %q freezes no settings (AD3)", k.Kind)
	} else if s := k.Settings(Compute{Kind: k.Kind, Name: "n"}); s.Kind != k.Kind || s.Name != "n" {
		t.Errorf("row %q settings = %+v, want the kind and the name", k.Kind, s)
	}
	if w := k.Words; w.Title == "" || w.Noun == "" || w.Is == "" {
		t.Errorf("row %q: words %+v must name the kind in refusals", k.Kind, w)
	}
}

// rules HM1, AU5, AU6, ND4, PR11, SS1, SS2: every row of the kind table is
// consistent, every known auth method, harness and mode is served by some
// kind, and the rows say what RULES.md says.
func TestKinds_TableIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		checkKindRow(t, k)
		if seen[k.Kind] {
			t.Errorf("kind %q has two rows", k.Kind)
		}
		seen[k.Kind] = true
	}
	if !slices.Equal(ComputeKinds, kindNames()) {
		t.Errorf("ComputeKinds = %v, want the table's kinds %v", ComputeKinds, kindNames())
	}
	for _, m := range AuthMethods {
		if len(kindsAccepting(m)) == 0 {
			t.Errorf("no kind takes auth method %q", m)
		}
	}
	for _, h := range Harnesses {
		if len(kindsWhere(func(k KindSupport) bool {
			return slices.ContainsFunc(k.Runs, func(hm HarnessMode) bool { return hm.Harness == h })
		})) == 0 {
			t.Errorf("no kind runs harness %q", h)
		}
	}

	// The rows as RULES.md states them.
	k8s, ok := KindOf(KindKubernetes)
	if !ok {
		t.Fatal("no kubernetes row")
	}
	ssh, ok := KindOf(KindSSH)
	if !ok {
		t.Fatal("no ssh row")
	}
	if _, ok := KindOf("docker"); ok {
		t.Error("KindOf(docker) found a row")
	}
	want := []struct {
		row                     KindSupport
		runs                    []HarnessMode
		methods                 []string
		bindings, driver, probe bool
	}{
		// HM1: openclaw embedded, codex dedicated, openclaw dedicated;
		// AU5: Kubernetes rejects runtime; AU6 bindings; ND4 drivers; PR1 probe.
		{k8s, []HarnessMode{{HarnessOpenClaw, ModeEmbedded}, {HarnessCodex, ModeDedicated}, {HarnessOpenClaw, ModeDedicated}},
			[]string{MethodAPIKey, MethodCodexPAT, MethodCredentialSource}, true, true, true},
		// SS1: embedded OpenClaw with runtime only; AU6: no Secrets to
		// project; ND4: no driver; SS2: readiness, not model auth.
		{ssh, []HarnessMode{{HarnessOpenClaw, ModeEmbedded}}, []string{MethodRuntime}, false, false, false},
	}
	for _, w := range want {
		r := w.row
		if !slices.Equal(r.Runs, w.runs) || !slices.Equal(r.AuthMethods, w.methods) || r.SecretBindings != w.bindings || r.SandboxDriver != w.driver || r.StartupProbe != w.probe {
			t.Errorf("row %q = runs %v methods %v bindings %v driver %v probe %v; want %v %v %v %v %v",
				r.Kind, r.Runs, r.AuthMethods, r.SecretBindings, r.SandboxDriver, r.StartupProbe, w.runs, w.methods, w.bindings, w.driver, w.probe)
		}
	}

	// HM1 and AU5 read the table: they agree with it cell by cell.
	for _, k := range Kinds() {
		for _, h := range Harnesses {
			for _, m := range ExecutionModes {
				if got := CheckHarnessMode(h, m, k.Kind) == nil; got != k.RunsHarness(h, m) {
					t.Errorf("CheckHarnessMode(%s, %s, %s) admitted=%v, row runs=%v", h, m, k.Kind, got, k.RunsHarness(h, m))
				}
			}
		}
		for _, m := range AuthMethods {
			if got := CheckSourceCompute(m, Compute{Kind: k.Kind, Name: "c"}) == nil; got != k.AcceptsMethod(m) {
				t.Errorf("CheckSourceCompute(%s, %s) admitted=%v, row takes=%v", m, k.Kind, got, k.AcceptsMethod(m))
			}
		}
	}
}

// rules HM1, AU4, AU5, AU6, ND4: the refusals the table's words build are
// the messages these rules have always answered with.
func TestKinds_RefusalMessagesKept(t *testing.T) {
	bindings := []SecretBindingEnv{{Binding: "telegram", EnvVar: "TELEGRAM"}}
	withGateway := sshCompute()
	withGateway = withGateway.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
	withDriver := sshCompute()
	withDriver = withDriver.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	_, runtimeOnK8s := CheckAuth(HarnessOpenClaw, ModeEmbedded, "anthropic", k8sCompute(), runtimeSource(k8sComputeID))
	_, keyOnSSH := CheckAuth(HarnessOpenClaw, ModeEmbedded, "anthropic", sshCompute(), apiKeySource(sshComputeID))
	_, runtimeWithGateway := CheckAuth(HarnessOpenClaw, ModeEmbedded, "anthropic", withGateway, runtimeSource(sshComputeID))
	for _, tc := range []struct {
		name string
		got  error
		want string
	}{
		{"HM1 codex embedded", CheckHarnessMode(HarnessCodex, ModeEmbedded, KindKubernetes),
			`the codex harness has no embedded mode; set execution_mode = "dedicated" (a gateway beside a separate Codex app server)`},
		{"HM1 dedicated on ssh", CheckHarnessMode(HarnessCodex, ModeDedicated, KindSSH),
			`codex dedicated runs on Kubernetes only; an SSH compute runs embedded OpenClaw (harness = "openclaw", execution_mode = "embedded")`},
		{"HM1 native on ssh", CheckHarnessMode(HarnessOpenClaw, ModeDedicated, KindSSH),
			`openclaw dedicated runs on Kubernetes only; an SSH compute runs embedded OpenClaw (harness = "openclaw", execution_mode = "embedded")`},
		{"HM1 unknown kind", CheckHarnessMode(HarnessOpenClaw, ModeEmbedded, "docker"),
			`compute kind "docker" is not supported; use a kubernetes or ssh compute`},
		{"AU5 runtime on kubernetes", runtimeOnK8s,
			`method "runtime" loads host credentials under systemd and exists only on SSH computes; on Kubernetes use api_key, codex_pat or credential_source`},
		{"AU5 api_key on ssh", keyOnSSH,
			`an SSH compute accepts only method "runtime" (systemd loads the operator's credentials file); "api_key" is not available there`},
		{"AU4 runtime with a gateway", runtimeWithGateway,
			`compute "edge" selects credential gateway "cg-main", which serves only credential_source bindings of a dedicated harness in the OpenShell sandbox on Kubernetes; method "runtime" would bypass it. Remove credential_gateway from the SSH compute`},
		{"AU6 bindings on ssh", checkBindingsCompute(bindings, sshCompute()),
			`the configuration has secret_bindings (telegram), which are Kubernetes Secrets; an SSH compute cannot project them. Remove them and add each as a NAME=value line to the environment_file of the agent's runtime credential source, which systemd loads at every start of the unit (outside version immutability, like the model credential); the document keeps referring to it as ${NAME} (here: TELEGRAM=…), or run the Agent on a Kubernetes compute`},
		{"ND4 driver on ssh", CheckSandbox(ModeEmbedded, withDriver),
			`a sandbox driver needs a Kubernetes compute; remove sandbox_driver or use a kubernetes compute`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got == nil {
				t.Fatal("no refusal")
			}
			var msg string
			switch e := tc.got.(type) {
			case *Error:
				msg = e.Message
			case Errors:
				if len(e) != 1 {
					t.Fatalf("errors = %v, want one", e)
				}
				msg = e[0].Message
			}
			if msg != tc.want {
				t.Errorf("message\n got %s\nwant %s", msg, tc.want)
			}
		})
	}
}

// withKind adds a row to the kind table for one test.
func withKind(t *testing.T, row KindSupport) {
	t.Helper()
	saved := kindTable
	kindTable = append(slices.Clone(kindTable), row)
	t.Cleanup(func() { kindTable = saved })
}

// rules HM1, AU5, AU6, ND4, PR11: a compute kind is one row. A
// hypothetical "vm" kind, running embedded OpenClaw and dedicated Codex
// with api_key only, no secret bindings, no sandbox driver and no startup
// probe, is admitted and refused exactly as its row says, by every rule,
// with no other change.
func TestKinds_HypotheticalRowChangesAdmission(t *testing.T) {
	vm := KindSupport{
		Kind:        "vm",
		Runs:        []HarnessMode{{HarnessOpenClaw, ModeEmbedded}, {HarnessCodex, ModeDedicated}},
		AuthMethods: []string{MethodAPIKey},
		Settings: func(c Compute) ComputeSettings {
			return ComputeSettings{Kind: c.Kind, Name: c.Name, Settings: vmSettings{Host: vmOf(c).Host}}
		},
		Words: KindWords{Title: "VM", Noun: "a VM compute", Is: "a VM", BindingsInstead: "put the channel credentials in the VM's image"},
	}
	vmCompute := Compute{ID: "cmp-vm-1", Name: "vm1", Kind: "vm", Settings: vmSettings{Host: "vm.example.com"}}
	embedded := func() Input {
		in := k8sEmbeddedInput()
		in.Compute, in.Source = vmCompute, apiKeySource(vmCompute.ID)
		return in
	}
	codex := func() Input {
		in := dedicatedCodexInput()
		in.Compute, in.Source = vmCompute, apiKeySource(vmCompute.ID)
		return in
	}

	// Without the row the kind does not exist.
	_, errs := Admit(embedded())
	checkRefusal(t, errs, refusal{InvalidRequest, "HM1", attrCompute, ""})

	withKind(t, vm)
	checkKindRow(t, vm)
	native := codex()
	native.Agent.Harness = HarnessOpenClaw
	native.Configuration.Document = modelDoc(openaiModel)
	runtimeSrc := embedded()
	runtimeSrc.Source = runtimeSource(vmCompute.ID)
	bound := embedded()
	bound.Configuration.SecretBindings = map[string]SecretRef{"telegram": {Name: "tg", Key: "token"}}
	sandboxed := embedded()
	sandboxed.Compute = sandboxed.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	envURL := withDoc(embedded(), `{agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {baseUrl: "${LLM_URL}", api: "openai-responses", models: [{id: "gpt-5", name: "m"}]}}}}`)
	envURL.Agent.Harness = HarnessOpenClaw

	for _, tc := range []struct {
		name    string
		in      Input
		want    *refusal
		message string // the refusal's message, when checked
	}{
		{"embedded openclaw", embedded(), nil, ""},
		{"dedicated codex", codex(), nil, ""},
		{"no native openclaw", native, &refusal{InvalidRequest, "HM1", attrMode, ""},
			`openclaw dedicated runs on Kubernetes only; a VM compute runs embedded OpenClaw (harness = "openclaw", execution_mode = "embedded") or dedicated Codex (harness = "codex", execution_mode = "dedicated")`},
		{"api_key only", runtimeSrc, &refusal{ResourceConflict, "AU5", attrSource, ""},
			`a VM compute accepts only method "api_key"; "runtime" is not available there`},
		{"no secret bindings", bound, &refusal{ResourceConflict, "AU6", attrConfig, ""},
			`the configuration has secret_bindings (telegram), which are Kubernetes Secrets; a VM compute cannot project them. Remove them and put the channel credentials in the VM's image (here: TELEGRAM=…), or run the Agent on a Kubernetes compute`},
		{"no sandbox driver", sandboxed, &refusal{ResourceConflict, "ND4", attrCompute, ""}, ""},
		{"no startup probe, so no PR11", envURL, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want != nil {
				checkRefusal(t, errs, *tc.want)
				if tc.message != "" && errs[0].Message != tc.message {
					t.Errorf("message\n got %s\nwant %s", errs[0].Message, tc.message)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
			if want := (ComputeSettings{Kind: "vm", Name: "vm1", Settings: vmSettings{Host: "vm.example.com"}}); !equalSettings(rev.ComputeSettings, want) {
				t.Errorf("frozen settings = %+v, want %+v (the row's)", rev.ComputeSettings, want)
			}
		})
	}
	// The same document is refused by PR11 on Kubernetes, whose row probes.
	k8sURL := envURL
	k8sURL.Compute, k8sURL.Source = k8sCompute(), apiKeySource(k8sComputeID)
	_, errs = Admit(k8sURL)
	checkRefusal(t, errs, refusal{InvalidRequest, "PR11", attrConfig, "models.providers.openai.baseUrl"})

	// Refusals that name the kinds now name the new one too.
	if e := CheckHarnessMode(HarnessOpenClaw, ModeEmbedded, "docker"); e == nil || !strings.Contains(e.Message, "use a kubernetes, ssh or vm compute") {
		t.Errorf("unknown kind: %v", e)
	}
	if e := CheckSourceCompute(MethodAPIKey, sshCompute()); e == nil || !strings.Contains(e.Message, "needs a Kubernetes compute or a VM compute") {
		t.Errorf("api_key on ssh: %v", e)
	}
	if e := CheckSourceCompute(MethodRuntime, vmCompute); e == nil ||
		e.Message != `a VM compute holds only api_key credentials: compute "vm1" is a VM; method "runtime" needs an SSH compute` {
		t.Errorf("runtime on vm: %v", e)
	}
	if e := CheckSourceCompute(MethodAPIKey, vmCompute); e != nil {
		t.Errorf("api_key on vm: %v", e)
	}
}

func equalSettings(a, b ComputeSettings) bool { return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b) }

// rules AD3, HM1: a kind registered from outside the table is one row,
// its platform keys and port rule included; a row without its settings or
// words, or a kind already registered, is refused.
func TestKinds_RegisterKind(t *testing.T) {
	saved := kindTable
	t.Cleanup(func() { kindTable = saved })
	kindTable = slices.Clone(kindTable)
	keys := []PlatformKey{{Path: PathGatewayBind, Value: "loopback", Why: "the test kind listens on loopback"}}
	row := KindSupport{Kind: "memory", Runs: []HarnessMode{{HarnessOpenClaw, ModeEmbedded}}, AuthMethods: []string{MethodAPIKey},
		Settings:     func(c Compute) ComputeSettings { return ComputeSettings{Kind: c.Kind, Name: c.Name} },
		PlatformKeys: func(_, _ string) []PlatformKey { return keys }, UserGatewayPort: true,
		Words: KindWords{Title: "Memory", Noun: "a memory compute", Is: "in memory"}}
	for _, bad := range []KindSupport{{Kind: "x", Words: row.Words}, {Kind: "x", Settings: row.Settings}, {Kind: KindSSH, Settings: row.Settings, Words: row.Words}} {
		if err := RegisterKind(bad); err == nil {
			t.Errorf("RegisterKind(%q) took a row it must refuse", bad.Kind)
		}
	}
	if err := RegisterKind(row); err != nil {
		t.Fatal(err)
	}
	if got := PlatformKeys("memory", HarnessOpenClaw, ModeEmbedded); len(got) != 1 || got[0].Value != "loopback" {
		t.Errorf("PlatformKeys of the registered kind = %+v, want its row's", got)
	}
	doc := modelDoc(anthropicModel)
	if errs := StampPlatformKeys(doc, "memory", HarnessOpenClaw, ModeEmbedded); len(errs) > 0 {
		t.Fatal(errs)
	}
	if v, _ := occconfig.Lookup(doc, PathGatewayBind); v != "loopback" {
		t.Errorf("gateway.bind = %v, want the row's loopback", v)
	}
	if v, _ := occconfig.Lookup(doc, PathGatewayPort); v != int64(GatewayPort) {
		t.Errorf("gateway.port = %v, want OpenClaw's default where the user's port is unset", v)
	}
	bad := modelDoc(anthropicModel)
	occconfig.Set(bad, PathGatewayPort, "x")
	if errs := StampPlatformKeys(bad, "memory", HarnessOpenClaw, ModeEmbedded); len(errs) == 0 {
		t.Error("a non-port gateway.port was stamped on a kind whose port is the user's")
	}
}

// vmSettings are the hypothetical VM kind's own settings, a type admission
// does not know.
type vmSettings struct {
	Host string `json:"host"`
}

func vmOf(c Compute) vmSettings { return SettingsOf[vmSettings](c.Settings) }
