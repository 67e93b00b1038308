package startup

import (
	"math/rand/v2"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// Policy is the probe's retry policy (PR4): at most MaxAttempts attempts of
// at most Attempt each, all inside Budget, the delay between attempts
// included; a retry only after a retryable class, after a delay drawn
// uniformly from [MinDelay, MaxDelay].
type Policy struct {
	MaxAttempts        int
	Attempt            time.Duration
	Budget             time.Duration
	MinDelay, MaxDelay time.Duration
	// Rand draws from [0, 1); nil is math/rand.
	Rand func() float64
}

// Minimum time an attempt must have left for a retry to be worth making.
const minAttempt = 250 * time.Millisecond

// PolicyFor derives the policy from the admitted probe settings: Codex's
// attempts and budget (PR4), or OpenClaw's single call whose budget is
// 20 s plus 45 CPU-seconds at the CPU limit (PR1).
func PolicyFor(p admission.Probe, cpuMillis int64) Policy {
	pol := Policy{MaxAttempts: p.MaxAttempts, MinDelay: time.Second, MaxDelay: 1500 * time.Millisecond}
	if pol.MaxAttempts < 1 {
		pol.MaxAttempts = 1
	}
	pol.Budget = p.Budget(cpuMillis)
	if pol.Budget <= 0 {
		pol.Budget = 20 * time.Second
	}
	pol.Attempt = time.Duration(p.AttemptSeconds) * time.Second
	if pol.Attempt <= 0 || pol.Attempt > pol.Budget {
		pol.Attempt = pol.Budget
	}
	return pol
}

// delay draws the wait before a retry.
func (p Policy) delay() time.Duration {
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	span := p.MaxDelay - p.MinDelay
	return p.MinDelay + time.Duration(r()*float64(span))
}

// Next decides, after attempt number attempt (from 1) failed with class c
// at elapsed time since the probe began, whether to retry and after which
// delay: only a retryable class, only while attempts remain, and only if
// the delay leaves the next attempt time inside the budget.
func (p Policy) Next(c Class, attempt int, elapsed time.Duration) (time.Duration, bool) {
	if !c.Retryable() || attempt >= p.MaxAttempts {
		return 0, false
	}
	d := p.delay()
	if p.Budget-elapsed-d < minAttempt {
		return 0, false
	}
	return d, true
}

// AttemptTimeout is the cap of an attempt that starts at elapsed: the
// attempt cap or what is left of the budget, whichever is shorter.
func (p Policy) AttemptTimeout(elapsed time.Duration) time.Duration {
	left := p.Budget - elapsed
	if left < p.Attempt {
		return left
	}
	return p.Attempt
}
