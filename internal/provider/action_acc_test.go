package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// actionPreCheck: actions are Terraform 1.14's.
func actionPreCheck(t *testing.T) { newTerraformPreCheck(t, 1, 14, "actions") }

// turnAction is the action block of the tests: a turn to occ_agent.a.
const turnAction = `
action "occ_agent_turn" "smoke" {
  config {
    agent   = occ_agent.a
    message = "Say ok."
    timeout = "3m"
  }
}
`

const requiredOCC = `
terraform {
  required_providers {
    occ = { source = "occ-platform/occ" }
  }
}
`

// answered is the action's progress line for an answer whose first line
// is ok.
var answered = regexp.MustCompile(`agent "support" answered \(first token after [0-9.]+m?s, [0-9.]+m?s in all\): ok`)

// TestAccAction_AgentTurnKubernetes: `terraform apply -invoke` of
// occ_agent_turn on the real node, with the real Terraform 1.14 and the
// built provider, as an operator runs it after a rotation. An agent whose
// configuration leaves the gateway's chat completions endpoint off fails
// the action with TURN_FAILED and the fix; once enabled (a new revision),
// the action reaches the gateway through a port-forward with the agent's
// gateway token and prints the model's answer and the time to the first
// token, and the model saw the agent's key. With the minimal Role the
// action is refused, naming the permission it lacks; with the turn's
// pods/portforward rule (kube.TurnRules) beside it, it runs.
func TestAccAction_AgentTurnKubernetes(t *testing.T) {
	actionPreCheck(t)
	run := builtProviderCLI(t)
	env := newRealEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := env.cluster.NamespacedIdentity(ctx, env.ns, append(append(kube.RequiredRules[:0:0], kube.RequiredRules...), kube.TurnRules...))
	if err != nil {
		t.Fatal(err)
	}
	minimal := env.provider // the Role of RequiredRules only
	turner := fmt.Sprintf("\nprovider \"occ\" {\n  kubernetes = { config_path = %q }\n}\n", id.KubeconfigPath)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	dir := t.TempDir()
	off := realAgentConfig(env, srv.URL, "6m")
	on := withChatCompletions(t, off, `agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }`)
	writeConfigFile(t, dir, "main.tf", requiredOCC+off+turnAction)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	// The minimal Role may not port-forward: refused, naming the permission.
	out, code := run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_turn.smoke")
	if code == 0 || !strings.Contains(out, "RESOURCE_CONFLICT") || !strings.Contains(out, "get and create on pods/portforward") {
		t.Fatalf("a turn without the port-forward permission (exit %d), want RESOURCE_CONFLICT naming it:\n%s", code, out)
	}
	off, on = strings.Replace(off, minimal, turner, 1), strings.Replace(on, minimal, turner, 1)
	writeConfigFile(t, dir, "main.tf", requiredOCC+off+turnAction)
	t.Cleanup(func() {
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	// The endpoint is off: a clear error with the fix, no answer.
	out, code = run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_turn.smoke")
	if code == 0 || !strings.Contains(out, "TURN_FAILED") || !strings.Contains(out, "gateway.http.endpoints.chatCompletions.enabled = true") {
		t.Fatalf("a turn to a gateway without its chat completions endpoint (exit %d), want TURN_FAILED naming the setting:\n%s", code, out)
	}

	writeConfigFile(t, dir, "main.tf", requiredOCC+on+turnAction)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply of the endpoint (exit %d):\n%s", code, out)
	}
	before := len(srv.ProbeRequests())
	out, code = run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_turn.smoke")
	if code != 0 || !answered.MatchString(out) {
		t.Fatalf("the turn (exit %d), want %s:\n%s", code, answered, out)
	}
	t.Logf("the action printed: %s", answered.FindString(out))
	calls := srv.ProbeRequests()[before:]
	if len(calls) == 0 {
		t.Fatal("the action answered without a model call")
	}
	for _, c := range calls {
		if c.Path != "/v1/messages" || c.Credential != testSentinel {
			t.Errorf("the turn's model call %s (the agent's key: %v)", c.Path, c.Credential == testSentinel)
		}
	}
	if strings.Contains(out, testSentinel) {
		t.Error("the action's output holds the key")
	}
}

// TestAccAction_AgentTurnSSH: the same action on the nspawn systemd host.
// The provider reads where the activated revision's gateway listens and
// how it authenticates from the host, takes the agent's own gateway token
// from its root-only file on the host for this turn only, and sends the
// turn through its SSH connection; the answer and the time to the first
// token are printed, and neither the key nor the token is in the output
// or the state.
func TestAccAction_AgentTurnSSH(t *testing.T) {
	actionPreCheck(t)
	run := builtProviderCLI(t)
	env := newSSHEnv(t)
	env.withGatewayToken(t)
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	writeConfigFile(t, dir, "main.tf", requiredOCC+env.turnConfig(t, srv.URL)+turnAction)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	out, code := run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_turn.smoke")
	if code != 0 || !answered.MatchString(out) {
		t.Fatalf("the turn (exit %d), want %s:\n%s", code, answered, out)
	}
	t.Logf("the action printed: %s", answered.FindString(out))
	if len(srv.ProbeRequests()) == 0 || srv.ProbeRequests()[0].Credential != testSentinel {
		t.Error("the model did not see the host's key")
	}
	state, _ := run(dir, "show", "-json")
	own := env.run(t, "sed -n 's/^OPENCLAW_GATEWAY_TOKEN=//p' "+sshAgentDir+"/"+render.GatewayTokenFile)
	if len(own) != 64 {
		t.Fatalf("the agent's token file holds %d characters, want 64 hex digits", len(own))
	}
	for _, s := range []string{testSentinel, sshGatewayToken, own} {
		if strings.Contains(out, s) || strings.Contains(state, s) {
			t.Errorf("a secret (%d bytes) is in the action's output or the state", len(s))
		}
	}
}

// Issue 30: a turn that takes long says so while it waits. On the nspawn
// host, a model that takes the request and never answers holds the turn
// until its timeout (12s); the action prints that it is waiting every 5
// seconds, then fails.
func TestAccAction_AgentTurnProgressSSH(t *testing.T) {
	actionPreCheck(t)
	run := builtProviderCLI(t)
	env := newSSHEnv(t)
	env.withGatewayToken(t)
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.Hang})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	slow := strings.Replace(turnAction, `timeout = "3m"`, `timeout = "12s"`, 1)
	writeConfigFile(t, dir, "main.tf", requiredOCC+env.turnConfig(t, srv.URL)+slow)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	out, code := run(dir, "apply", "-auto-approve", "-no-color", "-invoke=action.occ_agent_turn.smoke")
	if code == 0 {
		t.Fatalf("a turn to a model that never answers succeeded:\n%s", out)
	}
	for _, want := range []string{`agent "support": waiting for the answer (5s so far, at most 12s)`, `agent "support": waiting for the answer (10s so far, at most 12s)`} {
		if !strings.Contains(out, want) {
			t.Errorf("the action's output does not say %q:\n%s", want, out)
		}
	}
}
