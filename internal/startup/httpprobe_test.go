package startup

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

const sentinelKey = "sk-SENTINEL-do-not-log-4242"

var apis = []string{APIResponses, APICompletions, APIMessages}

func endpoint(s *fakemodel.Server, api string) Endpoint {
	base := s.URL + "/v1"
	if api == APIMessages {
		base = s.URL
	}
	return Endpoint{API: api, BaseURL: base, Model: "some-model", Key: sentinelKey}
}

func shortPolicy(attempts int, attempt, budget time.Duration) Policy {
	return Policy{MaxAttempts: attempts, Attempt: attempt, Budget: budget, MinDelay: time.Second, MaxDelay: 1500 * time.Millisecond}
}

// rules PR1, PR3, PR4, PR7: embedded OpenClaw's streamed HTTP probe against
// OpenAI Responses, chat completions and Anthropic Messages on loopback,
// for each answer a provider can give.
func TestPR1_HTTPProbe(t *testing.T) {
	t.Parallel()
	type tc struct {
		name     string
		steps    []fakemodel.Step
		policy   Policy
		want     runtimerecord.Code
		class    Class
		detail   string
		attempts int
		// retryGap: the second request came 1 to 1.5 s after the first ended.
		retryGap bool
	}
	one := shortPolicy(1, 3*time.Second, 3*time.Second)
	two := shortPolicy(2, 2*time.Second, 5*time.Second)
	status := func(code int, shape string) fakemodel.Step {
		return fakemodel.Step{Kind: fakemodel.Status, Status: code, Shape: shape}
	}
	cases := []tc{
		{name: "success", steps: []fakemodel.Step{{Kind: fakemodel.OK}}, policy: one, want: runtimerecord.CodeReady, attempts: 1},
		{name: "429", steps: []fakemodel.Step{status(429, fakemodel.ShapeErrorCode)}, policy: two, want: runtimerecord.CodeModelProbeFailed, class: ClassRateLimit, detail: "http_429", attempts: 1},
		{name: "5xx then success", steps: []fakemodel.Step{status(503, fakemodel.ShapeErrorNoCode), {Kind: fakemodel.OK}}, policy: two, want: runtimerecord.CodeReady, attempts: 2, retryGap: true},
		{name: "5xx twice", steps: []fakemodel.Step{status(500, fakemodel.ShapeErrorCode), status(502, fakemodel.ShapeNonJSON)}, policy: two, want: runtimerecord.CodeUnavailable, class: ClassServerError, attempts: 2, retryGap: true},
		{name: "5xx without a retry", steps: []fakemodel.Step{status(529, fakemodel.ShapeErrorNoCode), {Kind: fakemodel.OK}}, policy: one, want: runtimerecord.CodeModelProbeFailed, class: ClassServerError, detail: "http_5xx", attempts: 1},
		{name: "hang", steps: []fakemodel.Step{{Kind: fakemodel.Hang}}, policy: one, want: runtimerecord.CodeModelProbeTimeout, class: ClassTimeout, attempts: 1},
		{name: "hang twice", steps: []fakemodel.Step{{Kind: fakemodel.Hang}}, policy: two, want: runtimerecord.CodeModelProbeTimeout, class: ClassTimeout, attempts: 2, retryGap: true},
		{name: "dropped connection", steps: []fakemodel.Step{{Kind: fakemodel.Drop}}, policy: one, want: runtimerecord.CodeModelProbeFailed, class: ClassNetwork, detail: "stream_incomplete", attempts: 1},
		{name: "dropped then success", steps: []fakemodel.Step{{Kind: fakemodel.Reset}, {Kind: fakemodel.OK}}, policy: two, want: runtimerecord.CodeReady, attempts: 2, retryGap: true},
		{name: "tool call", steps: []fakemodel.Step{{Kind: fakemodel.Tool}}, policy: two, want: runtimerecord.CodeModelProbeFailed, class: ClassProtocol, detail: "tool_call", attempts: 1},
		{name: "no text", steps: []fakemodel.Step{{Kind: fakemodel.Empty}}, policy: two, want: runtimerecord.CodeModelProbeFailed, class: ClassProtocol, detail: "no_text", attempts: 1},
		{name: "unknown model", steps: []fakemodel.Step{status(404, fakemodel.ShapeErrorCode)}, policy: two, want: runtimerecord.CodeModelProbeFailed, class: ClassProtocol, detail: "invalid_model", attempts: 1},
	}
	for _, code := range []int{401, 403} {
		for _, shape := range []string{fakemodel.ShapeErrorCode, fakemodel.ShapeErrorNoCode, fakemodel.ShapeNoError, fakemodel.ShapeNonJSON, fakemodel.ShapeEmpty} {
			cases = append(cases, tc{name: fmt.Sprintf("%d %s", code, shape), steps: []fakemodel.Step{status(code, shape)}, policy: two,
				want: runtimerecord.CodeAuthenticationFailed, class: ClassAuth, attempts: 1})
		}
	}
	for _, api := range apis {
		for _, c := range cases {
			t.Run(api+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				srv := fakemodel.New(c.steps...)
				defer srv.Close()
				p := &HTTPProbe{Endpoint: endpoint(srv, api), Policy: c.policy, OutputTokens: 256}
				began := time.Now()
				r := p.Run(context.Background())
				took := time.Since(began)
				if r.Outcome.Code != c.want || r.Outcome.Class != c.class || (c.detail != "" && r.Outcome.CauseDetail != c.detail) || r.Attempts != c.attempts {
					t.Fatalf("outcome %+v after %d attempts; want %s %s/%s after %d", r.Outcome, r.Attempts, c.want, c.class, c.detail, c.attempts)
				}
				if took > c.policy.Budget+500*time.Millisecond {
					t.Errorf("the probe took %v, over its %v budget", took, c.policy.Budget)
				}
				reqs := srv.ProbeRequests()
				if len(reqs) != c.attempts {
					t.Errorf("%d model calls, want %d", len(reqs), c.attempts)
				}
				for _, q := range reqs {
					if q.Credential != sentinelKey {
						t.Errorf("request carried credential %q", q.Credential)
					}
				}
				if c.retryGap && len(reqs) == 2 {
					// The first attempt ends at once except a hang, which ends at the attempt cap.
					gap := reqs[1].Time.Sub(reqs[0].Time)
					lo, hi := time.Second, 1600*time.Millisecond
					if c.steps[0].Kind == fakemodel.Hang {
						lo, hi = lo+c.policy.Attempt, hi+c.policy.Attempt
					}
					if gap < lo || gap > hi {
						t.Errorf("retry came %v after the first call; want %v..%v", gap, lo, hi)
					}
				}
				b, err := runtimerecord.Marshal(probeRecord(runtimerecord.EventOpenClawProbe, r.Outcome))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), srv.Secret) || strings.Contains(string(b), sentinelKey) {
					t.Errorf("record leaks: %s", b)
				}
			})
		}
	}
}

