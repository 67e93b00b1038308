package startup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// syncBuffer is a records writer the test reads while the wrapper writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// shortPeerWait makes the wait poll every 20 ms and log at most every
// every, for the test.
func shortPeerWait(t *testing.T, every time.Duration) {
	t.Helper()
	poll, log := peerPoll, peerLogEvery
	peerPoll, peerLogEvery = 20*time.Millisecond, every
	t.Cleanup(func() { peerPoll, peerLogEvery = poll, log })
}

// gatewayConfig writes a gateway configuration whose Codex plugin reaches
// the app server at addr, and returns the wrapper's environment.
func gatewayConfig(t *testing.T, addr string) func(string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "openclaw.json")
	doc := fmt.Sprintf(`{plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "websocket", url: "ws://%s", authToken: "${OCC_APP_SERVER_TOKEN}"}}}}}}`, addr)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENCLAW_CONFIG_PATH": path}
	return func(k string) string { return env[k] }
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type logLine struct {
	Time      time.Time `json:"time"`
	Level     string    `json:"level"`
	Container string    `json:"container"`
	Msg       string    `json:"msg"`
}

// outputOf splits the wrapper's output into its startup records and its
// log lines; any other line fails the test.
func outputOf(t *testing.T, out string) (recs []runtimerecord.Record, logs []logLine) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		r, ok, err := runtimerecord.Parse(sc.Bytes())
		switch {
		case err != nil:
			t.Fatalf("%s: %v", sc.Text(), err)
		case ok:
			recs = append(recs, r)
			continue
		}
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Msg == "" {
			t.Fatalf("neither a record nor a log line: %s", sc.Text())
		}
		logs = append(logs, l)
	}
	return recs, logs
}

// rule PR10: a dedicated gateway (--wait-peer=harness) does not start
// before its harness reports ready. The harness's app server here comes up
// late: first nothing listens at the address the gateway's Codex plugin
// names, then it listens and answers /readyz 503, and only then 200. The
// wrapper reaches the spawn only after a 200, writes the peer_status phase
// with the wait as its duration, and meanwhile logs "Waiting for Harness
// plugin runtime status" (no host, port or path), at most once per
// interval.
func TestPR10_DedicatedGatewayWaitsForItsHarness(t *testing.T) {
	const every = 200 * time.Millisecond
	shortPeerWait(t, every)
	addr := freeAddr(t)
	var notReady atomic.Int32
	var readyAt atomic.Int64 // when the first 200 was answered
	listening := make(chan struct{})
	go func() {
		time.Sleep(400 * time.Millisecond) // the harness Pod is not there yet
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		close(listening)
		up := time.Now()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz" {
				t.Errorf("the gateway asked %s, want /readyz", r.URL.Path)
			}
			if time.Since(up) < 400*time.Millisecond { // logging in, probing
				notReady.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			readyAt.CompareAndSwap(0, time.Now().UnixNano())
			w.WriteHeader(http.StatusOK)
		})}
		t.Cleanup(func() { srv.Close() })
		_ = srv.Serve(ln)
	}()

	var out syncBuffer
	start := time.Now()
	res, _, err := Run(context.Background(), Options{Container: "gateway", Harness: HarnessOpenClaw, WaitPeer: PeerHarness,
		Command: []string{"sh"}, Getenv: gatewayConfig(t, addr), Records: &out})
	done := time.Now()
	if err != nil || res.Held != "" || res.Path == "" {
		t.Fatalf("Run = %+v, %v; want the gateway spawned", res, err)
	}
	select {
	case <-listening:
	default:
		t.Fatal("the gateway was let start before its harness listened")
	}
	if readyAt.Load() == 0 || done.Before(time.Unix(0, readyAt.Load())) {
		t.Fatal("the gateway was let start before its harness answered ready")
	}
	if notReady.Load() == 0 {
		t.Error("the gateway never asked the harness while it was not ready")
	}

	recs, logs := outputOf(t, out.String())
	var peer *runtimerecord.Record
	for i, r := range recs {
		if r.Event == runtimerecord.EventStartupPhase && r.Phase == runtimerecord.PhasePeerStatus {
			peer = &recs[i]
		}
	}
	if peer == nil || peer.Outcome != runtimerecord.OutcomeOK || peer.DurationMS < 700 {
		t.Fatalf("peer_status record %+v, want ok after the harness's 0.8 s of not being ready", peer)
	}
	waited := done.Sub(start)
	if len(logs) < 2 || len(logs) > int(waited/every)+1 {
		t.Errorf("%d waiting lines in %v, want one at once and then one per %v", len(logs), waited, every)
	}
	for i, l := range logs {
		if l.Msg != WaitingForHarness || l.Container != "gateway" || l.Level != "info" {
			t.Errorf("log line %+v, want %q from the gateway", l, WaitingForHarness)
		}
		if i > 0 && l.Time.Sub(logs[i-1].Time) < every {
			t.Errorf("waiting lines %v apart, want at most one per %v", l.Time.Sub(logs[i-1].Time), every)
		}
	}
	for _, secret := range []string{addr, "127.0.0.1", "ws://", "/readyz", "openclaw.json", "OCC_APP_SERVER_TOKEN"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the output names %q", secret)
		}
	}
}

