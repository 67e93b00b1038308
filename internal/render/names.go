package render

import (
	"regexp"
	"strings"
)

// The agent-name limit on Kubernetes, in one place: the provider's agent
// name validator refuses at plan a name whose derived names Kubernetes
// would refuse only at apply.

// LabelMaxLength is what Kubernetes allows a Service name (a DNS-1035
// label) and a label value: 63 characters. ConfigMap, Secret, Deployment
// and ServiceAccount names may be DNS subdomains of up to 253, so the
// labels bound the agent name.
const LabelMaxLength = 63

// MaxRevisionDigits is the revision numbers the limit assumes: up to six
// digits, 999999 deployments of one agent (a revision grows by one per
// deployment). A name at the limit fails a later deployment only past it.
const MaxRevisionDigits = 6

// maxRevision is the largest revision number with MaxRevisionDigits digits.
func maxRevision() int64 {
	n := int64(1)
	for range MaxRevisionDigits {
		n *= 10
	}
	return n - 1
}

// LabelLimitedNames are the names derived from an agent's name that
// Kubernetes holds to LabelMaxLength, at revision n: the agent's Service,
// the unsandboxed harness's Service, the Sandbox of a sandboxed harness
// (with a headless Service named like it), and the agent label itself
// (LG4).
func LabelLimitedNames(agent string, n int64) []string {
	return []string{ServiceName(agent), HarnessServiceName(agent), HarnessSandboxName(agent, n), agent}
}

// LongestLabelName is the longest of LabelLimitedNames at the largest
// revision number the limit assumes (MaxRevisionDigits).
func LongestLabelName(agent string) string {
	longest := ""
	for _, s := range LabelLimitedNames(agent, maxRevision()) {
		if len(s) > len(longest) {
			longest = s
		}
	}
	return longest
}

// MaxAgentNameLength is the longest agent name whose every label-limited
// derived name fits LabelMaxLength on a Kubernetes compute, for revision
// numbers of up to MaxRevisionDigits digits: 47, as NAME-harness-r999999
// is the longest. SSH computes have no such limit of their own (their unit
// and user names allow more; ServiceUser shortens a long name).
func MaxAgentNameLength() int {
	const probe = "a"
	return LabelMaxLength - (len(LongestLabelName(probe)) - len(probe))
}

// sandboxServiceName matches the names of the headless Services the
// sandbox driver gives an agent's Sandboxes (HarnessSandboxName,
// NodeSandboxName): AGENT-harness-rN and AGENT-node-rN.
var sandboxServiceName = regexp.MustCompile(`^([a-z][-a-z0-9]*)-(harness|node)-r[1-9][0-9]*$`)

// SandboxServiceOwner reports whether an agent's own Service, named like
// the agent (ServiceName), would bear the name of the Service the
// agent-sandbox controller makes for another agent's Sandbox in the same
// namespace: the other agent, and ok. The controller, not the provider,
// writes that Service,
// so no create guard stands between the two: such a name is refused on a
// Kubernetes compute.
func SandboxServiceOwner(agent string) (other string, ok bool) {
	m := sandboxServiceName.FindStringSubmatch(agent)
	if m == nil || strings.HasSuffix(m[1], "-") {
		return "", false
	}
	return m[1], true
}
