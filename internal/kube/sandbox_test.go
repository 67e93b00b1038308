package kube

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

func sandboxWith(attachments string, conds ...map[string]any) *unstructured.Unstructured {
	raw := make([]any, len(conds))
	for i, c := range conds {
		raw[i] = c
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "coder-harness-r1", "labels": map[string]any{render.LabelComponent: render.ComponentHarness}},
		"status":   map[string]any{"conditions": raw},
	}}
	if attachments != "" {
		u.SetAnnotations(map[string]string{sandboxapi.AnnotationAttachments: attachments})
	}
	return u
}

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": "2026-11-29T00:00:00Z"}
}

// rules AU3, OS1: a sandboxed revision activates only when the driver
// reports its Sandbox Ready and every attachment attached; a failed
// attachment or a refusal by the driver fails at once.
func TestAU3_SandboxVerdict(t *testing.T) {
	att := sandboxapi.EncodeAttachments([]sandboxapi.Attachment{{Name: "openai", Gateway: "cg-main", SourceType: "openai_api_key"}})
	attached := cond(sandboxapi.AttachmentCondition("openai"), "True", "Attached", "")
	placed := cond(sandboxapi.ConditionPlaced, "True", sandboxapi.ReasonPlaced, "")
	tests := []struct {
		name     string
		sb       *unstructured.Unstructured
		ready    bool
		waiting  string
		failCode executor.Code
	}{
		{"no status yet", sandboxWith(att), false, "waiting for the sandbox driver to place the Sandbox (facets, required profile)", ""},
		{"not placed yet", sandboxWith(att, cond("Ready", "False", "DependenciesNotReady", "Pod exists with phase: Pending"), attached), false,
			"waiting for the sandbox driver to place the Sandbox (facets, required profile)", ""},
		{"facet refused", sandboxWith(att, cond(sandboxapi.ConditionPlaced, "False", sandboxapi.ReasonFacetUnsupported, "the driver has no process facet")), false, "", executor.SandboxProvisioning},
		{"profile refused", sandboxWith(att, cond(sandboxapi.ConditionPlaced, "False", sandboxapi.ReasonProfileUnavailable, "no profile gpu-b")), false, "", executor.SandboxProvisioning},
		{"placed, no Ready yet", sandboxWith(att, placed), false, "the agent-sandbox controller has not reported the Sandbox Ready", ""},
		{"ready, attachment pending", sandboxWith(att, placed, cond("Ready", "True", "DependenciesReady", "")), false, "waiting for credential attachments: openai", ""},
		{"ready and attached", sandboxWith(att, placed, cond("Ready", "True", "DependenciesReady", ""), attached), true, "", ""},
		{"ready without attachments", sandboxWith("", placed, cond("Ready", "True", "DependenciesReady", "")), true, "", ""},
		{"attached, pod not ready", sandboxWith(att, placed, cond("Ready", "False", "DependenciesNotReady", "Pod is Running but not Ready"), attached), false,
			"the agent-sandbox controller has not reported the Sandbox Ready (DependenciesNotReady: Pod is Running but not Ready)", ""},
		{"attachment failed", sandboxWith(att, placed, cond("Ready", "True", "DependenciesReady", ""), cond(sandboxapi.AttachmentCondition("openai"), "False", "KeyNotFound", "no key")), false, "", executor.AttachmentFailed},
		{"pod refused", sandboxWith(att, placed, cond("Ready", "False", "ReconcilerError", `Error seen: pods "coder-harness-r1" is forbidden: exceeded quota: no-pods`)), false, "", executor.SandboxProvisioning},
		{"a retried error", sandboxWith(att, placed, cond("Ready", "False", "ReconcilerError", "Error seen: Operation cannot be fulfilled: the object has been modified")), false,
			"the agent-sandbox controller has not reported the Sandbox Ready (ReconcilerError: Error seen: Operation cannot be fulfilled: the object has been modified)", ""},
		{"pod failed", sandboxWith(att, placed, cond("Ready", "False", "PodFailed", "Pod failed")), false, "", executor.SandboxProvisioning},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready, waiting, f := sandboxVerdict(tc.sb)
			if ready != tc.ready || waiting != tc.waiting {
				t.Errorf("verdict = %v %q, want %v %q", ready, waiting, tc.ready, tc.waiting)
			}
			switch {
			case tc.failCode == "" && f != nil:
				t.Errorf("failure %+v", f)
			case tc.failCode != "" && (f == nil || f.Code != tc.failCode || f.Next == "" || f.Reason == ""):
				t.Errorf("failure = %+v, want code %s with reason and next step", f, tc.failCode)
			}
		})
	}
}
