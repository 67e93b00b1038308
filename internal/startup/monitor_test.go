package startup

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// records reads the records a monitor wrote.
func monitorRecords(t *testing.T, out *syncBuffer) []runtimerecord.Record {
	t.Helper()
	var recs []runtimerecord.Record
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		r, ok, err := runtimerecord.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if ok {
			recs = append(recs, r)
		}
	}
	return recs
}

// switchable answers /readyz 200 while up, 503 otherwise.
func switchable(up *atomic.Bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
}

// rule PR9: the starts of one container instance are counted in its TMPDIR.
func TestPR9_CountStart(t *testing.T) {
	dir := t.TempDir()
	for want := 1; want <= 3; want++ {
		n, err := CountStart(dir)
		if err != nil || n != want {
			t.Fatalf("CountStart = %d, %v; want %d", n, err, want)
		}
	}
	if n, err := CountStart(t.TempDir()); err != nil || n != 1 {
		t.Errorf("a new instance's first start = %d, %v; want 1", n, err)
	}
}

// rule PR9: a gateway restarted in its container logs gateway-respawn once
// it serves again, with the start's number; a first start logs nothing.
func TestPR9_GatewayRespawn(t *testing.T) {
	var up atomic.Bool
	gw := switchable(&up)
	defer gw.Close()
	out := &syncBuffer{}
	rec := NewRecorder(out, "gateway", time.Now(), nil)

	if (MonitorOptions{Start: 1, GatewayReady: gw.URL}).MonitorNeeded() {
		t.Error("a first start without a peer needs a monitor")
	}
	done := make(chan error, 1)
	go func() {
		done <- Monitor(context.Background(), MonitorOptions{Rec: rec, Start: 3, GatewayReady: gw.URL, Poll: 20 * time.Millisecond})
	}()
	time.Sleep(100 * time.Millisecond)
	if recs := monitorRecords(t, out); len(recs) != 0 {
		t.Fatalf("records before the gateway serves: %+v", recs)
	}
	up.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor did not end after reporting the respawn")
	}
	recs := monitorRecords(t, out)
	if len(recs) != 1 || recs[0].Event != runtimerecord.EventGatewayRespawn || recs[0].Attempt != 3 || recs[0].Container != "gateway" {
		t.Fatalf("records %+v, want one gateway-respawn of start 3", recs)
	}
}

// rule PR9: a dedicated gateway logs peer-status-changed when its harness
// is lost (two failed checks in a row) and when it is ready again.
func TestPR9_PeerStatusChanged(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	h := switchable(&up)
	defer h.Close()
	out := &syncBuffer{}
	o := MonitorOptions{Rec: NewRecorder(out, "gateway", time.Now(), nil), Start: 1, PeerReady: h.URL, Poll: 20 * time.Millisecond}
	if !o.MonitorNeeded() {
		t.Fatal("a dedicated gateway needs a monitor")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Monitor(ctx, o) }()

	waitRecords := func(n int) []runtimerecord.Record {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if recs := monitorRecords(t, out); len(recs) >= n {
				return recs
			}
			if time.Now().After(deadline) {
				t.Fatalf("want %d records, have %+v", n, monitorRecords(t, out))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	up.Store(false)
	recs := waitRecords(1)
	up.Store(true)
	recs = waitRecords(2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("records %+v", recs)
	}
	for i, want := range []string{"lost", "ready"} {
		r := recs[i]
		if r.Event != runtimerecord.EventPeerStatusChanged || r.Peer != "harness" || r.PeerStatus != want || r.Container != "gateway" {
			t.Errorf("record %d = %+v, want peer-status-changed harness %s", i, r, want)
		}
	}
}
