package sandboxapi

import (
	"os"
	"strings"
	"testing"
)

// rule OS1: a Ready=False reason of agent-sandbox v1.0 that will not
// change without a new revision fails the apply at once; progress is
// waited for. (The real controller's texts for a refused Pod are checked
// against it in internal/testenv/kubeenv.)
func TestOS1_Terminal(t *testing.T) {
	for _, tc := range []struct {
		reason, message string
		want            bool
	}{
		{ReasonDependenciesNotReady, "Pod exists with phase: Pending", false},
		{ReasonDependenciesNotReady, "Pod is Running but not Ready", false},
		{ReasonReconcilerError, `Error seen: Pod "a-harness-r1" is invalid: spec.restartPolicy: Unsupported value: "Sometimes"`, true},
		{ReasonReconcilerError, `Error seen: pods "a-harness-r1" is forbidden: exceeded quota: no-pods`, true},
		{ReasonReconcilerError, "Error seen: Operation cannot be fulfilled on sandboxes: the object has been modified", false},
		{ReasonReconcilerError, "Error seen: context deadline exceeded", false},
		{ReasonPodFailed, "Pod failed", true},
		{ReasonPodSucceeded, "Pod completed successfully", true},
		{ReasonMultiplePods, "2 pods", true},
		{ReasonExpired, "", true},
		{ReasonSuspended, "Sandbox is suspended", true},
		{"SomethingNew", "is invalid: ", false},
	} {
		if got := Terminal(tc.reason, tc.message); got != tc.want {
			t.Errorf("Terminal(%q, %q) = %v, want %v", tc.reason, tc.message, got, tc.want)
		}
	}
}

// The extension page names every annotation, condition, reason and gate
// of the contract, and every upstream reason the provider acts on: a
// driver author reads it, not this package.
func TestExtensionPageNamesTheContract(t *testing.T) {
	b, err := os.ReadFile("../../docs/guides/sandbox-extension.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, s := range []string{
		Extension, Version, Group,
		AnnotationFacets, AnnotationRequiredProfile, AnnotationAttachments, SchedulingGate,
		ConditionPlaced, ReasonPlaced, ReasonFacetUnsupported, ReasonProfileUnavailable,
		AttachmentConditionPrefix + "<name>", Placeholder, DefaultGatewayNamespace + "/" + DefaultGatewayService,
		ConditionReady, ReasonDependenciesReady, ReasonReconcilerError, ReasonPodFailed, ReasonPodSucceeded,
		ReasonMultiplePods, ReasonExpired, ReasonSuspended,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("docs/guides/sandbox-extension.md does not name %q", s)
		}
	}
}
