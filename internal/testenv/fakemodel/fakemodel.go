// Package fakemodel is a model provider on loopback for the startup
// wrapper's tests: OpenAI Responses (HTTP streaming and WebSocket), OpenAI
// chat completions and Anthropic Messages, each answering from a script of
// steps (success, an HTTP status with a chosen body shape, a hang, a
// dropped connection, a tool call). It records every request it saw, so a
// test can assert the number of model calls and the delay between them.
package fakemodel

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

// Kind of a step.
type Kind string

const (
	OK     Kind = "ok"     // a streamed answer "ok"
	Status Kind = "status" // an HTTP status with a body of Shape
	Hang   Kind = "hang"   // accept the request, never answer
	Drop   Kind = "drop"   // start the stream, then close the connection
	Reset  Kind = "reset"  // close the connection before any response
	Tool   Kind = "tool"   // a streamed tool call instead of text
	Empty  Kind = "empty"  // a complete stream without text
)

// Body shapes of a status answer (runtimerecord.BodyShapes).
const (
	ShapeErrorCode   = "json-error-code"
	ShapeErrorNoCode = "json-error-no-code"
	ShapeNoError     = "json-no-error"
	ShapeNonJSON     = "non-json"
	ShapeEmpty       = "empty"
)

// Step is one answer.
type Step struct {
	Kind   Kind
	Status int
	Shape  string
	// Code and Type fill error.code / error.type of a JSON error body.
	Code, Type string
	// Headers are added to a status answer.
	Headers map[string]string
}

// Request is what the server saw of one request.
type Request struct {
	Time       time.Time
	Method     string
	Path       string
	API        string // "responses", "responses-ws", "chat", "messages"
	Upfront    bool   // no model in the body: an upfront empty request
	Credential string // the credential the request carried
	// Model is the model the body names ("" for an upfront request or a
	// WebSocket upgrade, whose model comes in its messages).
	Model string
	// Remote is the caller's IP address: in a test environment where each
	// process has an address of its own (a Pod), who made the call.
	Remote string
	// Client is what the caller says it is, its User-Agent: on loopback,
	// where every process shares an address, who made the call.
	Client string
}

// Server is a fake provider.
type Server struct {
	*httptest.Server
	// Secret is a string the server puts into every error body and
	// message, so tests can assert raw provider output never leaks.
	Secret string
	// CAPEM is the CA of a TLS server's certificate (NewTLS).
	CAPEM []byte

	// Accept, when set, is the one credential the server takes: a model
	// call with another is answered 401 invalid_api_key, whatever the
	// steps say (a long-running endpoint for make demo).
	Accept string

	// OnRequest, when set, sees every request as it arrives.
	OnRequest func(Request)
	// LogWS, when set, sees every WebSocket message a client sends.
	LogWS func(string)

	active atomic.Int64

	mu      sync.Mutex
	steps   []Step
	upfront Step
	reqs    []Request
	done    chan struct{}
}

// New starts a plain HTTP server answering probe requests with steps in
// order (the last one repeats) and upfront empty requests with a 400.
func New(steps ...Step) *Server {
	s := newServer(steps)
	s.Server = httptest.NewServer(s)
	return s
}

// NewOn starts the same plain HTTP server on l (a listener in another
// network namespace, for Pods of the test environment's real node); its
// URL names l's address.
func NewOn(l net.Listener, steps ...Step) *Server {
	s := newServer(steps)
	s.Server = httptest.NewUnstartedServer(s)
	_ = s.Server.Listener.Close()
	s.Server.Listener = l
	s.Server.Start()
	return s
}

// NewTLS starts the same server behind TLS, with a serving certificate
// for 127.0.0.1 issued by a fresh CA that no client trusts unless told
// to: CAFile is that CA in PEM, for SSL_CERT_FILE.
func NewTLS(steps ...Step) (*Server, error) {
	s := newServer(steps)
	ca, leaf, err := issue()
	if err != nil {
		return nil, err
	}
	s.CAPEM = ca
	s.Server = httptest.NewUnstartedServer(s)
	s.Server.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the point
	s.Server.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	s.Server.StartTLS()
	return s, nil
}

