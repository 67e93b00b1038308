package startup

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Recorder writes startup records, one JSON line each, through the one
// record definition (runtimerecord.Marshal): a record that would break a
// closed set is never written.
type Recorder struct {
	mu        sync.Mutex
	w         io.Writer
	container string
	start     time.Time
	now       func() time.Time
}

// NewRecorder writes records for container to w; elapsed times count from start.
func NewRecorder(w io.Writer, container string, start time.Time, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{w: w, container: container, start: start, now: now}
}

// Write stamps the record with the time and the container and writes it.
func (r *Recorder) Write(rec runtimerecord.Record) error {
	rec.Time = r.now().UTC()
	if rec.Container == "" {
		rec.Container = r.container
	}
	b, err := runtimerecord.Marshal(rec)
	if err != nil {
		return err
	}
	return r.line(b)
}

// line writes one JSON line; lines of concurrent writers never interleave.
func (r *Recorder) line(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.w.Write(append(b, '\n'))
	return err
}

// Log writes one fixed message of the wrapper's own as a JSON log line
// beside the records (not a record: runtimerecord.Parse passes over it).
// msg is a constant of this package, never a value from the surroundings.
func (r *Recorder) Log(msg string) error {
	b, err := json.Marshal(struct {
		Time      time.Time `json:"time"`
		Level     string    `json:"level"`
		Container string    `json:"container,omitempty"`
		Msg       string    `json:"msg"`
	}{r.now().UTC(), "info", r.container, msg})
	if err != nil {
		return err
	}
	return r.line(b)
}

// Phase writes the runtime.startup_phase record of a phase that began at
// began (PR9): container, phase, outcome, duration and elapsed startup
// time, and nothing else but, for a failed login, its closed code and
// failure class.
func (r *Recorder) Phase(p runtimerecord.Phase, o runtimerecord.Outcome, began time.Time, extra *runtimerecord.Record) error {
	now := r.now()
	rec := runtimerecord.Record{Event: runtimerecord.EventStartupPhase, Phase: p, Outcome: o,
		ElapsedMS: now.Sub(r.start).Milliseconds()}
	if !began.IsZero() {
		rec.DurationMS = now.Sub(began).Milliseconds()
	}
	if extra != nil {
		rec.Code, rec.FailureClass = extra.Code, extra.FailureClass
	}
	return r.Write(rec)
}

// probeRecord is the record of a probe outcome (codex.model_probe per
// attempt, openclaw.model_probe once).
func probeRecord(ev runtimerecord.Event, o Outcome) runtimerecord.Record {
	rec := runtimerecord.Record{Event: ev, Code: o.Code, FailureClass: string(o.Class),
		CauseKind: o.CauseKind, CauseDetail: o.CauseDetail, ProviderCode: o.ProviderCode}
	if rec.Code != runtimerecord.CodeModelProbeFailed {
		rec.CauseKind, rec.CauseDetail = "", ""
	}
	if u := o.Upfront; u != nil {
		rec.ResponseHeaderMarker, rec.BodyShape = u.HeaderMarker, u.BodyShape
		rec.ProviderErrorCode, rec.ProviderErrorType = u.ErrorCode, u.ErrorType
	}
	return rec
}
