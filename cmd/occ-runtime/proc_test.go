package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// The tests run the wrapper as a real process: the test binary itself,
// re-executed with asMain set, runs main.
const asMain = "OCC_RUNTIME_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The credential every test hands the wrapper; it must never show up in
// its output.
const sentinel = "sk-SENTINEL-occ-runtime-9c1e"

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// proc is a running wrapper.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdout  syncBuffer
	stderr  syncBuffer
	started time.Time
	done    chan struct{}
	exit    int
	ended   time.Time
}

// startWrapper runs the wrapper with exactly env (plus PATH when unset) and args.
func startWrapper(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	hasPath := false
	for _, e := range env {
		hasPath = hasPath || strings.HasPrefix(e, "PATH=")
	}
	if !hasPath {
		env = append(env, "PATH="+os.Getenv("PATH"))
	}
	p.cmd.Env = append(env, asMain+"=1")
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.ended = time.Now()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.exit = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.exit = 128 + int(ws.Signal())
			}
		default:
			p.exit = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		out := p.stdout.String() + p.stderr.String()
		if strings.Contains(out, sentinel) {
			t.Errorf("the credential appeared in the wrapper's output:\n%s", out)
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// records parses the startup records written so far, on stdout (OpenClaw)
// or stderr (Codex, LG3); every record line must parse under the one
// definition.
func (p *proc) records() []runtimerecord.Record {
	var out []runtimerecord.Record
	sc := bufio.NewScanner(strings.NewReader(p.stdout.String() + p.stderr.String()))
	for sc.Scan() {
		r, ok, err := runtimerecord.Parse(sc.Bytes())
		if err != nil {
			p.t.Errorf("a record breaks the definition: %v: %s", err, sc.Text())
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// waitFor waits until a record satisfies f, the process ends, or timeout.
func (p *proc) waitFor(timeout time.Duration, what string, f func(runtimerecord.Record) bool) runtimerecord.Record {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range p.records() {
			if f(r) {
				return r
			}
		}
		if time.Now().After(deadline) || !p.alive() {
			if os.Getenv("OCC_DEBUG_QUIT") != "" && p.alive() {
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				<-p.done
			}
			p.t.Fatalf("no record %s within %v (alive=%v)", what, timeout, p.alive())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func phaseDone(ph runtimerecord.Phase) func(runtimerecord.Record) bool {
	return func(r runtimerecord.Record) bool { return r.Event == runtimerecord.EventStartupPhase && r.Phase == ph }
}

// held asserts the PR5 hold: the model probe (or login) phase failed with
// the final probe record's code, nothing was spawned, the process stays
// alive, and SIGTERM ends it at once.
func (p *proc) held(timeout time.Duration, phase runtimerecord.Phase, code runtimerecord.Code) []runtimerecord.Record {
	p.t.Helper()
	ph := p.waitFor(timeout, string(phase)+" failed", phaseDone(phase))
	if ph.Outcome != runtimerecord.OutcomeFailed {
		p.t.Fatalf("%s phase: %+v, want failed", phase, ph)
	}
	time.Sleep(400 * time.Millisecond)
	if !p.alive() {
		p.t.Fatalf("the wrapper exited (%d) instead of holding", p.exit)
	}
	recs := p.records()
	for _, r := range recs {
		if r.Phase == runtimerecord.PhaseProcessSpawn || r.Phase == runtimerecord.PhaseWorkspaceSetup {
			p.t.Errorf("a held startup went on to %s", r.Phase)
		}
	}
	if !strings.Contains(p.stderr.String(), "startup held: "+string(code)) {
		p.t.Errorf("stderr does not name the held code %s: %q", code, p.stderr.String())
	}
	p.heldHealth(code)
	p.term()
	return recs
}

// heldHealth asserts what the kubelet sees of a held wrapper started with
// --health-port (PR5): /healthz answers 200, so a liveness probe does not
// restart the container and run the model probe again, and /readyz answers
// 503 with the held code, however often it is asked (the callers then count
// the model calls: polling adds none).
func (p *proc) heldHealth(code runtimerecord.Code) {
	p.t.Helper()
	port := ""
	for _, a := range p.cmd.Args {
		if v, ok := strings.CutPrefix(a, "--health-port="); ok {
			port = v
		}
	}
	if port == "" {
		return
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		p.t.Helper()
		var last error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			resp, err := client.Get("http://127.0.0.1:" + port + path)
			if err != nil {
				last = err
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(body)
		}
		p.t.Fatalf("GET %s on the held wrapper's health port: %v", path, last)
		return 0, ""
	}
	want := `{"code":"` + string(code) + `","status":"held"}`
	if st, body := get("/healthz"); st != http.StatusOK || body != want {
		p.t.Errorf("held /healthz = %d %s, want 200 %s", st, body, want)
	}
	for range 3 {
		if st, body := get("/readyz"); st != http.StatusServiceUnavailable || body != want {
			p.t.Errorf("held /readyz = %d %s, want 503 %s", st, body, want)
		}
	}
}

// term sends SIGTERM and asserts the process ends. A held wrapper must end
// on SIGTERM (PR5); once the runtime is spawned, its own shutdown governs
// (the OpenClaw gateway takes a few seconds). The bound only tells a hang
// from an exit; the time taken is logged, never asserted.
func (p *proc) term() {
	p.t.Helper()
	spawned := false
	for _, r := range p.records() {
		spawned = spawned || r.Phase == runtimerecord.PhaseProcessSpawn
	}
	sent := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("SIGTERM did not end the process within 30 s (spawned=%v)", spawned)
	}
	p.t.Logf("SIGTERM ended the process in %v (spawned=%v)", p.ended.Sub(sent).Round(time.Millisecond), spawned)
	if !spawned && p.exit != 143 { // the runtime, once spawned, exits its own way
		p.t.Errorf("exit code after SIGTERM = %d, want 143", p.exit)
	}
}

// probeRecords are the records of one probe event.
func probeRecords(recs []runtimerecord.Record, ev runtimerecord.Event) []runtimerecord.Record {
	var out []runtimerecord.Record
	for _, r := range recs {
		if r.Event == ev {
			out = append(out, r)
		}
	}
	return out
}

// sequence is the records as "event/phase/outcome" and "event#attempt=CODE" strings.
func sequence(recs []runtimerecord.Record) []string {
	var out []string
	for _, r := range recs {
		switch r.Event {
		case runtimerecord.EventStartupPhase:
			s := fmt.Sprintf("%s:%s", r.Phase, r.Outcome)
			if r.Code != "" {
				s += "=" + string(r.Code)
			}
			out = append(out, s)
		default:
			s := fmt.Sprintf("%s#%d=%s", r.Event, r.Attempt, r.Code)
			if r.Final {
				s += "(final)"
			}
			out = append(out, s)
		}
	}
	return out
}

func writeProbe(t *testing.T, p admission.Probe) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "probe.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testenvCache is where make testenv-runtimes installs the runtimes.
func testenvCache() string {
	if d := os.Getenv("OCC_TESTENV_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "occ-testenv")
}

// needRuntime returns the path of an installed runtime binary, or skips
// (fails under CI=true) naming the make target that installs it.
func needRuntime(t *testing.T, rel string) string {
	t.Helper()
	path := filepath.Join(testenvCache(), rel)
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("%s is not installed: run `make testenv-runtimes` (part of `make testenv`)", path)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}
