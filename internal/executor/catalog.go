package executor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Code is a failure code: the first word of every error diagnostic the
// provider emits. Every code is in Catalog.
type Code string

// Source says who decides a code.
type Source string

const (
	// SourceAdmission: the plan (or apply's second admission) refused the
	// combination; nothing was written.
	SourceAdmission Source = "admission"
	// SourceProvider: the provider or an executor, while it talked to the
	// target.
	SourceProvider Source = "provider"
	// SourceRuntime: the runtime's startup probe held the revision unready
	// and wrote the code in its startup record (PR6, PR7).
	SourceRuntime Source = "runtime"
)

// Entry describes one code.
type Entry struct {
	Code   Code
	Source Source
	// Kinds are the compute kinds where it can happen; empty for any.
	Kinds []string
	// Meaning says what happened; Advice what to do.
	Meaning, Advice string
}

// The provider's codes. Runtime codes are runtimerecord's (CodeRuntime).
const (
	InvalidRequest   = Code(admission.InvalidRequest)
	ResourceConflict = Code(admission.ResourceConflict)

	Unavailable      Code = "UNAVAILABLE"
	NotFound         Code = "NOT_FOUND"
	DeploymentFailed Code = "DEPLOYMENT_FAILED"
	DeleteFailed     Code = "DELETE_FAILED"
	Stale            Code = "STALE_REVISION"
	Deadline         Code = "DEADLINE_EXCEEDED"
	BadRecord        Code = "INVALID_STARTUP_RECORD"

	CrashLoop           Code = "CRASH_LOOP"
	ImagePull           Code = "IMAGE_PULL_FAILED"
	ContainerConfig     Code = "CONTAINER_CONFIG_FAILED"
	Unschedulable       Code = "UNSCHEDULABLE"
	ReplicaFailure      Code = "REPLICA_FAILURE"
	AttachmentFailed    Code = "CREDENTIAL_ATTACHMENT_FAILED"
	SandboxProvisioning Code = "SANDBOX_PROVISIONING_FAILED"
	StateClaim          Code = "STATE_CLAIM_FAILED"

	UnitStartFailed      Code = "UNIT_START_FAILED"
	UnitFailed           Code = "UNIT_FAILED"
	ReadinessUnreachable Code = "READINESS_UNREACHABLE"
	AuthRefused          Code = "AUTH_REFUSED"
	HostKeyMismatch      Code = "HOST_KEY_MISMATCH"
	CommandFailed        Code = "COMMAND_FAILED"

	TurnFailed Code = "TURN_FAILED"

	RolloutHalted Code = "ROLLOUT_HALTED"
)

// CodeRuntime is a runtime's held startup code as a failure code.
func CodeRuntime(c runtimerecord.Code) Code { return Code(c) }

var (
	k8s = []string{admission.KindKubernetes}
	ssh = []string{admission.KindSSH}
)

