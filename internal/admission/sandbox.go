package admission

import (
	"fmt"
	"slices"
	"strings"
)

// Native worker support values reported by the installation (ND6).
const (
	NativeWorkersPinned   = "pinned-runtime"
	NativeWorkersDeclared = "declared"
)

// Installation is what GET /installation reports for a Compute (ND5).
type Installation struct {
	// ExecutionModes lists the OpenClaw modes an Agent can deploy in.
	ExecutionModes []string
	// NativeWorkersSupport is "pinned-runtime", "declared", or "" when the
	// installation omits nativeWorkers (no qualifying driver or no support).
	NativeWorkersSupport string
	// SandboxDriverUnavailable is true during a driver outage.
	SandboxDriverUnavailable bool
}

// MissingFacets lists the facets a native OpenClaw harness needs that the
// driver does not provide (ND4).
func MissingFacets(d *SandboxDriver) []string {
	var missing []string
	for _, f := range Facets {
		if d == nil || !slices.Contains(d.Facets, f) {
			missing = append(missing, f)
		}
	}
	return missing
}

// QualifyingDriver reports whether the Compute has a sandbox driver that can
// contain dedicated native OpenClaw: the bundled OpenShell driver, on a
// kind that takes sandbox drivers (Kubernetes), with all three facets and
// enforced worker placement (ND4).
func QualifyingDriver(c Compute) bool {
	d := c.SandboxDriver
	return kindRow(c.Kind).SandboxDriver && d != nil && d.Name == DriverOpenShell && !d.NotInstalled &&
		len(MissingFacets(d)) == 0 && d.RequiredProfile != ""
}

// nativeWorkerSupport is the runtime image's own support, independent of the
// driver (ND6), on a kind that runs native OpenClaw.
func nativeWorkerSupport(c Compute) string {
	switch {
	case !kindRow(c.Kind).RunsHarness(HarnessOpenClaw, ModeDedicated):
		return ""
	case pinnedRuntime(c.RuntimeImage):
		return NativeWorkersPinned
	case c.NativeWorkerSupport:
		return NativeWorkersDeclared
	default:
		return ""
	}
}

// ComputeInstallation derives the installation capabilities from the
// Compute's declared settings (ND5, ND6). A live read replaces
// SandboxDriverUnavailable with what the driver's gateway reports.
func ComputeInstallation(c Compute) Installation {
	inst := Installation{ExecutionModes: []string{ModeEmbedded}}
	if c.SandboxDriver != nil {
		inst.SandboxDriverUnavailable = c.SandboxDriver.Unavailable
	}
	support := nativeWorkerSupport(c)
	if QualifyingDriver(c) && support != "" {
		inst.NativeWorkersSupport = support
		inst.ExecutionModes = append(inst.ExecutionModes, ModeDedicated)
	}
	return inst
}

// CheckSandbox applies ND4 to ND6 to a harness, mode and Compute: dedicated
// native OpenClaw needs native worker support in the image (INVALID_REQUEST
// otherwise) and a qualifying driver (RESOURCE_CONFLICT naming what is
// missing); a sandbox driver needs Kubernetes.
func CheckSandbox(harness, mode string, c Compute) Errors {
	var errs Errors
	row := kindRow(c.Kind)
	if c.SandboxDriver != nil && !row.SandboxDriver {
		takes := kindsWhere(func(k KindSupport) bool { return k.SandboxDriver })
		var names []string
		for _, k := range takes {
			names = append(names, k.Kind)
		}
		errs = append(errs, conflict("ND4", []string{"compute"}, "a sandbox driver needs %s; remove sandbox_driver or use a %s compute", nouns(takes), orList(names)))
	}
	if c.SandboxDriver != nil && c.SandboxDriver.Name != DriverOpenShell {
		errs = append(errs, invalid("OS1", []string{"compute"}, nil, "sandbox driver %q is not known; the bundled driver is %q", c.SandboxDriver.Name, DriverOpenShell))
	}
	if mode == ModeDedicated && row.SandboxDriver && c.SandboxDriver != nil && c.SandboxDriver.NotInstalled {
		// The compute declares a driver to contain its dedicated harnesses,
		// and the cluster does not serve it: fail closed (AD6, ND5).
		return append(errs, conflict("ND5", []string{"compute"}, "the dedicated harness needs the sandbox driver %q, which is not installed in the cluster: %s", c.SandboxDriver.Name, notInstalledText))
	}
	if harness != HarnessOpenClaw || mode != ModeDedicated || !row.RunsHarness(harness, mode) {
		return errs
	}
	if nativeWorkerSupport(c) == "" {
		errs = append(errs, invalid("ND6", []string{"compute"}, nil,
			"the custom runtime image %q does not declare native worker support, so dedicated OpenClaw is not available; set kubernetes.native_worker_support = true if the image supports native workers, use the pinned runtime image, or deploy embedded", c.RuntimeImage))
		return errs
	}
	if !QualifyingDriver(c) {
		errs = append(errs, conflict("ND5", []string{"compute"}, "dedicated OpenClaw needs a qualifying sandbox driver: %s", missingDriverText(c.SandboxDriver)))
	}
	return errs
}

// CheckNativeWorkerDeclaration applies ND6 the other way round: a compute
// declares native worker support (runtime.nativeWorkerSupport) only for a
// custom runtime image; the pinned image supports native workers already.
// runtimeImage is the configured image ("" for the pinned one). The
// refusal points at the Kubernetes settings' native_worker_support.
func CheckNativeWorkerDeclaration(runtimeImage string, declared bool) *Error {
	if !declared || !pinnedRuntime(runtimeImage) {
		return nil
	}
	return invalid("ND6", []string{"kubernetes", "native_worker_support"}, nil,
		"native_worker_support is only for a custom runtime_image: the pinned runtime image already supports native workers. Remove native_worker_support, or set runtime_image to your custom image")
}

// pinnedRuntime reports whether a configured runtime image is the pinned one.
func pinnedRuntime(image string) bool { return image == "" || image == PinnedRuntimeImage }

func missingDriverText(d *SandboxDriver) string {
	if d == nil {
		return fmt.Sprintf("the compute has none; add kubernetes.sandbox_driver = { name = %q, facets = [\"networking\", \"filesystem\", \"process\"], required_profile = \"…\" }", DriverOpenShell)
	}
	var missing []string
	if d.NotInstalled {
		missing = append(missing, "it is not installed in the cluster ("+notInstalledText+")")
	}
	if d.Name != DriverOpenShell {
		missing = append(missing, fmt.Sprintf("driver %q is not the bundled %q", d.Name, DriverOpenShell))
	}
	if m := MissingFacets(d); len(m) > 0 {
		missing = append(missing, "facets "+strings.Join(m, ", ")+" are missing")
	}
	if d.RequiredProfile == "" {
		missing = append(missing, "required_profile is not set (enforced worker placement, cloudWorkers.requiredProfile)")
	}
	return fmt.Sprintf("driver %q does not qualify: %s", d.Name, strings.Join(missing, "; "))
}

// notInstalledText says what a cluster without the driver lacks.
const notInstalledText = "the agents.x-k8s.io/v1alpha1 Sandbox API is not served; install OpenShell with the agent-sandbox controller, or remove sandbox_driver from the compute"