// rule PR1: a TLS failure is a transport failure that never retries; with
// the CA trusted through SSL_CERT_FILE the same endpoint answers.
func TestPR1_HTTPProbeTLS(t *testing.T) {
	srv, err := fakemodel.NewTLS(fakemodel.Step{Kind: fakemodel.OK})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := (&HTTPProbe{Endpoint: endpoint(srv, APIResponses), Policy: shortPolicy(2, 2*time.Second, 5*time.Second)}).Run(context.Background())
	if r.Outcome.Class != ClassTLS || r.Outcome.CauseDetail != "tls_handshake" || r.Attempts != 1 {
		t.Fatalf("untrusted certificate: %+v after %d attempts", r.Outcome, r.Attempts)
	}
	// SSL_CERT_FILE is read once per process by crypto/x509: the trusted
	// case runs as a real process in cmd/occ-runtime's tests.
}

// rule PR7: OpenClaw's upfront empty request to a default endpoint; a 401
// reports providerCode, header names, the body shape and the error code
// and type, "other" outside the known set.
func TestPR7_Upfront(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		for _, tc := range []struct {
			step             fakemodel.Step
			shape, code, typ string
		}{
			{fakemodel.Step{Shape: fakemodel.ShapeErrorCode, Code: "invalid_api_key", Type: "invalid_request_error"}, "json-error-code", "invalid_api_key", "invalid_request_error"},
			{fakemodel.Step{Shape: fakemodel.ShapeErrorCode, Code: "vendor_specific_thing", Type: "weird"}, "json-error-code", "other", "other"},
			{fakemodel.Step{Shape: fakemodel.ShapeErrorNoCode, Type: "authentication_error"}, "json-error-no-code", "", "authentication_error"},
			{fakemodel.Step{Shape: fakemodel.ShapeNoError}, "json-no-error", "", ""},
			{fakemodel.Step{Shape: fakemodel.ShapeNonJSON}, "non-json", "", ""},
			{fakemodel.Step{Shape: fakemodel.ShapeEmpty}, "empty", "", ""},
		} {
			srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
			st := tc.step
			st.Kind, st.Status = fakemodel.Status, 401
			st.Headers = map[string]string{"WWW-Authenticate": "Bearer realm=\"" + srv.Secret + "\"", "X-Request-Id": "req_" + srv.Secret, "X-Custom": "v"}
			srv.SetUpfront(st)
			ep := endpoint(srv, api)
			ep.Default = true
			o, rejected := Upfront(context.Background(), ep, nil)
			srv.Close()
			if !rejected || o.Code != runtimerecord.CodeAuthenticationFailed || o.ProviderCode != 401 || o.Upfront == nil {
				t.Fatalf("%s %s: %+v %v", api, tc.shape, o, rejected)
			}
			u := o.Upfront
			if u.BodyShape != tc.shape || u.ErrorCode != tc.code || u.ErrorType != tc.typ || !slices.Equal(u.HeaderMarker, []string{"www-authenticate", "x-request-id"}) {
				t.Errorf("%s %s: %+v", api, tc.shape, *u)
			}
			b, err := runtimerecord.Marshal(probeRecord(runtimerecord.EventOpenClawProbe, o))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), srv.Secret) || strings.Contains(string(b), sentinelKey) {
				t.Errorf("record leaks: %s", b)
			}
			if reqs := srv.Requests(); len(reqs) != 1 || !reqs[0].Upfront {
				t.Errorf("%s: requests %+v, want the upfront one only", api, reqs)
			}
		}
		// Anything but a 401 lets the probe go on.
		srv := fakemodel.New()
		ep := endpoint(srv, api)
		if _, rejected := Upfront(context.Background(), ep, nil); rejected {
			t.Errorf("%s: a 400 to the empty request was taken as a rejection", api)
		}
		srv.Close()
	}
}

