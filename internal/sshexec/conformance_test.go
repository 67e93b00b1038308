package sshexec

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/executor/conformance"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// TestConformance runs the executor contract's conformance suite against
// the SSH executor on a booted systemd host (systemd-nspawn, real sshd and
// systemd; `make testenv-ssh` builds it), one host for the suite, fresh
// agent names per case, each case's agents deleted when it ends. The
// gateway is a fake (fakeGateway): the contract is the executor's, and the
// real OpenClaw's start on a loaded machine would only slow every case.
//
//	go test ./internal/sshexec -run '^TestConformance$' -v
func TestConformance(t *testing.T) {
	h := sshhost.StartSystemdHostT(t, sshhost.SystemdHostOptions{})
	hostRun(t, h, "install -d -m 0755 /etc/occ && umask 077 && printf 'ANTHROPIC_API_KEY=conformance\\n' > "+conformanceEnvFile, "")
	hostRun(t, h, "cat > "+fakeGatewayPath+" && chmod 0755 "+fakeGatewayPath, fakeGateway)
	var links []string
	for _, b := range []conformance.Behaviour{conformance.Ready, conformance.Slow, conformance.Held, conformance.Fails} {
		for v := 1; v <= 9; v++ {
			links = append(links, "ln -sfn "+fakeGatewayPath+" "+fakeGatewayAs(b, v))
		}
	}
	hostRun(t, h, strings.Join(links, " && "), "")

	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", h.Port, h.HostKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Credentials{PrivateKey: string(h.ClientKey)}, Options{})
	t.Cleanup(func() { _ = pool.Close() })
	exec := &Executor{Pool: pool, User: "root", KnownHostsFile: kh}
	compute := admission.Compute{ID: "edge", Name: "edge", Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: "127.0.0.1", Port: int64(h.Port), HostKey: h.HostKey, User: "root"}}
	where := net.JoinHostPort("127.0.0.1", strconv.Itoa(h.Port))

	conformance.Run(t, conformance.Kind{
		GatewayAnswers: true,
		Name:           "ssh",
		Executor:       exec,
		NewPlace:       func(t *testing.T) *conformance.Place { return sshPlace(t, h, exec, compute, where) },
		HeldCode:       executor.CodeRuntime(runtimerecord.CodeModelProbeTimeout),
		FailCode:       executor.UnitFailed,
		// PR8: the activation switched the host to revision 2 and
		// restarted the unit, which keeps failing; no earlier revision is
		// restored, so nothing activated runs: the unit is not running, or
		// (caught between two restarts) runs a revision never activated.
		AfterFailedUpdate: conformance.Observation{Revision: 0, Drifts: []executor.DriftReason{executor.DriftWorkload, executor.DriftUnfinished}},
		RemovedDrift:      executor.DriftWorkload,
		EditedDrift:       executor.DriftEdited,
		// A repeat of the selected revision stops, rewrites and restarts
		// the unit (deploy: "the host already selects revision n") and
		// records a new activation.
		KeepsActivationTime: false,
		ForeignIDs:          []string{"occ-acme/support", "support"},
	})
	t.Run("HostFilesAreRootsAlone", func(t *testing.T) { hostFilesAreRootsAlone(t, h, exec, compute) })
	t.Run("OneAgentOfANamePerHost", func(t *testing.T) { oneAgentOfANamePerHost(t, h, exec, compute) })
	t.Run("HostileNeighbours", func(t *testing.T) { hostileNeighbours(t, h, exec, compute) })
}

