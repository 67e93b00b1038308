package admission

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// rule ND4
func TestND4_SandboxDriverNeedsKubernetes(t *testing.T) {
	driverOnSSH := sshInput()
	driverOnSSH.Compute = driverOnSSH.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	unknownDriver := k8sEmbeddedInput()
	unknownDriver.Compute = unknownDriver.Compute.WithKubernetes(func(k *KubernetesCompute) {
		k.SandboxDriver = &SandboxDriver{Name: "gvisor", Facets: Facets, RequiredProfile: "p"}
	})
	codexFull := dedicatedCodexInput()
	codexFull.Compute = codexFull.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	codexPartial := dedicatedCodexInput()
	codexPartial.Compute = codexPartial.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = partialDriver() })
	codexNoProfile := dedicatedCodexInput()
	codexNoProfile.Compute = codexNoProfile.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = &SandboxDriver{Name: DriverOpenShell} })
	embeddedWithDriver := k8sEmbeddedInput()
	embeddedWithDriver.Compute = embeddedWithDriver.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = partialDriver() })
	tests := []struct {
		name    string
		in      Input
		want    *refusal
		mention string
	}{
		{"dedicated codex with all facets", codexFull, nil, ""},
		{"dedicated codex needs no facet set", codexPartial, nil, ""},
		{"dedicated codex needs no required profile", codexNoProfile, nil, ""},
		{"embedded beside a driver", embeddedWithDriver, nil, ""},
		{"driver on ssh", driverOnSSH, &refusal{ResourceConflict, "ND4", attrCompute, ""}, "Kubernetes"},
		{"unknown driver", unknownDriver, &refusal{InvalidRequest, "OS1", attrCompute, ""}, "gvisor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.Sandbox == nil || rev.Sandbox.Driver != DriverOpenShell || !slices.IsSorted(rev.Sandbox.Facets) {
					t.Errorf("sandbox binding = %+v", rev.Sandbox)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
			if !strings.Contains(errs[0].Message, tc.mention) {
				t.Errorf("message %q does not mention %q", errs[0].Message, tc.mention)
			}
		})
	}
}

// rule ND5
func TestND5_InstallationCapabilities(t *testing.T) {
	withDriver := func(d *SandboxDriver) Compute {
		c := k8sCompute()
		c = c.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = d })
		return c
	}
	custom := func(declared bool) Compute {
		c := withDriver(fullDriver())
		c = c.WithKubernetes(func(k *KubernetesCompute) { k.RuntimeImage = "registry.example/openclaw:custom" })
		c = c.WithKubernetes(func(k *KubernetesCompute) { k.NativeWorkerSupport = declared })
		return c
	}
	outage := withDriver(fullDriver())
	outage.Kubernetes().SandboxDriver.Unavailable = true
	notInstalled := withDriver(fullDriver())
	notInstalled.Kubernetes().SandboxDriver.NotInstalled = true
	sshWithDriver := sshCompute()
	sshWithDriver = sshWithDriver.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	// No compute offers dedicated OpenClaw (ND6): whatever the driver, the
	// image or its declaration, the installation lists embedded alone.
	tests := []struct {
		name        string
		c           Compute
		unavailable bool
	}{
		{"no driver", k8sCompute(), false},
		{"qualifying driver, pinned image", withDriver(fullDriver()), false},
		{"pinned image spelled out", func() Compute {
			c := withDriver(fullDriver())
			c = c.WithKubernetes(func(k *KubernetesCompute) { k.RuntimeImage = PinnedRuntimeImage })
			return c
		}(), false},
		{"custom image declaring support", custom(true), false},
		{"custom image without support", custom(false), false},
		{"partial driver", withDriver(partialDriver()), false},
		{"driver outage", outage, true},
		{"declared driver not installed", notInstalled, false},
		{"ssh", sshCompute(), false},
		{"ssh with a driver", sshWithDriver, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inst := ComputeInstallation(tc.c)
			if !slices.Equal(inst.ExecutionModes, []string{ModeEmbedded}) || inst.SandboxDriverUnavailable != tc.unavailable {
				t.Errorf("installation = %+v, want modes [embedded] unavailable %v", inst, tc.unavailable)
			}
		})
	}

	// A declared driver the cluster does not serve fails closed at apply
	// for dedicated Codex, naming the driver (AD6, ND5).
	in := dedicatedCodexInput()
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = fullDriver() })
	in.Compute.Kubernetes().SandboxDriver.NotInstalled = true
	_, errs := Admit(in)
	checkRefusal(t, errs, refusal{ResourceConflict, "ND5", attrCompute, ""})
	if !strings.Contains(errs[0].Message, "not installed") || !strings.Contains(errs[0].Message, DriverOpenShell) {
		t.Errorf("not-installed refusal: %s", errs[0].Message)
	}

	// Deploy agrees with the installation: an OpenClaw mode is admitted
	// exactly where the installation lists it (a mode not listed is refused
	// before any write).
	for _, tc := range tests {
		for _, mode := range ExecutionModes {
			in := k8sEmbeddedInput()
			if tc.c.Kind == KindSSH {
				in = sshInput()
			}
			in.Agent.Harness, in.Agent.ExecutionMode = HarnessOpenClaw, mode
			in.Compute = tc.c
			in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = nil }) // the driver's own refusals (ND4) are not the mode's
			_, errs := Admit(in)
			listed := slices.Contains(ComputeInstallation(tc.c).ExecutionModes, mode)
			if listed != (len(errs) == 0) {
				t.Errorf("%s, %s: listed=%v but Admit errors %v", tc.name, mode, listed, errs)
			}
		}
	}
}

