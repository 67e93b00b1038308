package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// The SSH acceptance tests run against a booted systemd host
// (systemd-nspawn, real sshd, the real OpenClaw gateway; `make
// testenv-ssh` builds it). The host shares this machine's network, so each
// test gives its gateway a free loopback port through gateway.port.

const (
	sshEnvFile  = "/etc/occ/openclaw.env"
	sshAgentDir = "/etc/openclaw/support"
	sshUnit     = "occ-agent-support.service"
)

// sshEnv is one test's systemd host, with a credentials file that holds the
// sentinel twice: as a valid assignment, and in a malformed line that
// systemd quotes in the journal on every start.
type sshEnv struct {
	host        *sshhost.Host
	sshAddr     string // where the compute connects (the host, or a proxy)
	gatewayPort int
	keyFile     string
	knownHosts  string
	envSum      string // sha256 of the credentials file as written
}

func newSSHEnv(t *testing.T) *sshEnv {
	t.Helper()
	h := sshhost.StartSystemdHostT(t, sshhost.SystemdHostOptions{})
	dir := t.TempDir()
	e := &sshEnv{host: h, sshAddr: h.Addr, gatewayPort: freePort(t), keyFile: filepath.Join(dir, "client_key"), knownHosts: filepath.Join(dir, "known_hosts")}
	if err := os.WriteFile(e.keyFile, h.ClientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.knownHosts, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", h.Port, h.HostKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.run(t, fmt.Sprintf(`install -d -m 0755 /etc/occ && umask 077 && printf 'ANTHROPIC_API_KEY=%s\nbad-name=%s\n' > %s`, testSentinel, testSentinel, sshEnvFile))
	e.envSum = e.run(t, "sha256sum "+sshEnvFile)
	return e
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// run runs a command as root on the host and returns its trimmed stdout.
func (e *sshEnv) run(t *testing.T, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stdout, stderr, exit, err := e.host.Run(ctx, cmd)
	if err != nil || exit != 0 {
		t.Fatalf("on the host: %s: exit %d, %v: %s", cmd, exit, err, stderr)
	}
	return strings.TrimSpace(stdout)
}

func (e *sshEnv) check(cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stdout, stderr, exit, err := e.host.Run(ctx, cmd)
	if err == nil && exit != 0 {
		err = fmt.Errorf("%s: exit %d: %s", cmd, exit, stderr)
	}
	return strings.TrimSpace(stdout), err
}

// gatewayReady asks the gateway's /readyz on the host's loopback, through
// an SSH connection, as the provider does.
func (e *sshEnv) gatewayReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sshhost.Dial(ctx, e.host.Addr, e.host.ClientConfig("root"))
	if err != nil {
		return err
	}
	defer c.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: c.DialContext}, Timeout: 10 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", e.gatewayPort))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s %s", resp.Status, body)
	}
	return nil
}

// serving checks that revision n is current, activated, its unit active
// and its gateway ready.
func (e *sshEnv) serving(n int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if cur, err := e.check("readlink " + sshAgentDir + "/current"); err != nil || cur != "r"+strconv.Itoa(n) {
			return fmt.Errorf("current -> %q (%v), want r%d", cur, err, n)
		}
		if st, err := e.check("systemctl is-active " + sshUnit); st != "active" {
			return fmt.Errorf("unit is %q (%v)", st, err)
		}
		rec, err := e.check(fmt.Sprintf("cat %s/r%d/activated.json", sshAgentDir, n))
		if err != nil || !strings.Contains(rec, fmt.Sprintf(`"revision":%d`, n)) {
			return fmt.Errorf("activation record of r%d: %q (%v)", n, rec, err)
		}
		return e.gatewayReady()
	}
}

func (e *sshEnv) provider() string {
	return fmt.Sprintf(`
provider "occ" {
  ssh = {
    user             = "occ"
    private_key      = file(%q)
    known_hosts_file = %q
  }
}
`, e.keyFile, e.knownHosts)
}

// config is an SSH variant of the quickstart: one embedded OpenClaw agent
// whose credentials come from the operator's file on the host (AU5).
func (e *sshEnv) config(computeExtra, document string) string {
	host, port, _ := net.SplitHostPort(e.sshAddr)
	return e.provider() + fmt.Sprintf(`
resource "occ_compute" "k" {
  name = "edge"
  ssh  = { host = %q, port = %s, host_key = %q %s }
}
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(%s)
}
resource "occ_credential_source" "s" {
  name             = "host"
  compute          = occ_compute.k
  method           = "runtime"
  environment_file = %q
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "8m", update = "8m", delete = "2m" }
}
`, host, port, e.host.HostKey, computeExtra, document, sshEnvFile)
}

