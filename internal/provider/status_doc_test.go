package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
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

// Issue 30: ssh.known_hosts_file's description names every reader the
// SSH executor verifies through the file (sshexec
// TestKnownHostsFile_ReadOnlyWithoutACompute): imports, refreshes of
// imported agents, the data source by id and the list resource.
func TestKnownHostsFile_DescriptionNamesItsReaders(t *testing.T) {
	resp := &provider.SchemaResponse{}
	New("test", "test")().Schema(context.Background(), provider.SchemaRequest{}, resp)
	ssh, ok := resp.Schema.Attributes["ssh"].(providerschema.SingleNestedAttribute)
	if !ok {
		t.Fatal("the provider has no ssh block")
	}
	desc := ssh.Attributes["known_hosts_file"].GetMarkdownDescription()
	for _, reader := range []string{"`terraform import`", "refreshes of an imported agent", "`occ_agent` data source looked up by `id`", "`occ_agent` list resource"} {
		if !strings.Contains(desc, reader) {
			t.Errorf("known_hosts_file's description does not name %s: %s", reader, desc)
		}
	}
}
