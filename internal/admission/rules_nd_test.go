package admission

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// rule ND4
func TestND4_SandboxDriverNeedsKubernetesAndFacets(t *testing.T) {
	qualify := []struct {
		name string
		c    Compute
		want bool
	}{
		{"all facets and profile", Compute{Kind: KindKubernetes, SandboxDriver: fullDriver()}, true},
		{"facets in any order", Compute{Kind: KindKubernetes, SandboxDriver: &SandboxDriver{Name: DriverOpenShell, Facets: []string{FacetProcess, FacetNetworking, FacetFilesystem}, RequiredProfile: "p"}}, true},
		{"no driver", Compute{Kind: KindKubernetes}, false},
		{"missing process", Compute{Kind: KindKubernetes, SandboxDriver: partialDriver()}, false},
		{"no facets", Compute{Kind: KindKubernetes, SandboxDriver: &SandboxDriver{Name: DriverOpenShell, RequiredProfile: "p"}}, false},
		{"no required profile", Compute{Kind: KindKubernetes, SandboxDriver: &SandboxDriver{Name: DriverOpenShell, Facets: Facets}}, false},
		{"not openshell", Compute{Kind: KindKubernetes, SandboxDriver: &SandboxDriver{Name: "gvisor", Facets: Facets, RequiredProfile: "p"}}, false},
		{"on ssh", Compute{Kind: KindSSH, SandboxDriver: fullDriver()}, false},
	}
	for _, tc := range qualify {
		if got := QualifyingDriver(tc.c); got != tc.want {
			t.Errorf("QualifyingDriver(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if m := MissingFacets(partialDriver()); !slices.Equal(m, []string{FacetProcess}) {
		t.Errorf("MissingFacets(partial) = %v", m)
	}
	if m := MissingFacets(nil); !slices.Equal(m, Facets) {
		t.Errorf("MissingFacets(nil) = %v", m)
	}

	driverOnSSH := sshInput()
	driverOnSSH.Compute.SandboxDriver = fullDriver()
	missingProcess := dedicatedOpenClawInput()
	missingProcess.Compute.SandboxDriver = partialDriver()
	noProfile := dedicatedOpenClawInput()
	noProfile.Compute.SandboxDriver.RequiredProfile = ""
	unknownDriver := k8sEmbeddedInput()
	unknownDriver.Compute.SandboxDriver = &SandboxDriver{Name: "gvisor", Facets: Facets, RequiredProfile: "p"}
	codexPartial := dedicatedCodexInput()
	codexPartial.Compute.SandboxDriver = partialDriver()
	embeddedWithDriver := k8sEmbeddedInput()
	embeddedWithDriver.Compute.SandboxDriver = partialDriver()
	tests := []struct {
		name    string
		in      Input
		want    *refusal
		mention string
	}{
		{"native openclaw with all facets", dedicatedOpenClawInput(), nil, ""},
		{"dedicated codex needs no facet set", codexPartial, nil, ""},
		{"embedded beside a driver", embeddedWithDriver, nil, ""},
		{"driver on ssh", driverOnSSH, &refusal{ResourceConflict, "ND4", attrCompute, ""}, "Kubernetes"},
		{"native openclaw missing process", missingProcess, &refusal{ResourceConflict, "ND5", attrCompute, ""}, "process"},
		{"native openclaw without required profile", noProfile, &refusal{ResourceConflict, "ND5", attrCompute, ""}, "required_profile"},
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
	withDriver := func(d *SandboxDriver) Compute { c := k8sCompute(); c.SandboxDriver = d; return c }
	custom := func(declared bool) Compute {
		c := withDriver(fullDriver())
		c.RuntimeImage = "registry.example/openclaw:custom"
		c.NativeWorkerSupport = declared
		return c
	}
	outage := withDriver(fullDriver())
	outage.SandboxDriver.Unavailable = true
	notInstalled := withDriver(fullDriver())
	notInstalled.SandboxDriver.NotInstalled = true
	sshWithDriver := sshCompute()
	sshWithDriver.SandboxDriver = fullDriver()
	tests := []struct {
		name        string
		c           Compute
		modes       []string
		support     string
		unavailable bool
	}{
		{"no driver", k8sCompute(), []string{ModeEmbedded}, "", false},
		{"qualifying driver, pinned image", withDriver(fullDriver()), []string{ModeEmbedded, ModeDedicated}, NativeWorkersPinned, false},
		{"pinned image spelled out", func() Compute { c := withDriver(fullDriver()); c.RuntimeImage = PinnedRuntimeImage; return c }(), []string{ModeEmbedded, ModeDedicated}, NativeWorkersPinned, false},
		{"custom image declaring support", custom(true), []string{ModeEmbedded, ModeDedicated}, NativeWorkersDeclared, false},
		{"custom image without support", custom(false), []string{ModeEmbedded}, "", false},
		{"partial driver", withDriver(partialDriver()), []string{ModeEmbedded}, "", false},
		{"driver outage", outage, []string{ModeEmbedded, ModeDedicated}, NativeWorkersPinned, true},
		{"declared driver not installed", notInstalled, []string{ModeEmbedded}, "", false},
		{"ssh", sshCompute(), []string{ModeEmbedded}, "", false},
		{"ssh with a driver", sshWithDriver, []string{ModeEmbedded}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inst := ComputeInstallation(tc.c)
			if !slices.Equal(inst.ExecutionModes, tc.modes) || inst.NativeWorkersSupport != tc.support || inst.SandboxDriverUnavailable != tc.unavailable {
				t.Errorf("installation = %+v, want modes %v support %q unavailable %v", inst, tc.modes, tc.support, tc.unavailable)
			}
		})
	}

	// Deploy agrees with the installation: dedicated OpenClaw is admitted
	// exactly where the installation lists it, else RESOURCE_CONFLICT naming the driver.
	// A declared driver the cluster does not serve fails closed at apply
	// for every dedicated harness, naming the driver (AD6, ND5).
	for _, in := range []Input{dedicatedOpenClawInput(), dedicatedCodexInput()} {
		in.Compute.SandboxDriver = fullDriver()
		in.Compute.SandboxDriver.NotInstalled = true
		_, errs := Admit(in)
		checkRefusal(t, errs, refusal{ResourceConflict, "ND5", attrCompute, ""})
		if !strings.Contains(errs[0].Message, "not installed") || !strings.Contains(errs[0].Message, DriverOpenShell) {
			t.Errorf("not-installed refusal: %s", errs[0].Message)
		}
	}
	noDriver := dedicatedOpenClawInput()
	noDriver.Compute.SandboxDriver = nil
	_, errs := Admit(noDriver)
	checkRefusal(t, errs, refusal{ResourceConflict, "ND5", attrCompute, ""})
	if !strings.Contains(errs[0].Message, DriverOpenShell) {
		t.Errorf("ND5 refusal does not name the missing driver: %s", errs[0].Message)
	}
	for _, tc := range tests {
		if tc.c.Kind != KindKubernetes {
			continue
		}
		in := dedicatedOpenClawInput()
		in.Compute = tc.c
		_, errs := Admit(in)
		listed := slices.Contains(ComputeInstallation(tc.c).ExecutionModes, ModeDedicated)
		if listed != (len(errs) == 0) {
			t.Errorf("%s: dedicated listed=%v but Admit errors %v", tc.name, listed, errs)
		}
	}
}

// rule ND6
func TestND6_CustomImageNativeWorkerSupport(t *testing.T) {
	image := func(in Input, img string, declared bool) Input {
		in.Compute.RuntimeImage = img
		in.Compute.NativeWorkerSupport = declared
		return in
	}
	noDriver := func(in Input) Input { in.Compute.SandboxDriver = nil; return in }
	tests := []struct {
		name    string
		in      Input
		want    *refusal
		version string
	}{
		{"pinned image", dedicatedOpenClawInput(), nil, "openclaw@" + PinnedOpenClawVersion},
		{"pinned image spelled out", image(dedicatedOpenClawInput(), PinnedRuntimeImage, false), nil, "openclaw@" + PinnedOpenClawVersion},
		{"custom image declaring support", image(dedicatedOpenClawInput(), "registry.example/openclaw:custom", true), nil, "openclaw@image:registry.example/openclaw:custom"},
		{"custom image, embedded needs no support", image(k8sEmbeddedInput(), "registry.example/openclaw:custom", false), nil, "openclaw@image:registry.example/openclaw:custom"},
		{"custom image, dedicated codex needs no support", image(dedicatedCodexInput(), "registry.example/openclaw:custom", false), nil, "codex@" + PinnedCodexVersion},
		{"custom image without support", image(dedicatedOpenClawInput(), "registry.example/openclaw:custom", false), &refusal{InvalidRequest, "ND6", attrCompute, ""}, ""},
		// ND6 (400) is judged before ND5 (409): with no driver either, the image is reported.
		{"custom image without support and no driver", noDriver(image(dedicatedOpenClawInput(), "registry.example/openclaw:custom", false)), &refusal{InvalidRequest, "ND6", attrCompute, ""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.HarnessVersion != tc.version {
					t.Errorf("harness version = %q, want %q", rev.HarnessVersion, tc.version)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
			if len(errs) != 1 {
				t.Errorf("errors = %v, want ND6 alone", errs)
			}
		})
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
		{"native openclaw", dedicatedOpenClawInput(), Probe{Model: openaiModel, OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}, 2000, 42500 * time.Millisecond},
		{"probe calls the primary, never a fallback", fallbacks, Probe{Model: anthropicModel, OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}, 2000, 42500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev := admitOK(t, tc.in)
			if rev.Probe != tc.want {
				t.Errorf("probe = %+v, want %+v", rev.Probe, tc.want)
			}
			if got := rev.Probe.Budget(tc.in.Compute.CPUMillis); got != tc.budget {
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

// rule ND6, the other way round: native worker support is declared only
// for a custom runtime image (CheckNativeWorkerDeclaration, which
// occ_compute calls); the pinned image supports native workers already.
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
			if !strings.HasPrefix(e.Message, "native_worker_support is only for a custom runtime_image: ") {
				t.Errorf("message %q", e.Message)
			}
		})
	}
	// It agrees with admission's own reading of the image: a declaration is
	// accepted exactly where it changes what the installation reports.
	for _, img := range []string{"", PinnedRuntimeImage, custom} {
		c := k8sCompute()
		c.SandboxDriver, c.RuntimeImage = fullDriver(), img
		without := ComputeInstallation(c).NativeWorkersSupport
		c.NativeWorkerSupport = true
		with := ComputeInstallation(c).NativeWorkersSupport
		if (CheckNativeWorkerDeclaration(img, true) == nil) != (with != without) {
			t.Errorf("image %q: declaration check %v, installation %q -> %q", img, CheckNativeWorkerDeclaration(img, true), without, with)
		}
	}
}
