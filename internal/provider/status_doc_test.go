package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// Issue 30: occ_agent.status's description names every status a refresh
// can give, by the prefix the code writes: five in all.
func TestAgentStatus_DescriptionNamesEveryValue(t *testing.T) {
	resp := &resource.SchemaResponse{}
	NewAgentResource().Schema(context.Background(), resource.SchemaRequest{}, resp)
	desc := resp.Schema.Attributes["status"].GetMarkdownDescription()
	seen := map[string]bool{}
	for _, d := range []executor.DriftReason{executor.DriftNone, executor.DriftGone, executor.DriftWorkload, executor.DriftEdited,
		executor.DriftUnfinished, executor.DriftUnretired, executor.DriftNetworkPolicy, executor.DriftExposure} {
		status, _ := observedStatus(executor.Observed{Drift: d, DriftDetail: "detail"})
		prefix, _, _ := strings.Cut(status, "detail")
		seen[prefix] = true
		if !strings.Contains(desc, "`"+prefix) {
			t.Errorf("status %q (drift %q) is not in the description: %s", prefix, d, desc)
		}
	}
	if len(seen) != 5 || !strings.Contains(desc, "one of five") {
		t.Errorf("%d statuses %v; the description says: %s", len(seen), seen, desc)
	}
}