// Issue 27, the hostile-neighbour test on SSH: the host holds, put there
// by other hands, a unit file of the agent's name (a plain one, and a
// masked one: a link to /dev/null) and another user's process listening
// on the agent's port. (Another configuration's agent of the same name is
// OneAgentOfANamePerHost.) Each deploy is refused before any write, naming
// what is in the way; the refused agent's destroy leaves the neighbour's
// unit as it was; the neighbour's process keeps running.
func hostileNeighbours(t *testing.T, h *sshhost.Host, exec *Executor, compute admission.Compute) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i, plant := range []string{
		"printf '[Unit]\\nDescription=someone else\\n[Service]\\nExecStart=/bin/sleep 3600\\n' > %s",
		"ln -sfn /dev/null %s",
	} {
		name := fmt.Sprintf("squat%d", i)
		unit := render.UnitPath(name)
		hostRun(t, h, fmt.Sprintf(plant, unit)+" && systemctl daemon-reload", "")
		t.Cleanup(func() { hostRun(t, h, "rm -f -- "+unit+" && systemctl daemon-reload", "") })
		snapshot := func() string {
			return hostRun(t, h, "stat -c '%N %s %Y' -- "+unit+"; sha256sum -- "+unit+" 2>&1; ls -d -- "+render.AgentDir(DefaultConfigDir, name)+" "+render.StateDir(name)+" 2>&1; id "+render.ServiceUser(name)+" 2>&1 || true", "")
		}
		before := snapshot()
		d := executor.Deployment{Revision: sshRevision(t, name, compute, fakeGatewayAs(conformance.Ready, 1), freeLoopbackPort(t)), Compute: compute, N: 1}
		preflightSays(t, exec, ctx, d, executor.ResourceConflict, unit)
		_, err := exec.Deploy(ctx, d)
		var f *executor.Failure
		if !errors.As(err, &f) || f.Code != executor.ResourceConflict || f.Wrote {
			t.Fatalf("deploy over a unit file someone else wrote (%s): %v; want RESOURCE_CONFLICT before any write", plant, err)
		}
		for _, w := range []string{unit, "another name", "Nothing on the host was touched"} {
			if !strings.Contains(f.Error()+" "+f.Next, w) {
				t.Errorf("the refusal does not say %q: %v %s", w, f, f.Next)
			}
		}
		if after := snapshot(); after != before {
			t.Fatalf("the refused deploy changed the host:\n%s\nthen\n%s", before, after)
		}
		var logged []string
		if err := exec.Delete(ctx, executor.Agent{Name: name, Compute: &compute, Log: func(msg string, _ map[string]any) { logged = append(logged, msg) }}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if after := snapshot(); after != before {
			t.Fatalf("the destroy changed the neighbour's unit:\n%s\nthen\n%s", before, after)
		}
		if !strings.Contains(strings.Join(logged, "\n"), "kept "+unit) {
			t.Errorf("the destroy does not say it kept %s: %q", unit, logged)
		}
	}

	// Another user's process on the agent's port (held in a global: a
	// socket nothing refers to is closed at once; and no "$" in the
	// command, which systemd would expand).
	port := freeLoopbackPort(t)
	neighbour := fmt.Sprintf("occ-neighbour-%d", port)
	hostRun(t, h, fmt.Sprintf(`systemd-run --quiet --unit=%s --uid=65534 /usr/bin/perl -MIO::Socket::INET -e 'push @::held, IO::Socket::INET->new(LocalAddr => "127.0.0.1:%d", Listen => 5, ReuseAddr => 1) || die; sleep 3600'
for i in $(seq 100); do ss -ltnH "sport = :%d" | grep -q . && exit 0; sleep 0.1; done
echo "the neighbour does not listen on %d" >&2; systemctl status --no-pager -- %s >&2; journalctl --no-pager -u %s | tail -n 5 >&2; exit 1`, neighbour, port, port, port, neighbour, neighbour), "")
	t.Cleanup(func() { hostRun(t, h, "systemctl stop -- "+neighbour+" 2>/dev/null || true", "") })
	const name = "porter"
	d := executor.Deployment{Revision: sshRevision(t, name, compute, fakeGatewayAs(conformance.Ready, 1), port), Compute: compute, N: 1}
	code := preflightSays(t, exec, ctx, d, "", fmt.Sprintf("port %d on the host's loopback is taken by another process", port))
	_, err := exec.Deploy(ctx, d)
	if !errors.As(err, new(*executor.Failure)) || !strings.HasPrefix(err.Error(), string(code)+":") {
		t.Errorf("the preflight said %s, the deploy %v", code, err)
	}
	var f *executor.Failure
	if !errors.As(err, &f) || f.Wrote || !strings.Contains(err.Error(), fmt.Sprintf("port %d on the host's loopback is taken by another process", port)) ||
		!strings.Contains(err.Error(), "set gateway.port") {
		t.Fatalf("deploy on a port another user's process listens on: %v; want a refusal before any write naming the port and the fix", err)
	}
	if got := hostRun(t, h, "systemctl is-active -- "+neighbour+"; ls -d -- "+render.UnitPath(name)+" "+render.AgentDir(DefaultConfigDir, name)+" 2>/dev/null || true", ""); got != "active\n" {
		t.Fatalf("after the refused deploy the host has %q; want the neighbour running and nothing of agent %s", got, name)
	}
}

