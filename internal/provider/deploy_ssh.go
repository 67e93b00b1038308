package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sshexec"
)

// SSHPool returns the provider's SSH connections: one per host, shared by
// every agent on it within this provider process.
func (d *Data) SSHPool() *sshexec.Pool {
	d.sshOnce.Do(func() {
		var creds sshexec.Credentials
		if s := d.SSH; s != nil {
			creds.PrivateKey, creds.Agent = s.PrivateKey.ValueString(), s.Agent.ValueBool()
		}
		d.sshPool = sshexec.NewPool(creds, sshexec.Options{})
	})
	return d.sshPool
}

// sshExecutor is an executor whose phase messages go to tflog with fields.
func (d *Data) sshExecutor(ctx context.Context, fields map[string]any) *sshexec.Executor {
	return &sshexec.Executor{Pool: d.SSHPool(), Log: func(msg string, f map[string]any) { tflog.Debug(ctx, msg, mergeFields(fields, f)) }}
}

func (d *Data) sshUser() string {
	if d.SSH == nil {
		return ""
	}
	return d.SSH.User.ValueString()
}

// sshTarget is how to reach a compute's host: its settings, the provider's
// user when the compute names none.
func (d *Data) sshTarget(c admission.Compute) sshexec.Target {
	user := c.User
	if user == "" {
		user = d.sshUser()
	}
	return sshexec.Target{Host: c.Host, Port: int(c.Port), User: user, HostKey: c.HostKey, InsecureIgnoreHostKey: c.InsecureIgnoreHostKey}
}

// knownHostsFile verifies hosts of imported agents (no compute in state).
func (d *Data) knownHostsFile() string {
	if d.SSH != nil && d.SSH.KnownHostsFile.ValueString() != "" {
		return d.SSH.KnownHostsFile.ValueString()
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".ssh", "known_hosts")
}

// deploySSH deploys a revision to its SSH host (rules SS1, SS2, AU5, AC1, AC4).
func deploySSH(ctx context.Context, data *Data, rev *admission.Revision, c admission.Compute, revision int64, fields map[string]any) (deployOutcome, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := deployOutcome{Status: types.StringValue("failed"), ActivatedAt: types.StringNull(), Endpoint: types.StringNull()}
	target := data.sshTarget(c)
	fields = mergeFields(fields, map[string]any{"host": target.Addr()})
	if target.InsecureIgnoreHostKey {
		tflog.Warn(ctx, "SSH host key verification is off for this compute (insecure_ignore_host_key)", fields)
	}
	start := time.Now()
	res, err := data.sshExecutor(ctx, fields).Deploy(ctx, target, rev, revision)
	if err != nil {
		var nw *sshexec.NotWritten
		out.Wrote = !errors.As(err, &nw)
		tflog.Info(ctx, "deployment failed", mergeFields(withOutcome(fields, "failed"), map[string]any{"elapsed_ms": time.Since(start).Milliseconds()}))
		addSSHDeployError(&diags, rev, revision, target, err)
		return out, diags
	}
	return activated(ctx, fields, start, res.ActivatedAt, res.Endpoint), diags
}

