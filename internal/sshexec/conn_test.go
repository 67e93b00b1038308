package sshexec

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// These tests run against the machine's real sshd (a private instance on a
// loopback port, internal/testenv/sshhost); they skip when it cannot start.

func targetOf(t *testing.T, addr, user, hostKey string) Target {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return Target{Host: host, Port: p, User: user, HostKey: hostKey}
}

func plainSSHD(t *testing.T, extra string) (*sshhost.SSHD, Target, *Pool) {
	t.Helper()
	s := sshhost.StartPlainSSHDT(t, sshhost.PlainSSHDOptions{ExtraConfig: extra})
	pool := NewPool(Credentials{PrivateKey: string(s.ClientKey)}, Options{})
	t.Cleanup(func() { pool.Close() })
	return s, targetOf(t, s.Addr, s.User, s.HostKey), pool
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestHostKeyMismatchShowsBothFingerprints(t *testing.T) {
	s, tg, pool := plainSSHD(t, "")
	other, err := sshhost.NewKeyPair("other")
	if err != nil {
		t.Fatal(err)
	}
	tg.HostKey = other.AuthorizedKey
	_, err = pool.Get(ctxT(t, 20*time.Second), tg)
	var e *Error
	if !errors.As(err, &e) || e.Code != executor.HostKeyMismatch {
		t.Fatalf("err = %v, want %s", err, executor.HostKeyMismatch)
	}
	if !strings.Contains(err.Error(), s.HostKeys.Fingerprint()) || !strings.Contains(err.Error(), other.Fingerprint()) {
		t.Errorf("the error does not show both fingerprints: %v", err)
	}
	if e.Advice() == "" {
		t.Error("no advice")
	}
}

func TestWrongClientKeyIsAuthRefused(t *testing.T) {
	s, tg, _ := plainSSHD(t, "")
	wrong, err := sshhost.NewKeyPair("wrong")
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Credentials{PrivateKey: string(wrong.PrivatePEM)}, Options{})
	defer pool.Close()
	_, err = pool.Get(ctxT(t, 20*time.Second), tg)
	if !IsCode(err, executor.AuthRefused) || !strings.Contains(err.Error(), wrong.Fingerprint()) {
		t.Fatalf("err = %v, want %s naming the offered key", err, executor.AuthRefused)
	}
	var e *Error
	errors.As(err, &e)
	if !strings.Contains(e.Advice(), "authorized_keys") || !strings.Contains(e.Advice(), s.User) {
		t.Errorf("advice = %q", e.Advice())
	}
}

func TestUnreachableAndSettingsErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	key, _ := sshhost.NewKeyPair("k")
	pool := NewPool(Credentials{PrivateKey: string(key.PrivatePEM)}, Options{})
	defer pool.Close()
	tg := targetOf(t, addr, "root", key.AuthorizedKey)
	if _, err := pool.Get(ctxT(t, 10*time.Second), tg); !IsCode(err, executor.Unavailable) {
		t.Errorf("closed port: %v", err)
	}
	tg.HostKey = ""
	if _, err := pool.Get(ctxT(t, 10*time.Second), tg); !IsCode(err, executor.InvalidRequest) || !strings.Contains(err.Error(), "host_key") {
		t.Errorf("no host key: %v", err)
	}
	if _, err := NewPool(Credentials{}, Options{}).Get(ctxT(t, 10*time.Second), targetOf(t, addr, "root", key.AuthorizedKey)); !IsCode(err, executor.InvalidRequest) {
		t.Errorf("no credentials: %v", err)
	}
}

