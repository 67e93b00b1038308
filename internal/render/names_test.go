package render

import (
	"strings"
	"testing"
)

// rules LG4, HM4: the agent-name limit on Kubernetes is the longest name
// whose label-limited derived names (Services, the Sandboxes and their
// Services, the agent label) all fit 63 characters at a revision number of
// up to MaxRevisionDigits digits; one character more does not fit.
func TestLG4_AgentNameLimitFitsDerivedNames(t *testing.T) {
	limit := MaxAgentNameLength()
	for _, tc := range []struct {
		length int
		fits   bool
	}{{1, true}, {limit, true}, {limit + 1, false}, {LabelMaxLength, false}} {
		agent := strings.Repeat("a", tc.length)
		fits := true
		for _, n := range []int64{1, 999999} {
			for _, name := range LabelLimitedNames(agent, n) {
				if len(name) > LabelMaxLength {
					fits = false
				}
			}
		}
		if fits != tc.fits {
			t.Errorf("agent name of %d characters: derived names fit = %v, want %v", tc.length, fits, tc.fits)
		}
	}
	if got, want := LongestLabelName("support"), HarnessSandboxName("support", 999999); got != want {
		t.Errorf("LongestLabelName = %q, want %q", got, want)
	}
	if limit != 47 {
		t.Errorf("MaxAgentNameLength() = %d, want 47", limit)
	}
}