// rule ND6: dedicated OpenClaw is refused at plan, INVALID_REQUEST at
// execution_mode, judged alone right after HM1, for the pinned image and
// for a custom one whatever it declares, with a qualifying driver or none,
// with any auth binding: the pinned runtime runs a native worker's
// inference on the gateway, which ND2 keeps from the credential.
func TestND6_DedicatedOpenClawIsRefused(t *testing.T) {
	const custom = "registry.example/openclaw:custom"
	image := func(in Input, img string, declared bool) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.RuntimeImage = img })
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.NativeWorkerSupport = declared })
		return in
	}
	noDriver := func(in Input) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = nil })
		return in
	}
	partial := func(in Input) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver = partialDriver() })
		return in
	}
	gatewayKey := func(in Input) Input {
		in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CredentialGateway = gateway() })
		in.Source = credSource(SourceTypeOpenAIAPIKey)
		return in
	}
	// Resolved, not named: the document's runtime policy picks OpenClaw.
	resolved := withDoc(dedicatedOpenClawInput(), `{agents: {defaults: {model: "openai/gpt-5", models: {"openai/gpt-5": {agentRuntime: {id: "openclaw"}}}}}}`)
	resolved.Agent.Harness = ""
	// Other faults of the agent do not come first: ND6 is judged alone.
	withFaults := withDoc(dedicatedOpenClawInput(), `{agents: {defaults: {model: "openai/gpt-5"}}, gateway: {bind: "loopback"}}`)
	withFaults.Source = patSource(k8sComputeID)
	tests := []struct {
		name string
		in   Input
	}{
		{"pinned image, qualifying driver", dedicatedOpenClawInput()},
		{"pinned image spelled out", image(dedicatedOpenClawInput(), PinnedRuntimeImage, false)},
		{"pinned image, no driver", noDriver(dedicatedOpenClawInput())},
		{"pinned image, partial driver", partial(dedicatedOpenClawInput())},
		{"custom image declaring support, qualifying driver", image(dedicatedOpenClawInput(), custom, true)},
		{"custom image without the declaration", image(dedicatedOpenClawInput(), custom, false)},
		{"custom image without the declaration, no driver", noDriver(image(dedicatedOpenClawInput(), custom, false))},
		{"credential gateway key", gatewayKey(dedicatedOpenClawInput())},
		{"harness resolved from the document", resolved},
		{"judged before the agent's other faults", withFaults},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if rev != nil {
				t.Fatalf("admitted dedicated OpenClaw: revision %s", rev.ID())
			}
			checkRefusal(t, errs, refusal{InvalidRequest, "ND6", attrMode, ""})
			if len(errs) != 1 {
				t.Errorf("errors = %v, want ND6 alone", errs)
			}
			msg := errs[0].Message
			for _, want := range []string{
				"dedicated OpenClaw cannot serve a turn",
				"OpenClaw " + PinnedOpenClawVersion, "inference proxy", "gateway's own credential", "(ND2)", "dispatched",
				"no OpenClaw release up to " + NativeInferenceCheckedVersion + " runs a worker's inference on the node",
				"native_worker_support",
				`execution_mode = "embedded"`, `harness = "codex"`,
				"dedicated OpenClaw returns when a pinned runtime runs worker inference on the node",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("message does not say %q: %s", want, msg)
				}
			}
		})
	}
	// The other combinations are not ND6's, whatever the image declares.
	for _, tc := range []struct {
		name    string
		in      Input
		version string
	}{
		{"custom image, embedded", image(k8sEmbeddedInput(), custom, false), "openclaw@image:" + custom},
		{"custom image declaring support, embedded", image(k8sEmbeddedInput(), custom, true), "openclaw@image:" + custom},
		{"custom image, dedicated codex", image(dedicatedCodexInput(), custom, false), "codex@" + PinnedCodexVersion},
	} {
		rev := admitOK(t, tc.in)
		if rev.HarnessVersion != tc.version {
			t.Errorf("%s: harness version = %q, want %q", tc.name, rev.HarnessVersion, tc.version)
		}
	}
	if e := CheckNativeOpenClaw(HarnessOpenClaw, ModeDedicated, KindSSH); e != nil {
		t.Errorf("ND6 on SSH, where HM1 refuses the combination: %v", e)
	}
}

