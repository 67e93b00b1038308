package startup

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Codex login modes (CODEX_LOGIN_MODE, AU1, AU2), as admission delivers
// them (admission.CredentialDelivery.LoginMode).
const (
	LoginAPIKey = admission.LoginAPIKeyStdin
	LoginPAT    = admission.LoginCodexPAT
)

// probePath is the PATH of the probe's and login's minimal environment:
// fixed, not inherited (the npm launcher of codex needs node on it).
const probePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// disabledFeatures turn off every Codex tool and side channel for the
// probe: no command execution, no web search, no plugins, apps or agents,
// and no unbounded reconnecting (a failed connection must end the turn).
var disabledFeatures = []string{"shell_tool", "unified_exec", "shell_snapshot", "goals", "multi_agent", "apps", "plugins",
	"hooks", "image_generation", "browser_use", "computer_use", "tool_suggest", "sleep_tool", "unbounded_connection_retries",
	"api_key_model_discovery", "remote_plugin"}

// Codex runs the Codex login and model probe with the real codex binary
// (PR2, PR4, PR6).
type Codex struct {
	Bin string
	// Home is CODEX_HOME, where the login stores its state for the app server.
	Home string
	// TmpDir holds the probe's temporary state.
	TmpDir string
	// Getenv reads the wrapper's environment: the credential and the TLS
	// trust variables, nothing else.
	Getenv    func(string) string
	Model     string // the model id Codex is given
	Transport string // "responses-websocket" or "responses-https"
	BaseURL   string // a compatible endpoint's base URL; "" is OpenAI's default
	LoginMode string
	Policy    Policy
	Now       func() time.Time
}

// env is the minimal environment of login and probe: only the TLS trust
// variables are inherited (PR2); the rest is set here.
func (c *Codex) env(home string) []string {
	env := []string{"PATH=" + probePath, "CODEX_HOME=" + c.Home, "HOME=" + home, "TMPDIR=" + home}
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v := c.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// LoginResult is the login's outcome: ok, or a held code with its class.
type LoginResult struct {
	OK    bool
	Code  runtimerecord.Code
	Class Class
}

var (
	loginAuthRe = regexp.MustCompile(`(?i)\b(401|403)\b|unauthori[sz]ed|forbidden`)
	loginCredRe = regexp.MustCompile(`(?i)jwt|token|api key|credential`)
)

// Login logs Codex in with the credential on stdin: `codex login
// --with-api-key` (OPENAI_API_KEY) or `codex login --with-access-token`
// (CODEX_ACCESS_TOKEN). The credential is never an argument or an
// environment variable of the child, and its output is read only to
// classify a failure.
func (c *Codex) Login(ctx context.Context) LoginResult {
	var flag, secret string
	switch c.LoginMode {
	case LoginAPIKey:
		flag, secret = "--with-api-key", c.Getenv(admission.EnvOpenAIAPIKey)
	case LoginPAT:
		flag, secret = "--with-access-token", c.Getenv(admission.EnvCodexAccessToken)
	default:
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassConfig}
	}
	if strings.TrimSpace(secret) == "" {
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassConfig}
	}
	if err := os.MkdirAll(c.Home, 0o700); err != nil {
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassConfig}
	}
	tmp, err := os.MkdirTemp(c.TmpDir, "occ-login-")
	if err != nil {
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassConfig}
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, c.Policy.Attempt)
	defer cancel()
	cmd := exec.Command(c.Bin, "login", flag)
	cmd.Env = c.env(tmp)
	cmd.Dir = tmp
	cmd.Stdin = strings.NewReader(strings.TrimSpace(secret) + "\n")
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassConfig}
	}
	stop := killOnDone(ctx, cmd)
	err = cmd.Wait()
	stop()
	switch {
	case ctx.Err() != nil:
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassTimeout}
	case err == nil:
		return LoginResult{OK: true}
	}
	msg := urlRe.ReplaceAllString(out.String(), "")
	switch {
	case loginAuthRe.MatchString(msg):
		return LoginResult{Code: runtimerecord.CodeAuthenticationFailed, Class: ClassAuth}
	case loginCredRe.MatchString(msg):
		return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: ClassAuth}
	}
	cl, _, _ := classifyMessage(msg)
	return LoginResult{Code: runtimerecord.CodeLoginFailed, Class: cl}
}

