package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestAccAgent_CrashLoopQuotesNoCredential: a crash-looping runtime whose
// previous run printed its environment and its key. The apply fails with
// CRASH_LOOP and quotes the run's last lines, its own words kept, but the
// credential (the value of the Secret the Pod was given, and what looks
// like one) is absent from the diagnostic, the TRACE log, the state and
// the plan JSON. Run through the real CLI so that all four can be read.
// rule AU7
func TestAccAgent_CrashLoopQuotesNoCredential(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: TF_ACC=1 (make testacc)")
	}
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cli := newTFCLI(t)
	t.Cleanup(func() { cli.run(nil, "destroy", "-auto-approve", "-input=false", "-no-color") })
	// The Pod starts unready; once its previous run's lines are served,
	// it is switched to crash-looping, so that the gate's CRASH_LOOP
	// always finds them (set after the crash loop, they raced the gate).
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err == nil && len(pods.Items) > 0 {
				pod := pods.Items[0].Name
				if err := env.cluster.SetPreviousPodLogs(ctx, env.ns, pod, "gateway", []string{
					"openclaw gateway starting",
					"ANTHROPIC_API_KEY=" + testSentinel,
					"\x1b[33mdebug\x1b[0m: using key " + testSentinel + " for anthropic",
					`{"level":"debug","headers":{"x-api-key":"` + testSentinel + `"}}`,
					"fatal: boot failed: cannot bind 0.0.0.0:18789",
				}); err != nil {
					t.Logf("set previous pod logs: %v", err)
					return
				}
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, kubeenv.AnnotationBehavior, kubeenv.BehaviorCrashLoop)
				if _, err := env.cluster.Clientset.CoreV1().Pods(env.ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Logf("switch the Pod to crash-looping: %v", err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	trace := filepath.Join(t.TempDir(), "trace.log")
	cli.write(faultAgentConfig(env, `, pod_annotations = { "testenv.occ.dev/behavior" = "never-ready" }`, anthropicDoc, "support"))
	out, code := cli.apply("TF_LOG=trace", "TF_LOG_PATH="+trace)
	if code == 0 || !strings.Contains(out, "CRASH_LOOP") {
		t.Fatalf("apply: exit %d, want CRASH_LOOP:\n%s", code, out)
	}
	if !strings.Contains(out, "fatal: boot failed: cannot bind 0.0.0.0:18789") || !strings.Contains(out, "ANTHROPIC_API_KEY=[redacted]") {
		t.Fatalf("the diagnostic does not quote the previous run's lines (redacted):\n%s", out)
	}
	readLeakSurfaces(t, cli, trace, out).absent(t, testSentinel, "SENTINEL")
}

// leakSurfaces is everything a failed apply through the CLI leaves for
// someone to read: its diagnostic, the TRACE log, the state, and the next
// plan (as printed and as JSON).
type leakSurfaces struct{ diagnostic, trace, state, plan, planJSON string }

func readLeakSurfaces(t *testing.T, cli tfCLI, trace, diagnostic string) leakSurfaces {
	t.Helper()
	l := leakSurfaces{diagnostic: diagnostic}
	l.state, _ = cli.run(nil, "show", "-json", "-no-color")
	l.plan, _ = cli.run(nil, "plan", "-input=false", "-no-color", "-out=plan.tfplan")
	l.planJSON, _ = cli.run(nil, "show", "-json", "-no-color", "plan.tfplan")
	b, err := os.ReadFile(trace)
	if err != nil || len(b) == 0 {
		t.Fatalf("no TRACE log (%v)", err)
	}
	l.trace = string(b)
	return l
}

// absent fails the test for every surface that holds one of the needles.
func (l leakSurfaces) absent(t *testing.T, needles ...string) {
	t.Helper()
	for name, text := range map[string]string{"diagnostic": l.diagnostic, "TRACE log": l.trace, "state": l.state, "plan": l.plan, "plan JSON": l.planJSON} {
		for _, n := range needles {
			if strings.Contains(text, n) {
				t.Errorf("the credential reached the %s", name)
				break
			}
		}
	}
}

// TestAccAgent_SSHEnvPrintQuotesNoCredential: over SSH, a gateway that
// prints its environment (the model key from the operator's file in it)
// and exits. The apply fails with UNIT_FAILED and quotes the journal of
// the activation, but the key is absent from the diagnostic, the TRACE
// log, the state (the failed create is kept, tainted) and the plan JSON of
// the replacement that follows. Destroy then leaves nothing on the host.
// rule AU7
func TestAccAgent_SSHEnvPrintQuotesNoCredential(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: TF_ACC=1 (make testacc)")
	}
	env := newSSHEnv(t)
	env.run(t, `printf '#!/bin/sh\necho "gateway starting"\nenv | grep -E "^ANTHROPIC_API_KEY="\necho "using key $ANTHROPIC_API_KEY"\nexit 1\n' > /usr/local/bin/occ-env-dump && chmod 0755 /usr/local/bin/occ-env-dump`)
	cli := newTFCLI(t)
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			cli.run(nil, "destroy", "-auto-approve", "-input=false", "-no-color")
		}
	})
	trace := filepath.Join(t.TempDir(), "trace.log")
	cli.write(env.config(`, openclaw_path = "/usr/local/bin/occ-env-dump"`, env.doc("anthropic/claude-sonnet-4-5", "")))
	out, code := cli.apply("TF_LOG=trace", "TF_LOG_PATH="+trace)
	if code == 0 || !strings.Contains(out, "UNIT_FAILED") {
		t.Fatalf("apply: exit %d, want UNIT_FAILED:\n%s", code, out)
	}
	if !strings.Contains(out, "ANTHROPIC_API_KEY=[redacted]") || !strings.Contains(out, "using key [redacted]") {
		t.Fatalf("the diagnostic does not quote the journal's lines (redacted):\n%s", out)
	}
	l := readLeakSurfaces(t, cli, trace, out)
	if !strings.Contains(l.state, `"occ_agent.a"`) || !strings.Contains(l.state, `"tainted":true`) {
		t.Fatalf("the failed create is not in the state, tainted; the state check would prove nothing:\n%s", l.state)
	}
	if !strings.Contains(l.planJSON, `"prior_state"`) {
		t.Fatalf("the plan JSON has no prior state:\n%s", l.planJSON)
	}
	l.absent(t, testSentinel)
	if out, code := cli.run(nil, "destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("destroy: exit %d:\n%s", code, out)
	}
	destroyed = true
	if err := env.destroyed(nil); err != nil {
		t.Fatal(err)
	}
}
