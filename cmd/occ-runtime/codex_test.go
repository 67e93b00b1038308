package main

import (
	"fmt"
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

// codexSlots bounds how many real codex probes run at once (2-core machines).
var codexSlots = make(chan struct{}, 3)

type codexSetup struct {
	env  []string
	args []string
	dir  string
	port int
}

// codexFor configures a dedicated Codex harness container, as render does,
// against the fake provider: the real codex from make testenv-runtimes,
// api_key login through stdin, the admitted probe with its endpoint.
func codexFor(t *testing.T, srv *fakemodel.Server, probe admission.Probe) codexSetup {
	t.Helper()
	bin := needRuntime(t, "npm/codex/node_modules/.bin/codex")
	codexSlots <- struct{}{}
	t.Cleanup(func() { <-codexSlots })
	dir := t.TempDir()
	if probe.Transport == "" {
		probe.Transport = "responses-https"
	}
	if probe.MaxAttempts == 0 {
		probe.MaxAttempts, probe.AttemptSeconds, probe.BudgetSeconds = 2, 30, 61
	}
	probe.Model, probe.OutputTokens = "codex/gpt-5-codex", 256
	probe.BaseURL = srv.URL + "/v1"
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The host-owned configuration as render writes it, plus what keeps the
	// app server from reaching beyond loopback in tests (plugin and model
	// catalogs).
	cfg := writeFile(t, dir, "etc/codex/config.toml", "# Host-owned by OCC\n[otel]\nexporter = \"none\"\nlog_user_prompt = false\n"+
		"[features]\nplugins = false\napps = false\nremote_plugin = false\napi_key_model_discovery = false\n")
	port := freePort(t)
	env := []string{
		"PATH=" + filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir, "TMPDIR=" + filepath.Join(dir, "tmp"),
		"CODEX_HOME=" + filepath.Join(dir, "codex-home"), "OCC_CODEX_CONFIG=" + cfg,
		"CODEX_LOGIN_MODE=api_key_stdin", "OPENAI_API_KEY=" + sentinel,
		"LOG_FORMAT=json", "RUST_LOG=info,codex_otel=off",
	}
	args := []string{"--container=harness", "--harness=codex", "--probe=" + writeProbe(t, probe), fmt.Sprintf("--health-port=%d", port),
		"--", "codex", "app-server", "--listen", fmt.Sprintf("ws://127.0.0.1:%d", port)}
	return codexSetup{env: env, args: args, dir: dir, port: port}
}

func withEnv(env []string, kv ...string) []string {
	out := slices.Clone(env)
	for _, e := range kv {
		k, _, _ := strings.Cut(e, "=")
		out = slices.DeleteFunc(out, func(x string) bool { return strings.HasPrefix(x, k+"=") })
		if !strings.HasSuffix(e, "=") {
			out = append(out, e)
		}
	}
	return out
}

// retryGap is the delay between two attempts as their records tell it:
// the second began (its elapsed end minus its duration) after the first ended.
func retryGap(a, b runtimerecord.Record) time.Duration {
	return time.Duration(b.ElapsedMS-b.DurationMS-a.ElapsedMS) * time.Millisecond
}

// rules PR2, PR3, PR9, AU1: a successful probe through the real codex
// (Responses over HTTPS, over WebSocket, and over TLS trusted through
// SSL_CERT_FILE) spawns the real app server, which turns ready.
func TestPR2_CodexReadySpawnsAppServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		transport string
		tls       bool
		api       string
	}{
		{"responses-https", "responses-https", false, "responses"},
		{"responses-websocket", "responses-websocket", false, "responses-ws"},
		{"tls trusted", "responses-https", true, "responses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var srv *fakemodel.Server
			if tc.tls {
				var err error
				if srv, err = fakemodel.NewTLS(fakemodel.Step{Kind: fakemodel.OK}); err != nil {
					t.Fatal(err)
				}
			} else {
				srv = fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
			}
			defer srv.Close()
			s := codexFor(t, srv, admission.Probe{Transport: tc.transport})
			env := s.env
			if tc.tls {
				env = append(env, "SSL_CERT_FILE="+writeFile(t, s.dir, "ca.pem", string(srv.CAPEM)))
			}
			p := startWrapper(t, env, s.args...)
			p.waitFor(60*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
			got := sequence(p.records())
			want := []string{"login:ok", "codex.model_probe#1=READY(final)", "model_probe:ok", "peer_status:skipped",
				"workspace_setup:ok", "process_spawn:ok"}
			if !slices.Equal(got, want) {
				t.Errorf("records %v\nwant %v", got, want)
			}
			reqs := srv.ProbeRequests()
			if len(reqs) == 0 || reqs[0].API != tc.api {
				t.Errorf("model calls %+v, want the first over %s", reqs, tc.api)
			}
			for _, r := range reqs {
				if r.Credential != sentinel {
					t.Errorf("the probe did not use the logged-in key (got %q)", r.Credential)
				}
			}
			if b, err := os.ReadFile(filepath.Join(s.dir, "codex-home", "config.toml")); err != nil || !strings.Contains(string(b), `exporter = "none"`) {
				t.Errorf("the host-owned Codex configuration is not in CODEX_HOME: %v", err)
			}
			url := fmt.Sprintf("http://127.0.0.1:%d/readyz", s.port)
			deadline := time.Now().Add(30 * time.Second)
			for {
				resp, err := http.Get(url)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						break
					}
				}
				if time.Now().After(deadline) || !p.alive() {
					t.Fatalf("the app server did not turn ready (alive=%v)", p.alive())
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("app server ready %v after the wrapper started", time.Since(p.started).Round(time.Millisecond))
			if n := len(srv.ProbeRequests()); n != len(reqs) {
				t.Errorf("readiness polling made model calls (%d, then %d): PR5", len(reqs), n)
			}
			p.term()
		})
	}
}