// killOnDone kills the child's process group when ctx ends; the returned
// function stops watching.
func killOnDone(ctx context.Context, cmd *exec.Cmd) func() {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	return func() { close(done) }
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64<<10 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return string(b.buf) }

// Attempt is one probe attempt as PR6 records it.
type Attempt struct {
	Number   int
	Outcome  Outcome
	ExitCode *int
	Signal   string
	Began    time.Time
	Ended    time.Time
}

// args is the `codex exec` command line of the probe: JSON events, no
// session kept, no user configuration or rules, read-only sandbox, no
// approvals, every tool off, and the model provider defined here with
// Codex's own retries off (the wrapper owns retries, PR4).
func (c *Codex) args(workdir string) []string {
	a := []string{"exec", "--json", "--ephemeral", "--ignore-user-config", "--ignore-rules", "--skip-git-repo-check",
		"--sandbox", "read-only", "--cd", workdir, "--model", c.Model,
		"-c", `approval_policy="never"`, "-c", `web_search="disabled"`, "-c", "analytics.enabled=false"}
	for _, f := range disabledFeatures {
		a = append(a, "--disable", f)
	}
	if c.LoginMode != LoginPAT || c.BaseURL != "" {
		base := c.BaseURL
		if base == "" {
			base = DefaultBaseURLs["openai"]
		}
		// The provider the app server runs with (the harness's
		// config.toml, internal/render), plus the probe's own: no retries
		// inside Codex.
		p := "model_providers." + admission.CodexProvider + "."
		a = append(a, "-c", `model_provider="`+admission.CodexProvider+`"`)
		for _, kv := range admission.CodexProviderSettings(base, c.Transport) {
			a = append(a, "-c", p+kv[0]+"="+kv[1])
		}
		a = append(a, "-c", p+"request_max_retries=0", "-c", p+"stream_max_retries=0")
	}
	return append(a, probePrompt)
}

// Probe runs the attempts of PR4, calling record for each (the last one
// final), and returns the final outcome. It returns ctx.Err() when the
// wrapper is told to stop.
func (c *Codex) Probe(ctx context.Context, record func(Attempt, bool)) (Outcome, error) {
	if c.Now == nil {
		c.Now = time.Now
	}
	start := c.Now()
	for n := 1; ; n++ {
		a := c.attempt(ctx, n, c.Policy.AttemptTimeout(c.Now().Sub(start)))
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		var d time.Duration
		retry := false
		if a.Outcome.Code != runtimerecord.CodeReady {
			d, retry = c.Policy.Next(a.Outcome.Class, n, c.Now().Sub(start))
		}
		if !retry {
			if c.Policy.MaxAttempts > 1 {
				a.Outcome = a.Outcome.exhausted()
			}
			record(a, true)
			return a.Outcome, nil
		}
		record(a, false)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Outcome{}, ctx.Err()
		case <-t.C:
		}
	}
}

// codexEvent is the part of a `codex exec --json` event the probe reads.
type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   struct {
		Message string `json:"message"`
	} `json:"error"`
	Item struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	} `json:"item"`
}

