package startup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// rule ND2: a native node's wrapper redeems its one-use target at the
// broker (retrying while the gateway starts, never after a refusal),
// writes the setup code, private, where OpenClaw consumes it, and on a
// restart writes the code it was issued again without asking twice.
func TestND2_NodeRedeemsItsTarget(t *testing.T) {
	const token, code = "node-token-77aa", "eyJ1cmwiOiJ3czovL2d3In0"
	type answer struct {
		status int
		body   string
	}
	for _, tc := range []struct {
		name     string
		answers  []answer
		issued   string // a code kept by an earlier start
		want     runtimerecord.Outcome
		requests int64
		reason   string
	}{
		{"issued at once", []answer{{200, `{"setupCode":"` + code + `"}`}}, "", runtimerecord.OutcomeOK, 1, ""},
		{"after the gateway started", []answer{{503, `{"error":"the gateway is not ready to issue a setup code"}`}, {503, `{}`}, {200, `{"setupCode":"` + code + `"}`}}, "", runtimerecord.OutcomeOK, 3, ""},
		{"refused", []answer{{403, `{"error":"the enrollment target is not this gateway's"}`}, {200, `{"setupCode":"x"}`}}, "", runtimerecord.OutcomeFailed, 1, "not this gateway's"},
		{"spent", []answer{{409, `{"error":"the enrollment target is spent: a node has enrolled with it"}`}}, "", runtimerecord.OutcomeFailed, 1, "spent"},
		{"no code in the answer", []answer{{200, `{}`}}, "", runtimerecord.OutcomeFailed, 1, "without a setup code"},
		{"restarted", []answer{{409, `{}`}}, code, runtimerecord.OutcomeOK, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := n.Add(1) - 1
				if r.Method != http.MethodPost || r.URL.Path != enrollment.Path || r.Header.Get("Authorization") != "Bearer "+token {
					t.Errorf("request %s %s with %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
				}
				a := tc.answers[min(int(i), len(tc.answers)-1)]
				w.WriteHeader(a.status)
				_, _ = w.Write([]byte(a.body))
			}))
			defer srv.Close()
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "enrollment", "target"), filepath.Join(dir, "home", ".occ", "connect-target")
			b, _ := enrollment.Target{URL: srv.URL + enrollment.Path, Token: token}.Encode()
			if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(src, b, 0o400); err != nil {
				t.Fatal(err)
			}
			if tc.issued != "" {
				if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst+enrollment.IssuedSuffix, []byte(tc.issued), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{enrollment.EnvFile: src, enrollment.EnvConnectTarget: dst}
			s := &run{o: Options{Harness: HarnessOpenClaw, Getenv: func(k string) string { return env[k] }}}
			out, _, err := s.peerStatus(context.Background())
			if out != tc.want || n.Load() != tc.requests {
				t.Fatalf("outcome %s after %d requests (%v), want %s after %d", out, n.Load(), err, tc.want, tc.requests)
			}
			if tc.want == runtimerecord.OutcomeFailed {
				if err == nil || !strings.Contains(err.Error(), tc.reason) || strings.Contains(err.Error(), token) {
					t.Errorf("error %v: want the reason %q and never the token", err, tc.reason)
				}
				if _, err := os.Stat(dst); !os.IsNotExist(err) {
					t.Error("a connect target was written after a failure")
				}
				return
			}
			for _, p := range []string{dst, dst + enrollment.IssuedSuffix} {
				fi, err := os.Stat(p)
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("%s: %v %v, want a private file", filepath.Base(p), fi, err)
				}
				if got, _ := os.ReadFile(p); string(got) != code {
					t.Errorf("%s = %q, want the setup code", filepath.Base(p), got)
				}
			}
		})
	}
}

// rule ND2: only a native node redeems a target; any other container, or
// a node without the enrollment environment, skips the phase.
func TestND2_PeerStatusSkippedElsewhere(t *testing.T) {
	for _, o := range []Options{
		{Harness: HarnessCodex, Getenv: func(k string) string { return "/x" }},
		{Harness: HarnessOpenClaw, Getenv: func(string) string { return "" }},
	} {
		s := &run{o: o}
		if out, _, err := s.peerStatus(context.Background()); out != runtimerecord.OutcomeSkipped || err != nil {
			t.Errorf("%s: %s %v, want skipped", o.Harness, out, err)
		}
	}
}

// rule ND2: a broker that never answers ends the wait at EnrollWait with
// the last reason, not a hang.
func TestND2_NodeEnrollmentWaitIsBounded(t *testing.T) {
	old := EnrollWait
	EnrollWait = 3 * time.Second
	defer func() { EnrollWait = old }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"the gateway is not ready to issue a setup code"}`))
	}))
	defer srv.Close()
	start := time.Now()
	_, err := redeem(context.Background(), enrollment.Target{URL: srv.URL + enrollment.Path, Token: "t"})
	if err == nil || !strings.Contains(err.Error(), "not ready") || time.Since(start) > 10*time.Second {
		t.Errorf("after %v: %v", time.Since(start), err)
	}
}