func (e *sshEnv) doc(model, extra string) string {
	return fmt.Sprintf(`{ agents = { defaults = { model = %q } }, gateway = { port = %d } %s }`, model, e.gatewayPort, extra)
}

// destroyed checks that delete removed the unit, the revisions and the
// state, and never touched the credentials file (AU5).
func (e *sshEnv) destroyed(*terraform.State) error {
	if out, _ := e.check("ls -d /etc/systemd/system/" + sshUnit + " " + sshAgentDir + " /var/lib/occ-agent/support 2>/dev/null || true"); out != "" {
		return fmt.Errorf("left on the host after destroy: %s", out)
	}
	if st, _ := e.check("systemctl is-active " + sshUnit + " || true"); st == "active" {
		return errors.New("the unit still runs")
	}
	if out, _ := e.check("id -u " + render.ServiceUser("support") + " 2>/dev/null || true"); out != "" {
		return fmt.Errorf("the service user %s is left after destroy", render.ServiceUser("support"))
	}
	if out, _ := e.check("ls -a /etc/systemd/system | grep -F .occ-upload." + sshUnit + " || true"); out != "" {
		return fmt.Errorf("an interrupted upload of the unit is left after destroy: %s", out)
	}
	if sum, err := e.check("sha256sum " + sshEnvFile); err != nil || sum != e.envSum {
		return fmt.Errorf("the credentials file changed: %q (%v)", sum, err)
	}
	return nil
}

// sentinelAbsentFromFile fails when the sentinel is in a log file.
func sentinelAbsentFromFile(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("log file: %v", err)
	}
	if len(b) == 0 {
		t.Fatalf("log file %s is empty: TF_ACC_LOG_PATH captured nothing", file)
	}
	if strings.Contains(string(b), testSentinel) {
		t.Fatalf("the credentials file's content is in the logs (%s)", file)
	}
}

// TestAccAgent_SSHLifecycle: create, update (a new revision; the previous
// revision's file kept), an empty re-plan, import by HOST:PORT/NAME, drift
// (a stopped unit, a configuration edited by hand) and delete, against a
// real systemd host running the real gateway. The credentials file's
// content is never in plan, state or logs (AU5, AU7).
func TestAccAgent_SSHLifecycle(t *testing.T) {
	env := newSSHEnv(t)
	logFile := filepath.Join(t.TempDir(), "tf.log")
	t.Setenv("TF_ACC_LOG_PATH", logFile)
	doc1 := env.doc("anthropic/claude-sonnet-4-5", "")
	doc2 := env.doc("anthropic/claude-opus-4-1", "")
	noSentinelInPlan := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}}
	start := time.Now()
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:           env.config("", doc1),
				ConfigPlanChecks: noSentinelInPlan,
				ConfigStateChecks: []statecheck.StateCheck{
					sentinelAbsentFromState{testSentinel},
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("id"), knownvalue.StringExact("127.0.0.1/support")),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("endpoint"), knownvalue.StringExact(fmt.Sprintf("http://127.0.0.1:%d", env.gatewayPort))),
				},
				Check: resource.ComposeTestCheckFunc(env.serving(1), func(*terraform.State) error {
					unit, err := env.check("cat /etc/systemd/system/" + sshUnit)
					if err != nil {
						return err
					}
					for _, want := range []string{"EnvironmentFile=" + sshEnvFile, "Environment=OPENCLAW_CONFIG_PATH=" + sshAgentDir + "/current/openclaw.json",
						"Restart=on-failure", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "User=occ-support"} {
						if !strings.Contains(unit, want+"\n") {
							return fmt.Errorf("unit lacks %s:\n%s", want, unit)
						}
					}
					if user, _ := env.check("ps -o user= -p $(systemctl show -p MainPID --value " + sshUnit + ")"); user != "occ-support" {
						return fmt.Errorf("the gateway runs as %q, want the dedicated user", user)
					}
					return nil
				}),
			},
			{
				// A semantic change: revision 2; revision 1's file stays.
				Config:           env.config("", doc2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}, plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2))}},
				Check: resource.ComposeTestCheckFunc(env.serving(2), func(*terraform.State) error {
					_, err := env.check("test -s " + sshAgentDir + "/r1/openclaw.json && test -s " + sshAgentDir + "/r1/activated.json")
					return err
				}),
			},
			{
				// The re-plan is empty: nothing on the host changed.
				Config:           env.config("", doc2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				ResourceName:  "occ_agent.a",
				ImportState:   true,
				ImportStateId: fmt.Sprintf("127.0.0.1:%d/support", env.host.Port),
				ImportStateCheck: func(s []*terraform.InstanceState) error {
					return expectAttrs(s, map[string]string{"revision": "2", "status": "active", "name": "support",
						"endpoint": fmt.Sprintf("http://127.0.0.1:%d", env.gatewayPort)})
				},
			},
			{
				// Drift: a stopped unit plans a redeploy.
				PreConfig: func() { env.run(t, "systemctl stop "+sshUnit) },
				Config:    env.config("", doc2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(3)),
				}},
				Check: env.serving(3),
			},
			{
				// Drift: the configuration edited by hand plans a redeploy.
				PreConfig: func() {
					env.run(t, `sed -i 's/claude-opus-4-1/claude-haiku-4-5/' `+sshAgentDir+`/current/openclaw.json`)
				},
				Config: env.config("", doc2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(4)),
				}},
				Check: resource.ComposeTestCheckFunc(env.serving(4), func(*terraform.State) error {
					if _, err := env.check("grep -q claude-opus-4-1 " + sshAgentDir + "/current/openclaw.json"); err != nil {
						return errors.New("the redeploy did not restore the admitted configuration")
					}
					return nil
				}),
			},
		},
		CheckDestroy: env.destroyed,
	})
	t.Logf("SSH lifecycle (4 activations, import, destroy) took %s", time.Since(start).Round(time.Second))
	sentinelAbsentFromFile(t, logFile)
}

