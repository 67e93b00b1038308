// Package rollout is the gate the agents deployed by one apply share in
// the provider process (the provider's rollout setting): at most
// MaxParallel activations at once; for each change (a configuration or
// credential source at a generation), the first Canary agents that deploy
// it go first and the others wait for them; and with HaltOnFailure, once
// an agent deploying a change fails, the agents of the same apply that
// would deploy that change do not start.
//
// Terraform applies the resources of one run in one provider process, so
// the gate sees every agent of the apply; separate applies (and separate
// HCP Terraform runs) each have their own.
package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Settings are the provider's rollout setting.
type Settings struct {
	// HaltOnFailure: an agent that fails deploying a change stops the
	// agents of the same apply that would deploy it, before they write.
	HaltOnFailure bool
	// Canary: how many agents deploy a change before the others of the
	// apply start it (0: no order).
	Canary int
	// MaxParallel bounds the activations running at once (0: no bound).
	MaxParallel int
}

// Halted is the refusal of an agent whose change failed on another agent
// of the same apply: it wrote nothing.
type Halted struct {
	// Agent is the one that asked to deploy; FailedAgent the one that
	// failed, with Code and Change (what both would deploy).
	Agent, FailedAgent, Code, Change string
}

func (h *Halted) Error() string {
	return fmt.Sprintf("agent %q was not deployed: agent %q failed with %s deploying the same change (%s) in this apply", h.Agent, h.FailedAgent, h.Code, h.Change)
}

// failure is the first failure of a change.
type failure struct{ agent, code string }

// change is what the gate knows of one change.
type change struct {
	canaries int // agents that took a canary place
	running  int // canaries not finished
	failed   *failure
}

// Gate is one provider process's rollout gate.
type Gate struct {
	s     Settings
	slots chan struct{}

	mu      sync.Mutex
	changes map[string]*change
	// wake is closed, and replaced, whenever a change's canaries finish
	// or a change fails: the waiting agents look again.
	wake chan struct{}
}

// New returns a gate with settings s.
func New(s Settings) *Gate {
	g := &Gate{s: s, changes: map[string]*change{}, wake: make(chan struct{})}
	if s.MaxParallel > 0 {
		g.slots = make(chan struct{}, s.MaxParallel)
	}
	return g
}

// Settings returns the gate's settings.
func (g *Gate) Settings() Settings { return g.s }

// Ticket is an agent's place in the gate, from Enter to Done.
type Ticket struct {
	g       *Gate
	agent   string
	changes []string
	canary  []string // the changes it is a canary of
	slot    bool
	once    sync.Once
}

// Enter waits until agent may deploy changes (the keys of what its
// revision changes; none: only MaxParallel applies), and returns its
// ticket; Done must follow. An agent that takes a canary place for any of
// its changes goes at once (so two canaries never wait on each other);
// the others wait until every canary of their changes has finished. A
// change that failed (HaltOnFailure) refuses with *Halted; ctx ending
// returns its error. Neither writes anything.
func (g *Gate) Enter(ctx context.Context, agent string, changes []string) (*Ticket, error) {
	keys := append([]string(nil), changes...)
	sort.Strings(keys)
	t := &Ticket{g: g, agent: agent, changes: keys}
	g.mu.Lock()
	if err := g.haltedLocked(agent, keys); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	for _, k := range keys {
		c := g.change(k)
		if c.canaries < g.s.Canary {
			c.canaries++
			c.running++
			t.canary = append(t.canary, k)
		}
	}
	g.mu.Unlock()
	if len(t.canary) == 0 {
		for {
			g.mu.Lock()
			if err := g.haltedLocked(agent, keys); err != nil {
				g.mu.Unlock()
				return nil, err
			}
			waiting := false
			for _, k := range keys {
				if g.changes[k].running > 0 {
					waiting = true
				}
			}
			wake := g.wake
			g.mu.Unlock()
			if !waiting {
				break
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if g.slots != nil {
		select {
		case g.slots <- struct{}{}:
			t.slot = true
		case <-ctx.Done():
			t.leave()
			return nil, ctx.Err()
		}
	}
	// A change may have failed while this agent waited for a slot.
	g.mu.Lock()
	err := g.haltedLocked(agent, keys)
	g.mu.Unlock()
	if err != nil {
		t.leave()
		return nil, err
	}
	return t, nil
}

// Canary reports whether the ticket's agent took a canary place.
func (t *Ticket) Canary() bool { return len(t.canary) > 0 }

// Done ends the agent's deploy: code is its failure code, "" when it
// activated (or wrote nothing of the change). With HaltOnFailure a
// failure marks each of its changes failed.
func (t *Ticket) Done(code string) { t.end(code, true) }

// leave ends a ticket whose agent did not deploy: its canary places go
// back to the agents still to come.
func (t *Ticket) leave() { t.end("", false) }

func (t *Ticket) end(code string, deployed bool) {
	t.once.Do(func() {
		g := t.g
		if t.slot {
			<-g.slots
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		woke := false
		for _, k := range t.canary {
			c := g.changes[k]
			c.running--
			if !deployed {
				c.canaries--
			}
			woke = woke || c.running == 0
		}
		if code != "" && g.s.HaltOnFailure {
			for _, k := range t.changes {
				if c := g.changes[k]; c.failed == nil {
					c.failed = &failure{agent: t.agent, code: code}
					woke = true
				}
			}
		}
		if woke {
			close(g.wake)
			g.wake = make(chan struct{})
		}
	})
}

func (g *Gate) change(k string) *change {
	c := g.changes[k]
	if c == nil {
		c = &change{}
		g.changes[k] = c
	}
	return c
}

func (g *Gate) haltedLocked(agent string, keys []string) error {
	if !g.s.HaltOnFailure {
		return nil
	}
	for _, k := range keys {
		if c := g.changes[k]; c != nil && c.failed != nil {
			return &Halted{Agent: agent, FailedAgent: c.failed.agent, Code: c.failed.code, Change: k}
		}
	}
	return nil
}

// Key names a change: what it is (kind, for example "credential source"),
// its id and the generation deployed.
func Key(kind, id string, generation int64) string {
	return fmt.Sprintf("%s %s generation %d", kind, strings.TrimSpace(id), generation)
}