// issue makes a CA and a leaf certificate for 127.0.0.1 signed by it.
func issue() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fakemodel test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func newServer(steps []Step) *Server {
	if len(steps) == 0 {
		steps = []Step{{Kind: OK}}
	}
	return &Server{Secret: "RAW-PROVIDER-OUTPUT-7f3a", steps: steps, done: make(chan struct{}),
		upfront: Step{Kind: Status, Status: 400, Shape: ShapeErrorCode, Code: "missing_required_parameter", Type: "invalid_request_error"}}
}

// SetUpfront sets the answer to upfront empty requests.
func (s *Server) SetUpfront(st Step) { s.mu.Lock(); s.upfront = st; s.mu.Unlock() }

// Close releases hanging handlers, then stops the server.
func (s *Server) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.Server.CloseClientConnections()
	s.Server.Close()
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ProbeRequests returns the model calls (not upfront requests).
func (s *Server) ProbeRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if !r.Upfront {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) next(r Request) Step {
	if s.OnRequest != nil {
		s.OnRequest(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Upfront {
		s.reqs = append(s.reqs, r)
		return s.upfront
	}
	if s.Accept != "" && r.Credential != s.Accept {
		s.reqs = append(s.reqs, r)
		return Step{Kind: Status, Status: http.StatusUnauthorized, Shape: ShapeErrorCode, Code: "invalid_api_key", Type: "authentication_error"}
	}
	n := 0
	for _, q := range s.reqs {
		if !q.Upfront {
			n++
		}
	}
	s.reqs = append(s.reqs, r)
	if n >= len(s.steps) {
		n = len(s.steps) - 1
	}
	return s.steps[n]
}

func credential(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// client is the caller's own name for itself: its User-Agent.
func client(r *http.Request) string { return r.Header.Get("User-Agent") }

// remoteIP is the address a request came from, without its port.
func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// Active is the number of requests being answered (a hang stays active
// until its client goes away).
func (s *Server) Active() int64 { return s.active.Load() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	api := ""
	switch {
	case strings.HasSuffix(r.URL.Path, "/responses") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		s.serveWebSocket(w, r)
		return
	case strings.HasSuffix(r.URL.Path, "/responses"):
		api = "responses"
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		api = "chat"
	case strings.HasSuffix(r.URL.Path, "/messages"):
		api = "messages"
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var head struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &head)
	st := s.next(Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, API: api, Upfront: head.Model == "", Credential: credential(r), Model: head.Model, Remote: remoteIP(r), Client: client(r)})
	s.answer(w, r, api, st)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, api string, st Step) {
	switch st.Kind {
	case Status:
		for k, v := range st.Headers {
			w.Header().Set(k, v)
		}
		b := s.errorBody(st)
		if st.Shape == ShapeNonJSON {
			w.Header().Set("Content-Type", "text/html")
		} else if len(b) > 0 {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(st.Status)
		_, _ = w.Write(b)
	case Hang:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case Reset:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	case Drop:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		ev := s.events(api, OK)
		_, _ = io.WriteString(w, ev[0])
		w.(http.Flusher).Flush()
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = buf.Flush()
			_ = conn.Close()
		}
	default:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range s.events(api, st.Kind) {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

func (s *Server) errorBody(st Step) []byte {
	msg := "provider says no: " + s.Secret
	switch st.Shape {
	case ShapeEmpty:
		return nil
	case ShapeNonJSON:
		return []byte("<html><body>401 Authorization Required " + s.Secret + "</body></html>")
	case ShapeNoError:
		b, _ := json.Marshal(map[string]any{"message": msg, "status": st.Status})
		return b
	case ShapeErrorNoCode:
		e := map[string]any{"message": msg}
		if st.Type != "" {
			e["type"] = st.Type
		}
		b, _ := json.Marshal(map[string]any{"type": "error", "error": e})
		return b
	default:
		e := map[string]any{"message": msg, "code": st.Code}
		if st.Code == "" {
			e["code"] = "invalid_api_key"
		}
		if st.Type != "" {
			e["type"] = st.Type
		}
		b, _ := json.Marshal(map[string]any{"error": e})
		return b
	}
}

func sse(event string, data any) string {
	b, _ := json.Marshal(data)
	if event == "" {
		return "data: " + string(b) + "\n\n"
	}
	return "event: " + event + "\ndata: " + string(b) + "\n\n"
}

// events renders a streamed answer of kind OK, Tool or Empty for an API.
func (s *Server) events(api string, kind Kind) []string {
	switch api {
	case "chat":
		out := []string{sse("", map[string]any{"id": "c1", "object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant"}}}})}
		switch kind {
		case Tool:
			out = append(out, sse("", map[string]any{"id": "c1", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": "exec", "arguments": "{}"}}}}}}}))
		case OK:
			out = append(out, sse("", map[string]any{"id": "c1", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "ok"}}}}))
		}
		out = append(out, sse("", map[string]any{"id": "c1", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}}), "data: [DONE]\n\n")
		return out
	case "messages":
		out := []string{sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "m1", "type": "message", "role": "assistant", "content": []any{}}})}
		switch kind {
		case Tool:
			out = append(out, sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "t1", "name": "exec", "input": map[string]any{}}}))
		case OK:
			out = append(out,
				sse("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
				sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "ok"}}),
				sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}))
		}
		return append(out,
			sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 1}}),
			sse("message_stop", map[string]any{"type": "message_stop"}))
	default: // responses (HTTP and WebSocket carry the same events)
		out := []string{sse("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})}
		switch kind {
		case Tool:
			out = append(out, sse("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0,
				"item": map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": `{"cmd":"ls"}`}}))
		case OK:
			out = append(out,
				sse("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "ok"}),
				sse("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0,
					"item": map[string]any{"type": "message", "role": "assistant", "id": "msg_1", "content": []any{map[string]any{"type": "output_text", "text": "ok"}}}}))
		}
		return append(out, sse("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1",
			"usage": map[string]any{"input_tokens": 1, "input_tokens_details": nil, "output_tokens": 1, "output_tokens_details": nil, "total_tokens": 2}}}))
	}
}

