package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ list.ListResource                   = (*agentListResource)(nil)
	_ list.ListResourceWithConfigure      = (*agentListResource)(nil)
	_ list.ListResourceWithValidateConfig = (*agentListResource)(nil)
)

// NewAgentListResource is the occ_agent list resource (Terraform 1.14's
// `terraform query`): the agents that run in one Kubernetes namespace or on
// one SSH host, each with the identity an import block takes, so that
// running agents can be found and adopted.
func NewAgentListResource() list.ListResource { return &agentListResource{} }

type agentListResource struct {
	data *Data
}

// agentListConfigModel is a list block: the target attributes of the
// kind it lists (target.go).
type agentListConfigModel = agentTarget

// listTargetAttributes are the list block's attributes: every kind's
// target attributes.
func listTargetAttributes() map[string]listschema.Attribute {
	attrs := map[string]listschema.Attribute{}
	for _, a := range targetAttrs() {
		if a.number {
			attrs[a.name] = listschema.Int64Attribute{Optional: true, MarkdownDescription: a.list}
		} else {
			attrs[a.name] = listschema.StringAttribute{Optional: true, MarkdownDescription: a.list}
		}
	}
	return attrs
}

// listTimeout bounds one listing: a host or cluster that does not answer
// fails the query instead of holding it.
const listTimeout = 2 * time.Minute

func (r *agentListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent"
}

func (r *agentListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = listschema.Schema{
		MarkdownDescription: "The Agents that run in one Kubernetes namespace of the provider's cluster, or on one SSH host, for `terraform query` (Terraform 1.14 and later). " +
			"Each result carries the Agent's identity (`name` and `namespace`, or `name`, `host` and `port`), which an `import` block takes, and its `revision`, `status`, " +
			"`activated_at` and `endpoint` as the listing read them (with `include_resource = true`). Only Agents this provider deployed are listed: objects or units " +
			"without the platform's labels or layout, such as a neighbour's with a similar name, never are. The listing reads only; a target with no Agents gives no results. " +
			"With `include_resource = true` a result also holds the references the Agent's last apply recorded on its target (`compute`, `configuration`, `harness_auth`, " +
			"`harness`, `execution_mode`), so `terraform query -generate-config-out=FILE` writes an `import` block and a resource block per Agent that plan as written, " +
			"deploying nothing (see the occ_agent resource's Import section).",
		Attributes: listTargetAttributes(),
	}
}

func (r *agentListResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if d, ok := req.ProviderData.(*Data); ok {
		r.data = d
	}
}

func (r *agentListResource) providerData() *Data {
	if r.data == nil {
		return &Data{}
	}
	return r.data
}

// ValidateListResourceConfig refuses a list block that names no target,
// two, or an attribute of another kind's target, at the attribute to fix
// (agentTarget.check).
func (r *agentListResource) ValidateListResourceConfig(ctx context.Context, req list.ValidateConfigRequest, resp *list.ValidateConfigResponse) {
	m, diags := listConfigOf(ctx, req.Config)
	resp.Diagnostics.Append(diags...)
	if !resp.Diagnostics.HasError() {
		m.check(&resp.Diagnostics)
	}
}

// listConfigOf reads a list block.
func listConfigOf(ctx context.Context, config tfsdk.Config) (agentListConfigModel, diag.Diagnostics) {
	var o types.Object
	diags := config.Get(ctx, &o)
	return identityFromObject(o).Target, diags
}

// listTarget is the compute a listing reads, as the executor's List takes
// it (its kind and the settings that locate it), where it is in words for
// the log, and the identity of an agent found there: what the row of the
// kind the block names says (check has made it name exactly one).
func listTarget(m agentListConfigModel) (on admission.Compute, where string, identity func(agent string) agentIdentityModel) {
	row, _ := m.judge(false)
	on, where = row.listTarget(agentIdentityModel{Target: m})
	return on, where, func(agent string) agentIdentityModel { return row.identity(on, agent) }
}

func (r *agentListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	m, diags := listConfigOf(ctx, req.Config)
	if !diags.HasError() {
		m.check(&diags)
	}
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	on, where, identityOf := listTarget(m)
	kind := on.Kind
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	ex, err := r.providerData().executor(ctx, kind)
	var listed []executor.Listed
	if err == nil {
		tflog.Info(ctx, "listing agents", map[string]any{"compute_kind": kind, "target": where})
		listed, err = ex.List(ctx, on)
	}
	if err != nil {
		addFailure(&diags, "", err)
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	tflog.Info(ctx, "agents listed", map[string]any{"compute_kind": kind, "target": where, "count": len(listed)})
	// The results are built now, in full: the framework reads the stream
	// after List has returned.
	results := make([]list.ListResult, 0, len(listed))
	for _, l := range listed {
		if req.Limit > 0 && int64(len(results)) >= req.Limit {
			break
		}
		results = append(results, listResult(ctx, req, identityOf(l.Name), l))
	}
	stream.Results = func(push func(list.ListResult) bool) {
		for _, res := range results {
			if !push(res) {
				return
			}
		}
	}
}

// listResult is one agent found: its identity, a display name with its
// revision and status, and (include_resource) what the listing read of
// it, in occ_agent's attributes, with the references its last apply
// recorded (references.go).
func listResult(ctx context.Context, req list.ListRequest, id agentIdentityModel, l executor.Listed) list.ListResult {
	res := req.NewListResult(ctx)
	res.Diagnostics.Append(res.Identity.Set(ctx, id.object())...)
	status, drifted := observedStatus(l.Observed) // as a refresh says it
	res.DisplayName = fmt.Sprintf("%s (revision %d, %s)", l.Name, l.Revision, status)
	if !req.IncludeResource {
		return res
	}
	set := func(attr string, v any) {
		res.Diagnostics.Append(res.Resource.SetAttribute(ctx, path.Root(attr), v)...)
	}
	set("id", l.ID)
	set("name", l.Name)
	set("status", status)
	if l.Revision > 0 {
		set("revision", l.Revision)
		set("revision_id", l.RevisionID)
	}
	if drifted {
		set("revision_id", "drifted") // as Read records it: the plan cannot match it
	}
	if !l.ActivatedAt.IsZero() {
		set("activated_at", l.ActivatedAt.UTC().Format(time.RFC3339))
	}
	if l.Endpoint != "" {
		set("endpoint", l.Endpoint)
	}
	// The references its last apply recorded, so that
	// -generate-config-out writes configuration that plans.
	var m agentModel
	if l.References == "" {
		return res
	}
	if err := decodeReferences(ctx, l.References, &m); err != nil {
		res.Diagnostics.AddWarning("An agent's references were not read back",
			fmt.Sprintf("Agent %q: %v. Write its compute, configuration and harness_auth in its configuration before you plan.", l.Name, err))
		return res
	}
	set("compute", m.Compute)
	set("configuration", m.Configuration)
	set("harness_auth", m.HarnessAuth)
	set("harness", m.Harness)
	set("execution_mode", m.ExecutionMode)
	return res
}
