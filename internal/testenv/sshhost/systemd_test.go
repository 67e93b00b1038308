package sshhost

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// requireSystemdPrereqs skips (or fails under CI) when the systemd host
// cannot be started here at all.
func requireSystemdPrereqs(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "the systemd-nspawn SSH host", errors.New("needs root"))
	}
	rootfs, err := filepath.EvalSymlinks(DefaultRootfs())
	if err != nil {
		Unavailable(t, "the systemd-nspawn SSH host", fmt.Errorf("no cached rootfs: %w", err))
	}
	if _, err := os.Stat(filepath.Join(rootfs, "usr/lib/systemd/systemd")); err != nil {
		Unavailable(t, "the systemd-nspawn SSH host", fmt.Errorf("rootfs %s: %w", rootfs, err))
	}
}

func TestSystemdHost(t *testing.T) {
	requireSystemdPrereqs(t)
	h := StartSystemdHostT(t, SystemdHostOptions{})
	ctx := testContext(t, 3*time.Minute)
	if len(h.FailedUnits) > 0 {
		t.Logf("systemd is degraded; failed units: %v", h.FailedUnits)
	}

	run := func(t *testing.T, user, cmd string, stdin string) Result {
		t.Helper()
		var in io.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		r, err := h.RunAs(ctx, user, cmd, in)
		if err != nil {
			t.Fatalf("%s as %s: %v", cmd, user, err)
		}
		if r.Exit != 0 {
			t.Fatalf("%s as %s: exit %d\nstdout: %s\nstderr: %s", cmd, user, r.Exit, r.Stdout, r.Stderr)
		}
		return r
	}

	t.Run("systemd is PID 1", func(t *testing.T) {
		r := run(t, "root", "cat /proc/1/comm; hostname", "")
		if got := strings.Fields(r.Stdout); len(got) != 2 || got[0] != "systemd" || got[1] != h.Name {
			t.Fatalf("PID 1 and hostname = %q, want systemd and %s", r.Stdout, h.Name)
		}
	})

	marker := "occ-testenv-" + randomHex(6)
	t.Run("unit written over SSH runs", func(t *testing.T) {
		unit := fmt.Sprintf(`[Unit]
Description=occ testenv unit
[Service]
ExecStart=/bin/sh -c 'echo %s started; while :; do sleep 60; done'
Restart=on-failure
[Install]
WantedBy=multi-user.target
`, marker)
		run(t, "root", "cat > /etc/systemd/system/occ-x.service", unit)
		run(t, "root", "systemctl daemon-reload && systemctl enable --now occ-x.service", "")
		r := run(t, "root", "systemctl is-active occ-x.service", "")
		if strings.TrimSpace(r.Stdout) != "active" {
			t.Fatalf("is-active = %q", r.Stdout)
		}
		run(t, "root", "systemctl restart occ-x.service && systemctl is-active occ-x.service", "")
	})

	t.Run("journal readable over SSH as JSON", func(t *testing.T) {
		deadline := time.Now().Add(15 * time.Second)
		for {
			r := run(t, "root", "journalctl -u occ-x.service -o json --no-pager", "")
			var found, lines int
			sc := bufio.NewScanner(strings.NewReader(r.Stdout))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var rec map[string]any
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("journalctl -o json line is not JSON: %v: %s", err, sc.Text())
				}
				lines++
				if msg, _ := rec["MESSAGE"].(string); msg == marker+" started" {
					if rec["_SYSTEMD_UNIT"] != "occ-x.service" {
						t.Errorf("record's _SYSTEMD_UNIT = %v", rec["_SYSTEMD_UNIT"])
					}
					found++
				}
			}
			if found >= 2 { // started, then restarted
				t.Logf("%d journal records for occ-x.service, %d from the unit's two activations", lines, found)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the unit's line %q appears %d times in the journal (want 2):\n%s", marker, found, r.Stdout)
			}
			time.Sleep(200 * time.Millisecond)
		}
		run(t, "root", "systemctl disable --now occ-x.service", "")
		r := run(t, "root", "systemctl is-active occ-x.service || true", "")
		if strings.TrimSpace(r.Stdout) != "inactive" {
			t.Fatalf("after stop, is-active = %q", r.Stdout)
		}
	})

	t.Run("files written over SSH", func(t *testing.T) {
		content := "written by the test " + marker + "\n"
		run(t, "root", "mkdir -p /etc/occ && cat > /etc/occ/test.conf.tmp && sync && mv /etc/occ/test.conf.tmp /etc/occ/test.conf", content)
		r := run(t, "root", "cat /etc/occ/test.conf", "")
		if r.Stdout != content {
			t.Fatalf("read back %q, want %q", r.Stdout, content)
		}
		// The per-start root is a plain directory on this machine too.
		b, err := os.ReadFile(filepath.Join(h.Root, "etc/occ/test.conf"))
		if err != nil || string(b) != content {
			t.Fatalf("from the host side: %q, %v", b, err)
		}
	})

	t.Run("operator logs in and has sudo", func(t *testing.T) {
		r := run(t, Operator, "id -un; sudo -n id -u", "")
		if got := strings.Fields(r.Stdout); len(got) != 2 || got[0] != Operator || got[1] != "0" {
			t.Fatalf("as %s: id -un; sudo -n id -u = %q", Operator, r.Stdout)
		}
		run(t, Operator, "echo hi > ~/note && sudo -n systemctl is-system-running", "")
	})

	t.Run("wrong host key is refused", func(t *testing.T) {
		impostor, err := NewKeyPair("impostor")
		if err != nil {
			t.Fatal(err)
		}
		cfg := h.ClientConfig("root")
		cfg.HostKeyCallback = ssh.FixedHostKey(impostor.PublicKey())
		if c, err := Dial(ctx, h.Addr, cfg); err == nil {
			c.Close()
			t.Fatal("connected despite a wrong host key")
		} else if !strings.Contains(err.Error(), "host key mismatch") {
			t.Fatalf("want a host key mismatch, got %v", err)
		}
	})

	t.Run("openclaw runs", func(t *testing.T) {
		if h.OpenClaw == "" {
			Unavailable(t, "OpenClaw in the rootfs", errors.New("/opt/openclaw/.occ-version missing"))
		}
		start := time.Now()
		r := run(t, Operator, "TMPDIR=/tmp openclaw --version", "")
		t.Logf("openclaw --version = %q in %v (rootfs: %s)", strings.TrimSpace(r.Stdout), time.Since(start).Round(time.Millisecond), h.OpenClaw)
		if strings.TrimSpace(r.Stdout) == "" {
			t.Fatal("openclaw --version printed nothing")
		}
	})

	t.Run("stop leaves nothing", func(t *testing.T) {
		pid, root := h.PID(), h.Root
		start := time.Now()
		if err := h.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
		if processAlive(pid) {
			t.Errorf("systemd-nspawn pid %d alive after Stop", pid)
		}
		if isMountPoint(root) {
			t.Errorf("%s still mounted", root)
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", root, err)
		}
		if r, err := h.RunAs(testContext(t, 10*time.Second), "root", "true", nil); err == nil {
			t.Errorf("host still answers SSH after Stop (exit %d)", r.Exit)
		}
	})
}

// A start that fails half-way (here: no time to boot) returns the console
// tail and leaves no process, mount or directory behind.
func TestSystemdHostFailedStartCleansUp(t *testing.T) {
	requireSystemdPrereqs(t)
	runDir := t.TempDir()
	name := "occ-fail-" + randomHex(3)
	_, err := StartSystemdHost(testContext(t, time.Minute), SystemdHostOptions{
		RunDir: runDir, Name: name, BootTimeout: time.Millisecond,
	})
	if err == nil {
		t.Fatal("start with a 1 ms boot timeout succeeded")
	}
	if !strings.Contains(err.Error(), "systemd-nspawn console tail") {
		t.Errorf("error has no console tail: %v", err)
	}
	t.Logf("failed as expected: %.300s", err)
	if pids := nspawnPIDs(name); len(pids) > 0 {
		t.Errorf("systemd-nspawn for %s still running: %v", name, pids)
	}
	entries, _ := os.ReadDir(runDir)
	if len(entries) > 0 {
		t.Errorf("run directory not cleaned: %v", entries)
	}
}

// nspawnPIDs lists systemd-nspawn processes for machine name.
func nspawnPIDs(name string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "systemd-nspawn") && strings.Contains(string(b), "--machine="+name+"\x00") {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}