// rules PR4, PR6, PR7: each provider answer through the real codex gives
// the final code PR6 lists, one codex.model_probe record per attempt, the
// retry only on transient classes after 1 to 1.5 s, and every attempt
// inside the budget; the held process stays up until SIGTERM.
func TestPR4_CodexHeldCodes(t *testing.T) {
	t.Parallel()
	status := func(code int, shape string) fakemodel.Step {
		return fakemodel.Step{Kind: fakemodel.Status, Status: code, Shape: shape}
	}
	type tc struct {
		name      string
		steps     []fakemodel.Step
		transport string
		tls       bool
		probe     admission.Probe // attempts and budget; default 2 × 30 s in 61 s
		code      runtimerecord.Code
		attempts  int
		class     string
		detail    string
		long      bool
	}
	cases := []tc{
		{name: "401", steps: []fakemodel.Step{status(401, fakemodel.ShapeErrorCode)}, code: runtimerecord.CodeAuthenticationFailed, attempts: 1, class: "auth"},
		{name: "403 over websocket", transport: "responses-websocket", steps: []fakemodel.Step{status(403, fakemodel.ShapeNonJSON)}, code: runtimerecord.CodeAuthenticationFailed, attempts: 1, class: "auth"},
		{name: "429", steps: []fakemodel.Step{status(429, fakemodel.ShapeErrorCode)}, code: runtimerecord.CodeModelProbeFailed, attempts: 1, class: "rate_limit", detail: "http_429"},
		{name: "5xx then success", steps: []fakemodel.Step{status(503, fakemodel.ShapeErrorNoCode), {Kind: fakemodel.OK}}, code: runtimerecord.CodeReady, attempts: 2},
		{name: "5xx twice", steps: []fakemodel.Step{status(500, fakemodel.ShapeErrorCode), status(502, fakemodel.ShapeEmpty)}, code: runtimerecord.CodeUnavailable, attempts: 2, class: "server_error"},
		{name: "dropped connection", steps: []fakemodel.Step{{Kind: fakemodel.Drop}}, code: runtimerecord.CodeModelProbeFailed, attempts: 2, class: "network", detail: "stream_incomplete"},
		{name: "hang", steps: []fakemodel.Step{{Kind: fakemodel.Hang}}, probe: admission.Probe{MaxAttempts: 2, AttemptSeconds: 5, BudgetSeconds: 11},
			code: runtimerecord.CodeModelProbeTimeout, attempts: 2, class: "timeout"},
		{name: "hang, real budget", steps: []fakemodel.Step{{Kind: fakemodel.Hang}}, code: runtimerecord.CodeModelProbeTimeout, attempts: 2, class: "timeout", long: true},
		// Over HTTPS Codex prints a TLS failure only as a failed connection,
		// which retries; over WebSocket its fallback message names the
		// certificate, which does not.
		{name: "tls untrusted https", tls: true, steps: []fakemodel.Step{{Kind: fakemodel.OK}}, code: runtimerecord.CodeModelProbeFailed, attempts: 2, class: "network", detail: "connection_failed"},
		{name: "tls untrusted websocket", tls: true, transport: "responses-websocket", steps: []fakemodel.Step{{Kind: fakemodel.OK}}, code: runtimerecord.CodeModelProbeFailed, attempts: 1, class: "tls", detail: "tls_handshake"},
		{name: "tool call", steps: []fakemodel.Step{{Kind: fakemodel.Tool}}, code: runtimerecord.CodeModelProbeFailed, attempts: 1, class: "protocol", detail: "tool_call"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.long && testing.Short() {
				t.Skip("runs the whole 61 s budget")
			}
			var srv *fakemodel.Server
			if c.tls {
				var err error
				if srv, err = fakemodel.NewTLS(c.steps...); err != nil {
					t.Fatal(err)
				}
			} else {
				srv = fakemodel.New(c.steps...)
			}
			defer srv.Close()
			probe := c.probe
			probe.Transport = c.transport
			s := codexFor(t, srv, probe)
			budget := 61 * time.Second
			if probe.BudgetSeconds > 0 {
				budget = time.Duration(probe.BudgetSeconds) * time.Second
			}
			p := startWrapper(t, s.env, s.args...)
			var recs []runtimerecord.Record
			if c.code == runtimerecord.CodeReady {
				p.waitFor(budget+30*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
				recs = p.records()
			} else {
				recs = p.held(budget+30*time.Second, runtimerecord.PhaseModelProbe, c.code)
			}
			pr := probeRecords(recs, runtimerecord.EventCodexProbe)
			if strings.Contains(p.stdout.String(), string(runtimerecord.EventCodexProbe)) || strings.Contains(p.stdout.String(), string(runtimerecord.EventStartupPhase)) {
				t.Errorf("records on the Codex harness's stdout, which is protocol (LG3): %q", p.stdout.String())
			}
			if len(pr) != c.attempts {
				t.Fatalf("probe records %v, want %d attempts", sequence(pr), c.attempts)
			}
			for i, r := range pr {
				if r.Attempt != i+1 || r.Final != (i == len(pr)-1) || r.ExitCode == nil {
					t.Errorf("attempt record %d: %+v", i+1, r)
				}
			}
			last := pr[len(pr)-1]
			if last.Code != c.code || last.FailureClass != c.class || (c.detail != "" && last.CauseDetail != c.detail) {
				t.Errorf("final record %+v, want %s %s/%s", last, c.code, c.class, c.detail)
			}
			if len(pr) == 2 {
				if gap := retryGap(pr[0], pr[1]); gap < 990*time.Millisecond || gap > 1600*time.Millisecond {
					t.Errorf("the retry began %v after the first attempt ended; want 1 to 1.5 s", gap)
				}
				if pr[0].Final || pr[0].Code == "" {
					t.Errorf("first attempt record %+v", pr[0])
				}
			}
			if e := time.Duration(last.ElapsedMS) * time.Millisecond; e > budget+time.Second {
				t.Errorf("the probe ended %v after it began, past its %v budget", e, budget)
			}
			if c.class == "timeout" {
				if d := time.Duration(pr[0].DurationMS) * time.Millisecond; d > time.Duration(max(probe.AttemptSeconds, 30))*time.Second+time.Second {
					t.Errorf("attempt 1 ran %v, past its cap", d)
				}
			}
			if strings.Contains(p.stdout.String()+p.stderr.String(), srv.Secret) {
				t.Error("provider output leaked into the wrapper's output")
			}
			if c.code == runtimerecord.CodeReady {
				p.term()
			}
		})
	}
}

