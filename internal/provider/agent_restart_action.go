package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ action.Action              = (*agentRestartAction)(nil)
	_ action.ActionWithConfigure = (*agentRestartAction)(nil)
)

// restartProgressEvery is how often a restart that is not back says so.
const restartProgressEvery = 5 * time.Second

// NewAgentRestartAction is action.occ_agent_restart (Terraform 1.14): a
// restart of an agent's activated revision, one component at a time,
// blocking until each passes its startup probe again. For a runtime that
// should re-read what it reads only at start (a rotated Secret, a model
// endpoint back from an outage), or to clear a wedged process, without a
// new revision.
func NewAgentRestartAction() action.Action { return &agentRestartAction{} }

type agentRestartAction struct{ data *Data }

type agentRestartModel struct {
	Agent   types.Object `tfsdk:"agent"`
	Timeout types.String `tfsdk:"timeout"`
}

// agentRestartRefType is what the restart reads of the agent passed whole:
// what the turn reads, and its harness and execution mode, which say what
// runs of it (a gateway, a harness beside it, a sandbox).
func agentRestartRefType() map[string]attr.Type {
	t := agentTurnRefType()
	t["harness"] = types.StringType
	t["execution_mode"] = types.StringType
	return t
}

func (a *agentRestartAction) Configure(_ context.Context, req action.ConfigureRequest, _ *action.ConfigureResponse) {
	if pd, ok := req.ProviderData.(*Data); ok {
		a.data = pd
	}
}

func (a *agentRestartAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent_restart"
}

func (a *agentRestartAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Restarts what runs of an Agent's activated revision and waits until it passes its startup probe again, " +
			"without a new revision: the revision, its activation time and the Agent's state stay. On Kubernetes each component " +
			"restarts in turn (a sandboxed one first, then the Codex harness, the gateway last), under its Deployment's own strategy " +
			"(the old Pod stops before the new one starts); on an SSH host the agent's unit restarts. Only an activated revision that " +
			"runs unchanged is restarted: anything else fails with `NOT_FOUND` or `RESOURCE_CONFLICT` and is the next apply's to repair. " +
			"A component that does not come back fails the action with the code a deploy would give it. Actions need Terraform 1.14 or later.",
		Attributes: map[string]schema.Attribute{
			"agent": schema.ObjectAttribute{Required: true, AttributeTypes: agentRestartRefType(),
				MarkdownDescription: passWhole("The Agent to restart.", "agent", "occ_agent")},
			"timeout": schema.StringAttribute{Optional: true, Validators: []validator.String{positiveDuration{}},
				MarkdownDescription: "How long the whole restart may take, as a Go duration (`90s`, `10m`); default `" + durationText(defaultCreateTimeout) + "`, as an Agent's create."},
		},
	}
}

func (a *agentRestartAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m agentRestartModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout := durationOr(m.Timeout, defaultCreateTimeout)
	name := agentArgName(m.Agent)
	wf := work("agent "+name, "restart")
	ex, ag, ok := a.data.agentArg(ctx, m.Agent, wf, &resp.Diagnostics)
	if !ok {
		return
	}
	// What runs of it: the harness and execution mode say (the restart
	// reads the rest from the target).
	str := func(k string) string {
		v, _ := m.Agent.Attributes()[k].(types.String)
		return v.ValueString()
	}
	ag.Harness, ag.ExecutionMode = str("harness"), str("execution_mode")
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// What the restart does now, from its own log, for the progress line.
	var mu sync.Mutex
	doing := "reading the agent"
	log := func(msg string, fields map[string]any) {
		if op := fields["work.operation"]; op == "restart" || op == "gate" {
			mu.Lock()
			doing = msg
			mu.Unlock()
		}
		logTo(ctx, wf)(msg, fields)
	}
	tflog.Info(ctx, "restart: starting", wf)
	start := time.Now()
	stop := waitProgress(resp.SendProgress, restartProgressEvery, func(waited time.Duration) string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("agent %q: %s (%s so far, at most %s)", name, doing, waited.Round(time.Second), timeout)
	})
	res, err := ex.Restart(rctx, executor.Restart{Agent: ag, Log: log})
	stop()
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	tflog.Info(ctx, "restart: ready again", executor.Fields(wf, map[string]any{"revision": res.Revision, "took_ms": time.Since(start).Milliseconds()}))
	if resp.SendProgress != nil {
		resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("agent %q revision %d restarted (%s) and ready again after %s",
			name, res.Revision, strings.Join(res.Components, ", "), took)})
	}
}