// rule PR10: the wait has no deadline of its own; only the wrapper's stop
// (SIGTERM) ends a wait for a harness that never reports.
func TestPR10_HarnessWaitEndsOnlyWhenStopped(t *testing.T) {
	shortPeerWait(t, time.Hour)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out syncBuffer
	_, _, err = Run(ctx, Options{Container: "gateway", Harness: HarnessOpenClaw, WaitPeer: PeerHarness,
		Command: []string{"sh"}, Getenv: gatewayConfig(t, ln.Addr().String()), Records: &out})
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("Run = %v, want ErrStopped", err)
	}
	recs, logs := outputOf(t, out.String())
	if len(logs) != 1 {
		t.Errorf("%d waiting lines, want one", len(logs))
	}
	for _, r := range recs {
		if r.Phase == runtimerecord.PhasePeerStatus || r.Phase == runtimerecord.PhaseProcessSpawn {
			t.Errorf("a stopped wait wrote %+v", r)
		}
	}
}

// rule PR10: a container that waits for no peer (an embedded gateway, a
// Codex harness) skips the peer status phase.
func TestPR10_PeerStatusSkippedWithoutWaitPeer(t *testing.T) {
	for _, o := range []Options{
		{Harness: HarnessCodex, Getenv: func(string) string { return "/x" }},
		{Harness: HarnessOpenClaw, Getenv: func(string) string { return "" }},
	} {
		s := &run{o: o}
		if out, _, err := s.peerStatus(context.Background()); out != runtimerecord.OutcomeSkipped || err != nil {
			t.Errorf("%s: %s %v, want skipped", o.Harness, out, err)
		}
	}
}

// Only an OpenClaw gateway waits, only for its harness, and only for the
// app server its configuration names.
func TestPR10_WaitPeerRefusals(t *testing.T) {
	noPlugin := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(noPlugin, []byte(`{gateway: {port: 18789}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"another peer":     {Options{Harness: HarnessOpenClaw, WaitPeer: "node"}, "only an OpenClaw gateway"},
		"a codex harness":  {Options{Harness: HarnessCodex, WaitPeer: PeerHarness}, "only an OpenClaw gateway"},
		"no configuration": {Options{Harness: HarnessOpenClaw, WaitPeer: PeerHarness}, "OPENCLAW_CONFIG_PATH"},
		"no Codex plugin":  {Options{Harness: HarnessOpenClaw, WaitPeer: PeerHarness, Getenv: func(string) string { return noPlugin }}, "names no harness app server"},
		"not a websocket":  {Options{Harness: HarnessOpenClaw, WaitPeer: PeerHarness, Getenv: httpConfig(t)}, `scheme "http"`},
		"unreadable":       {Options{Harness: HarnessOpenClaw, WaitPeer: PeerHarness, Getenv: func(string) string { return "/nonexistent/openclaw.json" }}, "cannot be read"},
		"unparseable":      {Options{Harness: HarnessOpenClaw, WaitPeer: PeerHarness, Getenv: badConfig(t)}, "cannot be parsed"},
		"a misspelt peer":  {Options{Harness: HarnessOpenClaw, WaitPeer: "harnesses"}, "only an OpenClaw gateway"},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.o
			o.Container, o.Command, o.Records = "gateway", []string{"sh"}, &syncBuffer{}
			if o.Getenv == nil {
				o.Getenv = func(string) string { return "" }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, _, err := Run(ctx, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %+v, %v; want an error naming %q", res, err, tc.want)
			}
		})
	}
}

func httpConfig(t *testing.T) func(string) string {
	p := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(p, []byte(`{plugins: {entries: {codex: {config: {appServer: {url: "http://127.0.0.1:1"}}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(string) string { return p }
}

func badConfig(t *testing.T) func(string) string {
	p := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(p, []byte(`{plugins: `), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(string) string { return p }
}
