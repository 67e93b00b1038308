package admission

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// rule HM1
func TestHM1_HarnessModeComputeMatrix(t *testing.T) {
	// The direct statement: exactly four supported combinations (ND6 then
	// refuses the fourth, dedicated OpenClaw, in Admit).
	supported := map[[3]string]bool{
		{HarnessOpenClaw, ModeEmbedded, KindKubernetes}:  true,
		{HarnessOpenClaw, ModeEmbedded, KindSSH}:         true,
		{HarnessCodex, ModeDedicated, KindKubernetes}:    true,
		{HarnessOpenClaw, ModeDedicated, KindKubernetes}: true,
	}
	for _, h := range Harnesses {
		for _, m := range ExecutionModes {
			for _, k := range ComputeKinds {
				e := CheckHarnessMode(h, m, k)
				if ok := e == nil; ok != supported[[3]string{h, m, k}] {
					t.Errorf("CheckHarnessMode(%s, %s, %s) = %v, want supported=%v", h, m, k, e, supported[[3]string{h, m, k}])
					continue
				}
				if e != nil && (e.Class != InvalidRequest || e.Rule != "HM1") {
					t.Errorf("CheckHarnessMode(%s, %s, %s) = %s %s, want INVALID_REQUEST HM1", h, m, k, e.Class, e.Rule)
				}
			}
		}
	}
	unknown := []struct {
		h, m, k string
		attr    []string
	}{
		{"claude", ModeEmbedded, KindKubernetes, attrHarness},
		{HarnessOpenClaw, "hybrid", KindKubernetes, attrMode},
		{HarnessOpenClaw, ModeEmbedded, "docker", attrCompute},
		{"", ModeEmbedded, KindKubernetes, attrHarness},
	}
	for _, u := range unknown {
		e := CheckHarnessMode(u.h, u.m, u.k)
		if e == nil || e.Class != InvalidRequest || e.Rule != "HM1" || canon(e.Attribute) != canon(u.attr) {
			t.Errorf("CheckHarnessMode(%q, %q, %q) = %+v, want INVALID_REQUEST HM1 at %v", u.h, u.m, u.k, e, u.attr)
		}
	}

	// Through Admit.
	codexOnSSH := sshInput()
	codexOnSSH.Agent = Agent{Name: "edge", Harness: HarnessCodex, ExecutionMode: ModeDedicated}
	codexOnSSH.Configuration.Document = modelDoc(codexModel)
	openclawDedicatedSSH := sshInput()
	openclawDedicatedSSH.Agent = Agent{Name: "edge", Harness: HarnessOpenClaw, ExecutionMode: ModeDedicated}
	openclawDedicatedSSH.Configuration.Document = modelDoc(openaiModel)
	codexEmbedded := dedicatedCodexInput()
	codexEmbedded.Agent.ExecutionMode = ModeEmbedded
	codexEmbeddedByPolicy := k8sEmbeddedInput() // harness from the document's runtime policy
	codexEmbeddedByPolicy.Configuration.Document = mustDoc(`{agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "codex"}}}}}}`)
	// Other refusals (AU4: gateway with api_key) are not reported: HM1 is judged alone.
	codexEmbeddedWithConflicts := codexEmbedded
	codexEmbeddedWithConflicts.Compute = codexEmbeddedWithConflicts.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
	// An explicit harness is judged before the document: the document's own
	// refusals (MR9 here) are not reported.
	codexEmbeddedBadDoc := withDoc(codexEmbedded, `{agents: {list: [{id: "x"}], defaults: {model: "codex/gpt-5-codex"}}}`)
	openclawDedicatedSSHBadDoc := withDoc(openclawDedicatedSSH, `{agentz: {}, agents: {defaults: {model: "openai/gpt-5"}}}`)
	unknownHarness := k8sEmbeddedInput()
	unknownHarness.Agent.Harness = "claude"
	unknownMode := k8sEmbeddedInput()
	unknownMode.Agent.ExecutionMode = "hybrid"
	unknownKind := k8sEmbeddedInput()
	unknownKind.Compute.Kind = "docker"

	tests := []struct {
		name string
		in   Input
		want *refusal
	}{
		{"openclaw embedded kubernetes", k8sEmbeddedInput(), nil},
		{"openclaw embedded ssh", sshInput(), nil},
		{"codex dedicated kubernetes", dedicatedCodexInput(), nil},
		// HM1 takes it; ND6 refuses it, right after HM1 (TestND6_DedicatedOpenClawIsRefused).
		{"openclaw dedicated kubernetes", dedicatedOpenClawInput(), &refusal{InvalidRequest, "ND6", attrMode, ""}},
		{"codex embedded", codexEmbedded, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"codex embedded by document policy", codexEmbeddedByPolicy, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"codex embedded judged alone", codexEmbeddedWithConflicts, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"codex embedded before document rules", codexEmbeddedBadDoc, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"openclaw dedicated on ssh before document rules", openclawDedicatedSSHBadDoc, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"codex dedicated on ssh", codexOnSSH, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"openclaw dedicated on ssh", openclawDedicatedSSH, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"unknown harness", unknownHarness, &refusal{InvalidRequest, "HM1", attrHarness, ""}},
		{"unknown mode", unknownMode, &refusal{InvalidRequest, "HM1", attrMode, ""}},
		{"unknown compute kind", unknownKind, &refusal{InvalidRequest, "HM1", attrCompute, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.ExecutionMode != tc.in.Agent.ExecutionMode || rev.ComputeKind != tc.in.Compute.Kind {
					t.Errorf("revision mode/kind = %s/%s", rev.ExecutionMode, rev.ComputeKind)
				}
				return
			}
			if rev != nil {
				t.Fatalf("refused admission returned a revision")
			}
			checkRefusal(t, errs, *tc.want)
			if len(errs) != 1 {
				t.Errorf("HM1 must be judged alone; got %d errors: %v", len(errs), errs)
			}
		})
	}
}

