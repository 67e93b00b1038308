package startup

import (
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// rule PR4, PR7: what the real codex 0.169.0 prints for each failure (seen
// against the loopback provider of package fakemodel) maps to a class, and
// only the listed transient classes retry.
func TestPR4_ClassifyCodexMessages(t *testing.T) {
	for _, tc := range []struct {
		msg    string
		class  Class
		detail string
	}{
		{"unexpected status 401 Unauthorized: provider says no, url: http://127.0.0.1:40123/v1/responses", ClassAuth, ""},
		{"unexpected status 403 Forbidden: msg, url: http://127.0.0.1:34619/v1/responses", ClassAuth, ""},
		{"exceeded retry limit, last status: 429 Too Many Requests", ClassRateLimit, "http_429"},
		{"We’re currently experiencing high demand, which may cause temporary errors.", ClassServerError, "http_5xx"},
		{"unexpected status 502 Bad Gateway: msg, url: http://127.0.0.1:18902/v1/responses", ClassServerError, "http_5xx"},
		{"unexpected status 529 <unknown status code>: msg, url: http://127.0.0.1:18902/v1/responses", ClassServerError, "http_5xx"},
		{"unexpected status 404 Not Found: msg, url: http://127.0.0.1:18902/v1/responses", ClassProtocol, "invalid_model"},
		{`{"error": {"message": "bad", "type": "x", "code": "y"}}`, ClassProtocol, "http_4xx"},
		{"something else entirely", ClassUnknown, "nonzero_exit"},
		{"stream disconnected before completion: stream closed before response.completed", ClassNetwork, "stream_incomplete"},
		{"stream disconnected before completion: Transport error: network error: error decoding response body", ClassNetwork, "stream_incomplete"},
		{"stream disconnected before completion: error sending request", ClassNetwork, "stream_incomplete"},
		{"Connection failed: error sending request", ClassNetwork, "connection_failed"},
		{"Falling back from WebSockets to HTTPS transport. stream disconnected before completion: invalid peer certificate: UnknownIssuer", ClassTLS, "tls_handshake"},
		{"failed to lookup address information: Name or service not known", ClassDNS, "dns"},
		// a port or host that looks like a status or TLS is not read
		{"Connection failed: error sending request, url: https://tls.example:401/v1/responses", ClassNetwork, "connection_failed"},
	} {
		c, _, d := classifyMessage(tc.msg)
		if c != tc.class || d != tc.detail {
			t.Errorf("classifyMessage(%q) = %s/%s, want %s/%s", tc.msg, c, d, tc.class, tc.detail)
		}
	}
	for c, want := range map[Class]bool{ClassTimeout: true, ClassServerError: true, ClassNetwork: true, ClassKilled: true,
		ClassAuth: false, ClassTLS: false, ClassRateLimit: false, ClassDNS: false, ClassProtocol: false, ClassConfig: false, ClassUnknown: false} {
		if c.Retryable() != want {
			t.Errorf("%s retryable = %v, want %v", c, !want, want)
		}
	}
	// A credential, TLS or limit seen anywhere in the attempt stops a retry.
	if worst(ClassNetwork, ClassTLS) != ClassTLS || worst(ClassServerError, ClassAuth) != ClassAuth || worst(ClassNetwork, ClassNone) != ClassNetwork {
		t.Error("worst does not let credential/TLS/limit win")
	}
}

// rule PR6: final codes after the retries end; every class lands in the
// closed sets of the record definition.
func TestPR6_FinalCodes(t *testing.T) {
	for _, tc := range []struct {
		o         Outcome
		retryable bool
		want      runtimerecord.Code
	}{
		{failure(ClassTimeout, "", ""), true, runtimerecord.CodeModelProbeTimeout},
		{failure(ClassServerError, "", ""), true, runtimerecord.CodeUnavailable},
		{failure(ClassServerError, "", ""), false, runtimerecord.CodeModelProbeFailed},
		{statusOutcome(401), true, runtimerecord.CodeAuthenticationFailed},
		{statusOutcome(403), false, runtimerecord.CodeAuthenticationFailed},
		{statusOutcome(429), true, runtimerecord.CodeModelProbeFailed},
		{statusOutcome(400), true, runtimerecord.CodeModelProbeFailed},
		{failure(ClassNetwork, "transport", "connection_reset"), true, runtimerecord.CodeModelProbeFailed},
	} {
		o := tc.o
		if tc.retryable {
			o = o.exhausted()
		}
		if o.Code != tc.want {
			t.Errorf("%+v (policy retries=%v) = %s, want %s", tc.o, tc.retryable, o.Code, tc.want)
		}
		rec := probeRecord(runtimerecord.EventCodexProbe, o)
		if _, err := runtimerecord.Marshal(rec); err != nil {
			t.Errorf("record of %+v: %v", o, err)
		}
	}
}

// rule PR4: one retry after 1 to 1.5 s, only on retryable classes, each
// attempt capped at 30 s inside one 61 s budget with the delay included.
func TestPR4_Policy(t *testing.T) {
	codex := admission.Probe{Model: "codex/gpt-5-codex", OutputTokens: 256, MaxAttempts: 2, AttemptSeconds: 30, BudgetSeconds: 61, Transport: "responses-websocket"}
	p := PolicyFor(codex, 2000)
	if p.MaxAttempts != 2 || p.Attempt != 30*time.Second || p.Budget != 61*time.Second {
		t.Fatalf("codex policy = %+v", p)
	}
	for _, r := range []float64{0, 0.5, 0.999999} {
		p.Rand = func() float64 { return r }
		d, ok := p.Next(ClassTimeout, 1, 30*time.Second)
		if !ok || d < time.Second || d > 1500*time.Millisecond {
			t.Errorf("retry after a timeout at 30 s: %v %v", d, ok)
		}
		if got := p.AttemptTimeout(30*time.Second + d); got > 31*time.Second-d || got <= 29*time.Second {
			t.Errorf("second attempt cap = %v after delay %v; want the rest of the 61 s budget", got, d)
		}
	}
	if _, ok := p.Next(ClassAuth, 1, time.Second); ok {
		t.Error("an auth failure retried")
	}
	if _, ok := p.Next(ClassTimeout, 2, 40*time.Second); ok {
		t.Error("a third attempt")
	}
	p.Rand = func() float64 { return 0.99 }
	if _, ok := p.Next(ClassServerError, 1, 60*time.Second); ok {
		t.Error("a retry past the budget")
	}

	// PR1: OpenClaw makes one call in 20 s plus 45 CPU-seconds at the limit.
	oc := admission.Probe{Model: "openai/gpt-5", OutputTokens: 256, WallSeconds: 20, CPUSeconds: 45, Transport: "http-streaming"}
	for _, tc := range []struct {
		millis int64
		want   time.Duration
	}{{1000, 65 * time.Second}, {2000, 42500 * time.Millisecond}, {500, 110 * time.Second}} {
		p := PolicyFor(oc, tc.millis)
		if p.MaxAttempts != 1 || p.Budget != tc.want || p.Attempt != tc.want {
			t.Errorf("OpenClaw policy at %dm = %+v, want one attempt of %v", tc.millis, p, tc.want)
		}
	}
}
