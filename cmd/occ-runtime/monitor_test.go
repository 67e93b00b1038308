package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rule PR9: the monitor the wrapper leaves beside a gateway runs detached
// (monitor-detach returns at once), writes the gateway's records on the
// container's output, and ends when the gateway's process does.
func TestPR9_MonitorDetachesAndEndsWithTheGateway(t *testing.T) {
	harness := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable) // the harness is gone
	}))
	defer harness.Close()
	gateway := exec.Command("sleep", "120") // stands in for the gateway's process
	if err := gateway.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gateway.Process.Kill() }()

	var out syncBuffer
	cmd := exec.Command(os.Args[0], "monitor-detach", "--container=gateway", "--harness=openclaw",
		"--peer-ready="+harness.URL+"/readyz", "--gateway-pid="+strconv.Itoa(gateway.Process.Pid))
	cmd.Env = append(os.Environ(), asMain+"=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The detach itself returns at once; its output stays open while the
	// monitor it left runs.
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), `"peerStatus":"lost"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no peer-status-changed lost record; output:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), `"event":"peer-status-changed"`) || !strings.Contains(out.String(), `"container":"gateway"`) {
		t.Errorf("record %s", out.String())
	}

	_ = gateway.Process.Kill()
	_ = gateway.Wait()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // returns once the monitor closed the output
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("monitor-detach: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the monitor outlived the gateway's process; output:\n%s", out.String())
	}
}