// preflightSays runs the plan's preflight of d and fails the test unless
// it refuses it with code (any code when ""), as a preflight's, wrote
// nothing, and says what; it returns the code. The preflight runs the
// deploy's own read-only checks, so the deploy that follows must give
// the same code (issue 31).
func preflightSays(t *testing.T, exec *Executor, ctx context.Context, d executor.Deployment, code executor.Code, says string) executor.Code {
	t.Helper()
	out, err := exec.Preflight(ctx, d)
	if err != nil || len(out.Refusals) != 1 {
		t.Fatalf("preflight: %v, refusals %v; want one refusal", err, out.Refusals)
	}
	var f *executor.Failure
	if !errors.As(out.Refusals[0], &f) || (code != "" && f.Code != code) || f.Op != executor.OpPreflight || f.Wrote || !strings.Contains(f.Error(), says) {
		t.Fatalf("preflight refusal %v; want %s saying %q", out.Refusals[0], code, says)
	}
	return f.Code
}

// Issue 31: the plan's preflight meets a host as the deploy would: a host
// that presents another key than the compute pins is HOST_KEY_MISMATCH,
// a config_dir another user can write and a systemd older than 240 are
// the deploy's refusals too; a host that does not answer is not a refusal
// (the plan says it was not checked).
func TestPreflight_SSHHost(t *testing.T) {
	h := sshhost.StartSystemdHostT(t, sshhost.SystemdHostOptions{})
	pool := NewPool(Credentials{PrivateKey: string(h.ClientKey)}, Options{})
	t.Cleanup(func() { _ = pool.Close() })
	exec := &Executor{Pool: pool, User: "root"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	compute := admission.Compute{ID: "edge", Name: "edge", Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: "127.0.0.1", Port: int64(h.Port), HostKey: h.HostKey, User: "root"}}

	other := compute.WithSSH(func(s *admission.SSHCompute) { s.HostKey = otherHostKey(t) })
	d := executor.Deployment{Revision: sshRevision(t, "keyed", other, "/bin/true", freeLoopbackPort(t)), Compute: other, N: 1}
	preflightSays(t, exec, ctx, d, executor.HostKeyMismatch, "presented")
	if _, err := exec.Deploy(ctx, d); !strings.HasPrefix(fmt.Sprint(err), string(executor.HostKeyMismatch)) {
		t.Fatalf("deploy to a host with another key: %v", err)
	}

	hostRun(t, h, "install -d -m 0777 /srv/occ-open", "")
	open := compute.WithSSH(func(s *admission.SSHCompute) { s.ConfigDir = "/srv/occ-open" })
	d = executor.Deployment{Revision: sshRevision(t, "opened", open, "/bin/true", freeLoopbackPort(t)), Compute: open, N: 1}
	code := preflightSays(t, exec, ctx, d, "", "config_dir /srv/occ-open is not root's alone")
	_, err := exec.Deploy(ctx, d)
	if !strings.HasPrefix(fmt.Sprint(err), string(code)+":") || !strings.Contains(fmt.Sprint(err), "is not root's alone") {
		t.Fatalf("the preflight said %s, the deploy %v", code, err)
	}

	// A systemd older than the activation's systemd-run flags: the host's
	// systemctl, shadowed by one that reports version 239 (first on the
	// root session's PATH), is refused by the preflight and the deploy
	// alike, before anything is written.
	hostRun(t, h, "install -m 0755 /dev/stdin /usr/local/sbin/systemctl",
		"#!/bin/sh\n[ \"$1\" = --version ] && { echo 'systemd 239 (239)'; exit 0; }\nexec /usr/bin/systemctl \"$@\"\n")
	old := sshRevision(t, "aged", compute, "/bin/true", freeLoopbackPort(t))
	d = executor.Deployment{Revision: old, Compute: compute, N: 1}
	code = preflightSays(t, exec, ctx, d, "", "systemd 239 is too old")
	if _, err := exec.Deploy(ctx, d); !strings.HasPrefix(fmt.Sprint(err), string(code)+":") || !strings.Contains(fmt.Sprint(err), "systemd 239 is too old") {
		t.Fatalf("the preflight said %s, the deploy %v", code, err)
	}
	if got := hostRun(t, h, "ls -d /etc/openclaw/aged /etc/systemd/system/occ-agent-aged.service 2>/dev/null || true", ""); strings.TrimSpace(got) != "" {
		t.Fatalf("the refused deploy wrote %q", got)
	}
	hostRun(t, h, "rm /usr/local/sbin/systemctl", "")

	plain := sshRevision(t, "plain", compute, "/bin/true", freeLoopbackPort(t))
	if out, err := exec.Preflight(ctx, executor.Deployment{Revision: plain, Compute: compute, N: 1}); err != nil || len(out.Refusals) > 0 {
		t.Fatalf("preflight of a revision the host runs: %v %v", err, out.Refusals)
	}
}

