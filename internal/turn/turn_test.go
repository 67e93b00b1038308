package turn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, body, want, err string
	}{
		{"streamed", "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"o\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"k\"}}]}\n\ndata: [DONE]\n\n", "ok", ""},
		{"streamed parts", "data: {\"choices\":[{\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}]}\ndata: [DONE]\n", "hi", ""},
		{"whole", `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`, "ok", ""},
		{"stream error", "data: {\"choices\":[{\"delta\":{\"content\":\"o\"}}]}\n\ndata: {\"error\":{\"message\":\"model call failed\",\"type\":\"api_error\"}}\n\ndata: [DONE]\n\n", "", "the agent's run failed (api_error): model call failed"},
		{"no done", "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n", "", "ended before [DONE]"},
		{"no text", "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: [DONE]\n\n", "", "no text"},
		{"not json", "data: <html>\n\n", "", "not JSON"},
		{"whole error", `{"error":{"message":"no","type":"invalid_request_error"}}`, "", "(invalid_request_error): no"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := Parse(strings.NewReader(c.body), time.Now())
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || a.Text != c.want {
				t.Fatalf("%q, %v; want %q", a.Text, err, c.want)
			}
		})
	}
}

func TestParse_Bounded(t *testing.T) {
	big := strings.Repeat("x", maxAnswer/4)
	var b strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", big)
	}
	b.WriteString("data: [DONE]\n\n")
	if _, err := Parse(strings.NewReader(b.String()), time.Now()); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an answer over the bound: %v", err)
	}
}

func TestSend(t *testing.T) {
	const token = "gw-token-123"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Unauthorized","type":"unauthorized"}}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"model":"openclaw/default"`) || !strings.Contains(string(body), `"stream":true`) || !strings.Contains(string(body), `"content":"hello"`) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"first line\\nsecond\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	ctx := context.Background()
	a, err := Send(ctx, srv.Client(), Request{BaseURL: srv.URL, Token: token, Message: "hello"})
	if err != nil || a.FirstLine() != "first line" || a.FirstToken <= 0 || a.Total < a.FirstToken {
		t.Fatalf("%+v, %v", a, err)
	}
	_, err = Send(ctx, srv.Client(), Request{BaseURL: srv.URL, Token: "other", Message: "hello"})
	var te *Error
	if !errors.As(err, &te) || !te.Unauthorized() || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong token: %v", err)
	}
	_, err = Send(ctx, srv.Client(), Request{BaseURL: srv.URL + "/nothing", Token: token, Message: "hello"})
	if !errors.As(err, &te) || !te.NotEnabled() {
		t.Fatalf("an endpoint the gateway does not serve: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n")
	f.Add(`{"choices":[{"message":{"content":[{"type":"text","text":"ok"}]}}]}`)
	f.Add("data: {\"error\":{\"message\":\"x\"}}\n")
	f.Add("event: x\n:comment\ndata: [DONE]\n")
	f.Fuzz(func(t *testing.T, body string) {
		a, err := Parse(strings.NewReader(body), time.Now())
		if err == nil && strings.TrimSpace(a.Text) == "" {
			t.Fatal("an answer without text was accepted")
		}
		if len(a.Text) > maxAnswer {
			t.Fatal("an answer over the bound was accepted")
		}
		var te *Error
		if errors.As(err, &te) && (len(te.Message) > 310 || strings.Contains(te.Message, "\n")) {
			t.Fatalf("an unbounded error message: %q", te.Message)
		}
	})
}
