package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/attr"
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

// turnProgressEvery is how often a turn that has not answered says so.
const turnProgressEvery = 5 * time.Second

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

// agentTurnRefType is what the action and the ephemeral resources read of
// the agent passed whole: its name and compute, and its activation time,
// which is unknown while a plan would deploy a new revision, so that
// Terraform opens them only once the apply has activated it (an ephemeral
// resource whose configuration is wholly known is opened during the plan,
// before a new agent exists).
func agentTurnRefType() map[string]attr.Type {
	return map[string]attr.Type{
		"name":         types.StringType,
		"compute":      types.ObjectType{AttrTypes: computeRefType()},
		"activated_at": types.StringType,
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
	timeout := durationOr(m.Timeout, defaultTurnTimeout)
	name := agentArgName(m.Agent)
	wf := work("agent "+name, "turn")
	ex, ag, ok := a.data.agentArg(ctx, m.Agent, wf, &resp.Diagnostics)
	if !ok {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tflog.Info(ctx, "turn: sending", wf)
	stop := waitProgress(resp.SendProgress, turnProgressEvery, func(waited time.Duration) string {
		return fmt.Sprintf("agent %q: waiting for the answer (%s so far, at most %s)", name, waited.Round(time.Second), timeout)
	})
	ans, err := ex.Turn(tctx, executor.Turn{Agent: ag, Message: m.Message.ValueString(), Log: logTo(ctx, wf)})
	stop()
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

// waitProgress sends what says(waited) every interval through send until
// stop is called, so that a long wait shows in Terraform's output; stop
// returns once nothing more is sent (the action's progress stream closes
// when Invoke returns). A nil send sends nothing.
func waitProgress(send func(action.InvokeProgressEvent), every time.Duration, says func(time.Duration) string) (stop func()) {
	if send == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				send(action.InvokeProgressEvent{Message: says(time.Since(start))})
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
