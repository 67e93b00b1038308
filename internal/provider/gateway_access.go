package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// defaultOpenTimeout bounds opening the way into a gateway, or reading its
// token, when the ephemeral resource sets no timeout.
const defaultOpenTimeout = 2 * time.Minute

// agentArg is an agent passed whole to an action or an ephemeral resource
// (agentTurnRefType): its executor and the agent as the executor takes
// it, logging with the work fields wf. ok is false, with diags saying why, when the agent is incomplete or
// its compute cannot be reached.
func (d *Data) agentArg(ctx context.Context, obj types.Object, wf map[string]any, diags *diag.Diagnostics) (executor.Executor, executor.Agent, bool) {
	// Read by attribute: each caller's type adds what it reads beside
	// these (agentRestartRefType).
	var ref struct {
		Name    types.String
		Compute types.Object
	}
	ref.Name, _ = obj.Attributes()["name"].(types.String)
	ref.Compute, _ = obj.Attributes()["compute"].(types.Object)
	if ref.Compute.IsNull() || ref.Compute.IsUnknown() || ref.Name.ValueString() == "" {
		addAttrError(diags, path.Root("agent"), "INVALID_REQUEST: the agent is incomplete",
			"Pass the whole agent: agent = occ_agent.<name>, after it has been applied.")
		return nil, executor.Agent{}, false
	}
	if d == nil {
		d = &Data{}
	}
	name := ref.Name.ValueString()
	ex, ag, ok := d.locateAgent(ctx, executor.Agent{Name: name, Log: logTo(ctx, wf)}, ref.Compute, "", diags)
	if !ok && !diags.HasError() {
		addAttrError(diags, path.Root("agent"), "INVALID_REQUEST: the agent's compute is incomplete",
			"Pass the whole agent: agent = occ_agent.<name>.")
	}
	return ex, ag, ok
}

// durationOr is a timeout attribute (positiveDuration checked it), or def
// when it is unset.
func durationOr(v types.String, def time.Duration) time.Duration {
	if v.IsNull() || v.IsUnknown() {
		return def
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil || d <= 0 {
		return def
	}
	return d
}

// deadlineFailure words an open that ran out of its timeout.
func deadlineFailure(agent string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &executor.Failure{Code: executor.Deadline, Op: executor.OpGateway, Agent: agent,
			Reason: fmt.Sprintf("the gateway was not reached within %s", timeout),
			Next:   "check the agent's status with terraform plan (a refresh reads it), or raise the timeout", Err: err}
	}
	return err
}

// openGateways are the ways into gateways this provider process holds
// open for occ_agent_tunnel, by the id the ephemeral resource's private
// data keeps until Terraform closes it.
type openGateways struct {
	mu   sync.Mutex
	open map[string]func()
}

// add keeps stop under a new id.
func (g *openGateways) add(stop func()) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = map[string]func(){}
	}
	g.open[id] = stop
	return id
}

// close ends the way kept under id; an id not held is nothing to do.
func (g *openGateways) close(id string) bool {
	g.mu.Lock()
	stop := g.open[id]
	delete(g.open, id)
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
	return stop != nil
}
