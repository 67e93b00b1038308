package sshhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestPlainSSHDRunsCommands(t *testing.T) {
	s := StartPlainSSHDT(t, PlainSSHDOptions{})
	ctx := testContext(t, 30*time.Second)

	stdout, stderr, exit, err := s.Run(ctx, "echo out; echo err >&2")
	if err != nil || exit != 0 || stdout != "out\n" || stderr != "err\n" {
		t.Fatalf("Run = %q, %q, %d, %v; want out, err, 0, nil", stdout, stderr, exit, err)
	}
	_, _, exit, err = s.Run(ctx, "exit 3")
	if err != nil || exit != 3 {
		t.Fatalf("exit 3: exit %d, err %v", exit, err)
	}
	if !strings.HasPrefix(string(s.ClientKey), "-----BEGIN OPENSSH PRIVATE KEY-----") {
		t.Errorf("ClientKey is not an OpenSSH PEM key: %.40q", s.ClientKey)
	}
	// The PEM key is what a provider configuration would carry: it must parse
	// and log in on its own.
	signer, err := ssh.ParsePrivateKey(s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s.HostKey))
	if err != nil {
		t.Fatalf("HostKey %q: %v", s.HostKey, err)
	}
	c, err := Dial(ctx, s.Addr, &ssh.ClientConfig{
		User:            s.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
	})
	if err != nil {
		t.Fatalf("login with the parsed PEM key and host key: %v", err)
	}
	c.Close()
}

func TestPlainSSHDRejectsWrongClientKey(t *testing.T) {
	s := StartPlainSSHDT(t, PlainSSHDOptions{})
	ctx := testContext(t, 30*time.Second)
	other, err := NewKeyPair("not-authorized")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.ClientConfig(s.User)
	cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(other.Signer)}
	c, err := Dial(ctx, s.Addr, cfg)
	if err == nil {
		c.Close()
		t.Fatal("login with an unauthorized client key succeeded")
	}
	if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("want an authentication failure, got: %v", err)
	}
	t.Logf("refused as expected: %v", err)
}

func TestPlainSSHDClientRejectsWrongHostKey(t *testing.T) {
	s := StartPlainSSHDT(t, PlainSSHDOptions{})
	ctx := testContext(t, 30*time.Second)
	impostor, err := NewKeyPair("impostor")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("FixedHostKey", func(t *testing.T) {
		cfg := s.ClientConfig(s.User)
		cfg.HostKeyCallback = ssh.FixedHostKey(impostor.PublicKey())
		c, err := Dial(ctx, s.Addr, cfg)
		if err == nil {
			c.Close()
			t.Fatal("handshake with a wrong expected host key succeeded")
		}
		if !strings.Contains(err.Error(), "host key mismatch") {
			t.Fatalf("want a host key mismatch, got: %v", err)
		}
	})

	t.Run("knownhosts", func(t *testing.T) {
		dir := t.TempDir()
		check := func(key ssh.PublicKey) error {
			path := filepath.Join(dir, "known_hosts")
			line := knownhosts.Line([]string{s.Addr}, key) + "\n"
			if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			cb, err := knownhosts.New(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.ClientConfig(s.User)
			cfg.HostKeyCallback = cb
			c, err := Dial(ctx, s.Addr, cfg)
			if err == nil {
				c.Close()
			}
			return err
		}
		if err := check(s.HostPublicKey); err != nil {
			t.Fatalf("the right host key in known_hosts: %v", err)
		}
		err := check(impostor.PublicKey())
		var keyErr *knownhosts.KeyError
		if !errors.As(err, &keyErr) || len(keyErr.Want) == 0 {
			t.Fatalf("want a knownhosts.KeyError with Want set (a mismatch), got %v", err)
		}
		if got := ssh.FingerprintSHA256(keyErr.Want[0].Key); got != impostor.Fingerprint() {
			t.Errorf("KeyError.Want = %s, want the known (impostor) key %s", got, impostor.Fingerprint())
		}
		t.Logf("mismatch detected: %v (server presents %s)", err, s.HostKeys.Fingerprint())
	})
}

func TestCutProxyDropsTransferMidway(t *testing.T) {
	s := StartPlainSSHDT(t, PlainSSHDOptions{})
	ctx := testContext(t, 60*time.Second)
	proxy := NewCutProxyT(t, s.Addr)
	via := s.Endpoint
	via.Addr = proxy.Addr
	dir := t.TempDir()

	const size = 8 << 20
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	upload := func(name string) (Result, error) {
		c, err := Dial(ctx, via.Addr, via.ClientConfig(s.User))
		if err != nil {
			t.Fatalf("dial through the proxy: %v", err)
		}
		defer c.Close()
		// Armed after the handshake: the cut falls inside the upload.
		if name == "cut" {
			proxy.CutAfter(1 << 20)
		}
		return RunOn(ctx, c, "cat > "+filepath.Join(dir, name), bytes.NewReader(payload))
	}

	r, err := upload("cut")
	if err == nil && r.Exit == 0 {
		t.Fatalf("upload through an armed proxy completed (exit %d)", r.Exit)
	}
	t.Logf("cut upload ended with: exit %d, err %v", r.Exit, err)
	if proxy.Cuts() != 1 {
		t.Fatalf("proxy cut %d connections, want 1", proxy.Cuts())
	}
	// What reached the server is a strict prefix of the payload.
	got := waitStableFile(t, filepath.Join(dir, "cut"))
	if len(got) >= size || !bytes.Equal(got, payload[:len(got)]) {
		t.Fatalf("server file after the cut: %d bytes, prefix of the payload: %v; want a strict prefix of %d bytes",
			len(got), bytes.Equal(got, payload[:min(len(got), size)]), size)
	}
	t.Logf("server received %d of %d bytes before the cut", len(got), size)

	proxy.Disarm()
	if r, err := upload("whole"); err != nil || r.Exit != 0 {
		t.Fatalf("upload through the disarmed proxy: exit %d, err %v, stderr %q", r.Exit, err, r.Stderr)
	}
	if got := waitStableFile(t, filepath.Join(dir, "whole")); !bytes.Equal(got, payload) {
		t.Fatalf("disarmed upload: %d bytes, want the %d-byte payload", len(got), size)
	}

	// CutNow drops an idle, established connection too.
	c, err := Dial(ctx, via.Addr, via.ClientConfig(s.User))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	proxy.CutNow()
	waitDone := make(chan error, 1)
	go func() { waitDone <- c.Wait() }()
	select {
	case <-waitDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not notice CutNow within 10 s")
	}
	if proxy.Cuts() != 2 {
		t.Fatalf("proxy cut %d connections, want 2", proxy.Cuts())
	}
}

// waitStableFile reads path once its size has stopped changing (sshd may
// still be flushing what it received).
func waitStableFile(t *testing.T, path string) []byte {
	t.Helper()
	last := int64(-1)
	for i := 0; i < 100; i++ {
		fi, err := os.Stat(path)
		if err == nil && fi.Size() == last {
			break
		}
		if err == nil {
			last = fi.Size()
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPlainSSHDStopLeavesNothing(t *testing.T) {
	s := StartPlainSSHDT(t, PlainSSHDOptions{})
	pid, dir, addr := s.PID(), s.Dir, s.Addr
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if processAlive(pid) {
		t.Errorf("sshd pid %d still alive after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after Stop (%v)", dir, err)
	}
	ctx := testContext(t, 10*time.Second)
	if _, _, _, err := s.Run(ctx, "true"); err == nil {
		t.Errorf("%s still answers after Stop", addr)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
