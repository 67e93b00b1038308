package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/sshexec"
)

// kindRow is one compute kind's registration in the provider: how the
// provider builds its executor, the agent id it gives (known at plan,
// without building the executor), the agent's resource identity (from its
// compute, or read from an agent id), and where an identity or an
// occ_agent list block points on it: whether it names the kind's target
// (claims), the import id it names, and the compute a listing reads with
// that target in words. Every kind-specific answer the provider's glue
// needs comes from here (with admission.KindSupport for the rules).
type kindRow struct {
	// block is the kind's attribute of occ_compute (and so of every
	// by-value compute reference), blockSchema its schema, settings what
	// admission takes of a known block (the kind's own settings type) and
	// validate the block's static checks that span attributes (nil: none).
	// hint says how to declare one, in a refusal.
	block       string
	blockSchema func() schema.SingleNestedAttribute
	settings    func(context.Context, types.Object, *diag.Diagnostics) any
	validate    func(context.Context, types.Object, path.Path, *diag.Diagnostics)
	hint        string
	// readsInstallation reports whether the compute's executor reads its
	// installation live (Inspect) rather than admission deriving it from
	// the settings; nil: never.
	readsInstallation func(admission.Compute) bool
	// unfrozen reads the settings of a compute that no revision freezes but
	// a ModeSettings deploy applies to the running agents (nil: the kind
	// has none); endpoint reads those of them that shape an agent's
	// endpoint, which the plan then recomputes.
	unfrozen, endpoint func(admission.Compute) any
	// where names the agent's target in messages ("namespace agents").
	where        func(admission.Compute) string
	build        func(context.Context, *Data) (executor.Executor, error)
	agentID      func(admission.Compute, string) string
	identity     func(admission.Compute, string) agentIdentityModel
	identityOfID func(id string) (agentIdentityModel, bool)
	// target holds the attributes that locate an agent on the kind's
	// target (one of them its key), in its resource identity, the
	// occ_agent list block and data.occ_agent (target.go); noun names
	// such a target ("an SSH host") and claim how to name one ("host (and
	// port)"), in refusals. checkTarget refuses a value the kind does not
	// take (nil: any).
	target      []targetAttr
	noun, claim string
	checkTarget func(agentTarget) *targetProblem
	// importID and listTarget read an identity (or list block) that names
	// the kind's target: the import id it names, and the compute a
	// listing reads with that target in words.
	importID   func(m agentIdentityModel) string
	listTarget func(m agentIdentityModel) (on admission.Compute, where string)
	// lookup reads data.occ_agent's key attribute (value) for agent: the
	// import id the executor recognises, the agent's id and where it is,
	// in words.
	lookup func(value, agent string) (lookupID, id, where string)
}