// Issue 27, rule AC3: a host has one unit, one state directory and one
// service user per agent name. A second configuration deploying an agent
// of the same name from another config_dir is refused before any write,
// naming the config_dir that runs it; its destroy leaves the running
// agent, its unit, state and user as they were. The agent's own compute
// moving to another config_dir is an update: it runs from the new
// directory, and the old one goes.
func oneAgentOfANamePerHost(t *testing.T, h *sshhost.Host, exec *Executor, compute admission.Compute) {
	const name, otherDir = "twin", "/etc/occ-twin"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := freeLoopbackPort(t)
	a := compute
	b := compute.WithSSH(func(s *admission.SSHCompute) { s.ConfigDir = otherDir })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.Delete(ctx, executor.Agent{Name: name, Compute: &b})
		_ = exec.Delete(ctx, executor.Agent{Name: name, Compute: &a})
		_, _ = h.RunAs(ctx, "root", "rm -rf -- "+otherDir, nil)
	})
	var logged []string
	logTo := func(msg string, _ map[string]any) { logged = append(logged, msg) }
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: sshRevision(t, name, a, fakeGatewayAs(conformance.Ready, 1), port), Compute: a, N: 1}); err != nil {
		t.Fatalf("deploy from config_dir %s: %v", DefaultConfigDir, err)
	}
	// What of the first agent must not change: its unit file, its
	// process, its directories and user.
	snapshot := func() string {
		return hostRun(t, h, "sha256sum "+render.UnitPath(name)+"; systemctl show -p MainPID -p ActiveState -- "+render.UnitName(name)+
			"; find "+render.AgentDir(DefaultConfigDir, name)+" "+render.StateDir(name)+" -printf '%p %U %m\\n' | sort; id "+render.ServiceUser(name)+"; ls -d "+otherDir+"/"+name+" 2>/dev/null || true", "")
	}
	before := snapshot()

	_, err := exec.Deploy(ctx, executor.Deployment{Revision: sshRevision(t, name, b, fakeGatewayAs(conformance.Ready, 2), freeLoopbackPort(t)), Compute: b, N: 1})
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.ResourceConflict || f.Wrote {
		t.Fatalf("deploy of the same name from config_dir %s: %v; want RESOURCE_CONFLICT before any write", otherDir, err)
	}
	for _, w := range []string{render.UnitName(name), render.AgentDir(DefaultConfigDir, name), "config_dir " + DefaultConfigDir} {
		if !strings.Contains(f.Error()+" "+f.Next, w) {
			t.Errorf("the refusal does not say %q: %v %s", w, f, f.Next)
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("the refused deploy changed the running agent:\n%s\nthen\n%s", before, after)
	}
	if err := exec.Delete(ctx, executor.Agent{Name: name, Compute: &b, Log: logTo}); err != nil {
		t.Fatalf("delete from config_dir %s: %v", otherDir, err)
	}
	if after := snapshot(); after != before {
		t.Fatalf("a destroy from another config_dir changed the running agent:\n%s\nthen\n%s", before, after)
	}
	if !strings.Contains(strings.Join(logged, "\n"), "kept "+render.UnitName(name)) {
		t.Errorf("the destroy does not say it kept the other configuration's unit: %q", logged)
	}

	// The agent's own compute moves to config_dir otherDir: revision 2,
	// serving 1.
	if _, err := exec.Deploy(ctx, executor.Deployment{Revision: sshRevision(t, name, b, fakeGatewayAs(conformance.Ready, 3), port), Compute: b, N: 2, Serving: 1}); err != nil {
		t.Fatalf("update after config_dir moved to %s: %v", otherDir, err)
	}
	if got := hostRun(t, h, "sed -n 's/^"+render.UnitKeyAgentDir+"=//p' "+render.UnitPath(name)+"; ls -d "+render.AgentDir(DefaultConfigDir, name)+" 2>/dev/null || true", ""); got != render.AgentDir(otherDir, name)+"\n" {
		t.Fatalf("after the move the host has %q; want the unit in %s and nothing left in %s", got, render.AgentDir(otherDir, name), DefaultConfigDir)
	}
	o, err := exec.Read(ctx, executor.Agent{Name: name, Compute: &b})
	if err != nil || o.Revision != 2 || o.Drift != executor.DriftNone {
		t.Fatalf("read after the move: %+v, %v; want revision 2 without drift", o, err)
	}
}

