package provider

import (
	"bytes"
	"context"
	"testing"

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
