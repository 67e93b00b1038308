package startup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// probePrompt asks for a one-word answer; the reply is read, never kept.
const probePrompt = "Startup check: reply with the single word OK."

// HTTPProbe is embedded OpenClaw's native model probe (PR1, PR3): one
// streamed call to the primary model over HTTP, with no tools (so no tool
// can run and no fallback model is tried), at most OutputTokens output
// tokens. Retries follow Policy through go-retryablehttp, whose CheckRetry
// and Backoff encode PR4 instead of its defaults.
type HTTPProbe struct {
	Endpoint     Endpoint
	Policy       Policy
	OutputTokens int
	// Transport is the base transport; nil is a clone of
	// http.DefaultTransport (system trust, SSL_CERT_FILE/SSL_CERT_DIR
	// honoured, proxies from the environment).
	Transport http.RoundTripper
	Now       func() time.Time
	// Start is when the probe's budget began (default: when Run is called).
	Start time.Time
}

// HTTPResult is the probe's result.
type HTTPResult struct {
	Outcome  Outcome
	Attempts int
}

type probeState struct {
	p        *HTTPProbe
	start    time.Time
	attempts int
	handled  bool
	last     Outcome
	wait     time.Duration
}

// Run runs the probe within ctx.
func (p *HTTPProbe) Run(ctx context.Context) HTTPResult {
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Start.IsZero() {
		p.Start = p.Now()
	}
	st := &probeState{p: p, start: p.Start, last: failure(ClassTimeout, "", "")}
	ctx, cancel := context.WithDeadline(ctx, p.Start.Add(p.Policy.Budget))
	defer cancel()

	base := p.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: &attemptTransport{base: base, st: st}, CheckRedirect: keepKeyOnHost}
	rc.Logger = nil // the default logger would print URLs and errors
	rc.RetryMax = p.Policy.MaxAttempts - 1
	rc.CheckRetry = st.checkRetry
	rc.Backoff = func(_, _ time.Duration, _ int, _ *http.Response) time.Duration { return st.wait }
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, _ int) {
		st.attempts++
		st.handled = false
	}

	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, p.Endpoint.url(), p.body())
	if err != nil {
		return HTTPResult{Outcome: failure(ClassConfig, "config", "unsupported")}
	}
	setHeaders(req.Header, p.Endpoint)
	req.SetResponseHandler(st.readStream)
	resp, err := rc.Do(req)
	if err == nil && resp != nil {
		resp.Body.Close()
	}
	out := st.last
	if p.Policy.MaxAttempts > 1 {
		out = out.exhausted()
	}
	return HTTPResult{Outcome: out, Attempts: st.attempts}
}

// attemptTransport caps each attempt at the policy's attempt time or what
// is left of the budget; the cap covers reading the stream, because the
// body is read before the attempt's context is released.
type attemptTransport struct {
	base http.RoundTripper
	st   *probeState
}

func (t *attemptTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), t.st.p.Policy.AttemptTimeout(t.st.p.Now().Sub(t.st.start)))
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

// checkRetry classifies each attempt and decides on a retry (PR4).
func (st *probeState) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	var o Outcome
	switch {
	case err != nil:
		var pe *probeError
		if errors.As(err, &pe) {
			o = pe.out
		} else {
			o = transportOutcome(err)
		}
	case resp.StatusCode != http.StatusOK:
		o = statusOutcome(resp.StatusCode)
	case st.handled:
		st.last = Ready
		return false, nil
	default:
		return false, nil // the response handler reads the stream next
	}
	if ctx.Err() != nil {
		o = failure(ClassTimeout, "", "")
	}
	st.last = o
	d, ok := st.p.Policy.Next(o.Class, st.attempts, st.p.Now().Sub(st.start))
	st.wait = d
	return ok, nil
}

// probeError carries an attempt's classified outcome from the response
// handler to checkRetry.
type probeError struct{ out Outcome }

func (e *probeError) Error() string { return "model probe: " + string(e.out.Class) }

// transportOutcome classifies a transport error by its type, never by
// printing it.
func transportOutcome(err error) Outcome {
	var (
		dnsErr   *net.DNSError
		x509Err  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		certErr  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
		alertErr tls.AlertError
		certVErr *tls.CertificateVerificationError
		netErr   net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return failure(ClassTimeout, "", "")
	case errors.As(err, &netErr) && netErr.Timeout():
		return failure(ClassTimeout, "", "")
	case errors.As(err, &dnsErr):
		return failure(ClassDNS, "transport", "dns")
	case errors.As(err, &x509Err), errors.As(err, &hostErr), errors.As(err, &certErr), errors.As(err, &recErr),
		errors.As(err, &alertErr), errors.As(err, &certVErr), strings.Contains(err.Error(), "tls: "):
		return failure(ClassTLS, "transport", "tls_handshake")
	case errors.Is(err, syscall.ECONNREFUSED):
		return failure(ClassNetwork, "transport", "connection_refused")
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return failure(ClassNetwork, "transport", "connection_reset")
	}
	return failure(ClassNetwork, "transport", "connection_failed")
}

