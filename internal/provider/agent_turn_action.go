package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ action.Action              = (*agentTurnAction)(nil)
	_ action.ActionWithConfigure = (*agentTurnAction)(nil)
)

// defaultTurnTimeout bounds a turn whose action sets no timeout.
const defaultTurnTimeout = 2 * time.Minute

// maxTurnMessage bounds the message a turn sends.
const maxTurnMessage = 16 << 10

// NewAgentTurnAction is action.occ_agent_turn (Terraform 1.14): one message
// to an activated agent through its gateway's own client surface, the
// answer's first line and the time to its first token reported as the
// action's progress. A smoke test after a rotation or an upgrade, or in CI.
func NewAgentTurnAction() action.Action { return &agentTurnAction{} }

type agentTurnAction struct{ data *Data }

type agentTurnModel struct {
	Agent   types.Object `tfsdk:"agent"`
	Message types.String `tfsdk:"message"`
	Timeout types.String `tfsdk:"timeout"`
}

// agentTurnRefType is what the action reads of the agent passed whole.
func agentTurnRefType() map[string]attr.Type {
	return map[string]attr.Type{
		"name":    types.StringType,
		"compute": types.ObjectType{AttrTypes: computeRefType()},
	}
}

func (a *agentTurnAction) Configure(_ context.Context, req action.ConfigureRequest, _ *action.ConfigureResponse) {
	if pd, ok := req.ProviderData.(*Data); ok {
		a.data = pd
	}
}

func (a *agentTurnAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent_turn"
}

func (a *agentTurnAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Sends one message to an activated Agent and reports its answer: the first line and the time to the first " +
			"token, as the action's progress. The message goes in through the Agent's gateway, to its OpenAI-compatible chat " +
			"completions endpoint, which the Agent's configuration must enable (`gateway.http.endpoints.chatCompletions.enabled = " +
			"true`); the gateway runs it as any client's turn, so its harness calls the model the configuration names with the " +
			"Agent's credential. On Kubernetes the provider reaches the gateway with a port-forward to the Pod the Agent's Service " +
			"selects and authenticates with the Agent's gateway token (it needs `get` and `create` on `pods/portforward` in the namespace, " +
			"beside the provider's Role); on an SSH host, through the SSH connection to the gateway's loopback port, with the " +
			"agent's own gateway token, which the deploy made on the host in a file only root reads (`CONFIG_DIR/NAME/gateway-token.env`). Nothing is written and nothing is kept: the answer is shown, never stored. A turn that does not answer " +
			"fails the action with `TURN_FAILED` (the gateway's refusal or the run's error, bounded), `NOT_FOUND` (no activated " +
			"revision), `UNAVAILABLE` (the gateway cannot be reached) or `DEADLINE_EXCEEDED`. Actions need Terraform 1.14 or later.",
		Attributes: map[string]schema.Attribute{
			"agent": schema.ObjectAttribute{Required: true, AttributeTypes: agentTurnRefType(),
				MarkdownDescription: passWhole("The Agent to send the turn to.", "agent", "occ_agent")},
			"message": schema.StringAttribute{Required: true,
				Validators:          []validator.String{stringvalidator.LengthBetween(1, maxTurnMessage)},
				MarkdownDescription: fmt.Sprintf("The message, as a user would send it (at most %d bytes). It may incur model charges.", maxTurnMessage)},
			"timeout": schema.StringAttribute{Optional: true, Validators: []validator.String{positiveDuration{}},
				MarkdownDescription: "How long the turn may take, from sending to the answer's end, as a Go duration (`30s`, `2m`); default `2m`."},
		},
	}
}

func (a *agentTurnAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m agentTurnModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var ref struct {
		Name    types.String `tfsdk:"name"`
		Compute types.Object `tfsdk:"compute"`
	}
	resp.Diagnostics.Append(m.Agent.As(ctx, &ref, objectAsOptions)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if ref.Compute.IsNull() || ref.Name.ValueString() == "" {
		addAttrError(&resp.Diagnostics, path.Root("agent"), "INVALID_REQUEST: the agent is incomplete",
			"Pass the whole agent: agent = occ_agent.<name>, after it has been applied.")
		return
	}
	timeout := defaultTurnTimeout
	if !m.Timeout.IsNull() {
		timeout, _ = time.ParseDuration(m.Timeout.ValueString()) // the validator checked it
	}
	pd := a.data
	if pd == nil {
		pd = &Data{}
	}
	name := ref.Name.ValueString()
	wf := work("agent "+name, "turn")
	ex, ag, ok := pd.locateAgent(ctx, executor.Agent{Name: name, Log: logTo(ctx, wf)}, ref.Compute, "", &resp.Diagnostics)
	if !ok {
		if !resp.Diagnostics.HasError() {
			addAttrError(&resp.Diagnostics, path.Root("agent"), "INVALID_REQUEST: the agent's compute is incomplete",
				"Pass the whole agent: agent = occ_agent.<name>.")
		}
		return
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tflog.Info(ctx, "turn: sending", wf)
	ans, err := ex.Turn(tctx, executor.Turn{Agent: ag, Message: m.Message.ValueString(), Log: logTo(ctx, wf)})
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	tflog.Info(ctx, "turn: answered", executor.Fields(wf, map[string]any{"first_token_ms": ans.FirstToken.Milliseconds(), "total_ms": ans.Total.Milliseconds()}))
	if resp.SendProgress != nil {
		resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("agent %q answered (first token after %s, %s in all): %s",
			name, ans.FirstToken.Round(time.Millisecond), ans.Total.Round(time.Millisecond), ans.FirstLine())})
	}
}