// rule PR1: the CPU limit comes from cgroup v2 cpu.max, else v1's CFS
// quota, else the CPUs available; throttling from cpu.stat.
func TestPR1_CgroupCPU(t *testing.T) {
	d := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		_ = os.MkdirAll(filepath.Dir(filepath.Join(d, name)), 0o755)
		if err := os.WriteFile(filepath.Join(d, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := CPULimitMillis(d); got < 1000 {
		t.Errorf("no cgroup files: %d millicores, want the CPU count", got)
	}
	write("cpu/cpu.cfs_quota_us", "50000\n")
	write("cpu/cpu.cfs_period_us", "100000\n")
	if got := CPULimitMillis(d); got != 500 {
		t.Errorf("v1 quota: %d, want 500", got)
	}
	write("cpu.max", "150000 100000\n")
	if got := CPULimitMillis(d); got != 1500 {
		t.Errorf("v2 cpu.max: %d, want 1500", got)
	}
	write("cpu.max", "max 100000\n")
	if got := CPULimitMillis(d); got < 1000 {
		t.Errorf("unlimited: %d", got)
	}
	if _, ok := Throttled(d); ok {
		t.Error("throttling without cpu.stat")
	}
	write("cpu.stat", "usage_usec 100\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2500000\n")
	if got, ok := Throttled(d); !ok || got != 2500*time.Millisecond {
		t.Errorf("throttled = %v %v", got, ok)
	}
	if !starved(3*time.Second, 20*time.Second) || starved(time.Second, 20*time.Second) || starved(50*time.Millisecond, 100*time.Millisecond) {
		t.Error("starved threshold")
	}
}

// Issue 27: the model key goes only to the host the endpoint names. A
// redirect to another host (here another port of 127.0.0.1, which
// net/http treats as the same domain) reaches it without the key, for
// Anthropic's x-api-key as for a Bearer token; a redirect on the same host
// keeps it.
func TestPR1_HTTPProbeKeyStaysOnItsHost(t *testing.T) {
	for _, api := range []string{APIMessages, APIResponses} {
		t.Run(api, func(t *testing.T) {
			var got atomic.Value // the headers the other host saw
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.Store(r.Header.Clone())
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer other.Close()
			var sameHostKey atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("hop") == "" {
					http.Redirect(w, r, r.URL.Path+"?hop=1", http.StatusTemporaryRedirect)
					return
				}
				sameHostKey.Store(strings.Contains(r.Header.Get("x-api-key")+r.Header.Get("Authorization"), sentinelKey))
				http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			defer srv.Close()
			base := srv.URL + "/v1"
			if api == APIMessages {
				base = srv.URL
			}
			p := &HTTPProbe{Endpoint: Endpoint{API: api, BaseURL: base, Model: "some-model", Key: sentinelKey}, Policy: shortPolicy(1, 3*time.Second, 3*time.Second)}
			p.Run(context.Background())
			h, ok := got.Load().(http.Header)
			switch {
			case !sameHostKey.Load():
				t.Fatal("a redirect on the endpoint's own host lost the key")
			case !ok:
				t.Fatal("the redirect to the other host was not followed")
			case strings.Contains(h.Get("x-api-key")+h.Get("Authorization"), sentinelKey):
				t.Fatalf("the other host received the key: %v", h)
			}
		})
	}
}