// executors registers one row per compute kind. importOrder is the order
// in which executors are asked whether an import id is theirs: an SSH id
// (HOST/NAME where HOST holds a dot or a colon) before Kubernetes'
// NAMESPACE/NAME, which matches almost anything.
var executors = map[string]kindRow{
	admission.KindSSH: {
		block: "ssh", blockSchema: sshBlockSchema, settings: sshSettings, validate: validateSSHBlock,
		hint:    "ssh = { host = ..., host_key = ... } for an SSH host",
		where:   func(c admission.Compute) string { return agentWhere("", c.SSH().Host) },
		build:   func(_ context.Context, d *Data) (executor.Executor, error) { return d.sshExecutor(), nil },
		agentID: sshexec.AgentID,
		identity: func(c admission.Compute, agent string) agentIdentityModel {
			return sshIdentity(c.SSH().Host, c.SSH().Port, agent)
		},
		identityOfID: func(id string) (agentIdentityModel, bool) {
			host, port, agent, ok := sshexec.SplitAgentID(id)
			return sshIdentity(host, int64(port), agent), ok
		},
		target: []targetAttr{
			{name: "host", key: true, what: "the SSH host", example: "10.0.0.5",
				identity: "SSH: the host the Agent runs on, as the compute's `ssh.host` writes it. Set this or `namespace`, not both.",
				list:     "SSH: the host to list, reached with the provider's `ssh` settings and its known_hosts file, as an import by id is. Set this or `namespace`.",
				data: "The SSH host the Agent runs on, `HOST` or `HOST:PORT` (its compute's `ssh.host`), reached as the " +
					"provider's `ssh.user` and verified against the provider's `ssh.known_hosts_file` (default `~/.ssh/known_hosts`), " +
					"as an import is."},
			{name: "port", number: true,
				identity: "SSH: the host's SSH port. Default: 22.",
				list:     "SSH: the host's SSH port. Default: 22."},
		},
		noun: "an SSH host", claim: "host (and port)",
		checkTarget: func(t agentTarget) *targetProblem {
			if p := t.num("port"); !p.IsNull() && (p.ValueInt64() < 1 || p.ValueInt64() > 65535) {
				return &targetProblem{attr: "port", value: fmt.Sprint(p.ValueInt64()), is: "not a TCP port", fix: "write 1 to 65535, or leave it out for 22"}
			}
			return nil
		},
		importID: func(m agentIdentityModel) string {
			return sshexec.ImportIDOf(m.Target.str("host").ValueString(), int(m.Target.num("port").ValueInt64()), m.Name.ValueString())
		},
		listTarget: func(m agentIdentityModel) (admission.Compute, string) {
			host, port := m.Target.str("host").ValueString(), m.Target.num("port").ValueInt64()
			return admission.Compute{Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: host, Port: port}}, sshexec.HostPort(host, int(port))
		},
		// ssh:// so that a host that is a single DNS label is not taken
		// for a namespace.
		lookup: func(host, agent string) (string, string, string) {
			return "ssh://" + host + "/" + agent, host + "/" + agent, agentWhere("", host)
		},
	},
	admission.KindKubernetes: {
		block: "kubernetes", blockSchema: kubernetesBlockSchema, settings: kubernetesSettings, validate: validateKubernetesBlock,
		hint:              "kubernetes = { namespace = ... } for a Kubernetes tenant namespace",
		readsInstallation: func(c admission.Compute) bool { return c.Kubernetes().SandboxDriver != nil },
		unfrozen: func(c admission.Compute) any {
			return [2]any{c.Kubernetes().NetworkPolicy, c.Kubernetes().Exposure}
		},
		endpoint: func(c admission.Compute) any { return c.Kubernetes().Exposure },
		where:    func(c admission.Compute) string { return agentWhere(c.Kubernetes().Namespace, "") },
		build:    func(ctx context.Context, d *Data) (executor.Executor, error) { return d.KubeExecutor(ctx) },
		agentID:  kube.AgentID,
		identity: func(c admission.Compute, agent string) agentIdentityModel {
			return kubeIdentity(c.Kubernetes().Namespace, agent)
		},
		identityOfID: func(id string) (agentIdentityModel, bool) {
			ns, agent, ok := kube.SplitAgentID(id)
			return kubeIdentity(ns, agent), ok
		},
		target: []targetAttr{
			{name: "namespace", key: true, what: "the tenant namespace", example: "occ-acme",
				identity: "Kubernetes: the tenant namespace the Agent runs in, on the provider's cluster. Set this or `host`, not both.",
				list:     "Kubernetes: the tenant namespace to list, on the provider's cluster (its `kubernetes` settings). Set this or `host`.",
				data: "The Kubernetes namespace the Agent runs in (its compute's `kubernetes.namespace`), read through the " +
					"provider's `kubernetes` settings.",
				dataValidators: []validator.String{dnsLabel()}},
		},
		noun: "a Kubernetes namespace", claim: "namespace",
		importID: func(m agentIdentityModel) string {
			return kube.AgentID(admission.Compute{Settings: admission.KubernetesCompute{Namespace: m.Target.str("namespace").ValueString()}}, m.Name.ValueString())
		},
		listTarget: func(m agentIdentityModel) (admission.Compute, string) {
			ns := m.Target.str("namespace").ValueString()
			return admission.Compute{Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: ns}}, ns
		},
		lookup: func(ns, agent string) (string, string, string) {
			id := ns + "/" + agent
			return id, id, agentWhere(ns, "")
		},
	},
}

// sshIdentity is the identity of agent on an SSH host.
func sshIdentity(host string, port int64, agent string) agentIdentityModel {
	if port == 0 {
		port = 22
	}
	return agentIdentityModel{Name: types.StringValue(agent), Target: agentTarget{"host": types.StringValue(host), "port": types.Int64Value(port)}}
}