// Issue 27, rule AU5: a credentials file another user can read or change
// (itself, a directory above it, or above what it links to) refuses the
// deploy before anything is written, naming the file, what is wrong and
// the commands that fix it. So does a config_dir another user can write
// (the activation runs as root from it), and an agent directory that is
// not one: a link, or a directory holding files the provider did not
// write, which is left exactly as it was.
func hostFilesAreRootsAlone(t *testing.T, h *sshhost.Host, exec *Executor, compute admission.Compute) {
	const dir = "/etc/occ-mode"
	hostRun(t, h, "install -d -m 0755 "+dir+" && install -d -m 1777 "+dir+"/drop", "")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = h.RunAs(ctx, "root", "rm -rf -- "+dir+" /var/tmp/occ-mode.env", nil)
	})
	type hostCase struct{ name, file, setup, want, configDir string }
	cases := []hostCase{
		{"readable by every user", dir + "/open.env", "install -m 0644 /dev/null " + dir + "/open.env", "is open to every user on the host (mode 644)", ""},
		{"owned by another user", dir + "/theirs.env", "install -m 0600 -o 65534 /dev/null " + dir + "/theirs.env", "is owned by uid 65534, not root", ""},
		{"readable by a group not root's", dir + "/group.env", "install -m 0640 -g 65534 /dev/null " + dir + "/group.env", "is open to group 65534 (mode 640)", ""},
		{"in a directory every user can write", dir + "/drop/k.env", "install -m 0600 /dev/null " + dir + "/drop/k.env", "is in a directory not root's alone: " + dir + "/drop can be written by every user (mode 1777)", ""},
		{"linked to a directory every user can write", dir + "/link.env", "install -m 0600 /dev/null /var/tmp/occ-mode.env && ln -sfn /var/tmp/occ-mode.env " + dir + "/link.env", "is in a directory not root's alone: /var/tmp can be written by every user", ""},
	}
	for _, c := range []struct{ name, configDir, setup, want string }{
		{"config_dir in a directory every user can write", dir + "/drop/cfg", "true", "the compute's config_dir " + dir + "/drop/cfg is not root's alone: " + dir + "/drop can be written by every user (mode 1777)"},
		{"config_dir owned by another user", dir + "/theirs", "install -d -m 0755 -o 65534 " + dir + "/theirs", "the compute's config_dir " + dir + "/theirs is not root's alone: " + dir + "/theirs is owned by uid 65534, not root"},
		{"agent directory holding the host's files", dir + "/host", "install -d -m 0755 " + dir + "/host/mode7 && install -m 0755 /dev/null " + dir + "/host/mode7/tool", dir + "/host/mode7, the agent's directory in config_dir, holds " + dir + "/host/mode7/tool, which the provider did not write"},
		{"agent directory that is a link", dir + "/link", "install -d -m 0755 " + dir + "/link && ln -sfn /usr " + dir + "/link/mode8", dir + "/link/mode8, the agent's directory in config_dir, exists and is not a directory the provider made"},
	} {
		cases = append(cases, hostCase{name: c.name, file: conformanceEnvFile, setup: c.setup, want: c.want, configDir: c.configDir})
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hostRun(t, h, tc.setup, "")
			name := fmt.Sprintf("mode%d", i)
			c := compute.WithSSH(func(s *admission.SSHCompute) {
				s.OpenClawPath = fakeGatewayAs(conformance.Ready, 1)
				if tc.configDir != "" {
					s.ConfigDir = tc.configDir
				}
			})
			agentDir := render.AgentDir(DefaultConfigDir, name)
			if tc.configDir != "" {
				agentDir = render.AgentDir(tc.configDir, name)
			}
			statBefore := hostRun(t, h, "stat -c '%U:%G:%a %N' -- "+agentDir+" "+path.Dir(agentDir)+" 2>/dev/null || true", "")
			rev := conformance.EmbeddedRevision(t, name, c, admission.CredentialSource{ID: "host", Name: "host", Method: admission.MethodRuntime, Generation: 1,
				EnvironmentFile: tc.file}, fmt.Sprintf("gateway: {port: %d}", freeLoopbackPort(t)))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := exec.Deploy(ctx, executor.Deployment{Revision: rev, Compute: c, N: 1})
			var f *executor.Failure
			if !errors.As(err, &f) || f.Code != executor.CommandFailed || f.Wrote {
				t.Fatalf("deploy: %v; want COMMAND_FAILED before any write", err)
			}
			want := []string{tc.want}
			if tc.configDir == "" {
				want = append(want, tc.file, "chmod 0600 "+tc.file, "environment_file")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the failure does not say %q: %v", w, err)
				}
			}
			if out := hostRun(t, h, "ls -d -- "+render.UnitPath(name)+" 2>/dev/null || true", ""); out != "" {
				t.Errorf("the refused deploy wrote %s", out)
			}
			if after := hostRun(t, h, "stat -c '%U:%G:%a %N' -- "+agentDir+" "+path.Dir(agentDir)+" 2>/dev/null || true", ""); after != statBefore {
				t.Errorf("the refused deploy changed the agent's directory: %q, then %q", statBefore, after)
			}
		})
	}
}

