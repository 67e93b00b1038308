package provider

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// restartAction is the action block of the tests: a restart of
// occ_agent.a, and the agent's activation time as an output.
const restartAction = `
action "occ_agent_restart" "now" {
  config {
    agent   = occ_agent.a
    timeout = "4m"
  }
}

output "activated_at" {
  value = occ_agent.a.activated_at
}
`

// secretRefSource is a credential source that names the test's own Secret
// "llm" (key api-key) in the compute's namespace.
const secretRefSource = `
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "llm", key = "api-key" }
}
`

// Issue 30: `terraform apply -invoke=action.occ_agent_restart` on the real
// node, with the real Terraform 1.14 and the built provider, as an operator
// runs it after rotating a key in place. The agent's credential source
// names the operator's Secret; the key in it is replaced behind
// Terraform's back (no new revision: the Secret is not the provider's). The
// restart replaces the gateway Pod under its Deployment's strategy and
// blocks until the new Pod passes its startup probe, which calls the model
// with the new key; the action says it is back; the activation time, the
// revision and the plan do not change. Then a ResourceQuota that admits no
// Pod (an administrator's) fails the next restart at once with
// REPLICA_FAILURE and what refused the Pod, not at the timeout.
func TestAccAction_AgentRestartKubernetes(t *testing.T) {
	actionPreCheck(t)
	run := builtProviderCLI(t)
	env := newRealEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	core := env.cluster.Clientset.CoreV1()
	rotated := testSentinel + "-rotated"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: env.ns}, StringData: map[string]string{"api-key": testSentinel}}
	if _, err := core.Secrets(env.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	cfg := strings.Replace(realAgentConfig(env, srv.URL, "6m"), writeOnlyKeySource("anthropic"), secretRefSource, 1)
	if !strings.Contains(cfg, `secret_ref = { name = "llm"`) {
		t.Fatal("the configuration was not rewritten")
	}
	dir := t.TempDir()
	writeConfigFile(t, dir, "main.tf", requiredOCC+cfg+restartAction)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	activatedAt, _ := run(dir, "output", "-raw", "activated_at")
	pods := func() []string {
		l, err := core.Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
		if err != nil {
			t.Fatal(err)
		}
		var uids []string
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				uids = append(uids, string(p.UID))
			}
		}
		return uids
	}
	before := pods()

	secret.StringData["api-key"] = rotated
	if _, err := core.Secrets(env.ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := len(srv.ProbeRequests())
	start := time.Now()
	out, code := run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_restart.now")
	back := regexp.MustCompile(`agent "support" revision 1 restarted \(gateway\) and ready again after [0-9.]+m?s`)
	if code != 0 || !back.MatchString(out) {
		t.Fatalf("the restart (exit %d), want %s:\n%s", code, back, out)
	}
	t.Logf("restart on the real node: %s (the action said: %s)", time.Since(start).Round(100*time.Millisecond), back.FindString(out))
	after := pods()
	if len(after) != 1 || len(before) != 1 || after[0] == before[0] {
		t.Errorf("the gateway's Pods were %v before the restart and are %v after it; want one new Pod", before, after)
	}
	var sawRotated bool
	for _, c := range srv.ProbeRequests()[calls:] {
		if c.Credential == testSentinel {
			t.Error("the restarted gateway called the model with the key from before the rotation")
		}
		sawRotated = sawRotated || c.Credential == rotated
	}
	if !sawRotated {
		t.Error("the restarted gateway's startup probe did not call the model with the rotated key")
	}
	if strings.Contains(out, testSentinel) {
		t.Error("the action's output holds a key")
	}
	// Nothing Terraform manages changed: no plan, the same activation.
	if out, code := run(dir, "plan", "-detailed-exitcode", "-no-color"); code != 0 {
		t.Errorf("plan after the restart (exit %d), want no changes:\n%s", code, out)
	}
	if out, code := run(dir, "apply", "-refresh-only", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("refresh (exit %d):\n%s", code, out)
	}
	if now, _ := run(dir, "output", "-raw", "activated_at"); now != activatedAt || now == "" {
		t.Errorf("activated_at was %q and is %q after the restart; a restart activates nothing", activatedAt, now)
	}

	// An administrator's quota admits no Pod: the restart fails fast,
	// saying what refused it.
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: env.ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if _, err := core.ResourceQuotas(env.ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = core.ResourceQuotas(env.ns).Delete(context.Background(), quota.Name, metav1.DeleteOptions{})
	})
	start = time.Now()
	out, code = run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_restart.now")
	if code == 0 || !strings.Contains(out, "REPLICA_FAILURE") || !strings.Contains(out, "exceeded quota") || !strings.Contains(out, `agent "support" revision 1 was not restarted`) || !strings.Contains(strings.Join(strings.Fields(out), " "), "then restart again (or apply)") {
		t.Fatalf("a restart under a quota that admits no Pod (exit %d), want REPLICA_FAILURE quoting the quota:\n%s", code, out)
	}
	if i := strings.Index(out, "Error:"); i >= 0 {
		t.Logf("the refused restart said:\n%s", out[i:])
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("the refused Pod failed the restart after %s: it waited for the timeout", d.Round(time.Second))
	}
}

