package render

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// rules PR1, PR4, PR5: every runtime container's kubelet probes leave the
// startup alone and never restart a held container. The wrapper answers on
// the container's port while held (--health-port: /healthz alive, /readyz
// not ready), and the startup probe holds the liveness probe off for the
// admitted probe budget at the CPU limit plus the login, so a slow model
// probe is never cut short and re-run (each run is a model charge).
func TestPR5_KubeletProbesNeverRestartAStartingOrHeldContainer(t *testing.T) {
	slow := embeddedInput(t, "anthropic/claude-sonnet-4-5")
	slow.Compute = slow.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.CPUMillis = 250 }) // PR1: 20 s + 45 CPU-s at 0.25 CPU = 200 s
	for name, in := range map[string]admission.Input{
		"embedded":             embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"embedded at 0.25 CPU": slow,
		"dedicated codex":      codexInput(t, admission.MethodAPIKey),
		"sandboxed codex":      sandboxedCodexInput(t),
	} {
		rev := admit(t, in)
		objs, err := Kubernetes(rev, 1, admission.Compute{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		containers := containersOf(objs)
		if len(containers) == 0 {
			t.Fatalf("%s: no containers", name)
		}
		budget := rev.Probe.Budget(rev.ComputeSettings.Kubernetes().CPUMillis)
		for _, c := range containers {
			what := name + "/" + *c.Name
			if len(c.Ports) == 0 {
				t.Fatalf("%s: a runtime container that listens on no port", what)
			}
			port := *c.Ports[0].ContainerPort
			if len(c.Args) == 0 || c.Args[0] != "--health-port="+strconv.Itoa(int(port)) {
				t.Errorf("%s: args %v, want --health-port=%d first", what, c.Args, port)
			}
			sp, lp := c.StartupProbe, c.LivenessProbe
			if sp == nil || lp == nil || sp.HTTPGet == nil || *sp.HTTPGet.Path != "/healthz" || sp.HTTPGet.Port.IntValue() != int(port) {
				t.Fatalf("%s: startup probe %+v, want /healthz on %d beside the liveness probe", what, sp, port)
			}
			window := time.Duration(*sp.PeriodSeconds**sp.FailureThreshold) * time.Second
			if window < budget+30*time.Second {
				t.Errorf("%s: the startup probe allows %v, less than the probe budget %v plus the 30 s login", what, window, budget)
			}
			if window > budget+10*time.Minute {
				t.Errorf("%s: the startup probe allows %v: a wedged start would go unnoticed for too long", what, window)
			}
			if strings.Contains(*c.Name, "gateway") && name == "embedded at 0.25 CPU" && window < 200*time.Second {
				t.Errorf("%s: window %v below the 200 s PR1 budget at 0.25 CPU", what, window)
			}
		}
	}
}

// rules PR5, SS2: a ready gateway stays in its Service while it is busy.
// One late /readyz (a turn on a loaded node answered after the kubelet's
// default 1 s) used to drop the Pod out of the agent's Service, so clients
// met "connection refused" until the next probe; it now takes three late
// or failed answers in a row. Becoming ready still takes one answer, so
// activation is noticed within a period.
func TestPR5_ReadinessToleratesABusyGateway(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
	} {
		objs, err := Kubernetes(admit(t, in), 1, admission.Compute{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, c := range containersOf(objs) {
			rp := c.ReadinessProbe
			switch {
			case rp == nil || rp.HTTPGet == nil || *rp.HTTPGet.Path != "/readyz":
				t.Errorf("%s/%s: readiness probe %+v, want /readyz", name, *c.Name, rp)
			case rp.SuccessThreshold != nil && *rp.SuccessThreshold != 1:
				t.Errorf("%s/%s: ready after %d answers, want 1", name, *c.Name, *rp.SuccessThreshold)
			case rp.FailureThreshold == nil || *rp.FailureThreshold < 3, rp.TimeoutSeconds == nil || *rp.TimeoutSeconds < 2:
				t.Errorf("%s/%s: unready after %v answers late by %v s, want at least 3 answers and a 2 s timeout", name, *c.Name, rp.FailureThreshold, rp.TimeoutSeconds)
			case *rp.PeriodSeconds > 2:
				t.Errorf("%s/%s: probed every %d s: activation would be noticed late", name, *c.Name, *rp.PeriodSeconds)
			}
		}
	}
}
