package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ datasource.DataSource                     = (*agentDataSource)(nil)
	_ datasource.DataSourceWithConfigure        = (*agentDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*agentDataSource)(nil)
)

// NewAgentDataSource is data.occ_agent: a deployed agent as its cluster or
// host reports it, read as the occ_agent resource's refresh reads it (the
// executor's Read), so that another configuration can use its endpoint
// and status without managing it.
func NewAgentDataSource() datasource.DataSource { return &agentDataSource{} }

type agentDataSource struct{ data *Data }

type agentDataModel struct {
	Name    types.String `tfsdk:"name"`
	Compute types.Object `tfsdk:"compute"`
	// Target holds the key attributes of the kinds' targets (namespace,
	// host): the schema is their union, so the model is read and written
	// one attribute at a time.
	Target      agentTarget
	ID          types.String `tfsdk:"id"`
	Status      types.String `tfsdk:"status"`
	Revision    types.Int64  `tfsdk:"revision"`
	RevisionID  types.String `tfsdk:"revision_id"`
	ActivatedAt types.String `tfsdk:"activated_at"`
	Endpoint    types.String `tfsdk:"endpoint"`
}

func (d *agentDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if pd, ok := req.ProviderData.(*Data); ok {
		d.data = pd
	}
}

func (d *agentDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent"
}

func (d *agentDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A deployed Agent as its cluster or host reports it: its status, activated revision and endpoint, read live " +
			"the way a refresh of `occ_agent` reads it. Use it from another configuration (another workspace) to depend on an Agent " +
			"without managing it: name the Agent and where it runs, by `namespace` (Kubernetes) or `host` (SSH), or, in the same " +
			"configuration, by `compute = occ_compute.<name>`. Exactly one of `compute`, `namespace` and `host`. It reads with the " +
			"provider's connection settings and writes nothing. An Agent that is not there fails the read with `NOT_FOUND`, naming " +
			"the Agent and where it was looked for; a cluster or host that does not answer fails it with `UNAVAILABLE`.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{agentName()},
				MarkdownDescription: "The Agent's name (`occ_agent.<name>.name`)."},
			"compute": schema.ObjectAttribute{Optional: true, AttributeTypes: computeRefType(),
				MarkdownDescription: passWhole("The Agent's compute, in the configuration that manages it.", "compute", "occ_compute")},
			"id": computed("The Agent's id: `NAMESPACE/NAME` on Kubernetes, `HOST/NAME` on SSH (the `occ_agent` import id)."),
			"status": computed("`active` when the activated revision runs; `drifted: …` when what runs is not the activated revision " +
				"(a workload deleted or edited outside Terraform, an apply stopped half-way); `unretired: …` or " +
				"`network policy missing: …` when the activated revision serves but its managing configuration's next apply " +
				"has something to finish (the `occ_agent` resource's `status` says the same)."),
			"revision": schema.Int64Attribute{Computed: true,
				MarkdownDescription: "The activated revision number; null when no revision was activated, or when `status` is `drifted: …`."},
			"revision_id":  computed("The activated revision's content address (the `occ_agent` resource's `revision_id`); null when `revision` is."),
			"activated_at": computed("When the activated revision was activated (RFC 3339); null when `revision` is."),
			"endpoint": computed("Where the Agent's gateway answers: on Kubernetes its Service, `http://NAME.NAMESPACE.svc:18789` (inside " +
				"the cluster); on SSH the gateway's loopback address on the host, `http://127.0.0.1:PORT`. Null when `revision` is."),
		},
	}
	for _, a := range dataKeys() {
		resp.Schema.Attributes[a.name] = schema.StringAttribute{Optional: true, Validators: a.dataValidators, MarkdownDescription: a.data}
	}
}

// dataKeys are the kinds' key target attributes the data source takes,
// each with its kind's row.
func dataKeys() []targetAttr {
	var keys []targetAttr
	for _, a := range targetAttrs() {
		if a.key && a.data != "" {
			keys = append(keys, a)
		}
	}
	return keys
}

func (d *agentDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	one := []path.Expression{path.MatchRoot("compute")}
	for _, a := range dataKeys() {
		one = append(one, path.MatchRoot(a.name))
	}
	return []datasource.ConfigValidator{datasourcevalidator.ExactlyOneOf(one...)}
}

