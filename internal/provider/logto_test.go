package provider

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"

	"github.com/hashicorp/terraform-plugin-log/tflogtest"
)

// A runtime's startup phase reaches TF_LOG=INFO as it is read; a
// warning is a warning; every other phase message stays at DEBUG.
func TestLogTo_Levels(t *testing.T) {
	var out bytes.Buffer
	ctx := tflogtest.RootLogger(context.Background(), &out)
	log := logTo(ctx, map[string]any{"work.target": "agent support"})
	log("startup phase model_probe ok", map[string]any{"level": "info", "phase": "model_probe"})
	log("SSH host key verification is off", map[string]any{"level": "warn"})
	log("applying revision", map[string]any{"revision": 2})
	entries, err := tflogtest.MultilineJSONDecode(&out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"info", "warn", "debug"}
	if len(entries) != len(want) {
		t.Fatalf("%d entries: %v", len(entries), entries)
	}
	for i, e := range entries {
		if e["@level"] != want[i] || e["work.target"] != "agent support" {
			t.Errorf("entry %d: %v; want level %s with the operation's fields", i, e, want[i])
		}
		if _, ok := e["level"]; ok {
			t.Errorf("entry %d keeps the level field: %v", i, e)
		}
	}
	if entries[0]["phase"] != "model_probe" {
		t.Errorf("the phase entry lost its fields: %v", entries[0])
	}
}

// Issue 30: waitProgress says how long a wait has lasted at every tick
// and sends nothing once stopped.
func TestWaitProgress(t *testing.T) {
	var mu sync.Mutex
	var got []string
	stop := waitProgress(func(e action.InvokeProgressEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e.Message)
	}, 10*time.Millisecond, func(d time.Duration) string { return "waited" })
	time.Sleep(55 * time.Millisecond)
	stop()
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n < 2 {
		t.Fatalf("%d progress messages in 55ms at one per 10ms", n)
	}
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("%d messages sent after stop", len(got)-n)
	}
	waitProgress(nil, time.Millisecond, func(time.Duration) string { return "" })() // no sender: nothing to do
}