// Issue 30: the same action on the nspawn systemd host. The restart starts
// the agent's unit again (a new systemd invocation) and blocks until the
// gateway answers /readyz through the SSH connection; the plan and the
// activation time do not change. Then, with the operator's credentials
// file gone from the host, the restart fails with the unit's failure, the
// journal of this restart and advice that names the file; once the file is
// back, a restart brings the agent back.
func TestAccAction_AgentRestartSSH(t *testing.T) {
	actionPreCheck(t)
	run := builtProviderCLI(t)
	env := newSSHEnv(t)
	env.withGatewayToken(t)
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	writeConfigFile(t, dir, "main.tf", requiredOCC+env.turnConfig(t, srv.URL)+restartAction)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	activatedAt, _ := run(dir, "output", "-raw", "activated_at")
	invocation := func() string {
		return env.run(t, "systemctl show -p InvocationID --value -- "+render.UnitName("support"))
	}
	first := invocation()
	start := time.Now()
	out, code := run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_restart.now")
	back := regexp.MustCompile(`agent "support" revision 1 restarted \(occ-agent-support\.service\) and ready again after [0-9.]+m?s`)
	if code != 0 || !back.MatchString(out) {
		t.Fatalf("the restart (exit %d), want %s:\n%s", code, back, out)
	}
	t.Logf("restart on the nspawn host: %s", time.Since(start).Round(100*time.Millisecond))
	if second := invocation(); second == first || second == "" {
		t.Errorf("the unit's invocation was %q before the restart and %q after it; want a new one", first, second)
	}
	if out, code := run(dir, "plan", "-detailed-exitcode", "-no-color"); code != 0 {
		t.Errorf("plan after the restart (exit %d), want no changes:\n%s", code, out)
	}
	if now, _ := run(dir, "output", "-raw", "activated_at"); now != activatedAt || now == "" {
		t.Errorf("activated_at was %q and is %q after the restart", activatedAt, now)
	}

	// The operator's credentials file is gone: systemd cannot start the
	// unit, and the diagnostic says which file.
	env.run(t, "mv -- "+sshEnvFile+" "+sshEnvFile+".moved")
	moved := true
	t.Cleanup(func() {
		if moved {
			env.run(t, "mv -- "+sshEnvFile+".moved "+sshEnvFile)
		}
	})
	out, code = run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_restart.now")
	if code == 0 || !strings.Contains(out, `agent "support" revision 1 was not restarted`) || !strings.Contains(out, "systemd cannot read the credentials file "+sshEnvFile) || !strings.Contains(strings.Join(strings.Fields(out), " "), "Journal of this restart") {
		t.Fatalf("a restart without the credentials file (exit %d), want a failure naming the file:\n%s", code, out)
	}
	if i := strings.Index(out, "Error:"); i >= 0 {
		t.Logf("the failed restart said:\n%s", out[i:])
	}
	env.run(t, "mv -- "+sshEnvFile+".moved "+sshEnvFile)
	moved = false
	if out, code := run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_restart.now"); code != 0 || !back.MatchString(out) {
		t.Fatalf("the restart with the file back (exit %d):\n%s", code, out)
	}
	state, _ := run(dir, "show", "-json")
	if strings.Contains(out+state, testSentinel) || strings.Contains(out+state, sshGatewayToken) {
		t.Error("a secret is in the action's output or the state")
	}
}
