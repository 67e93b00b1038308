package provider

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ ephemeral.EphemeralResource              = (*agentTunnelEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithConfigure = (*agentTunnelEphemeralResource)(nil)
	_ ephemeral.EphemeralResourceWithClose     = (*agentTunnelEphemeralResource)(nil)
)

// tunnelKey is the private data key of an open tunnel's id.
const tunnelKey = "tunnel"

// NewAgentTunnelEphemeralResource is ephemeral.occ_agent_tunnel: a
// loopback address on the machine running Terraform that reaches an
// agent's activated gateway for the rest of the run.
func NewAgentTunnelEphemeralResource() ephemeral.EphemeralResource {
	return &agentTunnelEphemeralResource{}
}

type agentTunnelEphemeralResource struct{ data *Data }

type agentTunnelModel struct {
	Agent   types.Object `tfsdk:"agent"`
	Timeout types.String `tfsdk:"timeout"`
	URL     types.String `tfsdk:"url"`
	Host    types.String `tfsdk:"host"`
	Port    types.Int64  `tfsdk:"port"`
}

func (r *agentTunnelEphemeralResource) Configure(_ context.Context, req ephemeral.ConfigureRequest, _ *ephemeral.ConfigureResponse) {
	if pd, ok := req.ProviderData.(*Data); ok {
		r.data = pd
	}
}

func (r *agentTunnelEphemeralResource) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent_tunnel"
}

func (r *agentTunnelEphemeralResource) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A local URL on the machine running Terraform that reaches an Agent's activated gateway for the rest of the run: " +
			"a port-forward to a ready gateway Pod behind the Agent's Service on Kubernetes, an SSH local forward to the gateway's " +
			"loopback port on an SSH host. Pair it with `occ_gateway_token` to call the Agent from a provisioner or hand both to " +
			"another provider; nothing of either is written to state or plan. Needs Terraform 1.10 or later; on Kubernetes the " +
			"provider's identity needs `get` and `create` on `pods/portforward` in the namespace.",
		Attributes: map[string]schema.Attribute{
			"agent": schema.ObjectAttribute{Required: true, AttributeTypes: agentTurnRefType(),
				MarkdownDescription: passWhole("The Agent whose gateway to reach.", "agent", "occ_agent")},
			"timeout": schema.StringAttribute{Optional: true, Validators: []validator.String{positiveDuration{}},
				MarkdownDescription: "How long opening the tunnel may take, as a Go duration (`30s`, `2m`); default `2m`. The tunnel then stays open until Terraform closes it at the end of the run."},
			"url": schema.StringAttribute{Computed: true,
				MarkdownDescription: "The gateway's base URL on this machine, `http://127.0.0.1:PORT`."},
			"host": schema.StringAttribute{Computed: true, MarkdownDescription: "The tunnel's local address, `127.0.0.1`."},
			"port": schema.Int64Attribute{Computed: true, MarkdownDescription: "The tunnel's local port, chosen free when it opens."},
		},
	}
}

func (r *agentTunnelEphemeralResource) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m agentTunnelModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := agentArgName(m.Agent)
	wf := work("agent "+name, "tunnel")
	ex, ag, ok := r.data.agentArg(ctx, m.Agent, wf, &resp.Diagnostics)
	if !ok {
		return
	}
	timeout := durationOr(m.Timeout, defaultOpenTimeout)
	// The tunnel outlives this call: it lives until Close, its opening
	// bounded by the timeout and ended with the request.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	expired := time.AfterFunc(timeout, cancel)
	unhook := context.AfterFunc(ctx, cancel)
	tflog.Info(ctx, "tunnel: opening", wf)
	gw, err := ex.OpenGateway(life, ag)
	timedOut := !expired.Stop()
	unhook()
	if err != nil || timedOut {
		cancel()
		if gw != nil {
			gw.Close()
		}
		if err == nil {
			err = context.DeadlineExceeded
		}
		addFailure(&resp.Diagnostics, "", deadlineFailure(name, timeout, err))
		return
	}
	host, portText, err := net.SplitHostPort(gw.Addr)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil {
		gw.Close()
		cancel()
		resp.Diagnostics.AddError("UNAVAILABLE: the tunnel has no local port", fmt.Sprintf("The executor opened %q.", gw.Addr))
		return
	}
	pd := r.data
	if pd == nil {
		pd = &Data{}
		r.data = pd
	}
	id := pd.gateways.add(func() {
		gw.Close()
		cancel()
	})
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, tunnelKey, []byte(strconv.Quote(id)))...)
	m.URL, m.Host, m.Port = types.StringValue(gw.URL()), types.StringValue(host), types.Int64Value(int64(port))
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
	tflog.Info(ctx, "tunnel: open", executor.Fields(wf, map[string]any{"local": gw.Addr, "where": gw.Where}))
}

func (r *agentTunnelEphemeralResource) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	raw, diags := req.Private.GetKey(ctx, tunnelKey)
	resp.Diagnostics.Append(diags...)
	id, err := strconv.Unquote(string(raw))
	if err != nil || r.data == nil {
		return
	}
	if r.data.gateways.close(id) {
		tflog.Info(ctx, "tunnel: closed", map[string]any{"tunnel": id})
	}
}

// agentArgName is the name of an agent passed whole, "" when unknown.
func agentArgName(obj types.Object) string {
	if v, ok := obj.Attributes()["name"].(types.String); ok {
		return v.ValueString()
	}
	return ""
}