func TestKnownHostsFileVerifiesImports(t *testing.T) {
	s, tg, pool := plainSSHD(t, "")
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	host, port, _ := net.SplitHostPort(s.Addr)
	if err := os.WriteFile(good, []byte("["+host+"]:"+port+" "+s.HostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg.HostKey, tg.KnownHostsFile = "", good
	c, err := pool.Get(ctxT(t, 20*time.Second), tg)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.RunOK(ctxT(t, 10*time.Second), "echo", "echo ok", nil); err != nil || out.Stdout != "ok\n" {
		t.Fatalf("%v %q", err, out.Stdout)
	}
	other, _ := sshhost.NewKeyPair("other")
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("["+host+"]:"+port+" "+other.AuthorizedKey+"\n"), 0o600)
	tg.KnownHostsFile = bad
	if _, err := pool.Get(ctxT(t, 20*time.Second), tg); !IsCode(err, executor.HostKeyMismatch) || !strings.Contains(err.Error(), other.Fingerprint()) {
		t.Errorf("wrong known key: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	tg.KnownHostsFile = empty
	if _, err := pool.Get(ctxT(t, 20*time.Second), tg); err == nil || !strings.Contains(err.Error(), "not in") {
		t.Errorf("unknown host: %v", err)
	}
}

func TestCommandFailedCarriesExitAndStderrTail(t *testing.T) {
	_, tg, pool := plainSSHD(t, "")
	c, err := pool.Get(ctxT(t, 20*time.Second), tg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RunOK(ctxT(t, 10*time.Second), "fail on purpose", `for i in $(seq 1 30); do echo "noise $i" >&2; done; echo "the real reason: $1" >&2; exit 3`, nil, "it's broken")
	var e *Error
	if !errors.As(err, &e) || e.Code != executor.CommandFailed || e.ExitCode != 3 {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasSuffix(e.Stderr, "the real reason: it's broken") || strings.Contains(e.Stderr, "noise 5\n") {
		t.Errorf("stderr tail = %q", e.Stderr)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "fail on purpose") {
		t.Errorf("message = %v", err)
	}
}

// Issue 27: a host whose command prints without end (on stdout or
// stderr) cannot fill the provider's memory: the command is ended past
// MaxOutput with COMMAND_FAILED that says so, promptly, and the
// connection serves the next command.
func TestRunBoundsTheOutput(t *testing.T) {
	_, tg, pool := plainSSHD(t, "")
	c, err := pool.Get(ctxT(t, 20*time.Second), tg)
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"", " >&2"} {
		start := time.Now()
		_, err := c.Run(ctxT(t, 60*time.Second), "print without end", "yes occ"+stream, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != executor.CommandFailed || !strings.Contains(err.Error(), "output passed 16 MiB") {
			t.Fatalf("%q: err = %v", stream, err)
		}
		t.Logf("%q ended after %s", stream, time.Since(start).Round(time.Millisecond))
		out, err := c.RunOK(ctxT(t, 20*time.Second), "after", "echo still here", nil)
		if err != nil || out.Stdout != "still here\n" {
			t.Fatalf("the next command: %q, %v", out.Stdout, err)
		}
	}
	// Just under the bound is kept whole.
	out, err := c.RunOK(ctxT(t, 60*time.Second), "big", fmt.Sprintf("head -c %d /dev/zero", MaxOutput), nil)
	if err != nil || len(out.Stdout) != MaxOutput {
		t.Fatalf("%d bytes, %v", len(out.Stdout), err)
	}
}

// TestPoolReusesOneConnectionAndBoundsSessions: every operation on a host
// shares one connection, and at most MaxSessions commands run at once.
func TestPoolReusesOneConnectionAndBoundsSessions(t *testing.T) {
	s, tg, _ := plainSSHD(t, "")
	proxy := sshhost.NewCutProxyT(t, s.Addr)
	tg = targetOf(t, proxy.Addr, s.User, s.HostKey)
	pool := NewPool(Credentials{PrivateKey: string(s.ClientKey)}, Options{MaxSessions: 2})
	defer pool.Close()
	ctx := ctxT(t, 30*time.Second)
	// What sshd ran, seen on the host: each session marks itself running
	// in dir, writes how many were running then and the connection it came
	// over (sshd's SSH_CONNECTION: the client's address and port), holds
	// 2 s (long enough for two to overlap on a loaded machine), and
	// unmarks itself.
	dir := t.TempDir()
	const script = `d=$1; mkdir "$d/run/$$" && set -- "$d"/run/* && echo "$# $SSH_CONNECTION" >>"$d/log" && sleep 2; rmdir "$d/run/$$"`
	if err := os.Mkdir(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	const sessions = 6
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pool.Get(ctx, tg)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.RunOK(ctx, "session", script, nil, dir); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != sessions {
		t.Fatalf("sshd ran %d sessions, want %d:\n%s", len(lines), sessions, b)
	}
	peak, conns := 0, map[string]bool{}
	for _, l := range lines {
		running, conn, _ := strings.Cut(l, " ")
		n, err := strconv.Atoi(running)
		if err != nil || conn == "" {
			t.Fatalf("session line %q", l)
		}
		peak = max(peak, n)
		conns[conn] = true
	}
	if len(conns) != 1 || proxy.Accepted() != 1 {
		t.Errorf("the sessions came over %d SSH connections (%d accepted by the proxy), want them all over one", len(conns), proxy.Accepted())
	}
	if peak > 2 {
		t.Errorf("%d sessions ran at once, want at most MaxSessions (2)", peak)
	}
	if peak < 2 {
		t.Errorf("at most %d session ran at once: the connection never ran 2 together", peak)
	}
}

// TestDeadConnectionIsReplaced: a connection cut under the pool is noticed
// and the next Get dials again.
func TestDeadConnectionIsReplaced(t *testing.T) {
	s, tg, _ := plainSSHD(t, "")
	proxy := sshhost.NewCutProxyT(t, s.Addr)
	tg = targetOf(t, proxy.Addr, s.User, s.HostKey)
	pool := NewPool(Credentials{PrivateKey: string(s.ClientKey)}, Options{KeepAlive: 200 * time.Millisecond})
	defer pool.Close()
	ctx := ctxT(t, 30*time.Second)
	c1, err := pool.Get(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	proxy.CutNow()
	for i := 0; c1.alive() && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if c1.alive() {
		t.Fatal("the cut connection still looks alive after 5 s")
	}
	c2, err := pool.Get(ctx, tg)
	if err != nil || c2 == c1 {
		t.Fatalf("no new connection: %v", err)
	}
	if _, err := c2.RunOK(ctx, "true", "true", nil); err != nil {
		t.Fatal(err)
	}
}

func TestContextEndsACommand(t *testing.T) {
	_, tg, pool := plainSSHD(t, "")
	c, err := pool.Get(ctxT(t, 20*time.Second), tg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Run(ctxT(t, 300*time.Millisecond), "sleep", "sleep 30", nil)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

// TestUploadCutMidTransferKeepsTheOldFile: a connection dropped during an
// upload never leaves a partial file in place (SS1: atomic writes).
func TestUploadCutMidTransferKeepsTheOldFile(t *testing.T) {
	s, tg, _ := plainSSHD(t, "")
	proxy := sshhost.NewCutProxyT(t, s.Addr)
	tg = targetOf(t, proxy.Addr, s.User, s.HostKey)
	pool := NewPool(Credentials{PrivateKey: string(s.ClientKey)}, Options{})
	defer pool.Close()
	ctx := ctxT(t, 60*time.Second)
	dest := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(dest, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := pool.Get(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	proxy.CutAfter(512 << 10)
	err = c.Upload(ctx, dest, big, "0640", "")
	if !IsCode(err, executor.Unavailable) {
		t.Fatalf("cut upload: err = %v, want %s", err, executor.Unavailable)
	}
	if b, _ := os.ReadFile(dest); string(b) != "old" {
		t.Fatalf("after the cut the file holds %d bytes, want the old content", len(b))
	}
	proxy.Disarm()
	c, err = pool.Get(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, dest, big, "0640", ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); !bytes.Equal(b, big) {
		t.Fatalf("the retried upload wrote %d bytes, want %d", len(b), len(big))
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// TestReadinessThroughTheTunnel (rule SS2: the provider checks the
// gateway's readiness, not model authentication): /readyz on the host's
// loopback is read over the SSH connection, retried until 200; a host that
// refuses to forward fails at once.
func TestReadinessThroughTheTunnel(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ready":true}`))
	}))
	defer srv.Close()
	_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.ParseInt(portText, 10, 64)

	_, tg, pool := plainSSHD(t, "")
	c, err := pool.Get(ctxT(t, 20*time.Second), tg)
	if err != nil {
		t.Fatal(err)
	}
	w := &watch{e: &Executor{PollInterval: 50 * time.Millisecond}, conn: c, h: &render.SystemdHost{Port: port}}
	if err := w.readyz(ctxT(t, 20*time.Second)); err != nil || calls.Load() != 3 {
		t.Fatalf("readyz: %v after %d calls", err, calls.Load())
	}

	_, tg2, pool2 := plainSSHD(t, "Match all\n  AllowTcpForwarding no")
	c2, err := pool2.Get(ctxT(t, 20*time.Second), tg2)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w2 := &watch{e: &Executor{PollInterval: 50 * time.Millisecond}, conn: c2, h: &render.SystemdHost{Port: port}}
	if err := w2.readyz(ctxT(t, 20*time.Second)); err == nil || !forwardingRefused(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("forwarding refused: %v after %v", err, time.Since(start))
	}
}

// Issue 30: known_hosts_file markers, against OpenSSH's sshd. A host whose
// ECDSA key is signed by a CA the file trusts with @cert-authority is
// asked for its certificate and connects; a key the file marks @revoked
// is refused as HOST_KEY_MISMATCH saying so, even beside a line that
// records the same key unmarked; a CA line for another CA accepts nothing.
func TestKnownHostsFileMarkers(t *testing.T) {
	dir := t.TempDir()
	hostPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(hostPriv, "occ-testenv-ecdsa-host")
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "ssh_host_ecdsa_key")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	hostPub, err := ssh.NewPublicKey(&hostPriv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	newCA := func() (ssh.Signer, string) {
		_, caPriv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := ssh.NewSignerFromKey(caPriv)
		if err != nil {
			t.Fatal(err)
		}
		return ca, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.PublicKey())))
	}
	ca, caLine := newCA()
	_, otherCALine := newCA()
	cert := &ssh.Certificate{Key: hostPub, Serial: 1, CertType: ssh.HostCert, KeyId: "occ-testenv-host",
		ValidPrincipals: []string{"127.0.0.1"}, ValidAfter: uint64(time.Now().Add(-time.Hour).Unix()), ValidBefore: uint64(time.Now().Add(time.Hour).Unix())}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	certPath := keyPath + "-cert.pub"
	if err := os.WriteFile(certPath, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
		t.Fatal(err)
	}
	s, tg, pool := plainSSHD(t, "HostKey "+keyPath+"\nHostCertificate "+certPath)
	host, port, _ := net.SplitHostPort(s.Addr)
	entry := "[" + host + "]:" + port
	hostLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostPub)))
	connect := func(t *testing.T, lines ...string) error {
		file := filepath.Join(t.TempDir(), "known_hosts")
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tg := tg
		tg.HostKey, tg.KnownHostsFile = "", file
		c, err := pool.Get(ctxT(t, 20*time.Second), tg)
		if err == nil {
			c.Close()
		}
		return err
	}
	t.Run("cert-authority", func(t *testing.T) {
		if err := connect(t, "@cert-authority "+entry+" "+caLine); err != nil {
			t.Fatalf("a host certificate signed by the CA the file trusts: %v", err)
		}
	})
	t.Run("cert-authority of a wildcard", func(t *testing.T) {
		if err := connect(t, "@cert-authority * "+caLine); err != nil {
			t.Fatalf("a host certificate signed by the CA the file trusts for every host: %v", err)
		}
	})
	t.Run("another cert-authority", func(t *testing.T) {
		if err := connect(t, "@cert-authority "+entry+" "+otherCALine); err == nil {
			t.Fatal("a host certificate signed by another CA than the file's was accepted")
		}
	})
	t.Run("revoked", func(t *testing.T) {
		err := connect(t, "@revoked "+entry+" "+hostLine, entry+" "+hostLine)
		var e *Error
		if !errors.As(err, &e) || e.Code != executor.HostKeyMismatch || !strings.Contains(err.Error(), "marks @revoked") {
			t.Fatalf("a host key marked @revoked: %v; want %s saying it is revoked", err, executor.HostKeyMismatch)
		}
		t.Logf("refused: %v", err)
	})
}

// Issue 30: a host with more than one key type (OpenSSH's sshd with an
// ed25519 and an ECDSA host key) verified through known_hosts_file is
// asked for a key type the file records for it: an ed25519 line alone, an
// ECDSA line alone, and a hashed entry each connect; before, the client
// asked for ECDSA first and called the ed25519-only host a mismatch.
func TestKnownHostsFileAsksForTheRecordedKeyType(t *testing.T) {
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "occ-testenv-ecdsa-host")
	if err != nil {
		t.Fatal(err)
	}
	ecdsaPath := filepath.Join(dir, "ssh_host_ecdsa_key")
	if err := os.WriteFile(ecdsaPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	ecdsaPub, err := ssh.NewPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	s, tg, pool := plainSSHD(t, "HostKey "+ecdsaPath)
	host, port, _ := net.SplitHostPort(s.Addr)
	entry := "[" + host + "]:" + port
	for name, line := range map[string]string{
		"ed25519 only": entry + " " + s.HostKey,
		"ecdsa only":   entry + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ecdsaPub))),
		"hashed":       knownhosts.HashHostname(entry) + " " + s.HostKey,
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tg := tg
			tg.HostKey, tg.KnownHostsFile = "", file
			c, err := pool.Get(ctxT(t, 20*time.Second), tg)
			if err != nil {
				t.Fatalf("known_hosts %q: %v", line, err)
			}
			if out, err := c.RunOK(ctxT(t, 10*time.Second), "echo", "echo ok", nil); err != nil || out.Stdout != "ok\n" {
				t.Fatalf("%v %q", err, out.Stdout)
			}
		})
	}
}