// rule HM2
func TestHM2_ModeDefaultsAndIsKept(t *testing.T) {
	tests := []struct {
		planned, prior, want string
	}{
		{"", "", ModeEmbedded},                        // create, omitted
		{ModeDedicated, "", ModeDedicated},            // create, set
		{"", ModeDedicated, ModeDedicated},            // update, omitted: kept
		{"", ModeEmbedded, ModeEmbedded},              // update, omitted: kept
		{ModeEmbedded, ModeDedicated, ModeEmbedded},   // update, changed
		{ModeDedicated, ModeEmbedded, ModeDedicated},  // update, changed
		{ModeDedicated, ModeDedicated, ModeDedicated}, // update, same
	}
	for _, tc := range tests {
		if got := DefaultExecutionMode(tc.planned, tc.prior); got != tc.want {
			t.Errorf("DefaultExecutionMode(%q, %q) = %q, want %q", tc.planned, tc.prior, got, tc.want)
		}
	}

	// Admit applies the create default: an omitted mode is embedded.
	in := k8sEmbeddedInput()
	in.Agent.ExecutionMode = ""
	rev := admitOK(t, in)
	if rev.ExecutionMode != ModeEmbedded {
		t.Errorf("omitted mode admitted as %q, want embedded", rev.ExecutionMode)
	}
	// Keeping the mode is no change: the revision is the same as with the mode spelled out.
	explicit := admitOK(t, k8sEmbeddedInput())
	if rev.ID() != explicit.ID() {
		t.Errorf("omitted and explicit embedded give different revisions: %s vs %s", rev.ID(), explicit.ID())
	}

	// Refused side: a Codex agent that omits the mode defaults to embedded,
	// which does not exist for Codex.
	codex := dedicatedCodexInput()
	codex.Agent.ExecutionMode = ""
	_, errs := Admit(codex)
	checkRefusal(t, errs, refusal{InvalidRequest, "HM1", attrMode, ""})
}