// TestAccAgent_SSHConnectionRefusals: a host key that does not match and a
// client key the host does not accept are refused with what was expected,
// what was found and what to do; nothing is written and nothing is kept:
// at plan by the preflight, and with it off at apply.
func TestAccAgent_SSHConnectionRefusals(t *testing.T) {
	h := sshhost.StartPlainSSHDT(t, sshhost.PlainSSHDOptions{})
	other, err := sshhost.NewKeyPair("not-the-host")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goodKey, wrongKey := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	wrong, _ := sshhost.NewKeyPair("not-authorized")
	os.WriteFile(goodKey, h.ClientKey, 0o600)
	os.WriteFile(wrongKey, wrong.PrivatePEM, 0o600)
	hostIP, port, _ := net.SplitHostPort(h.Addr)
	config := func(keyFile, hostKey string) string {
		return fmt.Sprintf(`
provider "occ" {
  ssh = { user = %q, private_key = file(%q) }
}
resource "occ_compute" "k" {
  name = "edge"
  ssh  = { host = %q, port = %s, host_key = %q }
}
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(%s)
}
resource "occ_credential_source" "s" {
  name             = "host"
  compute          = occ_compute.k
  method           = "runtime"
  environment_file = %q
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}`, h.User, keyFile, hostIP, port, hostKey, anthropicDoc, sshEnvFile)
	}
	// The plan's preflight meets each refusal first; with it off, the
	// apply does, in the same words.
	for preflight, nothingWritten := range map[string]string{"true": foundByPreflight, "false": `Nothing\s+was\s+written`} {
		t.Run("preflight="+preflight, func(t *testing.T) {
			t.Setenv(preflightEnv, preflight)
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{
					{
						Config: config(goodKey, other.AuthorizedKey),
						ExpectError: mustRegexp(`HOST_KEY_MISMATCH: SSH host ` + regexp.QuoteMeta(h.Addr) + ` presented another host key[\s\S]*` +
							regexp.QuoteMeta(h.HostKeys.Fingerprint()) + `[\s\S]*` + regexp.QuoteMeta(other.Fingerprint()) + `[\s\S]*` + nothingWritten),
					},
					{
						Config: config(wrongKey, h.HostKey),
						ExpectError: mustRegexp(`AUTH_REFUSED: SSH host ` + regexp.QuoteMeta(h.Addr) + ` refused the login[\s\S]*` +
							regexp.QuoteMeta(wrong.Fingerprint()) + `[\s\S]*authorized_keys[\s\S]*` + nothingWritten),
					},
				},
			})
		})
	}
}