// kubeIdentity is the identity of agent in a Kubernetes namespace.
func kubeIdentity(namespace, agent string) agentIdentityModel {
	return agentIdentityModel{Name: types.StringValue(agent), Target: agentTarget{"namespace": types.StringValue(namespace)}}
}

var importOrder = []string{admission.KindSSH, admission.KindKubernetes}

// kindOrder is the order of the kinds' blocks in messages and checks.
var kindOrder = []string{admission.KindKubernetes, admission.KindSSH}

// registerKind adds a compute kind's row to the registry (with its
// admission row, admission.RegisterKind, it is all a kind needs): its
// block joins occ_compute's schema and every by-value compute reference,
// and its import ids are asked for before Kubernetes' NAMESPACE/NAME,
// which matches almost anything. It is meant for package initialisation
// (a kind only tests run registers in its test's init) and refuses a
// kind or block registered already, or a row without what every kind
// needs.
func registerKind(kind string, row kindRow) error {
	switch {
	case kind == "" || row.block == "" || row.blockSchema == nil || row.settings == nil || row.build == nil || row.agentID == nil ||
		row.identity == nil || row.identityOfID == nil || row.importID == nil || row.listTarget == nil:
		return fmt.Errorf("provider: compute kind %q: a row needs its block, schema, settings, executor, agent id, identity, import id and list target", kind)
	case row.target != nil && (keyOf(row) == "" || row.noun == "" || row.claim == "" || row.lookup == nil):
		return fmt.Errorf("provider: compute kind %q: a target needs a key attribute, a noun, a claim and a lookup", kind)
	case slices.Contains(kindOrder, kind):
		return fmt.Errorf("provider: compute kind %q is registered already", kind)
	}
	taken := map[string]bool{"name": true}
	for _, a := range targetAttrs() {
		taken[a.name] = true
	}
	for _, k := range kindOrder {
		if executors[k].block == row.block {
			return fmt.Errorf("provider: compute kind %q: block %q is kind %q's", kind, row.block, k)
		}
	}
	for _, a := range row.target {
		if taken[a.name] {
			return fmt.Errorf("provider: compute kind %q: target attribute %q is taken", kind, a.name)
		}
		taken[a.name] = true
	}
	executors[kind] = row
	kindOrder = append(kindOrder, kind)
	importOrder = slices.Insert(importOrder, slices.Index(importOrder, admission.KindKubernetes), kind)
	return nil
}

// executor returns the provider's executor for a compute kind. Each is
// built once per provider instance and shared by every resource; nothing
// contacts its target until an operation does.
func (d *Data) executor(ctx context.Context, kind string) (executor.Executor, error) {
	e, ok := executors[kind]
	if !ok {
		return nil, &executor.Failure{Code: executor.InvalidRequest, Summary: fmt.Sprintf("compute kind %q has no executor", kind)}
	}
	if p := d.pending(kind); p != nil {
		return nil, p.failure() // never a connection built from the rest, or from the environment
	}
	ex, err := e.build(ctx, d)
	if err != nil {
		return nil, &executor.Failure{Code: executor.Unavailable, Op: executor.OpPrepare, Summary: "cannot reach " + kind, Reason: err.Error(), Err: err,
			Next: "Check the provider's " + kind + " settings."}
	}
	return ex, nil
}

// targetWhere names where an agent on compute c runs, in messages.
func targetWhere(c admission.Compute) string {
	if e, ok := executors[c.Kind]; ok && e.where != nil {
		return e.where(c)
	}
	return fmt.Sprintf("on compute %q", c.Name)
}

// agentID is an agent's id on its compute.
func agentID(c admission.Compute, name string) string {
	if e, ok := executors[c.Kind]; ok {
		return e.agentID(c, name)
	}
	return name
}

// sshBeforeWrite is the SSH executor's BeforeWrite hook: nil but in the
// fault tests, which cut the connection or kill the provider at a chosen
// write (ssh_fault_acc_test.go).
var sshBeforeWrite atomic.Pointer[func(addr, op string)]

