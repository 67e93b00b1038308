// Package runtimerecord is the one definition of the JSON startup records
// of the runtime contract (INTERFACE.md): the startup wrapper writes them on
// the runtime containers' output, the executors parse them from container
// logs or the journal. Every field that is not a number is drawn from a
// closed set or is a fixed identifier, so no record can carry a secret, a
// model name, a path or raw provider output (rules PR6, PR7, PR9).
package runtimerecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event names a record.
type Event string

const (
	EventStartupPhase      Event = "runtime.startup_phase"
	EventCodexProbe        Event = "codex.model_probe"
	EventOpenClawProbe     Event = "openclaw.model_probe"
	EventPeerStatusChanged Event = "peer-status-changed"
	EventGatewayRespawn    Event = "gateway-respawn"
)

// Events is the closed set of events.
var Events = []Event{EventStartupPhase, EventCodexProbe, EventOpenClawProbe, EventPeerStatusChanged, EventGatewayRespawn}

// Code is a probe's final code (PR6, PR7).
type Code string

const (
	CodeReady                Code = "READY"
	CodeModelProbeTimeout    Code = "MODEL_PROBE_TIMEOUT"
	CodeModelProbeFailed     Code = "MODEL_PROBE_FAILED"
	CodeAuthenticationFailed Code = "AUTHENTICATION_FAILED"
	CodeUnavailable          Code = "UNAVAILABLE"
	CodeModelProbeCPUStarved Code = "MODEL_PROBE_CPU_STARVED"
	CodeLoginFailed          Code = "LOGIN_FAILED"
)

// Codes is the closed set of final codes.
var Codes = []Code{CodeReady, CodeModelProbeTimeout, CodeModelProbeFailed, CodeAuthenticationFailed, CodeUnavailable, CodeModelProbeCPUStarved, CodeLoginFailed}

// Held reports whether the code holds the runtime unready until restart:
// every final code but READY (PR5, PR8).
func (c Code) Held() bool { return c != "" && c != CodeReady }

// Phase is a startup phase (PR9).
type Phase string

const (
	PhaseLogin          Phase = "login"
	PhaseModelProbe     Phase = "model_probe"
	PhasePeerStatus     Phase = "peer_status"
	PhaseWorkspaceSetup Phase = "workspace_setup"
	PhaseProcessSpawn   Phase = "process_spawn"
)

// Phases is the closed set of phases, in the order the wrapper runs them.
// PR9 also names plugin install and state migration; this wrapper does
// neither (the pinned images bundle their plugins, and it never touches
// the runtime's state beyond creating its directory), so it writes no
// record for them rather than one that is always "skipped".
var Phases = []Phase{PhaseLogin, PhaseModelProbe, PhasePeerStatus, PhaseWorkspaceSetup, PhaseProcessSpawn}

// Outcome of a phase.
type Outcome string

const (
	OutcomeOK      Outcome = "ok"
	OutcomeFailed  Outcome = "failed"
	OutcomeSkipped Outcome = "skipped"
)

// Outcomes is the closed set of outcomes.
var Outcomes = []Outcome{OutcomeOK, OutcomeFailed, OutcomeSkipped}

// FailureClasses is the closed set a failed Codex probe or login reports
// instead of any provider output (PR6).
var FailureClasses = []string{"network", "timeout", "tls", "dns", "auth", "rate_limit", "server_error", "protocol", "killed", "config", "unknown"}

// CauseKinds is the closed set of MODEL_PROBE_FAILED causes (PR6).
var CauseKinds = []string{"provider_error", "transport", "protocol", "tool_event", "empty_output", "process_exit", "config"}

// CauseDetails is the closed set of cause details.
var CauseDetails = []string{"http_4xx", "http_5xx", "http_429", "connection_reset", "connection_refused", "connection_failed", "tls_handshake", "dns", "stream_incomplete", "stream_error", "no_text", "tool_call", "nonzero_exit", "signal", "invalid_model", "unsupported"}

// BodyShapes is the closed set of an upfront 401's body shapes (PR7).
var BodyShapes = []string{"json-error-code", "json-error-no-code", "json-no-error", "non-json", "empty"}

// ProviderErrorValues are the known error.code / error.type values of an
// upfront 401; anything else is reported as "other" (PR7).
var ProviderErrorValues = []string{"invalid_api_key", "authentication_error", "invalid_request_error", "permission_error", "insufficient_quota", "unauthorized", "other"}

// Containers is the closed set of container names.
var Containers = []string{"gateway", "harness", "node"}

// Peers is the closed set of peers a gateway reports on: its dedicated
// harness.
var Peers = []string{"harness"}

// PeerStatuses is the closed set of a peer-status-changed record's status:
// the peer stopped answering its readiness endpoint (lost), or answers it
// again (ready).
var PeerStatuses = []string{"lost", "ready"}