// TestAccAgent_SSHUploadCutKeepsServingRevision: a connection cut while
// the next revision's configuration is uploaded fails the apply, leaves
// the previous revision selected and serving, and the next apply
// converges (SS1: atomic writes, AC1).
func TestAccAgent_SSHUploadCutKeepsServingRevision(t *testing.T) {
	env := newSSHEnv(t)
	proxy := sshhost.NewCutProxyT(t, env.host.Addr)
	env.sshAddr = proxy.Addr
	doc1 := env.doc("anthropic/claude-sonnet-4-5", "")
	// About 256 KiB of configuration (in $schema, a string the gateway
	// only stores): the upload is by far the largest transfer of the
	// apply, so a cut after 64 KiB lands in it.
	doc2 := env.doc("anthropic/claude-sonnet-4-5", fmt.Sprintf(`, "$schema" = %q`, "https://example.invalid/occ-test-padding/"+strings.Repeat("p", 256<<10)))
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: env.config("", doc1), Check: env.serving(1)},
			{
				PreConfig:   func() { proxy.CutAfter(64 << 10) },
				Config:      env.config("", doc2),
				ExpectError: mustRegexp(`UNAVAILABLE: cannot reach SSH host ` + regexp.QuoteMeta(proxy.Addr) + `[\s\S]*write ` + sshAgentDir + `/r2/openclaw.json`),
			},
			{
				PreConfig: func() {
					proxy.Disarm()
					if proxy.Cuts() == 0 {
						t.Fatal("the proxy cut nothing")
					}
					// The previous revision is still selected and serving.
					if err := env.serving(1)(nil); err != nil {
						t.Fatalf("after the cut: %v", err)
					}
					if out, _ := env.check("test -e " + sshAgentDir + "/r2/openclaw.json && echo present || true"); out == "present" {
						t.Fatal("a configuration file of revision 2 is in place after a cut upload")
					}
				},
				Config: env.config("", doc2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				Check: env.serving(2),
			},
		},
		CheckDestroy: env.destroyed,
	})
}

// TestAccAgent_SSHUnitThatFailsFailsFast: a unit that cannot start (a bad
// binary path), a gateway that refuses its configuration, or one that
// prints its environment (the credential in it) and exits fails the apply
// with the journal lines of the activation, well before the 8 minute
// deadline; the journal line in which systemd quotes the credentials file
// is withheld, and the printed credential is redacted: it is in neither
// the diagnostic nor the log (AU7).
func TestAccAgent_SSHUnitThatFailsFailsFast(t *testing.T) {
	env := newSSHEnv(t)
	env.run(t, `printf '#!/bin/sh\necho "gateway starting"\nenv | grep -E "^(ANTHROPIC_API_KEY|OPENCLAW_CONFIG_PATH)="\necho "using key $ANTHROPIC_API_KEY"\nexit 1\n' > /usr/local/bin/occ-env-dump && chmod 0755 /usr/local/bin/occ-env-dump`)
	cases := []struct {
		name, computeExtra, doc, want string
	}{
		{"gateway prints its environment", `, openclaw_path = "/usr/local/bin/occ-env-dump"`, env.doc("anthropic/claude-sonnet-4-5", ""),
			`UNIT_FAILED: agent "support" revision 1 did not activate[\s\S]*Journal of this activation[\s\S]*ANTHROPIC_API_KEY=\[redacted\][\s\S]*using key \[redacted\]`},
		{"bad binary path", `, openclaw_path = "/usr/local/bin/no-such-openclaw"`, env.doc("anthropic/claude-sonnet-4-5", ""),
			`UNIT_START_FAILED: agent "support" revision 1 did not activate[\s\S]*203[\s\S]*Journal of this activation[\s\S]*no-such-openclaw[\s\S]*Next: The compute's openclaw_path cannot be executed`},
		{"bad configuration", "", env.doc("anthropic/claude-sonnet-4-5", `, session = { bogusKey = 1 }`),
			`UNIT_FAILED: agent "support" revision 1 did not activate[\s\S]*status 78[\s\S]*Journal of this activation[\s\S]*Unrecognized key: "bogusKey"[\s\S]*Next: The gateway refused its configuration`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "tf.log")
			t.Setenv("TF_ACC_LOG_PATH", logFile)
			var elapsed time.Duration
			start := time.Now()
			want := mustRegexp(c.want)
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				// ErrorCheck sees the whole diagnostic (ExpectError only
				// matches): the failure must be the expected one, name the
				// withheld line, and hold nothing of the credentials file.
				ErrorCheck: func(err error) error {
					elapsed = time.Since(start)
					switch {
					case !want.MatchString(err.Error()):
						return fmt.Errorf("unexpected failure: %w", err)
					case strings.Contains(err.Error(), testSentinel) || strings.Contains(err.Error(), "bad-name"):
						return fmt.Errorf("the diagnostic holds the credentials file's content: %w", err)
					case !strings.Contains(err.Error(), "its text is withheld"):
						return fmt.Errorf("the journal line about the credentials file is missing: %w", err)
					}
					t.Logf("failed as expected after %s:\n%s", elapsed.Round(time.Second), err)
					return nil
				},
				Steps: []resource.TestStep{{
					Config: env.config(c.computeExtra, c.doc),
					Check:  func(*terraform.State) error { return errors.New("the apply succeeded; it must fail") },
				}},
				CheckDestroy: env.destroyed,
			})
			if elapsed == 0 {
				t.Fatal("the apply did not fail")
			}
			if elapsed > 3*time.Minute {
				t.Errorf("the failure surfaced after %s; it must not wait for the deadline", elapsed)
			}
			sentinelAbsentFromFile(t, logFile)
		})
	}
}