// get reads the data source's configuration.
func (m *agentDataModel) get(ctx context.Context, config tfsdk.Config) (diags diag.Diagnostics) {
	diags.Append(config.GetAttribute(ctx, path.Root("name"), &m.Name)...)
	diags.Append(config.GetAttribute(ctx, path.Root("compute"), &m.Compute)...)
	m.Target = agentTarget{}
	for _, a := range dataKeys() {
		var v types.String
		diags.Append(config.GetAttribute(ctx, path.Root(a.name), &v)...)
		m.Target[a.name] = v
	}
	return diags
}

// set writes what the read found into state (which starts as the
// configuration).
func (m *agentDataModel) set(ctx context.Context, state *tfsdk.State) (diags diag.Diagnostics) {
	for attr, v := range map[string]attr.Value{"id": m.ID, "status": m.Status, "revision": m.Revision, "revision_id": m.RevisionID,
		"activated_at": m.ActivatedAt, "endpoint": m.Endpoint} {
		diags.Append(state.SetAttribute(ctx, path.Root(attr), v)...)
	}
	return diags
}

func (d *agentDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, cancel := readDeadline(ctx, 0) // no timeouts of its own
	defer cancel()
	var m agentDataModel
	resp.Diagnostics.Append(m.get(ctx, req.Config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	pd := d.data
	if pd == nil {
		pd = &Data{}
	}
	name := m.Name.ValueString()
	lookupID, id, where := agentLookup(m)
	wf := work("agent "+name, "read")
	ex, a, ok := pd.locateAgent(ctx, executor.Agent{Name: name, Log: logTo(ctx, wf)}, m.Compute, lookupID, &resp.Diagnostics)
	if !ok {
		if !resp.Diagnostics.HasError() {
			addAttrError(&resp.Diagnostics, path.Root("compute"), "INVALID_REQUEST: the compute is incomplete",
				"Pass the whole compute: compute = occ_compute.<name>.")
		}
		return
	}
	if a.Compute != nil {
		id, where = agentID(*a.Compute, name), targetWhere(*a.Compute)
	}
	obs, err := ex.Read(ctx, a)
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	if !obs.Exists {
		addAttrError(&resp.Diagnostics, path.Root("name"), fmt.Sprintf("NOT_FOUND: agent %q not found %s", name, where),
			fmt.Sprintf("No object of agent %q exists %s. Check name and %s against the configuration that manages the agent, "+
				"and that it has been applied.", name, where, lookupAttribute(m)))
		return
	}
	status, drifted := observedStatus(obs)
	m.ID, m.Status = types.StringValue(id), types.StringValue(status)
	m.Revision, m.RevisionID, m.ActivatedAt, m.Endpoint = types.Int64Null(), types.StringNull(), types.StringNull(), types.StringNull()
	if !drifted && obs.Revision > 0 {
		m.Revision, m.RevisionID = types.Int64Value(obs.Revision), types.StringValue(obs.RevisionID)
		if !obs.ActivatedAt.IsZero() {
			m.ActivatedAt = types.StringValue(obs.ActivatedAt.UTC().Format(time.RFC3339))
		}
		if obs.Endpoint != "" {
			m.Endpoint = types.StringValue(obs.Endpoint)
		}
	}
	tflog.Debug(ctx, "agent read", executor.Fields(wf, map[string]any{"work.outcome": status, "compute_kind": ex.Kind()}))
	resp.Diagnostics.Append(m.set(ctx, &resp.State)...)
}

// agentLookup is, for a data source that names a target (a namespace, a
// host), the import id it reads the agent by (executors recognise it as
// they do an occ_agent import id), the agent's id, and where that is, in
// words, as the kind's row says; all empty for one that names a compute.
func agentLookup(m agentDataModel) (lookupID, id, where string) {
	if row, ok := lookupRow(m); ok {
		key := keyOf(row)
		return row.lookup(m.Target.str(key).ValueString(), m.Name.ValueString())
	}
	return "", "", ""
}

// lookupRow is the row of the kind whose key the data source names.
func lookupRow(m agentDataModel) (kindRow, bool) {
	for _, k := range kindOrder {
		if row := executors[k]; keyOf(row) != "" && row.lookup != nil && m.Target.has(keyOf(row), false) {
			return row, true
		}
	}
	return kindRow{}, false
}

func agentWhere(namespace, host string) string {
	if host != "" {
		return fmt.Sprintf("on SSH host %q", host)
	}
	return fmt.Sprintf("in Kubernetes namespace %q", namespace)
}

// lookupAttribute names the attribute that says where the data source
// looked.
func lookupAttribute(m agentDataModel) string {
	if row, ok := lookupRow(m); ok {
		return keyOf(row)
	}
	return "compute"
}
