package admission

import "fmt"

// Pinned runtime: the images and harness versions OCC approves by default.
const (
	PinnedOpenClawVersion = "2026.9.6"
	PinnedCodexVersion    = "0.169.0"
	PinnedRuntimeImage    = "registry.occ-platform.io/runtime/openclaw:" + PinnedOpenClawVersion
	PinnedCodexImage      = "registry.occ-platform.io/runtime/codex:" + PinnedCodexVersion
)

// DefaultNodeWorkers is the Kubernetes default of session-owned workers of a
// native OpenClaw node host (HM6).
const DefaultNodeWorkers = 8

// DefaultExecutionMode applies HM2: embedded on create; on update an omitted
// mode keeps the previous one. planned is the configured value ("" when
// omitted), prior the value in state ("" on create).
func DefaultExecutionMode(planned, prior string) string {
	switch {
	case planned != "":
		return planned
	case prior != "":
		return prior
	default:
		return ModeEmbedded
	}
}

// CheckHarnessMode applies HM1: the supported harness × mode × compute kind
// combinations. Everything else is INVALID_REQUEST, before any work.
func CheckHarnessMode(harness, mode, kind string) *Error {
	attr := []string{"execution_mode"}
	switch {
	case harness != HarnessOpenClaw && harness != HarnessCodex:
		return invalid("HM1", []string{"harness"}, nil, "harness %q is not supported; use \"openclaw\" or \"codex\"", harness)
	case mode != ModeEmbedded && mode != ModeDedicated:
		return invalid("HM1", attr, nil, "execution mode %q is not supported; use \"embedded\" or \"dedicated\"", mode)
	case harness == HarnessCodex && mode == ModeEmbedded:
		return invalid("HM1", attr, nil, "the codex harness has no embedded mode; set execution_mode = \"dedicated\" (a gateway beside a separate Codex app server)")
	case kind == KindSSH && mode == ModeDedicated:
		return invalid("HM1", attr, nil, "%s %s runs on Kubernetes only; an SSH compute runs embedded OpenClaw (harness = \"openclaw\", execution_mode = \"embedded\")", harness, mode)
	case kind != KindKubernetes && kind != KindSSH:
		return invalid("HM1", []string{"compute"}, nil, "compute kind %q is not supported; use a kubernetes or ssh compute", kind)
	}
	return nil
}

// MaxConcurrent applies HM7: an explicit agents.defaults.maxConcurrent wins;
// otherwise max(8, 4 × available parallelism), where parallelism is the
// workload's CPU limit rounded up. It returns 0 when the parallelism is not
// known before runtime (no CPU limit, as on an SSH host): the runtime then
// computes the same formula from what it sees.
func MaxConcurrent(explicit int64, cpuMillis int64) int64 {
	if explicit > 0 {
		return explicit
	}
	if cpuMillis <= 0 {
		return 0
	}
	cores := (cpuMillis + 999) / 1000
	return max(8, 4*cores)
}

// HarnessVersion is the approved harness identity and version the revision
// freezes (AD3): the pinned version, or the custom image that carries it.
func HarnessVersion(harness string, c Compute) string {
	switch {
	case harness == HarnessCodex && c.CodexImage != "" && c.CodexImage != PinnedCodexImage:
		return fmt.Sprintf("codex@image:%s", c.CodexImage)
	case harness == HarnessCodex:
		return "codex@" + PinnedCodexVersion
	case c.RuntimeImage != "" && c.RuntimeImage != PinnedRuntimeImage:
		return fmt.Sprintf("openclaw@image:%s", c.RuntimeImage)
	default:
		return "openclaw@" + PinnedOpenClawVersion
	}
}
