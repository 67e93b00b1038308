package runtimerecord

import (
	"strings"
	"testing"
	"time"
)

// rule PR6: records round-trip through one definition.
func TestPR6_RecordRoundTrip(t *testing.T) {
	exit := 1
	r := Record{Event: EventCodexProbe, Time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Container: "harness",
		Attempt: 2, ExitCode: &exit, Signal: "SIGKILL", Code: CodeModelProbeTimeout, Final: true, FailureClass: "timeout"}
	b, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := Parse(b)
	if err != nil || !ok {
		t.Fatalf("Parse(%s) = %v, %v", b, ok, err)
	}
	if got.Code != CodeModelProbeTimeout || got.Attempt != 2 || *got.ExitCode != 1 || !got.Final || got.Signal != "SIGKILL" {
		t.Errorf("round trip lost fields: %+v", got)
	}
}

func TestParse_IgnoresOtherLines(t *testing.T) {
	for _, line := range []string{
		"", "gateway ready", `{"time":"x","level":"info","subsystem":"gateway","message":"gateway ready"}`,
		`{"event":"something.else"}`, `[1,2]`,
	} {
		if _, ok, err := Parse([]byte(line)); ok || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want not a record", line, ok, err)
		}
	}
}

// rule PR7: free text cannot ride in a record; every field is a closed set.
func TestPR7_ClosedSetsRefuseFreeText(t *testing.T) {
	bad := []string{
		`{"event":"codex.model_probe","code":"MODEL_PROBE_FAILED","causeKind":"provider_error","causeDetail":"Incorrect API key provided: sk-abc"}`,
		`{"event":"openclaw.model_probe","code":"AUTHENTICATION_FAILED","bodyShape":"{\"error\":\"x\"}"}`,
		`{"event":"openclaw.model_probe","code":"AUTHENTICATION_FAILED","responseHeaderMarker":["x-request-id: abc"]}`,
		`{"event":"codex.model_probe","code":"NOT_A_CODE"}`,
		`{"event":"runtime.startup_phase","phase":"login","outcome":"failed","container":"/etc/secret"}`,
		`{"event":"codex.model_probe","failureClass":"401 Unauthorized from api.openai.com"}`,
		`{"event":"peer-status-changed","peer":"ws://coder-harness-r1:18790","peerStatus":"lost"}`,
		`{"event":"peer-status-changed","peer":"harness","peerStatus":"down since sk-abc"}`,
	}
	for _, line := range bad {
		if _, ok, err := Parse([]byte(line)); !ok || err == nil {
			t.Errorf("Parse(%s) accepted it", line)
		}
	}
	good := `{"event":"openclaw.model_probe","container":"gateway","code":"AUTHENTICATION_FAILED","final":true,"providerCode":401,"responseHeaderMarker":["www-authenticate","x-request-id"],"bodyShape":"json-error-code","providerErrorCode":"invalid_api_key","providerErrorType":"other"}`
	r, ok, err := Parse([]byte(good))
	if !ok || err != nil || r.ProviderCode != 401 || r.BodyShape != "json-error-code" || len(r.ResponseHeaderMarker) != 2 {
		t.Fatalf("Parse(valid 401 record) = %+v, %v, %v", r, ok, err)
	}
}

// rule PR8: every held code has advice; READY holds nothing.
func TestPR8_HeldCodesHaveAdvice(t *testing.T) {
	for _, c := range Codes {
		if c == CodeReady {
			if c.Held() || Advice(c) != "" {
				t.Errorf("READY is held or advised")
			}
			continue
		}
		if !c.Held() || !strings.Contains(Advice(c), "apply again") {
			t.Errorf("%s: held=%v advice=%q", c, c.Held(), Advice(c))
		}
	}
}
