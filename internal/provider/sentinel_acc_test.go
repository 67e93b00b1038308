package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
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
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err == nil && len(pods.Items) > 0 {
				if err := env.cluster.SetPreviousPodLogs(ctx, env.ns, pods.Items[0].Name, "gateway", []string{
					"openclaw gateway starting",
					"ANTHROPIC_API_KEY=" + testSentinel,
					"\x1b[33mdebug\x1b[0m: using key " + testSentinel + " for anthropic",
					`{"level":"debug","headers":{"x-api-key":"` + testSentinel + `"}}`,
					"fatal: boot failed: cannot bind 0.0.0.0:18789",
				}); err != nil {
					t.Logf("set previous pod logs: %v", err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	trace := filepath.Join(t.TempDir(), "trace.log")
	cli.write(faultAgentConfig(env, `, pod_annotations = { "testenv.occ.dev/behavior" = "crash-loop" }`, anthropicDoc, "support"))
	out, code := cli.apply("TF_LOG=trace", "TF_LOG_PATH="+trace)
	if code == 0 || !strings.Contains(out, "CRASH_LOOP") {
		t.Fatalf("apply: exit %d, want CRASH_LOOP:\n%s", code, out)
	}
	if !strings.Contains(out, "fatal: boot failed: cannot bind 0.0.0.0:18789") || !strings.Contains(out, "ANTHROPIC_API_KEY=[redacted]") {
		t.Fatalf("the diagnostic does not quote the previous run's lines (redacted):\n%s", out)
	}
	state, _ := cli.run(nil, "show", "-json", "-no-color")
	planOut, _ := cli.run(nil, "plan", "-input=false", "-no-color", "-out=plan.tfplan")
	planJSON, _ := cli.run(nil, "show", "-json", "-no-color", "plan.tfplan")
	traceLog, err := os.ReadFile(trace)
	if err != nil || len(traceLog) == 0 {
		t.Fatalf("no TRACE log (%v)", err)
	}
	for name, text := range map[string]string{"diagnostic": out, "TRACE log": string(traceLog), "state": state, "plan": planOut, "plan JSON": planJSON} {
		if strings.Contains(text, testSentinel) || strings.Contains(text, "SENTINEL") {
			t.Errorf("the credential reached the %s", name)
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
	state, _ := cli.run(nil, "show", "-json", "-no-color")
	if !strings.Contains(state, `"occ_agent.a"`) || !strings.Contains(state, `"tainted":true`) {
		t.Fatalf("the failed create is not in the state, tainted; the state check would prove nothing:\n%s", state)
	}
	planOut, _ := cli.run(nil, "plan", "-input=false", "-no-color", "-out=plan.tfplan")
	planJSON, _ := cli.run(nil, "show", "-json", "-no-color", "plan.tfplan")
	if !strings.Contains(planJSON, `"prior_state"`) {
		t.Fatalf("the plan JSON has no prior state:\n%s", planJSON)
	}
	traceLog, err := os.ReadFile(trace)
	if err != nil || len(traceLog) == 0 {
		t.Fatalf("no TRACE log (%v)", err)
	}
	for name, text := range map[string]string{"diagnostic": out, "TRACE log": string(traceLog), "state": state, "plan": planOut, "plan JSON": planJSON} {
		if strings.Contains(text, testSentinel) {
			t.Errorf("the credential reached the %s", name)
		}
	}
	if out, code := cli.run(nil, "destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("destroy: exit %d:\n%s", code, out)
	}
	destroyed = true
	if err := env.destroyed(nil); err != nil {
		t.Fatal(err)
	}
}
