package startup

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// endless repeats one chunk for ever: an endpoint that streams without end.
type endless struct {
	chunk []byte
	off   int
	read  int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], e.chunk[e.off:])
		n += c
		e.off = (e.off + c) % len(e.chunk)
	}
	e.read += int64(n)
	return n, nil
}

// Issue 27: the startup probe's event stream is bounded: a stream without
// end, an event of endless data lines and an endless line each stop the
// read at its bound with errStreamTooLarge, and the probe fails that
// attempt as a protocol failure (stream_error), holding no more than the
// bounds in memory.
func TestReadSSE_Bounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		chunk string
		max   int64
	}{
		{"endless events", "event: ping\ndata: {}\n\n", maxSSEStream + 64<<10},
		{"one endless event", "data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", 2*maxSSEEvent + 64<<10}, // the event and the scanner's read-ahead
		{"one endless line", "data: " + strings.Repeat("x", 4096), maxSSEEvent + 64<<10},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &endless{chunk: []byte(c.chunk)}
			events := 0
			err := readSSE(r, func(string, []byte) bool { events++; return true })
			if !errors.Is(err, errStreamTooLarge) || r.read > c.max {
				t.Fatalf("readSSE = %v after %d bytes (%d events), want errStreamTooLarge within %d bytes", err, r.read, events, c.max)
			}
			st := &probeState{p: &HTTPProbe{Endpoint: Endpoint{API: APICompletions}}}
			perr := st.readStream(&http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(&endless{chunk: []byte(c.chunk)})})
			var pe *probeError
			if !errors.As(perr, &pe) || pe.out.Class != ClassProtocol || pe.out.CauseKind != "protocol" || pe.out.CauseDetail != "stream_error" {
				t.Fatalf("readStream = %v, want a protocol failure (stream_error)", perr)
			}
		})
	}
}