// sshExecutor returns the provider's SSH executor: one connection pool,
// one connection per host, shared by every agent on it.
func (d *Data) sshExecutor() *sshexec.Executor {
	d.sshOnce.Do(func() {
		var creds sshexec.Credentials
		ex := &sshexec.Executor{KnownHostsFile: d.knownHostsFile()}
		ex.BeforeWrite = func(addr, op string) {
			if h := sshBeforeWrite.Load(); h != nil {
				(*h)(addr, op)
			}
		}
		var opts sshexec.Options
		if s := d.SSH; s != nil {
			creds.PrivateKey, creds.Agent = s.PrivateKey.ValueString(), s.Agent.ValueBool()
			creds.Passphrase, creds.Certificate = s.PrivateKeyPassphrase.ValueString(), s.Certificate.ValueString()
			ex.User = s.User.ValueString()
			opts.ConnectTimeout, _ = time.ParseDuration(s.ConnectTimeout.ValueString()) // validated: positiveDuration
		}
		ex.Pool = sshexec.NewPool(creds, opts)
		d.sshExec = ex
	})
	return d.sshExec
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

// logTo sends an operation's phase messages to tflog with its fields; a
// message with level "warn" is a warning, one with level "info" (a
// runtime's startup phase as it is read) is logged at INFO, so that
// TF_LOG=INFO shows where a long apply is; the rest at DEBUG.
func logTo(ctx context.Context, fields map[string]any) executor.Log {
	return func(msg string, f map[string]any) {
		all := executor.Fields(fields, f)
		level := all["level"]
		delete(all, "level")
		switch level {
		case "warn":
			tflog.Warn(ctx, msg, all)
		case "info":
			tflog.Info(ctx, msg, all)
		default:
			tflog.Debug(ctx, msg, all)
		}
	}
}

// addFailure turns what an executor returned into diagnostics, in one
// place for every kind and operation: admission refusals at the compute,
// a *executor.Failure as its code, summary and detail, anything else as
// the operation's generic code. revisionID is the deployed revision's id
// ("" outside a deploy).
func addFailure(diags *diag.Diagnostics, revisionID string, err error) {
	var es admission.Errors
	var one *admission.Error
	if errors.As(err, &es) || errors.As(err, &one) {
		addAdmissionErrors(diags, path.Root("compute"), err)
		return
	}
	var f *executor.Failure
	if !errors.As(err, &f) {
		f = &executor.Failure{Code: executor.DeploymentFailed, Reason: err.Error(), Wrote: true}
	}
	diags.AddError(fmt.Sprintf("%s: %s", f.Code, f.SummaryText()), f.Detail(revisionID))
}

// addWarnings reports an executor's warnings.
func addExecutorWarnings(diags *diag.Diagnostics, ws []executor.Warning) {
	for _, w := range ws {
		diags.AddWarning(w.Summary, w.Detail)
	}
}

// locateAgent finds an agent's executor and completes a for it: from its
// compute (a by-value reference, as the resource's state holds it), or,
// when compute is null (an import, whose compute is not in state yet, or
// the occ_agent data source read by namespace or host), from importID,
// which each executor is asked in turn to recognise. ok is false when
// neither is known, or when the executor cannot be built or the id is
// malformed (diags then says so).
func (d *Data) locateAgent(ctx context.Context, a executor.Agent, compute types.Object, importID string, diags *diag.Diagnostics) (executor.Executor, executor.Agent, bool) {
	var ignored diag.Diagnostics
	c, known := computeFromObject(ctx, compute, &ignored)
	switch {
	case known:
		a.Compute = &c
		ex, err := d.executor(ctx, c.Kind)
		if err != nil {
			addFailure(diags, "", err)
			return nil, a, false
		}
		return ex, a, true
	case compute.IsNull():
		a.ImportID = importID
		ex, _, err := d.importExecutor(ctx, a.ImportID)
		var f *executor.Failure
		switch {
		case errors.As(err, &f):
			addFailure(diags, "", err)
		case err != nil:
			diags.AddError("INVALID_REQUEST: unexpected agent id", err.Error())
		}
		return ex, a, ex != nil && err == nil
	}
	return nil, a, false
}

// importExecutor asks the executors, in importOrder, which one an import
// id is for, and the agent name it holds. ex is nil when none recognises
// it; err is the *executor.Failure of an executor that cannot be built, or
// the malformed id of a kind that recognises it.
func (d *Data) importExecutor(ctx context.Context, id string) (ex executor.Executor, name string, err error) {
	for _, kind := range importOrder {
		if ex, err = d.executor(ctx, kind); err != nil {
			return nil, "", err
		}
		name, ok, err := ex.ParseImportID(id)
		if ok {
			return ex, name, err
		}
	}
	return nil, "", nil
}