// serveWebSocket answers Responses over WebSocket: each response.create
// message gets the events of the next step as text frames. A status step
// refuses the upgrade with that status.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	st := s.next(Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, API: "responses-ws", Credential: credential(r), Remote: remoteIP(r), Client: client(r)})
	if st.Kind == Status {
		s.answer(w, r, "responses", st)
		return
	}
	if st.Kind == Reset {
		s.answer(w, r, "responses", st)
		return
	}
	websocket.Server{
		Handshake: func(*websocket.Config, *http.Request) error { return nil },
		Handler: func(c *websocket.Conn) {
			defer c.Close()
			for {
				var msg string
				if err := websocket.Message.Receive(c, &msg); err != nil {
					return
				}
				if s.LogWS != nil {
					s.LogWS(msg)
				}
				var m struct {
					Generate *bool `json:"generate"`
				}
				_ = json.Unmarshal([]byte(msg), &m)
				kind := st.Kind
				if m.Generate != nil && !*m.Generate {
					kind = Empty // a warm-up request generates nothing
				}
				switch kind {
				case Hang: // until the client goes away
					go func() { <-s.done; c.Close() }()
					for websocket.Message.Receive(c, &msg) == nil {
					}
					return
				case Drop:
					_ = websocket.Message.Send(c, eventData(s.events("responses", OK)[0]))
					return
				}
				for _, e := range s.events("responses", kind) {
					if err := websocket.Message.Send(c, eventData(e)); err != nil {
						return
					}
				}
			}
		},
	}.ServeHTTP(w, r)
}

// eventData is the JSON of an SSE event.
func eventData(e string) string {
	for _, line := range strings.Split(e, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			return d
		}
	}
	panic(fmt.Sprintf("no data in %q", e))
}
