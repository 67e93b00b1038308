package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// One cluster per test binary: Shared starts it on first use, Main stops it
// when the tests are done. Tests isolate by namespace (CreateNamespace,
// TestNamespace).
var shared struct {
	mu         sync.Mutex
	mainActive bool
	started    bool
	cluster    *Cluster
	err        error
}

// Main runs the tests and then stops the shared cluster, if one was
// started. Every test package that calls Shared needs it:
//
//	func TestMain(m *testing.M) { os.Exit(kubeenv.Main(m)) }
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.mainActive = true
	shared.mu.Unlock()
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the shared cluster (Main calls it).
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		shared.cluster.Stop()
		shared.cluster = nil
	}
}

// Shared returns the test binary's cluster, starting it on first use
// (about 10 s). When it cannot start, the test fails with the failing
// server's log tail, except outside CI when the binaries are missing: then
// the test is skipped with a message naming `make testenv`.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.mainActive {
		t.Fatal("testenv/kubeenv: Shared needs `func TestMain(m *testing.M) { os.Exit(kubeenv.Main(m)) }` " +
			"in the test package, so that the cluster is stopped after the tests")
	}
	if !shared.started {
		shared.started = true
		opts := Options{}
		if testing.Verbose() {
			opts.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
		}
		shared.cluster, shared.err = Start(context.Background(), opts)
	}
	if shared.err != nil {
		SkipOrFail(t, shared.err)
	}
	return shared.cluster
}

// InCI reports whether CI is set to true (as .ci/run does).
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// SkipOrFail ends the test for a backend that could not start: a skip when
// the binaries are missing and CI is not set, a failure otherwise.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrBinariesMissing) && !InCI() {
		t.Skipf("skipping: %v", err)
	}
	t.Fatalf("%v", err)
}

// TestNamespace creates a namespace for t (name from the test's name) and
// deletes it when t ends.
func (c *Cluster) TestNamespace(t testing.TB) string {
	t.Helper()
	return c.testNamespace(t, "")
}

// testNamespace is TestNamespace with a placement ("" for the cluster's
// default; see PlacementAnnotations).
func (c *Cluster) testNamespace(t testing.TB, placement string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := c.createNamespace(ctx, namespacePrefix(t.Name()), placement)
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, deleteNow)
	})
	return ns
}

// namespacePrefix turns a test name into a DNS label prefix (at most 40
// characters, lower case, [a-z0-9-]).
func namespacePrefix(name string) string {
	b := make([]byte, 0, len(name))
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b = append(b, byte(r))
		case r >= 'A' && r <= 'Z':
			b = append(b, byte(r-'A'+'a'))
		default:
			if len(b) > 0 && b[len(b)-1] != '-' {
				b = append(b, '-')
			}
		}
		if len(b) >= 40 {
			break
		}
	}
	for len(b) > 0 && b[len(b)-1] == '-' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || b[0] < 'a' || b[0] > 'z' {
		b = append([]byte("t-"), b...)
	}
	return string(b)
}
