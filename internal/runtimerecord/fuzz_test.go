package runtimerecord

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds container log lines to Parse. Properties:
//   - it never panics; a line that is not a record is (zero, false, nil);
//   - a refused record is (zero, true, err) with a short message that
//     quotes no string of the line that is longer than a closed-set value
//     (free text may be a credential or provider output: PR7, AU7);
//   - an accepted record is valid, every string in it is from its closed
//     set (checked here independently of Validate), and it round-trips:
//     Marshal succeeds, Parse of that reads the same record, and a second
//     Marshal gives the same bytes;
//   - the output is bounded by the input: the re-encoding is at most the
//     line plus the "time" member Marshal always writes.
func FuzzParse(f *testing.F) {
	exit := 1
	valid, _ := Marshal(Record{Event: EventCodexProbe, Time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Container: "harness",
		Attempt: 2, ExitCode: &exit, Signal: "SIGKILL", Code: CodeModelProbeTimeout, Final: true, FailureClass: "timeout"})
	for _, seed := range []string{
		string(valid),
		"",
		"gateway ready",
		`{"time":"x","level":"info","subsystem":"gateway","message":"gateway ready"}`,
		`{"event":"something.else"}`,
		`[1,2]`,
		`{"event":"runtime.startup_phase","time":"2026-11-29T10:00:00.123456789+02:00","container":"gateway","phase":"model_probe","outcome":"ok","durationMs":12,"elapsedMs":40}`,
		`{"event":"openclaw.model_probe","container":"gateway","code":"AUTHENTICATION_FAILED","final":true,"providerCode":401,"responseHeaderMarker":["www-authenticate","x-request-id"],"bodyShape":"json-error-code","providerErrorCode":"invalid_api_key","providerErrorType":"other"}`,
		`{"event":"peer-status-changed"}`,
		`{"event":"peer-status-changed","container":"gateway","peer":"harness","peerStatus":"lost","elapsedMs":9000}`,
		`{"event":"peer-status-changed","peer":"harness","peerStatus":"sk-abcdefghijklmnop"}`,
		`{"event":"gateway-respawn","container":"gateway","attempt":2,"elapsedMs":4100}`,
		`  {"event":"gateway-respawn","time":"2026-01-01T00:00:00Z"}  ` + "\r\n",
		// Free text in a closed-set field: refused, and not echoed.
		`{"event":"codex.model_probe","code":"MODEL_PROBE_FAILED","causeKind":"provider_error","causeDetail":"Incorrect API key provided: sk-abcdefghijklmnop"}`,
		`{"event":"openclaw.model_probe","code":"AUTHENTICATION_FAILED","responseHeaderMarker":["authorization: Bearer sk-abcdefghijklmnop"]}`,
		`{"event":"codex.model_probe","time":"sk-abcdefghijklmnop"}`,
		`{"event":"codex.model_probe","attempt":123456789012345678901234567890}`,
		`{"event":"codex.model_probe","exitCode":"sk-abcdefghijklmnop"}`,
		`{"event":"codex.model_probe","code":"NOT_A_CODE"}`,
		`{"EVENT":"codex.model_probe","Code":"READY"}`,
		`{"event":"codex.model_probe","event":"nope"}`,
		`{"event":"codex.model_probe","time":"0000-01-01T00:00:00+23:59"}`,
		`{"event":"codex.model_probe","time":"9999-12-31T23:59:59.9999999999-00:01"}`,
		`{"event":"codex.model_probe","responseHeaderMarker":null,"exitCode":null,"time":null}`,
		`{"event":"codex.model_probe"` + strings.Repeat(`,"signal":"SIGTERM"`, 50) + `}`,
		"{\"event\":\"codex.model_probe\",\"container\":\"gate\xffway\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		in := bytes.Clone(line)
		r, ok, err := Parse(line)
		if !bytes.Equal(in, line) {
			t.Fatalf("Parse modified its input")
		}
		if !ok {
			if err != nil || !reflect.DeepEqual(r, Record{}) {
				t.Fatalf("not a record, yet %+v, %v", r, err)
			}
			return
		}
		if err != nil {
			if !reflect.DeepEqual(r, Record{}) {
				t.Fatalf("refused record returned %+v", r)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "runtimerecord: ") || len(msg) > 200 {
				t.Fatalf("error message %q", msg)
			}
			for _, s := range lineStrings(line) {
				if len(s) > longestSetValue && strings.Contains(msg, s) {
					t.Fatalf("error %q echoes %q from the line", msg, s)
				}
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid record: %v", err)
		}
		checkClosedSets(t, r)
		out, err := Marshal(r)
		if err != nil {
			t.Fatalf("Marshal(%+v) of an accepted record: %v", r, err)
		}
		if max := len(bytes.TrimSpace(line)) + len(`,"time":"0001-01-01T00:00:00Z"`); len(out) > max {
			t.Fatalf("re-encoding is %d bytes from a %d-byte line: %s", len(out), len(line), out)
		}
		r2, ok, err := Parse(out)
		if !ok || err != nil {
			t.Fatalf("Parse(Marshal(r)) = %v, %v for %s", ok, err, out)
		}
		if !sameRecord(r, r2) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, r2)
		}
		out2, err := Marshal(r2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("second encoding differs: %s vs %s (%v)", out, out2, err)
		}
	})
}