const (
	conformanceEnvFile = "/etc/occ/conformance.env"
	fakeGatewayPath    = "/usr/local/bin/occ-fake-gateway"
)

// fakeGatewayAs is the path under which the fake gateway behaves as b;
// variants (1 to 9, the links the test makes) are other paths (another
// openclaw_path: another revision).
func fakeGatewayAs(b conformance.Behaviour, variant int) string {
	return fmt.Sprintf("/usr/local/bin/occ-fake-%s-v%d", b, variant)
}

// fakeGateway stands in for OpenClaw's `gateway run` on the host: what it
// does follows from the name it is run as (occ-fake-BEHAVIOUR-vN). Ready
// listens at once on OPENCLAW_GATEWAY_PORT (the unit's) and answers every
// request, /readyz included, 200; slow listens after 8 s; held writes the
// startup record of a probe that timed out (PR6, PR7) and never listens;
// fails exits 1.
const fakeGateway = `#!/usr/bin/perl
use strict;
use warnings;
use IO::Socket::INET;
$| = 1;
my ($mode) = $0 =~ m{occ-fake-([a-z]+)-v[0-9]+$} or die "occ-fake-gateway: no behaviour in the name $0\n";
my $port = $ENV{OPENCLAW_GATEWAY_PORT} or die "occ-fake-gateway: OPENCLAW_GATEWAY_PORT is not set\n";
print "occ-fake-gateway ($mode) starting on 127.0.0.1:$port\n";
if ($mode eq "fails") {
	print "occ-fake-gateway: failing on purpose\n";
	exit 1;
}
if ($mode eq "held") {
	print '{"event":"openclaw.model_probe","container":"gateway","code":"MODEL_PROBE_TIMEOUT","final":true}', "\n";
	sleep 3600 while 1;
}
sleep 8 if $mode eq "slow";
my $srv = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $port, Proto => "tcp", Listen => 16, ReuseAddr => 1)
	or die "occ-fake-gateway: listen on $port: $!\n";
print "occ-fake-gateway: ready\n";
while (1) {
	my $c = $srv->accept or next;
	while (defined(my $l = <$c>)) { last if $l =~ /^\r?\n$/; }
	print $c "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{\"ready\":true}\n";
	close $c;
}
`

// hostRun runs cmd as root on the host, stdin its input, and returns its
// stdout; a failure fails t.
func hostRun(t *testing.T, h *sshhost.Host, cmd, stdin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var in io.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	r, err := h.RunAs(ctx, "root", cmd, in)
	if err != nil || r.Exit != 0 {
		t.Fatalf("on the host: %s: exit %d, %v: %s", cmd, r.Exit, err, r.Stderr)
	}
	return r.Stdout
}