// rule ND6: the refusal names the OpenClaw release it was read from; a
// newer pinned runtime needs that reading again (NativeInferenceCheckedVersion)
// before the refusal may name it.
func TestND6_RefusalNamesTheReadRelease(t *testing.T) {
	if PinnedOpenClawVersion != NativeInferenceCheckedVersion {
		t.Fatalf("the pinned runtime is OpenClaw %s, but ND6's refusal was read from %s: read the new release for node-local worker inference "+
			"and required placement, then raise NativeInferenceCheckedVersion (or admit dedicated OpenClaw again)", PinnedOpenClawVersion, NativeInferenceCheckedVersion)
	}
}

// rule PR1
func TestPR1_ProbeBudget(t *testing.T) {
	p := Probe{WallSeconds: 20, CPUSeconds: 45}
	budgets := []struct {
		cpuMillis int64
		want      time.Duration
	}{
		{1000, 65 * time.Second},
		{2000, 42500 * time.Millisecond},
		{500, 110 * time.Second},
		{250, 200 * time.Second},
		{4500, 30 * time.Second},
		{0, 65 * time.Second}, // no limit: one core
	}
	for _, tc := range budgets {
		if got := p.Budget(tc.cpuMillis); got != tc.want {
			t.Errorf("Budget(%d) = %v, want %v", tc.cpuMillis, got, tc.want)
		}
	}

	fallbacks := withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1"]}}}}`)
	tests := []struct {
		name      string
		in        Input
		want      Probe
		cpuMillis int64
		budget    time.Duration
	}{
		{"embedded kubernetes", k8sEmbeddedInput(), Probe{Model: anthropicModel, OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}, 2000, 42500 * time.Millisecond},
		{"probe calls the primary, never a fallback", fallbacks, Probe{Model: anthropicModel, OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}, 2000, 42500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev := admitOK(t, tc.in)
			if rev.Probe != tc.want {
				t.Errorf("probe = %+v, want %+v", rev.Probe, tc.want)
			}
			if got := rev.Probe.Budget(tc.in.Compute.Kubernetes().CPUMillis); got != tc.budget {
				t.Errorf("budget = %v, want %v", got, tc.budget)
			}
		})
	}
	// Refused side: no revision, hence no probe, for a model the harness cannot run.
	rev, errs := Admit(withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "openai/gpt-5"}}}`))
	if rev != nil || len(errs) == 0 {
		t.Errorf("admitted a probe for an unresolved model")
	}
}

// rule PR4: dedicated Codex's probe is one retry at most, 30 s per attempt
// inside one 61 s budget, whatever the CPU limit; PR3: Responses over
// WebSocket by default, HTTPS streaming for a compatible endpoint.
func TestPR4_CodexProbeBudget(t *testing.T) {
	rev := admitOK(t, dedicatedCodexInput())
	want := Probe{Model: rev.Probe.Model, OutputTokens: 256, MaxAttempts: 2, AttemptSeconds: 30, BudgetSeconds: 61, Transport: "responses-websocket"}
	if rev.Probe != want {
		t.Fatalf("probe = %+v, want %+v", rev.Probe, want)
	}
	for _, cpu := range []int64{250, 2000, 16000} {
		if got := rev.Probe.Budget(cpu); got != 61*time.Second {
			t.Errorf("Budget(%d) = %v, want 61s", cpu, got)
		}
	}
	custom := admitOK(t, withDoc(dedicatedCodexInput(), `{agents: {defaults: {model: "codex/vendor/org/model"}}, models: {providers: {codex: {baseUrl: "https://llm.example/v1", models: [{id: "vendor/org/model", name: "m"}]}}}}`))
	if custom.Probe.Transport != "responses-https" || custom.Probe.Model != "codex/vendor/org/model" {
		t.Errorf("compatible endpoint probe = %+v, want responses-https on the stored model", custom.Probe)
	}
}

// rule ND6, the other way round: native_worker_support, deprecated, no
// longer admits anything; on the pinned image, which is no custom image,
// it is refused as before (CheckNativeWorkerDeclaration, which occ_compute
// calls), saying that it admits nothing.
func TestND6_DeclarationOnlyForACustomImage(t *testing.T) {
	const custom = "registry.example/openclaw:custom"
	for _, tc := range []struct {
		name     string
		image    string
		declared bool
		refused  bool
	}{
		{"pinned by default, declared", "", true, true},
		{"pinned spelled out, declared", PinnedRuntimeImage, true, true},
		{"pinned by digest (a release's default), declared", PinnedRuntimeImage + "@" + testDigest, true, true},
		{"custom, declared", custom, true, false},
		{"pinned, not declared", "", false, false},
		{"custom, not declared", custom, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := CheckNativeWorkerDeclaration(tc.image, tc.declared)
			if !tc.refused {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || e.Class != InvalidRequest || e.Rule != "ND6" || !slices.Equal(e.Attribute, []string{"kubernetes", "native_worker_support"}) {
				t.Fatalf("got %+v, want INVALID_REQUEST ND6 at kubernetes.native_worker_support", e)
			}
			if !strings.HasPrefix(e.Message, "native_worker_support is only for a custom runtime_image, and it no longer admits anything: ") ||
				strings.Contains(e.Message, "already supports") || !strings.Contains(e.Message, "Remove native_worker_support") {
				t.Errorf("message %q", e.Message)
			}
		})
	}
	// Whatever the declaration says, the installation is the same.
	for _, img := range []string{"", PinnedRuntimeImage, custom} {
		c := k8sCompute()
		c = c.WithKubernetes(func(k *KubernetesCompute) { k.SandboxDriver, k.RuntimeImage = fullDriver(), img })
		without := ComputeInstallation(c)
		c = c.WithKubernetes(func(k *KubernetesCompute) { k.NativeWorkerSupport = true })
		if with := ComputeInstallation(c); !slices.Equal(with.ExecutionModes, without.ExecutionModes) {
			t.Errorf("image %q: the declaration changed the installation %v -> %v", img, without, with)
		}
	}
}