// rule HM6
func TestHM6_NodeWorkersDefault(t *testing.T) {
	if DefaultNodeWorkers != 8 {
		t.Fatalf("DefaultNodeWorkers = %d, want 8", DefaultNodeWorkers)
	}
	withWorkers := func(in Input, n int64) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.NodeWorkers = n })
		return in
	}
	tests := []struct {
		name string
		in   Input
		want int64
	}{
		// Not a native node host (no admitted revision has one, ND6): no
		// session-owned workers are frozen.
		{"dedicated codex ignores node workers", withWorkers(dedicatedCodexInput(), 3), 0},
		{"embedded openclaw ignores node workers", withWorkers(k8sEmbeddedInput(), 3), 0},
		{"ssh ignores node workers", withWorkers(sshInput(), 3), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev := admitOK(t, tc.in)
			if rev.NodeWorkers != tc.want {
				t.Errorf("NodeWorkers = %d, want %d", rev.NodeWorkers, tc.want)
			}
		})
	}
	// Changing the count changes no admitted revision.
	a := admitOK(t, withWorkers(dedicatedCodexInput(), 4))
	b := admitOK(t, withWorkers(dedicatedCodexInput(), 5))
	if a.ID() != b.ID() {
		t.Errorf("changing node workers changed dedicated Codex's revision %s -> %s", a.ID(), b.ID())
	}
	// Refused side: the only topology with a node host, dedicated OpenClaw,
	// is not admitted at all, whatever its worker count (ND6).
	_, errs := Admit(withWorkers(dedicatedOpenClawInput(), 3))
	checkRefusal(t, errs, refusal{InvalidRequest, "ND6", attrMode, ""})
}

// rule HM7: the default is max(8, 4 × available parallelism), where the
// parallelism honours the CPU quota: the limit in whole CPUs, rounded
// down, at least 1.
func TestHM7_MaxConcurrentDefault(t *testing.T) {
	tests := []struct {
		explicit, cpuMillis, want int64
	}{
		{0, 0, 0},     // parallelism unknown before runtime
		{0, -1, 0},    // no limit
		{0, 250, 8},   // below one CPU: parallelism 1 -> max(8, 4)
		{0, 1000, 8},  // 1 CPU
		{0, 1500, 8},  // 1.5 CPUs: parallelism 1
		{0, 2000, 8},  // 2 CPUs
		{0, 2001, 8},  // just over 2 CPUs: parallelism 2, not 3
		{0, 2500, 8},  // 2.5 CPUs: parallelism 2
		{0, 2999, 8},  // still parallelism 2
		{0, 3000, 12}, // 3 CPUs
		{0, 3500, 12}, // 3.5 CPUs: parallelism 3
		{0, 4000, 16}, // 4 CPUs
		{0, 16000, 64},
		{5, 4000, 5}, // explicit wins, even below the default
		{32, 0, 32},  // explicit wins without a limit
		{1, 16000, 1},
	}
	for _, tc := range tests {
		if got := MaxConcurrent(tc.explicit, tc.cpuMillis); got != tc.want {
			t.Errorf("MaxConcurrent(%d, %d) = %d, want %d", tc.explicit, tc.cpuMillis, got, tc.want)
		}
	}
}

// rule HM7: the rules page says what the code does (issue 30): the
// default is for dedicated Codex only, and the CPU limit is rounded down.
func TestHM7_RulesPageMatchesTheCode(t *testing.T) {
	r, _ := LookupRule("HM7")
	text := r.Summary
	for _, w := range []string{"Dedicated Codex", "rounded down and at least 1", "Other topologies keep the document's value"} {
		if !strings.Contains(text, w) {
			t.Errorf("the HM7 text %q does not say %q", text, w)
		}
	}
	// Rounded down (4.5 CPUs: 4 × 4), at least 1 (0.5 CPU: max(8, 4)).
	if MaxConcurrent(0, 4500) != 16 || MaxConcurrent(0, 500) != 8 {
		t.Errorf("MaxConcurrent(0, 4500) = %d, MaxConcurrent(0, 500) = %d: not what the rules page says", MaxConcurrent(0, 4500), MaxConcurrent(0, 500))
	}
	if n := admitMaxConcurrent(modelDoc(anthropicModel), HarnessOpenClaw, ModeEmbedded, 4500); n != 0 {
		t.Errorf("embedded OpenClaw gets maxConcurrent %d; the rules page says the document's value stands", n)
	}
}

