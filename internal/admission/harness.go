package admission

import (
	"fmt"
	"slices"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Pinned runtime: the images and harness versions OCC approves by default.
const (
	PinnedOpenClawVersion = "2026.9.6"
	PinnedCodexVersion    = "0.169.0"
	PinnedRuntimeImage    = "ghcr.io/occ-platform/runtime/openclaw:" + PinnedOpenClawVersion
	PinnedCodexImage      = "ghcr.io/occ-platform/runtime/codex:" + PinnedCodexVersion
)

// What the pinned OpenClaw does with a native worker, and so why dedicated
// OpenClaw is refused (ND6, CheckNativeOpenClaw). Read from OpenClaw
// 2026.9.6: a node started as a session host (`openclaw node run
// --session-host`, `openclaw connect --ephemeral`) runs a session's agent
// loop, but every model call goes back to the gateway
// (WorkerInferenceProxyClient, worker.inference.start), which runs it with
// its own configuration and credential; the worker processes get no secret;
// a session runs on a node only once the sessions.dispatch RPC places it
// there, and no configuration key places every session of an Agent on a
// node (cloudWorkers has no requiredProfile). The topology rendered for
// dedicated OpenClaw (a gateway without the credential, ND2; a node with
// it, ND1, ND4) therefore runs every turn on the keyless gateway.
const (
	// NativeInferenceCheckedVersion is the newest OpenClaw release read
	// for node-local worker inference: the newest published when it was
	// read. Raise it only after reading a newer release; a test holds it
	// to PinnedOpenClawVersion, so that pinning a newer runtime asks for
	// that reading.
	NativeInferenceCheckedVersion = "2026.9.6"

	// pinnedWorkerInference says where the pinned runtime runs a native
	// worker's inference.
	pinnedWorkerInference = "the pinned runtime OpenClaw " + PinnedOpenClawVersion + " sends a native worker's model calls through the gateway's inference proxy " +
		"with the gateway's own credential, which the gateway must not hold (ND2), and places a session on a node only when that session is dispatched there; " +
		"no OpenClaw release up to " + NativeInferenceCheckedVersion + " runs a worker's inference on the node"

	// nativeWorkerRefusal is ND6's refusal of dedicated OpenClaw: why, and
	// what to deploy instead.
	nativeWorkerRefusal = "dedicated OpenClaw cannot serve a turn: " + pinnedWorkerInference +
		", so neither a custom runtime_image nor native_worker_support changes this. " +
		`Deploy embedded OpenClaw (execution_mode = "embedded") or dedicated Codex (harness = "codex", execution_mode = "dedicated"); ` +
		"dedicated OpenClaw returns when a pinned runtime runs worker inference on the node"

	// nativeWorkerSupportIgnored says why a native_worker_support
	// declaration admits nothing.
	nativeWorkerSupportIgnored = "dedicated OpenClaw is refused whatever it says (rule ND6), because no OpenClaw release up to " +
		NativeInferenceCheckedVersion + " runs a native worker's inference on the node"
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
// combinations, as the kind table lists them (kindTable). Everything else
// is INVALID_REQUEST, before any work.
func CheckHarnessMode(harness, mode, kind string) *Error {
	attr := []string{"execution_mode"}
	switch {
	case !slices.Contains(Harnesses, harness):
		return invalid("HM1", []string{"harness"}, nil, "harness %q is not supported; use \"openclaw\" or \"codex\"", harness)
	case !slices.Contains(ExecutionModes, mode):
		return invalid("HM1", attr, nil, "execution mode %q is not supported; use \"embedded\" or \"dedicated\"", mode)
	}
	runs := kindsWhere(func(k KindSupport) bool { return k.RunsHarness(harness, mode) })
	if len(runs) == 0 {
		// No compute kind runs the combination: it does not exist (codex+embedded).
		return invalid("HM1", attr, nil, "the %s harness has no %s mode; %s", harness, mode, modeAdvice(harness))
	}
	row, known := KindOf(kind)
	switch {
	case !known:
		return invalid("HM1", []string{"compute"}, nil, "compute kind %q is not supported; use a %s compute", kind, orList(kindNames()))
	case !row.RunsHarness(harness, mode):
		var alts []string
		for _, hm := range row.Runs {
			alts = append(alts, hm.describe())
		}
		return invalid("HM1", attr, nil, "%s %s runs on %s only; %s runs %s", harness, mode, titles(runs), row.Words.Noun, orList(alts))
	}
	return nil
}

// modeAdvice names the modes some compute kind runs harness in.
func modeAdvice(harness string) string {
	var advice []string
	for _, m := range ExecutionModes {
		if len(kindsWhere(func(k KindSupport) bool { return k.RunsHarness(harness, m) })) == 0 {
			continue
		}
		a := fmt.Sprintf("set execution_mode = %q", m)
		if note := modeNotes[HarnessMode{harness, m}]; note != "" {
			a += " (" + note + ")"
		}
		advice = append(advice, a)
	}
	if len(advice) == 0 {
		return "no compute kind runs it"
	}
	return orList(advice)
}

// MaxConcurrent applies HM7: an explicit agents.defaults.maxConcurrent wins;
// otherwise max(8, 4 × available parallelism), where parallelism honours
// the workload's CPU quota: the CPU limit in whole CPUs, rounded down and
// at least 1, as a quota-aware count of available parallelism counts it
// (a quota of 2.5 CPUs keeps 2 threads busy at once; Node's
// os.availableParallelism, which OpenClaw runs on, truncates the quota the
// same way). It returns 0 when the parallelism is not known before
// runtime (no CPU limit): the runtime then computes the same formula from
// what it sees.
func MaxConcurrent(explicit int64, cpuMillis int64) int64 {
	if explicit > 0 {
		return explicit
	}
	if cpuMillis <= 0 {
		return 0
	}
	cores := max(1, cpuMillis/1000)
	return max(8, 4*cores)
}

// admitMaxConcurrent is the bound on concurrent top-level turns a revision
// freezes (HM7). The platform defines the default for dedicated Codex
// only: there it is frozen into the admitted document (where the CPU
// quota is known), so that the plan shows what will run. Elsewhere
// (embedded OpenClaw, a native node host, an SSH host) the document keeps
// what the configuration says, and an unset value is the runtime's own
// default: the result is the explicit value, or 0.
func admitMaxConcurrent(doc occconfig.Document, harness, mode string, cpuMillis int64) int64 {
	v, _ := occconfig.Lookup(doc, pathMaxConcurrent)
	explicit, _ := v.(int64)
	if harness != HarnessCodex || mode != ModeDedicated {
		return explicit
	}
	n := MaxConcurrent(explicit, cpuMillis)
	if explicit == 0 && n > 0 {
		occconfig.Set(doc, pathMaxConcurrent, n)
	}
	return n
}

// HarnessVersion is the approved harness identity and version the revision
// freezes (AD3): the pinned version, or the custom image that carries it.
//
// An image of the platform's own repository names its version, whichever
// release pinned it: a compute that holds an earlier release's image
// (runtime_image = "ghcr.io/occ-platform/runtime/openclaw:V") keeps
// "openclaw@V" and so its revisions across a provider upgrade (see the
// upgrading guide).
func HarnessVersion(harness string, c Compute) string {
	switch {
	case harness == HarnessCodex && c.Kubernetes().CodexImage != "":
		if v, ok := platformImageVersion(c.Kubernetes().CodexImage, PinnedCodexImage); ok {
			return "codex@" + v
		}
		return fmt.Sprintf("codex@image:%s", c.Kubernetes().CodexImage)
	case harness == HarnessCodex:
		return "codex@" + PinnedCodexVersion
	case c.Kubernetes().RuntimeImage != "":
		if v, ok := platformImageVersion(c.Kubernetes().RuntimeImage, PinnedRuntimeImage); ok {
			return "openclaw@" + v
		}
		return fmt.Sprintf("openclaw@image:%s", c.Kubernetes().RuntimeImage)
	default:
		return "openclaw@" + PinnedOpenClawVersion
	}
}

// platformImageVersion is the tag of image when it is the pinned image's
// repository at another (or the same) tag, pinned by digest or not.
func platformImageVersion(image, pinned string) (string, bool) {
	img, err := ParseImage(image)
	if err != nil || img.Tag == "" {
		return "", false
	}
	if p, err := ParseImage(pinned); err != nil || p.Name != img.Name {
		return "", false
	}
	return img.Tag, true
}
