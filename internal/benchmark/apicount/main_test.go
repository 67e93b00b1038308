package main

import (
	"strings"
	"testing"
)

// The counter's samples are added up, whatever their labels; other
// metrics, comments and a metric whose name only starts the same are not.
func TestSumCounter(t *testing.T) {
	body := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="GET"} 12
apiserver_request_total{code="201",resource="secrets",verb="POST"} 3.0
apiserver_request_total_other{verb="GET"} 100
apiserver_request_duration_seconds_count{verb="GET"} 7
apiserver_request_total 5
`
	got, err := sumCounter([]byte(body), "apiserver_request_total")
	if err != nil || got != 20 {
		t.Fatalf("sum = %d, %v; want 20", got, err)
	}
	if _, err := sumCounter([]byte("up 1\n"), "apiserver_request_total"); err == nil || !strings.Contains(err.Error(), "no apiserver_request_total") {
		t.Errorf("no samples: %v", err)
	}
	if _, err := sumCounter([]byte(`apiserver_request_total{verb="GET"} x`), "apiserver_request_total"); err == nil {
		t.Error("a sample that is not a number was added")
	}
}

// The API server's metrics are text from the network: any body gives a
// sum or an error, never a panic.
func FuzzSumCounter(f *testing.F) {
	f.Add([]byte("apiserver_request_total{a=\"}\"} 1\n"))
	f.Add([]byte("apiserver_request_total{\n"))
	f.Add([]byte("apiserver_request_total} 2 1700000000\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _ = sumCounter(body, "apiserver_request_total")
	})
}