// Record is one startup record. Unset fields are omitted.
type Record struct {
	Event     Event     `json:"event"`
	Time      time.Time `json:"time"`
	Container string    `json:"container,omitempty"`

	// runtime.startup_phase
	Phase      Phase   `json:"phase,omitempty"`
	Outcome    Outcome `json:"outcome,omitempty"`
	DurationMS int64   `json:"durationMs,omitempty"`
	ElapsedMS  int64   `json:"elapsedMs,omitempty"`

	// codex.model_probe and openclaw.model_probe; on gateway-respawn, the
	// number of this start of the container (2 for its first restart).
	Attempt  int    `json:"attempt,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Code     Code   `json:"code,omitempty"`
	// Final is true on the record that publishes the status after retries end.
	Final        bool   `json:"final,omitempty"`
	FailureClass string `json:"failureClass,omitempty"`
	CauseKind    string `json:"causeKind,omitempty"`
	CauseDetail  string `json:"causeDetail,omitempty"`

	// The upfront 401 of AUTHENTICATION_FAILED (PR7).
	ProviderCode         int      `json:"providerCode,omitempty"`
	ResponseHeaderMarker []string `json:"responseHeaderMarker,omitempty"`
	BodyShape            string   `json:"bodyShape,omitempty"`
	ProviderErrorCode    string   `json:"providerErrorCode,omitempty"`
	ProviderErrorType    string   `json:"providerErrorType,omitempty"`

	// peer-status-changed: which peer, and its new status.
	Peer       string `json:"peer,omitempty"`
	PeerStatus string `json:"peerStatus,omitempty"`
}

// Signals are the termination signals a record may name.
var Signals = []string{"SIGTERM", "SIGKILL", "SIGINT", "SIGSEGV", "SIGABRT", "SIGXCPU"}

// Validate checks every field against its closed set. Its errors name the
// field, never the value: a value outside its closed set is free text,
// which may be provider output or a credential (PR6, PR7, AU7), and the
// executors put the error into a diagnostic.
func (r Record) Validate() error {
	check := func(name, v string, set []string) error {
		if v != "" && !slices.Contains(set, v) {
			return outsideSet(name, v)
		}
		return nil
	}
	if !slices.Contains(Events, r.Event) {
		return outsideSet("event", string(r.Event))
	}
	if r.Phase != "" && !slices.Contains(Phases, r.Phase) {
		return outsideSet("phase", string(r.Phase))
	}
	if r.Outcome != "" && !slices.Contains(Outcomes, r.Outcome) {
		return outsideSet("outcome", string(r.Outcome))
	}
	if r.Code != "" && !slices.Contains(Codes, r.Code) {
		return outsideSet("code", string(r.Code))
	}
	for _, h := range r.ResponseHeaderMarker {
		if !headerNameRe(h) {
			return fmt.Errorf("runtimerecord: responseHeaderMarker holds a value that is not a header name (%d bytes, withheld: records carry no free text)", len(h))
		}
	}
	for _, c := range []error{
		check("container", r.Container, Containers),
		check("signal", r.Signal, Signals),
		check("failureClass", r.FailureClass, FailureClasses),
		check("causeKind", r.CauseKind, CauseKinds),
		check("causeDetail", r.CauseDetail, CauseDetails),
		check("bodyShape", r.BodyShape, BodyShapes),
		check("providerErrorCode", r.ProviderErrorCode, ProviderErrorValues),
		check("providerErrorType", r.ProviderErrorType, ProviderErrorValues),
		check("peer", r.Peer, Peers),
		check("peerStatus", r.PeerStatus, PeerStatuses),
	} {
		if c != nil {
			return c
		}
	}
	return nil
}

// outsideSet is the error for a value outside its closed set; it gives the
// value's length only.
func outsideSet(field, v string) error {
	return fmt.Errorf("runtimerecord: %s is not in its closed set (a value of %d bytes, withheld: records carry no free text)", field, len(v))
}

// headerNameRe accepts an HTTP header name (RFC 9110 token), lower-cased.
func headerNameRe(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Marshal encodes a valid record as one JSON line (no trailing newline).
func Marshal(r Record) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// Parse reads one log line. It returns false for lines that are not
// startup records (other JSON logs, plain text); a line that claims to be a
// record but breaks the closed sets is an error, so that a misbehaving
// runtime is reported rather than trusted.
func Parse(line []byte) (Record, bool, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Record{}, false, nil
	}
	var probe struct {
		Event Event `json:"event"`
	}
	if json.Unmarshal(line, &probe) != nil || !slices.Contains(Events, probe.Event) {
		return Record{}, false, nil
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return Record{}, true, fmt.Errorf("runtimerecord: malformed %s record: %s", probe.Event, jsonFault(err))
	}
	if err := r.Validate(); err != nil {
		return Record{}, true, err
	}
	return r, true, nil
}

// jsonFault describes why a record that is valid JSON does not decode,
// without the offending value (encoding/json quotes a number's literal,
// time.Time the whole string).
func jsonFault(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		kind, _, _ := strings.Cut(te.Value, " ") // "number 1e999" -> "number"
		return fmt.Sprintf("field %s holds a JSON %s, not a %s", te.Field, kind, te.Type)
	}
	// The only other decoder in a Record is time.Time's.
	return "field time is not an RFC 3339 time in a JSON string"
}