// rules AU2, PR7: login failures hold the harness before any model call:
// a malformed access token (codex_pat, `codex login --with-access-token`)
// and a missing key.
func TestAU2_CodexLoginFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   []string
		class string
	}{
		{"codex_pat malformed token", []string{"CODEX_LOGIN_MODE=codex_pat", "CODEX_ACCESS_TOKEN=" + sentinel, "OPENAI_API_KEY="}, "auth"},
		{"api key missing", []string{"OPENAI_API_KEY="}, "config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakemodel.New()
			defer srv.Close()
			s := codexFor(t, srv, admission.Probe{})
			p := startWrapper(t, withEnv(s.env, tc.env...), s.args...)
			recs := p.held(30*time.Second, runtimerecord.PhaseLogin, runtimerecord.CodeLoginFailed)
			if got := sequence(recs); !slices.Equal(got, []string{"login:failed=LOGIN_FAILED"}) {
				t.Errorf("records %v", got)
			}
			if recs[0].FailureClass != tc.class {
				t.Errorf("failureClass %q, want %q", recs[0].FailureClass, tc.class)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("%d model calls after a failed login", n)
			}
		})
	}
}

// rule PR5: SIGTERM during a Codex probe ends the wrapper at once and
// takes the codex process with it.
func TestPR5_CodexTermDuringProbe(t *testing.T) {
	t.Parallel()
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.Hang})
	defer srv.Close()
	s := codexFor(t, srv, admission.Probe{})
	p := startWrapper(t, s.env, s.args...)
	deadline := time.Now().Add(30 * time.Second)
	for srv.Active() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if srv.Active() == 0 {
		t.Fatal("codex never called the model")
	}
	p.term()
	deadline = time.Now().Add(3 * time.Second)
	for srv.Active() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if srv.Active() > 0 {
		t.Error("the codex probe outlived the wrapper")
	}
	if n := len(probeRecords(p.records(), runtimerecord.EventCodexProbe)); n != 0 {
		t.Errorf("%d probe records after SIGTERM; a stopped probe publishes nothing", n)
	}
}