// Catalog is every code the provider can emit, in the order the docs list
// them: one literal table, held to runtimerecord.Codes by its test.
var Catalog = []Entry{
	{InvalidRequest, SourceAdmission, nil,
		"The request cannot be used as written: a refused attribute or configuration document (the diagnostic cites the rule and points at the attribute), a malformed import id, provider settings that cannot be used (no SSH user or key), or a revision that cannot be rendered.",
		"Change what the diagnostic names and plan again."},
	{ResourceConflict, SourceAdmission, nil,
		"The request is well formed but conflicts with what exists: a combination the compute does not support, a sandbox driver that is not installed, a credential or binding another object owns, or permissions the provider's Kubernetes identity lacks.",
		"Change the combination, install or grant what is missing (see Kubernetes permissions), then apply again."},
	{Unavailable, SourceProvider, nil,
		"Something the operation depends on did not answer: the Kubernetes API server, the SSH host, or the compute's sandbox driver (for which provisioning waits until the deadline). As a runtime's held startup code (source runtime) the same word means the model provider was unavailable through the probe's retry.",
		"Check that the cluster or host is reachable with the provider's settings, then apply again; nothing the provider could not reach was changed."},
	{NotFound, SourceProvider, nil,
		"The occ_agent data source found no agent of that name where it looked: no Service or workload of it in the Kubernetes namespace, no unit of it on the SSH host. For an action or an ephemeral resource: the agent has no activated revision, or (occ_agent_restart) what runs of it was deleted or stopped.",
		"Check the name and namespace or host (or compute) against the agent's own configuration, and that the configuration that manages the agent has been applied; apply it to deploy what was deleted or stopped."},
	{DeploymentFailed, SourceProvider, nil,
		"The target refused a write or a read in the middle of a deploy (the API server's or the host's own error is quoted).",
		"Fix what the quoted error names and apply again; the revision is deployed again from the start."},
	{DeleteFailed, SourceProvider, nil,
		"Removing an agent's objects from the cluster or host failed; what was removed stays removed.",
		"Fix what the quoted error names and run the destroy again; it removes only what is left."},
	{Stale, SourceProvider, nil,
		"Another apply activated a newer revision of the agent meanwhile (AC3); this revision was not activated.",
		"Refresh (terraform plan) and apply again."},
	{Deadline, SourceProvider, nil,
		"The revision was not ready before the apply's deadline (timeouts.create or timeouts.update); the diagnostic names the last phase, the last startup record, and the components with no Pod or the unit's state.",
		"Raise timeouts.create/update if the runtime is only slow, or fix what holds it, then apply again."},
	{BadRecord, SourceProvider, nil,
		"The runtime wrote a startup record outside the contract (an unknown field value or code).",
		"Use the pinned runtime image or fix the custom image or wrapper."},
	{TurnFailed, SourceProvider, nil,
		"A turn sent with the occ_agent_turn action did not answer: the gateway refused it (its chat completions endpoint is off, or it refused the gateway token) or the agent's run failed (the model refused the key, was unreachable, or the turn outlived its timeout); the gateway's own words are quoted, bounded.",
		"Enable gateway.http.endpoints.chatCompletions in the agent's configuration when the diagnostic says the endpoint is off; otherwise read the agent's status and logs (terraform plan refreshes it), fix the credential or the model endpoint, and send the turn again."},
	{RolloutHalted, SourceProvider, nil,
		"With the provider's rollout setting (halt_on_failure), another agent of the same apply failed deploying the same change (a configuration or credential source at a new generation); this agent's deploy did not start, nothing of it was written, and what it served keeps serving. The diagnostic names the agent that failed and its code.",
		"Read the failed agent's own diagnostic, fix what it says (the key, the configuration), then apply again: the halted agents deploy the fixed change."},
	{CrashLoop, SourceProvider, k8s,
		"A container keeps exiting; the diagnostic quotes the last lines of its previous run (at most 20, with every credential the Pod was given, and whatever looks like one, redacted).",
		"Fix the image or the configuration, then apply again."},
	{ImagePull, SourceProvider, k8s,
		"An image cannot be pulled.",
		"Check runtime_image/codex_image and, for a private registry, the compute's image_pull_secrets (Secrets in its namespace), then apply again."},
	{ContainerConfig, SourceProvider, k8s,
		"The kubelet cannot build a container's configuration: a Secret or key it refers to is missing.",
		"Create the credential source's Secret (secret_ref) or the configuration's secret_bindings Secret, then apply again."},
	{Unschedulable, SourceProvider, k8s,
		"No node can take the revision's Pod.",
		"Lower the compute's cpu_limit/memory_limit (or cpu_request/memory_request), check its node_selector and tolerations, or add capacity, then apply again."},
	{ReplicaFailure, SourceProvider, k8s,
		"The API server refuses to create the Pod (a ResourceQuota, a LimitRange, an admission policy); checked only while a workload has no Pod yet.",
		"Fix what refuses the Pod, or lower the compute's cpu_limit/memory_limit, then apply again."},
	{AttachmentFailed, SourceProvider, k8s,
		"The Credential Gateway could not attach the key to the revision's Sandbox (AU3).",
		"Make the Credential Gateway hold the credential the source names, then apply again."},
	{SandboxProvisioning, SourceProvider, k8s,
		"The Sandbox will not become ready as the revision asks: the agent-sandbox controller reports its Pod refused by the API server, failed, expired or ambiguous, or the driver's extension refuses a facet or the placement profile.",
		"Fix what the message names (the driver's facets or profiles, an admission policy or quota), or change the Agent or compute, then apply again."},
	{StateClaim, SourceProvider, k8s,
		"The agent's state claim cannot be used: it cannot bind (no default StorageClass, a class that does not exist, a provisioner that fails), a quota refuses it, it cannot change as the compute's state asks (a class or access mode of an existing claim, a shrink, a class that does not allow expansion), it is being deleted, or another object holds its name.",
		"Name an existing StorageClass in the compute's state.storage_class (or make one the cluster's default), raise the quota, or set state.enabled = false for a throwaway agent; a class or access mode change needs a new claim (destroy the agent, or move its data yourself). Then apply again."},
	{UnitStartFailed, SourceProvider, ssh,
		"systemd could not start the agent's unit, or another process answered on the gateway's port.",
		"Read the journal lines in the diagnostic; fix the host (openclaw_path, the service user, a free gateway.port) and apply again."},
	{UnitFailed, SourceProvider, ssh,
		"The gateway exited before it was ready.",
		"Read the journal lines in the diagnostic (journalctl -u on the host), fix the host or the configuration and apply again; no earlier revision is restored (PR8)."},
	{ReadinessUnreachable, SourceProvider, ssh,
		"The gateway's /readyz on the host's loopback cannot be reached through the SSH connection (sshd refuses TCP forwarding).",
		"Allow TCP forwarding for the provider's user in sshd_config (AllowTcpForwarding local), then apply again."},
	{AuthRefused, SourceProvider, ssh,
		"The SSH host refused every authentication method the provider offered.",
		"Add the provider's public key to the user's authorized_keys on the host, or fix the provider's ssh block or the compute's user."},
	{HostKeyMismatch, SourceProvider, ssh,
		"The SSH host presented another host key than the compute's host_key or the known_hosts file holds.",
		"Compare the fingerprint with the host's own key; only when it is the host's, set the compute's host_key to it."},
	{CommandFailed, SourceProvider, ssh,
		"A command the provider ran on the host exited non-zero (its error output is quoted); often sudo without NOPASSWD.",
		"Fix the host as the quoted output says (passwordless sudo for the provider's user, a writable config_dir) and apply again."},
	// The runtime's held startup codes (runtimerecord.Codes but READY),
	// in its order; UNAVAILABLE is listed above.
	{CodeRuntime(runtimerecord.CodeModelProbeTimeout), SourceRuntime, nil,
		"The startup probe's model call did not answer within its budget.",
		runtimerecord.Advice(runtimerecord.CodeModelProbeTimeout)},
	{CodeRuntime(runtimerecord.CodeModelProbeFailed), SourceRuntime, nil,
		"The startup probe's model call failed; causeKind and causeDetail say how.",
		runtimerecord.Advice(runtimerecord.CodeModelProbeFailed)},
	{CodeRuntime(runtimerecord.CodeAuthenticationFailed), SourceRuntime, nil,
		"The model provider rejected the credential (providerCode 401 or 403).",
		runtimerecord.Advice(runtimerecord.CodeAuthenticationFailed)},
	{CodeRuntime(runtimerecord.CodeModelProbeCPUStarved), SourceRuntime, nil,
		"The startup probe was starved of CPU by the container's limit.",
		runtimerecord.Advice(runtimerecord.CodeModelProbeCPUStarved)},
	{CodeRuntime(runtimerecord.CodeLoginFailed), SourceRuntime, nil,
		"Codex could not log in with the credential (failureClass says how).",
		runtimerecord.Advice(runtimerecord.CodeLoginFailed)},
}