// attempt runs `codex exec` once, capped at timeout.
func (c *Codex) attempt(ctx context.Context, n int, timeout time.Duration) (a Attempt) {
	a = Attempt{Number: n, Began: c.Now()}
	defer func() { a.Ended = c.Now() }()
	tmp, err := os.MkdirTemp(c.TmpDir, "occ-probe-")
	if err != nil {
		a.Outcome = failure(ClassConfig, "config", "unsupported")
		return a
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		a.Outcome = failure(ClassConfig, "config", "unsupported")
		return a
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(c.Bin, c.args(work)...)
	cmd.Env = c.env(tmp)
	cmd.Dir = work
	cmd.Stdin = nil // /dev/null: codex exec reads stdin otherwise
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err1 := cmd.StdoutPipe()
	stderr, err2 := cmd.StderrPipe()
	if err1 != nil || err2 != nil || cmd.Start() != nil {
		a.Outcome = failure(ClassConfig, "config", "unsupported")
		return a
	}
	var (
		mu        sync.Mutex
		tool      bool
		completed bool
		text      bool
		failedMsg string
		hints     Class
		killOnce  sync.Once
	)
	kill := func() { killOnce.Do(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // events on stdout
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		for sc.Scan() {
			var ev codexEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			mu.Lock()
			switch ev.Type {
			case "item.started", "item.updated", "item.completed":
				switch ev.Item.Type {
				case "agent_message":
					if strings.TrimSpace(ev.Item.Text) != "" {
						text = true
					}
				case "reasoning":
				case "error":
					if strings.HasPrefix(ev.Item.Message, "Falling back from WebSockets") {
						hints = worst(hints, significant(ev.Item.Message))
					}
				default: // command_execution, file_change, mcp_tool_call, web_search, ...
					tool = true
				}
			case "error":
				hints = worst(hints, significant(ev.Message))
			case "turn.failed":
				failedMsg = ev.Error.Message
			case "turn.completed":
				completed = true
			}
			isTool := tool
			mu.Unlock()
			if isTool {
				kill() // a tool event never counts as success (PR2)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { // diagnostics on stderr: only a refused tool call is looked for
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			if bytesContainsAll(sc.Bytes(), "tools::router", "unsupported call") {
				mu.Lock()
				tool = true
				mu.Unlock()
				kill()
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-actx.Done()
		kill()
	}()
	wg.Wait()
	waitErr := cmd.Wait()
	killOnce.Do(func() {}) // the group is gone: never signal a reused id
	timedOut := actx.Err() != nil && ctx.Err() == nil

	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code := 128 + int(ws.Signal())
			a.ExitCode = &code
			a.Signal = signalName(ws.Signal())
		} else {
			code := ps.ExitCode()
			a.ExitCode = &code
		}
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case tool:
		a.Outcome = failure(ClassProtocol, "tool_event", "tool_call")
	case timedOut:
		a.Outcome = failure(ClassTimeout, "", "")
	case completed && text && waitErr == nil:
		a.Outcome = Ready
	case completed && waitErr == nil:
		a.Outcome = failure(ClassProtocol, "empty_output", "no_text")
	case a.Signal != "" && failedMsg == "":
		a.Outcome = failure(ClassKilled, "process_exit", "signal")
	case failedMsg != "":
		cl, kind, detail := classifyMessage(failedMsg)
		if w := worst(cl, hints); w != cl {
			kind, detail = causeOf(w)
			cl = w
		}
		a.Outcome = failure(cl, kind, detail)
	case hints != ClassNone:
		kind, detail := causeOf(hints)
		a.Outcome = failure(hints, kind, detail)
	default:
		a.Outcome = failure(ClassUnknown, "process_exit", "nonzero_exit")
	}
	return a
}

// significant keeps, of a message Codex printed along the way (a
// reconnect, a WebSocket fallback), only what must stop a retry: a
// credential, a TLS error, a limit or DNS (PR4).
func significant(msg string) Class {
	cl, _, _ := classifyMessage(msg)
	switch cl {
	case ClassAuth, ClassTLS, ClassRateLimit, ClassDNS:
		return cl
	}
	return ClassNone
}

func causeOf(c Class) (string, string) {
	switch c {
	case ClassTLS:
		return "transport", "tls_handshake"
	case ClassRateLimit:
		return "provider_error", "http_429"
	case ClassDNS:
		return "transport", "dns"
	case ClassServerError:
		return "provider_error", "http_5xx"
	case ClassNetwork:
		return "transport", "connection_failed"
	}
	return "", ""
}

func bytesContainsAll(b []byte, subs ...string) bool {
	s := string(b)
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGXCPU:
		return "SIGXCPU"
	}
	return ""
}
