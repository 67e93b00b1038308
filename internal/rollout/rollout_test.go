package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const rotated = "credential source openai generation 2"

// wait bounds every wait of these tests; it holds on a loaded machine.
const wait = 10 * time.Second

// started reports, for each agent, when Enter returned.
type run struct {
	agent string
	t     *Ticket
	err   error
}

func enterAll(g *Gate, ctx context.Context, agents []string, changes []string) <-chan run {
	out := make(chan run, len(agents))
	for _, a := range agents {
		go func() {
			t, err := g.Enter(ctx, a, changes)
			out <- run{a, t, err}
		}()
	}
	return out
}

func next(t *testing.T, ch <-chan run) run {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(wait):
		t.Fatal("no agent entered the gate in time")
		return run{}
	}
}

func none(t *testing.T, ch <-chan run) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("agent %s entered (err %v) before the canary finished", r.agent, r.err)
	case <-time.After(200 * time.Millisecond):
	}
}

// rule issue 31: the first canary agents of a change go first; the others
// wait for them and then go together.
func TestGate_CanariesGoFirst(t *testing.T) {
	g := New(Settings{HaltOnFailure: true, Canary: 1})
	ctx := context.Background()
	first, err := g.Enter(ctx, "a0", []string{rotated})
	if err != nil || !first.Canary() {
		t.Fatalf("the first agent: %v, canary %v", err, first != nil && first.Canary())
	}
	rest := enterAll(g, ctx, []string{"a1", "a2", "a3"}, []string{rotated})
	none(t, rest)
	first.Done("")
	for range 3 {
		r := next(t, rest)
		if r.err != nil || r.t.Canary() {
			t.Fatalf("%s after the canary: %v, canary %v", r.agent, r.err, r.t != nil && r.t.Canary())
		}
		r.t.Done("")
	}
}

// rule issue 31: a canary's failure halts the agents of the same change,
// naming the agent and its code; an agent of another change goes on.
func TestGate_FailureHaltsTheSameChange(t *testing.T) {
	g := New(Settings{HaltOnFailure: true, Canary: 2})
	ctx := context.Background()
	c0, _ := g.Enter(ctx, "a0", []string{rotated})
	c1, _ := g.Enter(ctx, "a1", []string{rotated})
	if !c0.Canary() || !c1.Canary() {
		t.Fatal("the first two agents are not canaries")
	}
	rest := enterAll(g, ctx, []string{"a2", "a3"}, []string{rotated})
	none(t, rest)
	c0.Done("AUTHENTICATION_FAILED")
	for range 2 {
		r := next(t, rest)
		var h *Halted
		if !errors.As(r.err, &h) || h.FailedAgent != "a0" || h.Code != "AUTHENTICATION_FAILED" || h.Change != rotated || h.Agent != r.agent {
			t.Fatalf("%s: %v, want halted by a0's AUTHENTICATION_FAILED", r.agent, r.err)
		}
	}
	c1.Done("") // a canary already running finishes
	if _, err := g.Enter(ctx, "late", []string{rotated}); err == nil {
		t.Fatal("an agent of the failed change entered later")
	}
	other, err := g.Enter(ctx, "b0", []string{"configuration other generation 3"})
	if err != nil {
		t.Fatalf("an agent of another change: %v", err)
	}
	other.Done("")
}

// Without halt_on_failure, a failed canary only orders the change.
func TestGate_NoHaltGoesOn(t *testing.T) {
	g := New(Settings{Canary: 1})
	ctx := context.Background()
	c, _ := g.Enter(ctx, "a0", []string{rotated})
	rest := enterAll(g, ctx, []string{"a1"}, []string{rotated})
	none(t, rest)
	c.Done("AUTHENTICATION_FAILED")
	if r := next(t, rest); r.err != nil {
		t.Fatalf("a1: %v", r.err)
	}
}

// rule issue 31: at most max_parallel deploys run at once.
func TestGate_MaxParallel(t *testing.T) {
	g := New(Settings{MaxParallel: 3})
	var now, peak atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := g.Enter(context.Background(), fmt.Sprint("a", i), nil)
			if err != nil {
				t.Error(err)
				return
			}
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			now.Add(-1)
			tk.Done("")
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 1 {
		t.Fatalf("peak %d deploys at once, want at most 3", p)
	}
}

// Two agents that are each the canary of one change and not of the
// other do not wait on each other.
func TestGate_CrossedCanariesDoNotDeadlock(t *testing.T) {
	g := New(Settings{HaltOnFailure: true, Canary: 1})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a, err := g.Enter(ctx, "a", []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Enter(ctx, "b", []string{"y"})
	if err != nil {
		t.Fatal(err)
	}
	// c changes both: x's and y's canary places are taken; it waits for both.
	rest := enterAll(g, ctx, []string{"c"}, []string{"x", "y"})
	a.Done("")
	none(t, rest)
	b.Done("")
	if r := next(t, rest); r.err != nil {
		t.Fatal(r.err)
	}
}

// A waiting agent whose deadline passes leaves without a place.
func TestGate_DeadlineWhileWaiting(t *testing.T) {
	g := New(Settings{HaltOnFailure: true, Canary: 1, MaxParallel: 1})
	c, _ := g.Enter(context.Background(), "a0", []string{rotated})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Enter(ctx, "a1", []string{rotated}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a1: %v, want the deadline", err)
	}
	// A canary of another change waits for the slot a0 holds, then leaves.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := g.Enter(ctx2, "b0", []string{"other"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b0: %v, want the deadline", err)
	}
	c.Done("")
	// b0 gave its canary place back: the next agent of "other" is its canary.
	b1, err := g.Enter(context.Background(), "b1", []string{"other"})
	if err != nil || !b1.Canary() {
		t.Fatalf("b1: %v, canary %v", err, b1 != nil && b1.Canary())
	}
	b1.Done("")
}
