package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
)

var (
	_ ephemeral.EphemeralResource              = (*gatewayTokenEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithConfigure = (*gatewayTokenEphemeralResource)(nil)
)

// NewGatewayTokenEphemeralResource is ephemeral.occ_gateway_token: the
// token an agent's activated gateway takes, read from the target for
// this run, never written to state or plan.
func NewGatewayTokenEphemeralResource() ephemeral.EphemeralResource {
	return &gatewayTokenEphemeralResource{}
}

type gatewayTokenEphemeralResource struct{ data *Data }

type gatewayTokenModel struct {
	Agent   types.Object `tfsdk:"agent"`
	Timeout types.String `tfsdk:"timeout"`
	Token   types.String `tfsdk:"token"`
}

func (r *gatewayTokenEphemeralResource) Configure(_ context.Context, req ephemeral.ConfigureRequest, _ *ephemeral.ConfigureResponse) {
	if pd, ok := req.ProviderData.(*Data); ok {
		r.data = pd
	}
}

func (r *gatewayTokenEphemeralResource) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_gateway_token"
}

func (r *gatewayTokenEphemeralResource) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The token an Agent's activated gateway takes (`Authorization: Bearer`), read for this run from what the " +
			"target runs: the Agent's gateway token Secret on Kubernetes (the provider's identity reads it already), the Agent's " +
			"root-only token file on an SSH host. It is never written to state or plan: hand it to another provider or a " +
			"provisioner, with `occ_agent_tunnel` for the address. Needs Terraform 1.10 or later.",
		Attributes: map[string]schema.Attribute{
			"agent": schema.ObjectAttribute{Required: true, AttributeTypes: agentTurnRefType(),
				MarkdownDescription: passWhole("The Agent whose gateway token to read.", "agent", "occ_agent")},
			"timeout": schema.StringAttribute{Optional: true, Validators: []validator.String{positiveDuration{}},
				MarkdownDescription: "How long reading the token may take, as a Go duration (`30s`, `2m`); default `2m`."},
			"token": schema.StringAttribute{Computed: true, Sensitive: true,
				MarkdownDescription: "The gateway token; empty for a gateway whose configuration takes none (`gateway.auth.mode = \"none\"`)."},
		},
	}
}

func (r *gatewayTokenEphemeralResource) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m gatewayTokenModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := agentArgName(m.Agent)
	wf := work("agent "+name, "gateway token")
	ex, ag, ok := r.data.agentArg(ctx, m.Agent, wf, &resp.Diagnostics)
	if !ok {
		return
	}
	timeout := durationOr(m.Timeout, defaultOpenTimeout)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	token, err := ex.GatewayToken(tctx, ag)
	if err != nil {
		addFailure(&resp.Diagnostics, "", deadlineFailure(name, timeout, err))
		return
	}
	m.Token = types.StringValue(token)
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
	tflog.Info(ctx, "gateway token: read", wf)
}