// Lookup finds a code's entry.
func Lookup(c Code) (Entry, bool) {
	i := slices.IndexFunc(Catalog, func(e Entry) bool { return e.Code == c })
	if i < 0 {
		return Entry{}, false
	}
	return Catalog[i], true
}

// Known reports whether a code is in the catalog.
func Known(c Code) bool {
	_, ok := Lookup(c)
	return ok
}

// Markdown renders the catalog as the docs' failure-code guide (a
// tfplugindocs template); `make generate` writes it.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`---
page_title: "Failure codes"
subcategory: ""
description: |-
  Every code an error diagnostic of the OCC provider starts with: what it means and what to do.
---

<!-- Generated from internal/executor/catalog.go by ` + "`make generate`" + `; do not edit. -->

# Failure codes

Every error the provider reports starts with one of these codes, such as
` + "`CRASH_LOOP: agent \"support\" revision 3 did not activate`" + `. The detail says where it
happened, what happened, the structured fields of the startup record that held the revision (see
[Startup probe and failure codes](startup-probe)), the lines that show it, whether anything
was written, and what to do next.

Sources: **admission** codes come from the plan (or apply's second admission, before any write);
**provider** codes from the provider while it talks to the cluster or host; **runtime** codes are
the runtime's held startup codes, read from its startup record.

| Code | Source | Where | What happened | What to do |
|---|---|---|---|---|
`)
	for _, e := range Catalog {
		where := "any"
		if len(e.Kinds) > 0 {
			where = strings.Join(e.Kinds, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", e.Code, e.Source, where, cell(e.Meaning), cell(e.Advice))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
