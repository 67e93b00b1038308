// Package turn sends one turn to an agent through its gateway's own client
// surface, the OpenAI-compatible chat completions endpoint OpenClaw serves
// when the configuration enables it
// (gateway.http.endpoints.chatCompletions.enabled): a message in, the
// agent's answer out, streamed, so that the time to the first token is
// measured where a client sees it.
//
// The gateway runs the turn as any client's: its harness calls the model
// the configuration names (embedded: the gateway itself; dedicated Codex:
// the app server). How the HTTP connection reaches the gateway (a
// Kubernetes port-forward, an SSH tunnel, a Pod network) is the caller's
// http.Client. What the gateway sends back is untrusted text: Parse reads
// it with bounds, and nothing of it but the answer's text reaches the
// caller.
package turn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Path is the gateway's chat completions endpoint.
const Path = "/v1/chat/completions"

// Model is the agent target of the request: OpenClaw's configured default
// agent (the gateway treats the OpenAI model field as an agent, not as a
// provider model).
const Model = "openclaw/default"

// Limits on what is read of an answer.
const (
	maxLine   = 1 << 20 // one SSE line
	maxAnswer = 1 << 20 // the answer's text
)

// Request is one turn.
type Request struct {
	// BaseURL is the gateway's address, e.g. http://127.0.0.1:18789.
	BaseURL string
	// Token is the gateway token (Authorization: Bearer); empty sends no
	// header (a gateway with auth mode none).
	Token   string
	Message string
}

// Answer is what the agent said.
type Answer struct {
	Text string
	// FirstToken is the time from sending the request to the first text
	// of the answer; Total to its end.
	FirstToken, Total time.Duration
}

// FirstLine is the answer's first non-empty line.
func (a Answer) FirstLine() string {
	for _, l := range strings.Split(a.Text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// Error is a turn that did not answer: the gateway refused it (Status set)
// or the run failed (Status 0, the stream's error).
type Error struct {
	Status int
	// Type and Message are the error object's, bounded; the gateway's own
	// words, which hold no credential (OpenClaw redacts its errors).
	Type, Message string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Status != 0 {
		fmt.Fprintf(&b, "the gateway answered %d %s", e.Status, http.StatusText(e.Status))
	} else {
		b.WriteString("the agent's run failed")
	}
	if e.Type != "" {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// Unauthorized reports whether the gateway refused the token.
func (e *Error) Unauthorized() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// NotEnabled reports whether the gateway does not serve the endpoint (its
// configuration leaves chat completions off).
func (e *Error) NotEnabled() bool {
	return e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed
}

// Send sends the turn and reads the streamed answer; ctx bounds the whole
// turn.
func Send(ctx context.Context, c *http.Client, r Request) (Answer, error) {
	body, _ := json.Marshal(map[string]any{
		"model":    Model,
		"stream":   true,
		"messages": []any{map[string]any{"role": "user", "content": r.Message}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.BaseURL, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := errorOf(raw)
		e.Status = resp.StatusCode
		return Answer{}, e
	}
	a, err := Parse(resp.Body, start)
	if err != nil {
		return Answer{}, err
	}
	a.Total = time.Since(start)
	return a, nil
}

// Parse reads a chat completions answer, streamed (SSE data lines) or
// whole (one JSON object); FirstToken is measured from start, when the
// first text arrives.
func Parse(body io.Reader, start time.Time) (Answer, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	peek, _ := br.Peek(1)
	if len(peek) == 1 && peek[0] == '{' {
		raw, err := io.ReadAll(io.LimitReader(br, maxAnswer+1))
		if err != nil {
			return Answer{}, err
		}
		return parseWhole(raw, start)
	}
	var a Answer
	var text strings.Builder
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	done := false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // event names, comments, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content json.RawMessage `json:"content"`
				} `json:"delta"`
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			} `json:"choices"`
			Error *errorObject `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return Answer{}, fmt.Errorf("the gateway's stream holds a line that is not JSON (%d bytes)", len(data))
		}
		if chunk.Error != nil {
			return Answer{}, chunk.Error.err()
		}
		for _, c := range chunk.Choices {
			for _, raw := range []json.RawMessage{c.Delta.Content, c.Message.Content} {
				s := contentText(raw)
				if s == "" {
					continue
				}
				if text.Len() == 0 {
					a.FirstToken = time.Since(start)
				}
				if text.Len()+len(s) > maxAnswer {
					return Answer{}, fmt.Errorf("the answer is longer than %d bytes", maxAnswer)
				}
				text.WriteString(s)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Answer{}, fmt.Errorf("reading the gateway's stream: %w", err)
	}
	if !done {
		return Answer{}, errors.New("the gateway's stream ended before [DONE]")
	}
	a.Text = text.String()
	if strings.TrimSpace(a.Text) == "" {
		return Answer{}, errors.New("the agent answered with no text")
	}
	return a, nil
}

func parseWhole(raw []byte, start time.Time) (Answer, error) {
	if len(raw) > maxAnswer {
		return Answer{}, fmt.Errorf("the answer is longer than %d bytes", maxAnswer)
	}
	var whole struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Error *errorObject `json:"error"`
	}
	if err := json.Unmarshal(raw, &whole); err != nil {
		return Answer{}, fmt.Errorf("the gateway's answer is not JSON (%d bytes)", len(raw))
	}
	if whole.Error != nil {
		return Answer{}, whole.Error.err()
	}
	var text strings.Builder
	for _, c := range whole.Choices {
		text.WriteString(contentText(c.Message.Content))
	}
	if strings.TrimSpace(text.String()) == "" {
		return Answer{}, errors.New("the agent answered with no text")
	}
	d := time.Since(start)
	return Answer{Text: text.String(), FirstToken: d}, nil
}

// contentText is a message content's text: a string, or the text parts of
// an array of parts.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

type errorObject struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

func (o *errorObject) err() *Error {
	return &Error{Type: bound(o.Type, 64), Message: bound(o.Message, 300)}
}

// errorOf reads an error answer's body: OpenAI's {"error": {...}} shape,
// else nothing of it (a body of another shape is not quoted).
func errorOf(raw []byte) *Error {
	var body struct {
		Error *errorObject `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		return body.Error.err()
	}
	return &Error{}
}

// bound keeps at most n bytes of a single line of s, at a rune boundary.
func bound(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
