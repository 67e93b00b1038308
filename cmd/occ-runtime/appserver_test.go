package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// renderedAppServer is the runtime command render gives the dedicated
// Codex harness, as the wrapper parses it (what it execs after --).
func renderedAppServer(t *testing.T) []string {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "codex/gpt-5-codex"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "coder", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "occ-acme", CPUMillis: 1000, MemoryLimit: "1Gi"}},
		Source:        admission.CredentialSource{ID: "s", Name: "s", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs, err := render.Kubernetes(rev, 1, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range objs.Deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if *c.Name != "harness" {
				continue
			}
			o, err := parseArgs(c.Args, io.Discard)
			if err != nil {
				t.Fatalf("the wrapper refuses %v: %v", c.Args, err)
			}
			return o.Command
		}
	}
	t.Fatal("no harness container rendered")
	return nil
}

// secretVolume lays out a Secret volume as the kubelet's atomic writer
// does (key -> ..data/key -> ..<timestamp>/key, mode 0440) and returns its
// directory.
func secretVolume(t *testing.T, key, value string) string {
	t.Helper()
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_12_01_00_00_00.000000001")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, key), []byte(value), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rule AU6: the real Codex app server (the pinned codex), started with the
// command line render writes, refuses a websocket client without the
// app-server token or with another one, and serves the client that sends
// it as the gateway's Codex plugin does ("Authorization: Bearer <token>"):
// its initialize request is answered. Without --ws-auth the same codex
// refuses to listen beyond loopback at all. Only the listen address is
// moved to loopback and the token file to where the test keeps the Secret.
func TestAU6_RealAppServerRefusesClientsWithoutTheToken(t *testing.T) {
	bin := needRuntime(t, "npm/codex/node_modules/.bin/codex")
	cmd := renderedAppServer(t)
	listen := slices.Index(cmd, "--listen")
	tokenFile := slices.Index(cmd, "--ws-token-file")
	if len(cmd) < 2 || cmd[0] != "codex" || cmd[1] != "app-server" || listen < 0 || cmd[listen+1] != fmt.Sprintf("ws://0.0.0.0:%d", render.AppServerPort) ||
		tokenFile < 0 || cmd[tokenFile+1] != render.AppServerTokenDir+"/"+render.AppServerTokenKey || !slices.Contains(cmd, "capability-token") {
		t.Fatalf("rendered app server command %v: want codex app-server on 0.0.0.0:%d with a capability token from %s", cmd, render.AppServerPort, render.AppServerTokenDir)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	token := hex.EncodeToString(buf) // as the executor writes the Secret
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "CODEX_HOME=" + filepath.Join(home, "codex"), "TMPDIR=" + t.TempDir(), "PATH=/usr/local/bin:/usr/bin:/bin", "RUST_LOG=warn"}

	t.Run("without --ws-auth codex will not listen beyond loopback", func(t *testing.T) {
		var args []string
		for i := 1; i < len(cmd); i++ {
			if cmd[i] == "--ws-auth" || cmd[i] == "--ws-token-file" {
				i++
				continue
			}
			args = append(args, cmd[i])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := exec.CommandContext(ctx, bin, args...)
		p.Env = env
		out, err := p.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "refusing to start non-loopback websocket listener") {
			t.Fatalf("codex %v: %v, output %q: want a refusal to listen without auth", args, err, out)
		}
	})

	port := freePort(t)
	args := slices.Clone(cmd[1:])
	args[listen] = fmt.Sprintf("ws://127.0.0.1:%d", port)
	args[tokenFile] = filepath.Join(secretVolume(t, render.AppServerTokenKey, token), render.AppServerTokenKey)
	ctx, cancel := context.WithCancel(context.Background())
	p := exec.CommandContext(ctx, bin, args...)
	p.Env = env
	// codex starts helpers of its own (the code-mode host) that hold the
	// output pipe: stop the whole process group.
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.Cancel = func() error { return syscall.Kill(-p.Process.Pid, syscall.SIGKILL) }
	p.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	p.Stdout, p.Stderr = &out, &out
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.Wait() }()
	t.Cleanup(func() { cancel(); <-exited })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app server never answered /readyz: %v\n%s", err, out.String())
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the app server exited (%v) with the rendered arguments %v:\n%s", err, args, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}

	for name, header := range map[string]string{"no token": "", "another token": "Bearer " + strings.Repeat("0", len(token)), "the token without Bearer": token} {
		conn, status := wsHandshake(t, addr, header)
		conn.Close()
		if status != http.StatusUnauthorized {
			t.Errorf("%s: handshake status %d, want 401", name, status)
		}
	}
	conn, status := wsHandshake(t, addr, "Bearer "+token)
	defer conn.Close()
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("with the token: handshake status %d, want 101\n%s", status, out.String())
	}
	wsWriteText(t, conn, `{"id":1,"method":"initialize","params":{"clientInfo":{"name":"occ-test","version":"0"}}}`)
	var reply struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(wsReadText(t, conn), &reply); err != nil || reply.ID != 1 || len(reply.Result) == 0 {
		t.Fatalf("initialize over the authenticated connection: %+v (%v)", reply, err)
	}
	if strings.Contains(out.String(), token) {
		t.Error("the app server logged the token")
	}
}

// wsHandshake opens a websocket handshake on a new connection, with the
// Authorization header when given and without an Origin (codex refuses
// browser origins), and returns the connection and the status.
func wsHandshake(t *testing.T, addr, authorization string) (net.Conn, int) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
	}
	return &bufferedConn{Conn: conn, r: br}, resp.StatusCode
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// wsWriteText writes one masked text frame (RFC 6455 5.2: a client masks).
func wsWriteText(t *testing.T, w io.Writer, s string) {
	t.Helper()
	frame := []byte{0x81}
	switch n := len(s); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	default:
		frame = append(frame, 0x80|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(n))
	}
	mask := []byte{0x0c, 0xc0, 0x5e, 0xed}
	frame = append(frame, mask...)
	for i := range len(s) {
		frame = append(frame, s[i]^mask[i%4])
	}
	if _, err := w.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// wsReadText reads the next text frame's payload (a server does not mask).
func wsReadText(t *testing.T, r io.Reader) []byte {
	t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			t.Fatal(err)
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(r, b[:]); err != nil {
				t.Fatal(err)
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(r, b[:]); err != nil {
				t.Fatal(err)
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f == 0x1 {
			return payload
		}
	}
}