// longestSetValue is the longest value of any closed set or field name: an
// error may name those.
var longestSetValue = func() int {
	n := 0
	for _, set := range closedSets() {
		for _, v := range set {
			n = max(n, len(v))
		}
	}
	return max(n, len("responseHeaderMarker"))
}()

func closedSets() map[string][]string {
	str := func(vs ...string) []string { return vs }
	events, codes, phases, outcomes := []string{}, []string{}, []string{}, []string{}
	for _, e := range Events {
		events = append(events, string(e))
	}
	for _, c := range Codes {
		codes = append(codes, string(c))
	}
	for _, p := range Phases {
		phases = append(phases, string(p))
	}
	for _, o := range Outcomes {
		outcomes = append(outcomes, string(o))
	}
	return map[string][]string{
		"event": events, "code": codes, "phase": phases, "outcome": outcomes,
		"container": Containers, "signal": Signals, "failureClass": FailureClasses, "causeKind": CauseKinds,
		"causeDetail": CauseDetails, "bodyShape": BodyShapes, "providerErrorCode": ProviderErrorValues,
		"providerErrorType": ProviderErrorValues, "fields": str("durationMs", "elapsedMs", "exitCode", "providerCode"),
	}
}

var headerName = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// checkClosedSets checks every string of an accepted record, without Validate.
func checkClosedSets(t *testing.T, r Record) {
	t.Helper()
	sets := closedSets()
	for field, v := range map[string]string{
		"event": string(r.Event), "code": string(r.Code), "phase": string(r.Phase), "outcome": string(r.Outcome),
		"container": r.Container, "signal": r.Signal, "failureClass": r.FailureClass, "causeKind": r.CauseKind,
		"causeDetail": r.CauseDetail, "bodyShape": r.BodyShape, "providerErrorCode": r.ProviderErrorCode,
		"providerErrorType": r.ProviderErrorType,
	} {
		if (v != "" || field == "event") && !slices.Contains(sets[field], v) {
			t.Fatalf("accepted %s %q outside its closed set", field, v)
		}
	}
	for _, h := range r.ResponseHeaderMarker {
		if !headerName.MatchString(h) {
			t.Fatalf("accepted header marker %q", h)
		}
	}
	if r.Code.Held() == (r.Code == "" || r.Code == CodeReady) {
		t.Fatalf("Held(%q) = %v", r.Code, r.Code.Held())
	}
}

func sameRecord(a, b Record) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	if len(a.ResponseHeaderMarker) == 0 && len(b.ResponseHeaderMarker) == 0 {
		a.ResponseHeaderMarker, b.ResponseHeaderMarker = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// lineStrings is every string and number literal in a JSON line (when it
// is one), as the line spells or decodes them.
func lineStrings(line []byte) []string {
	var out []string
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			out = append(out, t)
		case json.Number:
			out = append(out, string(t))
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for k, e := range t {
				out = append(out, k)
				walk(e)
			}
		}
	}
	walk(v)
	return out
}
