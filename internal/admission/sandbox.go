package admission

// Installation is what GET /installation reports for a Compute (ND5).
type Installation struct {
	// ExecutionModes lists the OpenClaw modes an Agent can deploy in.
	ExecutionModes []string
	// SandboxDriverUnavailable is true during a driver outage.
	SandboxDriverUnavailable bool
}

// ComputeInstallation derives the installation capabilities from the
// Compute's declared settings (ND5): the OpenClaw execution modes its kind
// runs that ND6 does not refuse, so that a mode not listed is refused
// before any write. It never reports native worker support: no OpenClaw
// release runs a native worker's inference on the node (ND6). A live read
// replaces SandboxDriverUnavailable with what the driver's gateway reports.
func ComputeInstallation(c Compute) Installation {
	var inst Installation
	for _, m := range ExecutionModes {
		if kindRow(c.Kind).RunsHarness(HarnessOpenClaw, m) && CheckNativeOpenClaw(HarnessOpenClaw, m, c.Kind) == nil {
			inst.ExecutionModes = append(inst.ExecutionModes, m)
		}
	}
	if c.Kubernetes().SandboxDriver != nil {
		inst.SandboxDriverUnavailable = c.Kubernetes().SandboxDriver.Unavailable
	}
	return inst
}

// CheckNativeOpenClaw applies ND6, the one place it is decided: dedicated
// native OpenClaw, on a kind that runs it, is refused with INVALID_REQUEST
// whatever the runtime image, its declared native worker support or the
// sandbox driver. The topology the provider renders for it (ND1 to ND4: a
// gateway without the model credential, a node with it) needs node-local
// worker inference and required placement, which no OpenClaw release has
// (see nativeWorkerRefusal), so it could never serve a turn. Admit judges
// it right after HM1, alone.
func CheckNativeOpenClaw(harness, mode, kind string) *Error {
	if harness != HarnessOpenClaw || mode != ModeDedicated || !kindRow(kind).RunsHarness(harness, mode) {
		return nil
	}
	return invalid("ND6", []string{"execution_mode"}, nil, "%s", nativeWorkerRefusal)
}

// CheckSandbox applies ND4 and ND5 to an execution mode and a Compute: a
// sandbox driver needs a kind that takes one (RESOURCE_CONFLICT), must be
// the bundled driver (OS1), and a dedicated harness (Codex: ND6 refuses
// dedicated OpenClaw before this is asked) fails closed when the driver its
// compute declares is not installed in the cluster (RESOURCE_CONFLICT
// naming it).
func CheckSandbox(mode string, c Compute) Errors {
	var errs Errors
	row := kindRow(c.Kind)
	if c.Kubernetes().SandboxDriver != nil && !row.SandboxDriver {
		takes := kindsWhere(func(k KindSupport) bool { return k.SandboxDriver })
		var names []string
		for _, k := range takes {
			names = append(names, k.Kind)
		}
		errs = append(errs, conflict("ND4", []string{"compute"}, "a sandbox driver needs %s; remove sandbox_driver or use a %s compute", nouns(takes), orList(names)))
	}
	if c.Kubernetes().SandboxDriver != nil && c.Kubernetes().SandboxDriver.Name != DriverOpenShell {
		errs = append(errs, invalid("OS1", []string{"compute"}, nil, "sandbox driver %q is not known; the bundled driver is %q", c.Kubernetes().SandboxDriver.Name, DriverOpenShell))
	}
	if mode == ModeDedicated && row.SandboxDriver && c.Kubernetes().SandboxDriver != nil && c.Kubernetes().SandboxDriver.NotInstalled {
		// The compute declares a driver to contain its dedicated harnesses,
		// and the cluster does not serve it: fail closed (AD6, ND5).
		errs = append(errs, conflict("ND5", []string{"compute"}, "the dedicated harness needs the sandbox driver %q, which is not installed in the cluster: %s", c.Kubernetes().SandboxDriver.Name, notInstalledText))
	}
	return errs
}

// CheckNativeWorkerDeclaration applies ND6 to a compute's
// native_worker_support: it was a custom runtime image's declaration, and
// it no longer admits anything (dedicated OpenClaw is refused whatever it
// says), so on the pinned image, which is no custom image, it is refused
// as before, saying so. runtimeImage is the configured image ("" for the
// pinned one). The refusal points at the Kubernetes settings'
// native_worker_support.
func CheckNativeWorkerDeclaration(runtimeImage string, declared bool) *Error {
	if !declared || !pinnedRuntime(runtimeImage) {
		return nil
	}
	return invalid("ND6", []string{"kubernetes", "native_worker_support"}, nil,
		"native_worker_support is only for a custom runtime_image, and it no longer admits anything: %s. Remove native_worker_support", nativeWorkerSupportIgnored)
}

// pinnedRuntime reports whether a configured runtime image is the pinned
// one: its tag, with or without a digest (a release's default has one).
func pinnedRuntime(image string) bool {
	if image == "" {
		return true
	}
	v, ok := platformImageVersion(image, PinnedRuntimeImage)
	return ok && v == PinnedOpenClawVersion
}

// notInstalledText says what a cluster without the driver lacks.
const notInstalledText = "the agents.x-k8s.io/v1beta1 Sandbox API is not served; install the agent-sandbox controller (v1.0 or later) with OpenShell, or remove sandbox_driver from the compute"