// credentialHeaders carry the model key (setHeaders).
var credentialHeaders = []string{"x-api-key", "Authorization"}

// keepKeyOnHost follows a redirect (at most 10, as net/http does) but
// sends the key only to the host the endpoint names: net/http drops
// Authorization on a redirect to another domain, but not Anthropic's
// x-api-key, and it keeps both for another port of the same name.
func keepKeyOnHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		for _, h := range credentialHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}

func setHeaders(h http.Header, e Endpoint) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if e.API == APIMessages {
		h.Set("x-api-key", e.Key)
		h.Set("anthropic-version", "2023-06-01")
	} else {
		h.Set("Authorization", "Bearer "+e.Key)
	}
}

// body is the probe request: the primary model, a fixed prompt, the
// output cap, streaming, and no tools.
func (p *HTTPProbe) body() []byte {
	n := p.OutputTokens
	if n <= 0 {
		n = 256
	}
	var v map[string]any
	user := []any{map[string]any{"role": "user", "content": probePrompt}}
	switch p.Endpoint.API {
	case APIMessages:
		v = map[string]any{"model": p.Endpoint.Model, "max_tokens": n, "stream": true, "messages": user}
	case APICompletions:
		v = map[string]any{"model": p.Endpoint.Model, "max_tokens": n, "stream": true, "messages": user}
	default:
		v = map[string]any{"model": p.Endpoint.Model, "max_output_tokens": n, "stream": true, "store": false, "input": probePrompt}
	}
	b, _ := json.Marshal(v)
	return b
}

// readStream reads one streamed answer and says whether it is a model
// answer: text, a terminal event, and no tool call (a tool event never
// counts as success).
func (st *probeState) readStream(resp *http.Response) error {
	st.handled = true
	if resp.StatusCode != http.StatusOK {
		return &probeError{statusOutcome(resp.StatusCode)}
	}
	s := &streamState{api: st.p.Endpoint.API}
	err := readSSE(resp.Body, s.event)
	switch {
	case s.fail != nil:
		return &probeError{*s.fail}
	case s.tool:
		return &probeError{failure(ClassProtocol, "tool_event", "tool_call")}
	case s.done && (s.text || s.truncated):
		return nil
	case s.done:
		return &probeError{failure(ClassProtocol, "empty_output", "no_text")}
	case errors.Is(err, errStreamTooLarge):
		return &probeError{failure(ClassProtocol, "protocol", "stream_error")}
	case err != nil:
		o := transportOutcome(err)
		if o.Class == ClassNetwork {
			o.CauseDetail = "stream_incomplete"
		}
		return &probeError{o}
	}
	return &probeError{failure(ClassNetwork, "transport", "stream_incomplete")} // the stream ended early: a dropped connection
}

// The probe reads at most maxSSEStream bytes of a streamed answer, and
// at most maxSSEEvent of one event's data (a line is bounded alike): an
// answer of a few hundred tokens is a few kilobytes, and an endpoint that
// streams without end must not hold the probe's memory.
const (
	maxSSEEvent  = 4 << 20
	maxSSEStream = 32 << 20
)

// errStreamTooLarge is a stream past maxSSEStream, an event past
// maxSSEEvent or a line past it.
var errStreamTooLarge = errors.New("the model's stream is larger than the startup probe reads")

// capReader fails past n bytes.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errStreamTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// readSSE calls fn for each server-sent event; it stops when fn returns
// false. It returns the read error, if any (nil at a clean end;
// errStreamTooLarge past the bounds above).
func readSSE(r io.Reader, fn func(event string, data []byte) bool) error {
	sc := bufio.NewScanner(&capReader{r: r, n: maxSSEStream})
	sc.Buffer(make([]byte, 64*1024), maxSSEEvent)
	var event string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 || event != "" {
				if !fn(event, bytes.TrimSuffix(data.Bytes(), []byte("\n"))) {
					return nil
				}
			}
			event = ""
			data.Reset()
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[6:]))
		case bytes.HasPrefix(line, []byte("data:")):
			data.Write(bytes.TrimPrefix(line[5:], []byte(" ")))
			data.WriteByte('\n')
			if data.Len() > maxSSEEvent {
				return errStreamTooLarge
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return errStreamTooLarge
		}
		return err
	}
	if data.Len() > 0 {
		fn(event, bytes.TrimSuffix(data.Bytes(), []byte("\n")))
	}
	return nil
}

// streamState interprets the events of one API.
type streamState struct {
	api       string
	text      bool
	tool      bool
	done      bool
	truncated bool // stopped at the output cap: the model answered
	fail      *Outcome
}

