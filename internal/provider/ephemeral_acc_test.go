package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// ephemeralPreCheck: ephemeral resources are Terraform 1.10's.
func ephemeralPreCheck(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests skipped unless env %s is set", resource.EnvTfAcc)
	}
	newTerraformPreCheck(t, 1, 10, "ephemeral resources")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the ephemeral resource tests call the agent with curl from a provisioner: install curl")
	}
}

// callThroughTunnel is what a user writes to call an agent from
// Terraform: the tunnel's URL and the gateway token, both ephemeral, in a
// provisioner's environment; curl sends one chat completions turn and
// writes the status and the answer beside the configuration.
const callThroughTunnel = `
ephemeral "occ_agent_tunnel" "gw" {
  agent = occ_agent.a
}

ephemeral "occ_gateway_token" "gw" {
  agent = occ_agent.a
}

resource "terraform_data" "call" {
  triggers_replace = [occ_agent.a.revision_id]

  provisioner "local-exec" {
    command = "curl -sS --max-time 150 -o answer.json -w '%%{http_code}' -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' -d '{\"model\":\"openclaw/default\",\"messages\":[{\"role\":\"user\",\"content\":\"Say ok.\"}]}' \"$URL/v1/chat/completions\" > status.txt; echo \"$URL\" > url.txt"
    environment = {
      URL   = ephemeral.occ_agent_tunnel.gw.url
      TOKEN = ephemeral.occ_gateway_token.gw.token
    }
  }
}
`

// calledThroughTunnel checks what the provisioner wrote: a 200 with the
// model's answer, through a loopback URL.
func calledThroughTunnel(t *testing.T, dir string) {
	t.Helper()
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("the provisioner wrote no %s: %v", f, err)
		}
		return strings.TrimSpace(string(b))
	}
	url, status, answer := read("url.txt"), read("status.txt"), read("answer.json")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("the tunnel's url %q; want a loopback URL", url)
	}
	if status != "200" || !strings.Contains(answer, `"ok`) {
		t.Fatalf("the turn through the tunnel: status %s, answer %.300s; want 200 and the model's ok", status, answer)
	}
	t.Logf("the turn through %s answered %.120s", url, answer)
}

// TestAccEphemeral_TunnelAndTokenKubernetes: ephemeral.occ_agent_tunnel
// and ephemeral.occ_gateway_token on the real node, with the real
// Terraform CLI and the built provider, as a user calls their agent from
// a provisioner: the tunnel is a port-forward to the agent's gateway Pod
// on a loopback port, the token the agent's own; the turn reaches the
// model with the agent's key and answers; neither the token nor the key
// is in the output or the state. With the minimal Role (no
// pods/portforward) the tunnel is refused, naming the permission.
func TestAccEphemeral_TunnelAndTokenKubernetes(t *testing.T) {
	ephemeralPreCheck(t)
	env := newRealEnv(t)
	run := builtProviderCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := env.cluster.NamespacedIdentity(ctx, env.ns, append(append(kube.RequiredRules[:0:0], kube.RequiredRules...), kube.TurnRules...))
	if err != nil {
		t.Fatal(err)
	}
	minimal := env.provider
	tunneler := fmt.Sprintf("\nprovider \"occ\" {\n  kubernetes = { config_path = %q }\n}\n", id.KubeconfigPath)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	dir := t.TempDir()
	agent := withChatCompletions(t, realAgentConfig(env, srv.URL, "6m"), `agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }`)
	writeConfigFile(t, dir, "main.tf", requiredOCC+agent)
	if out, code := run(dir, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	t.Cleanup(func() {
		writeConfigFile(t, dir, "main.tf", requiredOCC+agent)
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	defer podLogsOnFailure(t, env, "support")

	// The minimal Role may not port-forward: the tunnel is refused.
	writeConfigFile(t, dir, "main.tf", requiredOCC+agent+callThroughTunnel)
	out, code := run(dir, "apply", "-auto-approve", "-no-color")
	if code == 0 || !strings.Contains(out, "RESOURCE_CONFLICT") || !strings.Contains(out, "get and create on pods/portforward") {
		t.Fatalf("a tunnel without the port-forward permission (exit %d), want RESOURCE_CONFLICT naming it:\n%s", code, out)
	}

	writeConfigFile(t, dir, "main.tf", requiredOCC+strings.Replace(agent, minimal, tunneler, 1)+callThroughTunnel)
	before := len(srv.ProbeRequests())
	out, code = run(dir, "apply", "-auto-approve", "-no-color")
	if code != 0 {
		t.Fatalf("apply of the call through the tunnel (exit %d):\n%s", code, out)
	}
	calledThroughTunnel(t, dir)
	calls := srv.ProbeRequests()[before:]
	if len(calls) == 0 {
		t.Fatal("the turn through the tunnel answered without a model call")
	}
	for _, c := range calls {
		if c.Path != "/v1/messages" || c.Credential != testSentinel {
			t.Errorf("the turn's model call %s (the agent's key: %v)", c.Path, c.Credential == testSentinel)
		}
	}
	sec, err := env.cluster.Clientset.CoreV1().Secrets(env.ns).Get(context.Background(), render.GatewayTokenSecret("support"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := string(sec.Data[render.GatewayTokenKey])
	state, _ := run(dir, "show", "-json")
	plan, _ := run(dir, "plan", "-no-color")
	for _, s := range []string{testSentinel, token} {
		if s == "" || strings.Contains(out, s) || strings.Contains(state, s) || strings.Contains(plan, s) {
			t.Errorf("a secret (%d bytes) is in the apply's output, the plan or the state", len(s))
		}
	}
}

// TestAccEphemeral_TunnelAndTokenSSH: the same on the nspawn systemd host:
// the tunnel is an SSH local forward to the gateway's loopback port, the
// token the agent's own from its root-only file on the host.
func TestAccEphemeral_TunnelAndTokenSSH(t *testing.T) {
	ephemeralPreCheck(t)
	env := newSSHEnv(t)
	run := builtProviderCLI(t)
	env.withGatewayToken(t)
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	writeConfigFile(t, dir, "main.tf", requiredOCC+env.turnConfig(t, srv.URL)+callThroughTunnel)
	out, code := run(dir, "apply", "-auto-approve", "-no-color")
	t.Cleanup(func() {
		if out, code := run(dir, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})
	if code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	calledThroughTunnel(t, dir)
	if len(srv.ProbeRequests()) == 0 || srv.ProbeRequests()[len(srv.ProbeRequests())-1].Credential != testSentinel {
		t.Error("the model did not see the host's key")
	}
	own := env.run(t, "sed -n 's/^OPENCLAW_GATEWAY_TOKEN=//p' "+sshAgentDir+"/"+render.GatewayTokenFile)
	if len(own) != 64 {
		t.Fatalf("the agent's token file holds %d characters, want 64 hex digits", len(own))
	}
	state, _ := run(dir, "show", "-json")
	for _, s := range []string{testSentinel, sshGatewayToken, own} {
		if strings.Contains(out, s) || strings.Contains(state, s) {
			t.Errorf("a secret (%d bytes) is in the apply's output or the state", len(s))
		}
	}
}