// rule HM7: the platform defines maxConcurrent's default for dedicated
// Codex, from the workload's CPU quota; admission freezes it into that
// revision's document (the plan shows what runs). Every other topology
// keeps the document as written: an explicit value is reported, an unset
// one is the runtime's own default (max_concurrent is null).
func TestHM7_MaxConcurrentFrozenForDedicatedCodexOnly(t *testing.T) {
	with := func(in Input, cpu int64, doc string) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CPUMillis = cpu })
		if doc != "" {
			in.Configuration.Document = mustDoc(doc)
		}
		return in
	}
	codex := dedicatedCodexInput()
	tests := []struct {
		name    string
		in      Input
		want    int64
		wantDoc any // agents.defaults.maxConcurrent in the admitted document; nil: absent
	}{
		{"codex: default frozen from the cpu limit", with(codex, 4000, ""), 16, int64(16)},
		{"codex: default floor of eight", with(codex, 500, ""), 8, int64(8)},
		{"codex: fractional limit rounds down", with(codex, 3500, ""), 12, int64(12)},
		{"codex: explicit setting kept", with(codex, 4000, `{agents: {defaults: {model: "codex/gpt-5-codex", maxConcurrent: 3}}}`), 3, int64(3)},
		{"codex: no cpu limit, runtime computes it", with(codex, 0, ""), 0, nil},
		{"codex: no cpu limit, explicit", with(codex, 0, `{agents: {defaults: {model: "codex/gpt-5-codex", maxConcurrent: 24}}}`), 24, int64(24)},
		{"embedded: not written", with(k8sEmbeddedInput(), 4000, ""), 0, nil},
		{"embedded: explicit kept", with(k8sEmbeddedInput(), 4000, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", maxConcurrent: 5}}}`), 5, int64(5)},
		{"ssh: not written", sshInput(), 0, nil},
		{"ssh: explicit kept", with(sshInput(), 0, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", maxConcurrent: 6}}}`), 6, int64(6)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stored := canon(tc.in.Configuration.Document)
			rev := admitOK(t, tc.in)
			if rev.MaxConcurrent != tc.want {
				t.Errorf("MaxConcurrent = %d, want %d", rev.MaxConcurrent, tc.want)
			}
			got, ok := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("agents", "defaults", "maxConcurrent"))
			if tc.wantDoc == nil && ok {
				t.Errorf("admitted maxConcurrent = %v, want absent", got)
			}
			if tc.wantDoc != nil && got != tc.wantDoc {
				t.Errorf("admitted maxConcurrent = %#v, want %#v", got, tc.wantDoc)
			}
			if canon(tc.in.Configuration.Document) != stored {
				t.Errorf("the stored configuration changed")
			}
		})
	}
}

// rule HM7: maxConcurrent, when set, is a positive whole number.
func TestHM7_MaxConcurrentMustBePositiveInteger(t *testing.T) {
	for _, v := range []string{"0", "-3", "2.5", `"8"`, "true"} {
		t.Run(v, func(t *testing.T) {
			in := withDoc(dedicatedCodexInput(), `{agents: {defaults: {model: "codex/gpt-5-codex", maxConcurrent: `+v+`}}}`)
			_, errs := Admit(in)
			checkRefusal(t, errs, refusal{InvalidRequest, "HM7", attrConfig, "agents.defaults.maxConcurrent"})
			if doc := CheckDocument(in.Configuration.Document); !doc.Has("HM7") {
				t.Errorf("save time accepted maxConcurrent %s", v)
			}
		})
	}
}
