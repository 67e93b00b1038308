package sshhost

import (
	"context"
	"os"
	"testing"
	"time"
)

// InCI reports whether the tests run under CI (the CI environment variable
// is non-empty): a backend that cannot start must fail the run there.
func InCI() bool { return os.Getenv("CI") != "" }

// Unavailable ends the test because backend could not start: under CI it
// fails with err (which carries the backend's log tail); elsewhere it skips
// with a message naming `make testenv`.
func Unavailable(t testing.TB, backend string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s cannot start (CI is set, so this is a failure): %v", backend, err)
	}
	t.Skipf("%s cannot start, skipping: %v\n(prepare it with `make testenv` as root; `make testenv-ssh` builds only the SSH hosts)", backend, err)
}

// StartSystemdHostT starts a systemd host for t and stops it in t.Cleanup,
// so a test that fails half-way leaves nothing running. A host that cannot
// start skips the test, or fails it under CI (see Unavailable).
func StartSystemdHostT(t testing.TB, opts SystemdHostOptions) *Host {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := StartSystemdHost(ctx, opts)
	if err != nil {
		Unavailable(t, "the systemd-nspawn SSH host", err)
		return nil
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping systemd host %s: %v", h.Name, err)
		}
	})
	t.Logf("systemd host %s on %s (%s root, prepared in %v, SSH %v and systemd %s %v after launch)",
		h.Name, h.Addr, h.CopyMode, h.PrepareTime.Round(time.Millisecond),
		h.BootToSSH.Round(time.Millisecond), h.SystemState, h.BootToRunning.Round(time.Millisecond))
	return h
}

// StartPlainSSHDT starts a plain sshd for t and stops it in t.Cleanup. One
// that cannot start skips the test, or fails it under CI.
func StartPlainSSHDT(t testing.TB, opts PlainSSHDOptions) *SSHD {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartPlainSSHD(ctx, opts)
	if err != nil {
		Unavailable(t, "the plain sshd", err)
		return nil
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping sshd: %v", err)
		}
	})
	return s
}

// NewCutProxyT starts a CutProxy to target and closes it in t.Cleanup.
func NewCutProxyT(t testing.TB, target string) *CutProxy {
	t.Helper()
	p, err := NewCutProxy(target)
	if err != nil {
		t.Fatalf("cut proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