// sshPlace is the suite's host for one case: the agents it names get a
// free loopback port each (the host shares this machine's network).
func sshPlace(t *testing.T, h *sshhost.Host, exec *Executor, compute admission.Compute, where string) *conformance.Place {
	var mu sync.Mutex
	ports := map[string]int{}
	port := func(t *testing.T, name string) int {
		mu.Lock()
		defer mu.Unlock()
		if ports[name] == 0 {
			ports[name] = freeLoopbackPort(t)
		}
		return ports[name]
	}
	return &conformance.Place{
		Compute: compute,
		Where:   where,
		ID:      func(name string) string { return where + "/" + name },
		Revision: func(t *testing.T, name string, variant int, b conformance.Behaviour) *admission.Revision {
			t.Helper()
			return sshRevision(t, name, compute, fakeGatewayAs(b, variant), port(t, name))
		},
		Remove: func(_ context.Context, t *testing.T, name string) {
			hostRun(t, h, "systemctl stop -- "+render.UnitName(name), "")
		},
		Edit: func(_ context.Context, t *testing.T, name string) {
			hostRun(t, h, "printf ' ' >> "+path.Join(render.AgentDir(DefaultConfigDir, name), render.CurrentLink, render.ConfigFile), "")
		},
		LookAlike: func(_ context.Context, t *testing.T, name string) {
			t.Helper()
			// A unit with the agents' prefix that the provider did not
			// write (no agent key), and one whose agent key names another
			// agent than its file name.
			unit := "[Unit]\nDescription=look-alike\n%s\n[Service]\nExecStart=/bin/sleep infinity\n"
			for file, key := range map[string]string{name + "x": "", name + "y": render.UnitKeyAgent + "=" + name} {
				p := render.UnitPath(file)
				hostRun(t, h, "cat > "+p, fmt.Sprintf(unit, key))
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_, _ = h.RunAs(ctx, "root", "rm -f -- "+p, nil)
				})
			}
		},
		Leftovers: func(ctx context.Context, t *testing.T, name string) []string {
			t.Helper()
			out := hostRun(t, h, "sh -s -- "+strings.Join([]string{name, render.UnitName(name), render.UnitPath(name),
				render.AgentDir(DefaultConfigDir, name), render.StateDir(name), render.ServiceUser(name)}, " "), leftoversScript)
			var l []string
			for _, line := range strings.Split(out, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					l = append(l, line)
				}
			}
			return l
		},
		Incarnation: func(_ context.Context, t *testing.T, name string) string {
			// systemd's id of the unit's current run: a new one per start.
			return strings.TrimSpace(hostRun(t, h, "systemctl show -p InvocationID --value -- "+render.UnitName(name), ""))
		},
		Unreachable: func(t *testing.T) (executor.Executor, admission.Compute) {
			c := compute
			c = c.WithSSH(func(s *admission.SSHCompute) { s.Port = int64(freeLoopbackPort(t)) }) // nothing listens there
			return exec, c
		},
	}
}

// leftoversScript prints, one a line, what of an agent is on the host:
// its unit file and what an interrupted upload of it left, every file of
// its agent and state directories, its service user, its unit when
// systemd has it loaded in any state but inactive, and its transient
// activation units.
const leftoversScript = `name=$1 unit=$2 unitpath=$3 agentdir=$4 statedir=$5 user=$6
for p in "$unitpath" "$(dirname -- "$unitpath")"/.occ-upload."$unit".*; do
	[ -e "$p" ] && echo "file $p"
done
for d in "$agentdir" "$statedir"; do
	[ -e "$d" ] && find "$d" | sort | sed 's/^/file /'
done
id -u "$user" >/dev/null 2>&1 && echo "user $user"
s=$(systemctl is-active -- "$unit" 2>/dev/null)
case "$s" in inactive | unknown | "") ;; *) echo "unit $unit $s" ;; esac
systemctl list-units --all --plain --no-legend -- "occ-activate-occ-agent-$name-*" 2>/dev/null | awk '{ print "unit " $1 " " $3 }'
exit 0
`

// sshRevision admits an embedded OpenClaw revision of agent name for an
// SSH compute, run by openclaw, its gateway on port.
func sshRevision(t *testing.T, name string, c admission.Compute, openclaw string, port int) *admission.Revision {
	t.Helper()
	c = c.WithSSH(func(s *admission.SSHCompute) { s.OpenClawPath = openclaw })
	return conformance.EmbeddedRevision(t, name, c, admission.CredentialSource{ID: "host", Name: "host", Method: admission.MethodRuntime, Generation: 1,
		EnvironmentFile: conformanceEnvFile}, fmt.Sprintf("gateway: {port: %d}", port))
}

// freeLoopbackPort is a port nothing listens on now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// otherHostKey is a fresh ed25519 public key, as an authorized_keys line:
// a host key no test host has.
func otherHostKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}
