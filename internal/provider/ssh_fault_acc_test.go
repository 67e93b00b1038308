package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// setSSHBeforeWrite installs the SSH executor's fault hook for one test.
func setSSHBeforeWrite(t *testing.T, h func(addr, op string)) {
	sshBeforeWrite.Store(&h)
	t.Cleanup(func() { sshBeforeWrite.Store(nil) })
}

// onTheHost waits until cmd succeeds on the host (a deadline that holds
// on a loaded machine) and reports whether it did.
func (e *sshEnv) onTheHost(cmd string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, err := e.check(cmd); err == nil {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// leftovers lists what an interrupted write may leave on the host.
func (e *sshEnv) leftovers() string {
	out, _ := e.check(`ls -a ` + sshAgentDir + ` ` + sshAgentDir + `/r* /etc/systemd/system 2>/dev/null | grep -E '^\.(occ-upload|current\.tmp)' || true`)
	return out
}

// Fault: the SSH connection is cut while the host runs the activation of
// revision 2. Pass: the apply fails (UNAVAILABLE); the activation, a
// transient systemd unit, completes on its own (revision 2 selected, its
// unit restarted); refresh reports it unfinished (never recorded as
// activated); the next apply converges on the first try, the plan after
// it is empty, and nothing of an upload is left. rules AC3, AC4, SS1
func TestAccAgent_SSHConnectionCutAtActivation(t *testing.T) {
	env := newSSHEnv(t)
	proxy := sshhost.NewCutProxyT(t, env.host.Addr)
	env.sshAddr = proxy.Addr
	doc1 := env.doc("anthropic/claude-sonnet-4-5", "")
	doc2 := env.doc("anthropic/claude-sonnet-4-5", `, "$schema" = "https://example.invalid/occ-test/2"`)
	cut := make(chan bool, 1)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: env.config("", doc1), Check: env.serving(1)},
			{
				PreConfig: func() {
					setSSHBeforeWrite(t, func(_, op string) {
						if !strings.HasPrefix(op, "activate") {
							return
						}
						go func() {
							// Cut once the host runs the activation job.
							ok := env.onTheHost("test -e "+sshAgentDir+"/.activate.sh", 60*time.Second)
							proxy.CutNow()
							cut <- ok
						}()
					})
				},
				Config:      env.config("", doc2),
				ExpectError: mustRegexp(`UNAVAILABLE: cannot reach SSH host`),
			},
			{
				PreConfig: func() {
					sshBeforeWrite.Store(nil)
					if !<-cut {
						t.Fatal("the activation never started on the host: the cut was not at activation")
					}
					// The activation finished without the connection.
					if !env.onTheHost(`[ "$(readlink `+sshAgentDir+`/current)" = r2 ] && systemctl is-active --quiet `+sshUnit, 90*time.Second) {
						t.Fatal("after the cut, the host never selected and started revision 2: the activation did not complete on its own")
					}
					if out := env.leftovers(); out != "" {
						t.Fatalf("an interrupted write left: %s", out)
					}
				},
				Config: env.config("", doc2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				Check: env.serving(2),
			},
			{Config: env.config("", doc2), PlanOnly: true},
		},
		CheckDestroy: env.destroyed,
	})
}

// Fault: the provider process is killed (SIGKILL) while the host runs the
// activation of revision 2 (the test binary serves as the plugin of the
// real CLI). Pass: the next apply, with the same and with a changed
// configuration, converges on the first try; the plan after it is empty;
// nothing of an upload is left. rules AC3, AC4
func TestAccAgent_SSHProviderKilledAtActivation(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: TF_ACC=1 (make testacc)")
	}
	for _, changed := range []bool{false, true} {
		t.Run(map[bool]string{false: "same", true: "changed"}[changed], func(t *testing.T) {
			env := newSSHEnv(t)
			cli := newTFCLI(t)
			t.Cleanup(func() {
				if out, code := cli.run(nil, "destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
					t.Errorf("destroy: exit %d\n%s", code, out)
				}
				if err := env.destroyed(nil); err != nil {
					t.Error(err)
				}
			})
			doc := func(n int) string {
				return env.doc("anthropic/claude-sonnet-4-5", fmt.Sprintf(`, "$schema" = "https://example.invalid/occ-test/%d"`, n))
			}
			cli.write(env.config("", doc(2)))
			if out, code := cli.apply(); code != 0 {
				t.Fatalf("revision 1: exit %d\n%s", code, out)
			}
			cli.write(env.config("", doc(3)))
			mark := filepath.Join(t.TempDir(), "killed")
			out, code := cli.apply(envKillAfter+"=ssh-activate", envKillMark+"="+mark)
			if _, err := os.Stat(mark); err != nil || code == 0 {
				t.Fatalf("the provider was not killed at the activation (exit %d):\n%s", code, out)
			}
			retry := 3
			if changed {
				retry = 4
			}
			cli.write(env.config("", doc(retry)))
			if out, code := cli.apply(); code != 0 {
				t.Fatalf("the apply after the kill did not converge on the first try: exit %d\n%s", code, out)
			}
			rev, err := env.check("readlink " + sshAgentDir + "/current")
			if err != nil {
				t.Fatal(err)
			}
			if cfg, err := env.check("cat " + sshAgentDir + "/" + rev + "/openclaw.json"); err != nil || !strings.Contains(cfg, fmt.Sprintf("occ-test/%d", retry)) {
				t.Fatalf("revision %s does not run the document applied last: %s (%v)", rev, cfg, err)
			}
			n, err := strconv.Atoi(strings.TrimPrefix(rev, "r"))
			if err != nil {
				t.Fatal(err)
			}
			if err := env.serving(n)(nil); err != nil {
				t.Fatal(err)
			}
			if out := env.leftovers(); out != "" {
				t.Fatalf("an interrupted write left: %s", out)
			}
			if out, code := cli.run(nil, "plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
				t.Fatalf("second plan: exit %d, want 0 (empty)\n%s", code, out)
			}
		})
	}
}

// killAtSSHActivation is serveChild's hook for envKillAfter=ssh-activate:
// SIGKILL shortly after the activation command was sent.
func killAtSSHActivation(mark string) func(addr, op string) {
	return func(_, op string) {
		if !strings.HasPrefix(op, "activate") {
			return
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			if mark != "" {
				_ = os.WriteFile(mark, []byte(op+"\n"), 0o600)
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}()
	}
}