var toolItems = map[string]bool{"function_call": true, "custom_tool_call": true, "web_search_call": true, "file_search_call": true,
	"computer_call": true, "code_interpreter_call": true, "mcp_call": true, "mcp_list_tools": true, "local_shell_call": true, "image_generation_call": true}

func (s *streamState) event(name string, data []byte) bool {
	if string(data) == "[DONE]" {
		s.done = true
		return false
	}
	var ev struct {
		Type  string          `json:"type"`
		Delta json.RawMessage `json:"delta"`
		Item  struct {
			Type string `json:"type"`
		} `json:"item"`
		ContentBlock struct {
			Type string `json:"type"`
		} `json:"content_block"`
		Response struct {
			Status            string          `json:"status"`
			Error             json.RawMessage `json:"error"`
			IncompleteDetails struct {
				Reason string `json:"reason"`
			} `json:"incomplete_details"`
		} `json:"response"`
		Error   json.RawMessage `json:"error"`
		Choices []struct {
			Delta struct {
				Content      string          `json:"content"`
				ToolCalls    json.RawMessage `json:"tool_calls"`
				FunctionCall json.RawMessage `json:"function_call"`
			} `json:"delta"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return true // not an event of the API: ignored
	}
	if ev.Type == "" {
		ev.Type = name
	}
	if len(ev.Error) > 0 && string(ev.Error) != "null" && ev.Type != "response.failed" {
		o := streamErrorOutcome(ev.Error)
		s.fail = &o
		return false
	}
	if ev.Type == "error" { // Responses: code and type at the top level
		o := streamErrorOutcome(data)
		s.fail = &o
		return false
	}
	switch s.api {
	case APICompletions:
		for _, c := range ev.Choices {
			if c.Delta.Content != "" {
				s.text = true
			}
			if len(c.Delta.ToolCalls) > 0 && string(c.Delta.ToolCalls) != "null" || len(c.Delta.FunctionCall) > 0 && string(c.Delta.FunctionCall) != "null" {
				s.tool = true
			}
			switch c.FinishReason {
			case "tool_calls", "function_call":
				s.tool = true
			case "length":
				s.truncated = true
			}
		}
	case APIMessages:
		switch ev.Type {
		case "content_block_start":
			if t := ev.ContentBlock.Type; t != "text" && t != "thinking" && t != "redacted_thinking" {
				s.tool = true
			}
		case "content_block_delta":
			var d struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			_ = json.Unmarshal(ev.Delta, &d)
			switch d.Type {
			case "text_delta":
				if d.Text != "" {
					s.text = true
				}
			case "input_json_delta":
				s.tool = true
			}
		case "message_delta":
			var d struct {
				StopReason string `json:"stop_reason"`
			}
			_ = json.Unmarshal(ev.Delta, &d)
			switch d.StopReason {
			case "tool_use":
				s.tool = true
			case "max_tokens":
				s.truncated = true
			}
		case "message_stop":
			s.done = true
			return false
		}
	default: // Responses
		switch ev.Type {
		case "response.output_text.delta":
			var d string
			if json.Unmarshal(ev.Delta, &d) == nil && d != "" {
				s.text = true
			}
		case "response.output_item.added", "response.output_item.done":
			if toolItems[ev.Item.Type] {
				s.tool = true
			}
		case "response.completed":
			s.done = true
			return false
		case "response.incomplete":
			s.done = true
			s.truncated = ev.Response.IncompleteDetails.Reason == "max_output_tokens"
			return false
		case "response.failed":
			o := streamErrorOutcome(ev.Response.Error)
			s.fail = &o
			return false
		}
	}
	return true
}

// streamErrorOutcome classifies an error event inside a stream by its
// error code and type (closed sets only; the message is never read).
func streamErrorOutcome(raw json.RawMessage) Outcome {
	var e struct {
		Type string `json:"type"`
		Code any    `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	code, _ := e.Code.(string)
	switch k := code + " " + e.Type; {
	case strings.Contains(k, "invalid_api_key"), strings.Contains(k, "authentication"), strings.Contains(k, "permission"):
		return failure(ClassAuth, "", "")
	case strings.Contains(k, "rate_limit"), strings.Contains(k, "quota"):
		return failure(ClassRateLimit, "provider_error", "http_429")
	case strings.Contains(k, "overloaded"), strings.Contains(k, "server_error"), strings.Contains(k, "api_error"), strings.Contains(k, "unavailable"):
		return failure(ClassServerError, "provider_error", "http_5xx")
	case strings.Contains(k, "model_not_found"), strings.Contains(k, "not_found"):
		return failure(ClassProtocol, "provider_error", "invalid_model")
	}
	return failure(ClassProtocol, "provider_error", "stream_error")
}