// addSSHDeployError turns an SSH executor failure into a diagnostic: what
// happened, where, the unit's state and journal lines, what to do next.
// Nothing in it comes from the credentials file (AU7).
func addSSHDeployError(diags *diag.Diagnostics, rev *admission.Revision, n int64, t sshexec.Target, err error) {
	var f *sshexec.Failure
	var se *sshexec.Error
	var nw *sshexec.NotWritten
	written := "Parts of the revision may have been written; the agent's previous revision no longer serves only if the unit was restarted (see above). Apply again once fixed."
	if errors.As(err, &nw) {
		written = "Nothing was written to the host."
	}
	switch {
	case errors.As(err, &f):
		var b strings.Builder
		fmt.Fprintf(&b, "Agent %q, revision %d (%s), unit %s on %s", f.Agent, f.Revision, rev.ID(), f.Unit, t.Addr())
		if f.Phase != "" {
			fmt.Fprintf(&b, ", phase %s", f.Phase)
		}
		b.WriteString(".\n")
		if f.Reason != "" {
			fmt.Fprintf(&b, "What happened: %s.\n", f.Reason)
		}
		if f.State.ActiveState != "" {
			fmt.Fprintf(&b, "Unit state: %s.\n", f.State)
		}
		if r := f.Record; r != nil {
			fmt.Fprintf(&b, "Startup record: %s", r.Event)
			if r.Code != "" {
				fmt.Fprintf(&b, ", code %s", r.Code)
			}
			if r.Phase != "" {
				fmt.Fprintf(&b, ", phase %s", r.Phase)
			}
			if r.FailureClass != "" {
				fmt.Fprintf(&b, ", failureClass %s", r.FailureClass)
			}
			if r.ProviderCode != 0 {
				fmt.Fprintf(&b, ", providerCode %d", r.ProviderCode)
			}
			b.WriteString(".\n")
		}
		if len(f.Journal) > 0 {
			b.WriteString("Journal of this activation (journalctl -u " + f.Unit + "):\n")
			for _, l := range f.Journal {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
		if f.Next != "" {
			fmt.Fprintf(&b, "Next: %s", f.Next)
		}
		diags.AddError(fmt.Sprintf("%s: agent %q revision %d did not activate", f.Code, f.Agent, f.Revision), b.String())
	case errors.As(err, &se):
		summary := map[sshexec.Class]string{
			sshexec.ClassUnreachable:     "UNAVAILABLE: cannot reach SSH host %s",
			sshexec.ClassAuthRefused:     "AUTH_REFUSED: SSH host %s refused the login",
			sshexec.ClassHostKeyMismatch: "HOST_KEY_MISMATCH: SSH host %s presented another host key",
			sshexec.ClassCommandFailed:   "COMMAND_FAILED: a command failed on SSH host %s",
			sshexec.ClassConfig:          "INVALID_REQUEST: cannot connect to SSH host %s",
		}[se.Class]
		if summary == "" {
			summary = "DEPLOYMENT_FAILED: SSH host %s"
		}
		diags.AddError(fmt.Sprintf(summary, t.Addr()),
			fmt.Sprintf("Agent %q, revision %d: %v.\n%s\n%s", rev.Agent, n, se, se.Advice(), written))
	default:
		diags.AddError(fmt.Sprintf("DEPLOYMENT_FAILED: agent %q revision %d", rev.Agent, n), err.Error()+"\n"+written)
	}
}

// sshLocation is where an SSH agent lives: its compute's host (and its
// agent directory), or, for an agent imported by HOST[:PORT]/NAME whose
// compute is not in state yet, the host from the id, verified through the
// provider's known_hosts file. ok is false for agents not on SSH.
func (r *agentResource) sshLocation(ctx context.Context, m agentModel) (t sshexec.Target, agentDir, name string, ok bool) {
	data := r.providerData()
	var diags diag.Diagnostics
	if c, known := computeFromObject(ctx, m.Compute, &diags); known {
		if c.Kind != admission.KindSSH {
			return t, "", "", false
		}
		configDir := c.ConfigDir
		if configDir == "" {
			configDir = "/etc/openclaw"
		}
		return data.sshTarget(c), render.AgentDir(configDir, m.Name.ValueString()), m.Name.ValueString(), true
	}
	if !m.Compute.IsNull() {
		return t, "", "", false
	}
	host, port, name, isSSH := parseSSHImportID(m.ID.ValueString())
	if !isSSH {
		return t, "", "", false
	}
	return sshexec.Target{Host: host, Port: port, User: data.sshUser(), KnownHostsFile: data.knownHostsFile()}, "", name, true
}

// readSSH refreshes an SSH agent from its host; handled is false for
// agents that are not on SSH. Drift (a stopped or removed unit, a
// configuration edited by hand, a revision never activated) plans a
// redeploy through a revision_id the plan cannot match.
func (r *agentResource) readSSH(ctx context.Context, state *agentModel, resp *resource.ReadResponse) (handled bool) {
	target, agentDir, name, ok := r.sshLocation(ctx, *state)
	if !ok {
		return false
	}
	wf := work("agent "+name, "read")
	obs, err := r.providerData().sshExecutor(ctx, wf).Read(ctx, target, name, agentDir)
	if err != nil {
		addSSHReadError(&resp.Diagnostics, "refresh", name, target, err)
		return true
	}
	switch {
	case !obs.Exists && state.Revision.IsNull():
		resp.State.RemoveResource(ctx) // imported name that does not exist
		return true
	case !obs.Exists:
		state.Status, state.RevisionID = types.StringValue("drifted: the agent is not on the host"), types.StringValue("drifted")
	case obs.Drift != "":
		state.Status, state.RevisionID = types.StringValue("drifted: "+obs.Drift), types.StringValue("drifted")
	default:
		a := obs.Activation
		state.Revision, state.RevisionID = types.Int64Value(a.Revision), types.StringValue(a.RevisionID)
		state.Status = types.StringValue("active")
		state.ActivatedAt = types.StringValue(a.ActivatedAt.UTC().Format(time.RFC3339))
		if a.Endpoint != "" {
			state.Endpoint = types.StringValue(a.Endpoint)
		}
	}
	tflog.Debug(ctx, "agent refreshed from its SSH host", mergeFields(wf, map[string]any{"work.outcome": state.Status.ValueString()}))
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
	return true
}

// deleteSSH removes an SSH agent from its host: the unit (stopped and
// disabled), its revision files and state directory. The operator's
// credentials file is never touched (AU5).
func (r *agentResource) deleteSSH(ctx context.Context, state agentModel, resp *resource.DeleteResponse) (handled bool) {
	target, agentDir, name, ok := r.sshLocation(ctx, state)
	if !ok {
		return false
	}
	timeout, d := state.Timeouts.Delete(ctx, 5*time.Minute)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := r.providerData().sshExecutor(ctx, work("agent "+name, "delete")).Delete(ctx, target, name, agentDir); err != nil {
		addSSHReadError(&resp.Diagnostics, "delete", name, target, err)
	}
	return true
}

func addSSHReadError(diags *diag.Diagnostics, op, name string, t sshexec.Target, err error) {
	var se *sshexec.Error
	code := "UNAVAILABLE"
	detail := err.Error()
	if errors.As(err, &se) {
		if se.Class != sshexec.ClassUnreachable {
			code = string(se.Class)
		}
		detail += ".\n" + se.Advice()
	}
	if op == "delete" {
		code = "DELETE_FAILED"
	}
	diags.AddError(fmt.Sprintf("%s: cannot %s agent %q on SSH host %s", code, op, name, t.Addr()), detail)
}

// importSSH adopts an agent by HOST/NAME, HOST:PORT/NAME or
// ssh://HOST[:PORT]/NAME; handled is false for a Kubernetes NAMESPACE/NAME.
// A HOST that is a single DNS label is read as a namespace: write it as
// ssh://HOST/NAME.
func (r *agentResource) importSSH(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) (handled bool) {
	_, _, name, ok := parseSSHImportID(req.ID)
	if !ok {
		return false
	}
	if len(name) > 63 || !dnsLabelRe.MatchString(name) {
		resp.Diagnostics.AddError("INVALID_REQUEST: unexpected import ID",
			fmt.Sprintf("import ID %q: the agent name %q is not a DNS label; use HOST/NAME, HOST:PORT/NAME or ssh://HOST[:PORT]/NAME, such as 10.0.0.5/support", req.ID, name))
		return true
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	return true
}

// parseSSHImportID reads ssh://HOST[:PORT]/NAME, or HOST[:PORT]/NAME where
// HOST holds a dot or a colon (an address or a qualified name) or is
// bracketed IPv6. Port 0 means the default (22).
func parseSSHImportID(id string) (host string, port int, name string, ok bool) {
	explicit := strings.HasPrefix(id, "ssh://")
	id = strings.TrimPrefix(id, "ssh://")
	i := strings.LastIndex(id, "/")
	if i <= 0 || i == len(id)-1 {
		return "", 0, "", false
	}
	hostPort, name := id[:i], id[i+1:]
	if !explicit && !strings.ContainsAny(hostPort, ".:[") {
		return "", 0, "", false // a namespace
	}
	host = hostPort
	if h, p, err := net.SplitHostPort(hostPort); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, "", false
		}
		host, port = h, n
	} else if strings.HasPrefix(hostPort, "[") && strings.HasSuffix(hostPort, "]") {
		host = hostPort[1 : len(hostPort)-1]
	}
	if host == "" || strings.ContainsAny(host, "/@ ") {
		return "", 0, "", false
	}
	return host, port, name, true
}
