package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

var (
	_ resource.Resource                 = (*agentResource)(nil)
	_ resource.ResourceWithModifyPlan   = (*agentResource)(nil)
	_ resource.ResourceWithConfigure    = (*agentResource)(nil)
	_ resource.ResourceWithImportState  = (*agentResource)(nil)
	_ resource.ResourceWithIdentity     = (*agentResource)(nil)
	_ resource.ResourceWithUpgradeState = (*agentResource)(nil)
)

// NewAgentResource is occ_agent: one deployed assistant. Plan runs the full
// admission over its compute, configuration and credential source and shows
// the revision that would run; apply deploys that revision.
func NewAgentResource() resource.Resource { return &agentResource{} }

type agentResource struct {
	data *Data
}

type agentModel struct {
	ID               types.String   `tfsdk:"id"`
	Name             types.String   `tfsdk:"name"`
	Compute          types.Object   `tfsdk:"compute"`
	Configuration    types.Object   `tfsdk:"configuration"`
	Harness          types.String   `tfsdk:"harness"`
	ExecutionMode    types.String   `tfsdk:"execution_mode"`
	HarnessAuth      types.Object   `tfsdk:"harness_auth"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
	Revision         types.Int64    `tfsdk:"revision"`
	RevisionID       types.String   `tfsdk:"revision_id"`
	AdmittedDocument types.String   `tfsdk:"admitted_document"`
	GatewayDocument  types.String   `tfsdk:"gateway_document"`
	HarnessVersion   types.String   `tfsdk:"harness_version"`
	RevisionReason   types.String   `tfsdk:"revision_reason"`
	StartupPhases    types.List     `tfsdk:"startup_phases"`
	MaxConcurrent    types.Int64    `tfsdk:"max_concurrent"`
	Status           types.String   `tfsdk:"status"`
	ActivatedAt      types.String   `tfsdk:"activated_at"`
	Endpoint         types.String   `tfsdk:"endpoint"`
}

type harnessAuthModel struct {
	Source types.Object `tfsdk:"source"`
}

func (r *agentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent"
	// An agent whose compute moves to another namespace (a replaced
	// compute) is updated in place there: its identity follows it.
	resp.ResourceBehavior.MutableIdentity = true
}

// IdentitySchema: name and namespace, or name, host and port
// (agentIdentityModel).
func (r *agentResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = agentIdentitySchema()
}

// saveAgent writes m as the agent's state, and its identity beside it.
func saveAgent(ctx context.Context, st *tfsdk.State, identity *tfsdk.ResourceIdentity, m agentModel, diags *diag.Diagnostics) {
	diags.Append(st.Set(ctx, &m)...)
	if id, ok := agentIdentityOf(ctx, m.Compute, m.ID.ValueString(), m.Name.ValueString()); ok {
		setIdentity(ctx, identity, id.object(), diags)
	}
}

func (r *agentResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = agentSchema(ctx)
}

// UpgradeState: version 0 held the compute reference whole.
func (r *agentResource) UpgradeState(ctx context.Context) map[int64]resource.StateUpgrader {
	return map[int64]resource.StateUpgrader{0: computeRefUpgrader(agentSchema(ctx), false)}
}

func agentSchema(ctx context.Context) schema.Schema {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	return schema.Schema{
		// Version 1: compute is {id, name, settings} (computeRefUpgrader).
		Version: 1,
		MarkdownDescription: "One deployed assistant. `terraform plan` runs the OCC admission over the Agent's compute, configuration and " +
			"credential source (passed whole: `compute = occ_compute.prod`) and shows the exact revision that would run in " +
			"`admitted_document`; a refused combination fails the plan with `INVALID_REQUEST` or `RESOURCE_CONFLICT` at the attribute " +
			"that caused it. Any change to a referenced object that matters plans a new `revision`; nothing else does. Apply checks " +
			"everything again before its first write (rule AD6), then blocks until the revision is activated or fails with the held " +
			"failure code. On a compute with a `sandbox_driver`, dedicated Codex runs in " +
			"one Sandbox per revision and activates only once the driver reports it ready with every Credential Gateway attachment; " +
			"see the guide \"Dedicated harnesses and sandboxes\". Dedicated OpenClaw is refused at plan (rule ND6): no OpenClaw release runs a native worker's inference on the node.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`NAMESPACE/NAME` on Kubernetes, `HOST/NAME` on SSH."},
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{agentName()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "The Agent's name, a DNS-1035 label (it names the Agent's Service). On a Kubernetes compute at most " +
					strconv.Itoa(render.MaxAgentNameLength()) + " characters, so that the names derived from it (such as `NAME-harness-rN`) fit Kubernetes' 63, and not ending in `-harness-rN` or `-node-rN`: " +
					"that is the Service the agent-sandbox controller makes for another agent's Sandbox. Changing it replaces the Agent."},
			"compute": schema.ObjectAttribute{Required: true, AttributeTypes: computeRefType(),
				MarkdownDescription: passWhole("Where the Agent runs.", "compute", "occ_compute")},
			"configuration": schema.ObjectAttribute{Required: true, AttributeTypes: refType(configurationSchema(), []string{"document"}, nil),
				MarkdownDescription: passWhole("The native configuration it runs with.", "configuration", "occ_configuration")},
			"harness": schema.StringAttribute{Optional: true, Computed: true,
				Validators: []validator.String{oneOfRule("HM1", admission.Harnesses...)},
				MarkdownDescription: "`openclaw` or `codex`: the Agent-level runtime policy, an attribute of the Agent rather than a resource of its own (rule HM3). When omitted, it is resolved from the configuration's " +
					"runtime policies and models (rule MR5); when set, it must not conflict with them (rule MR3)."},
			"execution_mode": schema.StringAttribute{Optional: true, Computed: true,
				Validators:    []validator.String{oneOfRule("HM1", admission.ExecutionModes...)},
				PlanModifiers: []planmodifier.String{defaultOnCreateKeepOnUpdate{apply: admission.DefaultExecutionMode}},
				MarkdownDescription: "`embedded` (the harness built into the gateway) or `dedicated` (a separate harness beside the gateway). " +
					"Defaults to `embedded` on create; an update that omits it keeps the previous mode (rule HM2)."},
			"harness_auth": schema.SingleNestedAttribute{Required: true,
				MarkdownDescription: "The sole model-auth selector: the credential source, whose `method` is the binding (rules AU1 to AU5).",
				Attributes: map[string]schema.Attribute{
					"source": schema.ObjectAttribute{Required: true,
						// The agent needs only the identity of the source's compute (AD1).
						AttributeTypes: refType(credentialSourceSchema(), []string{"value_wo", "timeouts"},
							map[string]attr.Type{"compute": types.ObjectType{AttrTypes: map[string]attr.Type{"id": types.StringType}}}),
						MarkdownDescription: passWhole("The credential source.", "source", "occ_credential_source")},
				}},
			"timeouts": agentTimeouts(ctx),
			"revision": schema.Int64Attribute{Computed: true,
				MarkdownDescription: "The revision number: 1 on create, previous + 1 for every deployment that changes what runs."},
			"revision_id": computed("The content address of the admitted revision: equal revisions have equal ids."),
			"admitted_document": computed("The frozen document the revision runs, as canonical JSON: the configuration after the sandbox driver's transform (AD2), the platform logging stamp (AD4), " +
				"for dedicated Codex the admitted `maxConcurrent` (HM7), and the deployment wiring the platform owns (gateway listener and auth, the offline start, the Codex plugin's app-server wiring; rule AD3). " +
				"Only the address of a dedicated Codex revision's own harness is added when the gateway's file is written; see the Configuration keys guide."),
			"gateway_document": computed("The private gateway configuration compiled from `admitted_document`, which the gateway runs: with a custom Codex endpoint, codex model references name the openai-compatible provider (MR4); otherwise identical. " +
				"Writing it adds only a dedicated Codex harness's `appServer.url`."),
			"harness_version": computed("The approved harness identity and version the revision freezes, such as `openclaw@2026.9.6`."),
			"revision_reason": computed("Why the current revision was made, as the plan that made it said: `" + reasonFirst + "`, or what differs from the revision before it " +
				"(for example `the compute's cpu_limit 1000m → 2000m; the configuration document at agents.defaults`), the drift it repairs, or a provider release that pins another runtime " +
				"(which the plan also warns of, with how to hold the running version). A new revision restarts the agent; changes that keep the revision (network policy, Service exposure) restart nothing and keep this value."),
			"max_concurrent": schema.Int64Attribute{Computed: true,
				MarkdownDescription: "Concurrent top-level turns (`agents.defaults.maxConcurrent`, rule HM7). Dedicated Codex: the configuration's value, or the platform's default " +
					"max(8, 4 × available parallelism), where the parallelism honours the compute's CPU quota: `cpu_limit` in whole CPUs, rounded down, at least 1 " +
					"(`2` and `2.5` give 8, `3` gives 12); the default is written into `admitted_document`. Other topologies (embedded OpenClaw, SSH): " +
					"the configuration's value when it sets one, else null: the document keeps no value and the runtime applies its own default."},
			"status": computed("The revision's status, one of five: `active` once activated. A refresh that finds what runs is not the activated revision says `" + statusDrifted + "…` " +
				"(the plan deploys a new revision); `" + statusUnretired + "…` when the activated revision runs but the apply that activated it stopped before retiring " +
				"earlier revisions (the plan is an in-place update that finishes the retirement and deploys nothing); `" + statusNetworkPolicy + "…` when a NetworkPolicy the compute asks for " +
				"was deleted, and `" + statusExposure + "…` when the Service lacks the compute's `service` exposure (the next apply writes them back, without a new revision)."),
			"activated_at":   computed("When the current revision was activated (RFC 3339)."),
			"startup_phases": startupPhasesSchema(),
			"endpoint": computed("Where the Agent's gateway answers. On Kubernetes: the in-cluster URL of its Service (`http://NAME.NAMESPACE.svc:18789`, which only the cluster's Pods resolve), " +
				"or, with the compute's `service.type = \"LoadBalancer\"`, `http://ADDRESS:18789` once the load balancer has an address. Over SSH: the gateway's loopback address on the host."),
		},
	}
}

// How long an apply may take when the configuration's timeouts block does
// not say.
const (
	defaultCreateTimeout = 15 * time.Minute
	defaultUpdateTimeout = 15 * time.Minute
	defaultDeleteTimeout = 5 * time.Minute
	// defaultReadTimeout bounds a refresh, and every read of a cluster or
	// host that has no timeouts of its own (the data sources, a compute's
	// and a credential source's refresh): client-go and an SSH session
	// would otherwise wait for an API server or host that accepted the
	// connection and never answers, and the plan with them.
	defaultReadTimeout = 5 * time.Minute
)

// readDeadline is ctx with a read's deadline (d, or defaultReadTimeout).
func readDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		d = defaultReadTimeout
	}
	return context.WithTimeout(ctx, d)
}

// agentTimeouts is the timeouts attribute, each timeout described with its
// default and with what a failure leaves.
func agentTimeouts(ctx context.Context) schema.Attribute {
	a := timeouts.Attributes(ctx, timeouts.Opts{Create: true, Read: true, Update: true, Delete: true,
		ReadDescription: "How long a refresh may wait for the cluster or host to answer, as a Go duration. Default " + durationText(defaultReadTimeout) +
			". A refresh past it fails with `UNAVAILABLE` and keeps the state as it was.",
		CreateDescription: "How long a create may take, until the revision is activated, as a Go duration (\"30s\", \"2h45m\"; " +
			"units s, m, h). Default " + durationText(defaultCreateTimeout) + ". A create that fails or runs out of time after it wrote to the " +
			"cluster or host stays in state, tainted, so the next apply replaces it (destroy, then create); one that failed before any write " +
			"(an admission refusal, a target that does not answer) leaves nothing in state.",
		UpdateDescription: "How long an update may take until the new revision is activated, as a Go duration. Default " +
			durationText(defaultUpdateTimeout) + ". An update that fails or runs out of time keeps the previous state, so the next plan " +
			"shows the change again; the previous revision may have stopped serving already (an embedded replacement stops it before its " +
			"startup probe, a dedicated one first: rules AC1, AC2).",
		DeleteDescription: "How long a destroy may take until every object of the Agent and its Pods are gone, as a Go duration. Default " +
			durationText(defaultDeleteTimeout) + ". A destroy that fails or runs out of time keeps the Agent in state; running it again " +
			"removes only what is left.",
	}).(schema.SingleNestedAttribute)
	a.MarkdownDescription = "How long apply may wait, per operation (defaults: create " + durationText(defaultCreateTimeout) +
		", update " + durationText(defaultUpdateTimeout) + ", delete " + durationText(defaultDeleteTimeout) + "), and how long a refresh may wait (read " +
		durationText(defaultReadTimeout) + "). A create or update whose " +
		"revision is not activated by its deadline fails with `DEADLINE_EXCEEDED`, naming the last phase reached."
	return a
}

// durationText writes a default timeout as users write it: 15m, 90s.
func durationText(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// ModifyPlan runs the full admission on known values and plans the revision.
// Unknown inputs defer the checks to apply.
func (r *agentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, state agentModel
	var configHarness types.String
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("harness"), &configHarness)...)
	hasState := !req.State.Raw.IsNull()
	if hasState {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	in, known := agentInput(ctx, plan, configHarness, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if !known {
		tflog.Debug(ctx, "agent inputs not known at plan; admission deferred to apply", map[string]any{"work.operation": "plan", "work.outcome": "deferred"})
		markRevisionUnknown(&plan, configHarness)
		resp.Diagnostics.Append(setAgentComputed(ctx, &resp.Plan.Raw, plan)...)
		return
	}
	rev, errs := admission.Admit(in)
	if len(errs) > 0 {
		addAdmissionErrors(&resp.Diagnostics, path.Empty(), errs)
		return
	}
	addWarnings(&resp.Diagnostics, path.Root("configuration"), rev.Warnings)
	applyRevision(&plan, rev, in.Compute)
	if hasState && state.RevisionID.Equal(plan.RevisionID) && !state.Revision.IsNull() {
		plan.Revision, plan.RevisionReason, plan.StartupPhases = state.Revision, keepReason(state), keepPhases(state)
		plan.Status, plan.ActivatedAt, plan.Endpoint = state.Status, state.ActivatedAt, state.Endpoint
		if unretired(state) || networkDrifted(state) {
			plan.Status = types.StringUnknown() // an in-place update finishes the retirement, or writes the policies or the exposure back
		}
		if exposureChanged(ctx, state, plan, in.Compute, &resp.Diagnostics) || exposureDrifted(state) {
			// The Service's type may change, and its endpoint with it.
			plan.Status, plan.Endpoint = types.StringUnknown(), types.StringUnknown()
		}
	} else {
		plan.Revision = types.Int64Value(state.Revision.ValueInt64() + 1)
		plan.Status, plan.ActivatedAt, plan.Endpoint = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
		plan.StartupPhases = types.ListUnknown(phaseType)
		if hasState {
			plan.RevisionReason = types.StringValue(revisionReason(ctx, state, rev, in.Compute, &resp.Diagnostics))
		} else {
			plan.RevisionReason = types.StringValue(reasonFirst)
		}
		// The plan deploys a new revision: what would the target say?
		r.data.preflight(ctx, rev, in.Compute, plan.Revision.ValueInt64(), state.Revision.ValueInt64(), &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	tflog.Debug(ctx, "agent admitted at plan", map[string]any{"work.operation": "plan", "work.outcome": "admitted",
		"revision": plan.Revision.ValueInt64(), "revision_id": plan.RevisionID.ValueString()})
	resp.Diagnostics.Append(setAgentComputed(ctx, &resp.Plan.Raw, plan)...)
}

// setAgentComputed writes the agent's computed attributes into a planned
// value. It replaces those top-level attributes only, instead of encoding
// the whole model again (the by-value references are large, and plans of
// hundreds of agents would pay for it).
func setAgentComputed(ctx context.Context, raw *tftypes.Value, m agentModel) diag.Diagnostics {
	return setTopLevel(ctx, raw, map[string]attr.Value{
		"id": m.ID, "harness": m.Harness, "execution_mode": m.ExecutionMode, "revision": m.Revision, "revision_id": m.RevisionID,
		"admitted_document": m.AdmittedDocument, "gateway_document": m.GatewayDocument, "harness_version": m.HarnessVersion, "revision_reason": m.RevisionReason, "startup_phases": m.StartupPhases,
		"max_concurrent": m.MaxConcurrent, "status": m.Status, "activated_at": m.ActivatedAt, "endpoint": m.Endpoint,
	})
}

// agentInput converts the planned inputs into admission's Input; known is
// false while anything admission needs is unknown.
// configHarness is the harness as configured (null when omitted, so that
// resolution decides).
func agentInput(ctx context.Context, plan agentModel, configHarness types.String, diags *diagnostics) (admission.Input, bool) {
	var in admission.Input
	if !fullyKnown(plan.Name) || !fullyKnown(plan.Compute) || !fullyKnown(plan.Configuration) || !fullyKnown(plan.HarnessAuth) ||
		!fullyKnown(configHarness) || !fullyKnown(plan.ExecutionMode) {
		return in, false
	}
	in.Agent = admission.Agent{Name: plan.Name.ValueString(), Harness: configHarness.ValueString(), ExecutionMode: plan.ExecutionMode.ValueString()}
	var ok bool
	if in.Compute, ok = computeFromObject(ctx, plan.Compute, diags); !ok {
		return in, false
	}
	cfg, ok := decodeObject[configurationRefModel](ctx, plan.Configuration, diags)
	if !ok {
		return in, false
	}
	if in.Configuration, ok = configurationInput(ctx, cfg, diags); !ok {
		return in, false
	}
	auth, ok := decodeObject[harnessAuthModel](ctx, plan.HarnessAuth, diags)
	if !ok {
		return in, false
	}
	src, ok := decodeObject[sourceRefModel](ctx, auth.Source, diags)
	if !ok {
		return in, false
	}
	in.Source = sourceInput(ctx, src, diags)
	return in, !diags.HasError()
}

func configurationInput(ctx context.Context, m configurationRefModel, diags *diagnostics) (admission.Configuration, bool) {
	doc, err := occconfig.Parse(m.CanonicalDocument.ValueString())
	if err != nil {
		addDocumentError(diags, path.Root("configuration").AtName("canonical_document"), err)
		return admission.Configuration{}, false
	}
	c := admission.Configuration{ID: m.ID.ValueString(), Name: m.Name.ValueString(), Generation: m.Generation.ValueInt64(), Document: doc}
	c.SecretBindings, _ = secretBindings(ctx, m.SecretBindings, diags)
	return c, true
}

func sourceInput(ctx context.Context, m sourceRefModel, diags *diagnostics) admission.CredentialSource {
	s := admission.CredentialSource{
		ID: m.ID.ValueString(), Name: m.Name.ValueString(), Method: m.Method.ValueString(), Generation: m.Generation.ValueInt64(),
		ComputeID: computeID(ctx, m.Compute), HasValue: !m.ValueWOVersion.IsNull(), SecretName: m.SecretName.ValueString(),
		ServiceAccount: m.ServiceAccount.ValueString(), SourceType: m.SourceType.ValueString(), EnvironmentFile: m.EnvironmentFile.ValueString(),
	}
	if ref, ok := decodeObject[secretRefModel](ctx, m.SecretRef, diags); ok {
		s.SecretRef = &admission.SecretRef{Name: ref.Name.ValueString(), Key: ref.Key.ValueString()}
	}
	return s
}

// applyRevision writes an admitted revision's values into the plan.
func applyRevision(plan *agentModel, rev *admission.Revision, c admission.Compute) {
	plan.ID = types.StringValue(agentID(c, rev.Agent))
	plan.Harness = types.StringValue(rev.Harness)
	plan.ExecutionMode = types.StringValue(rev.ExecutionMode)
	plan.RevisionID = types.StringValue(rev.ID())
	plan.AdmittedDocument = types.StringValue(string(occconfig.Canonical(rev.AdmittedDocument)))
	plan.GatewayDocument = types.StringValue(string(occconfig.Canonical(rev.GatewayDocument)))
	plan.HarnessVersion = types.StringValue(rev.HarnessVersion)
	plan.MaxConcurrent = types.Int64Null()
	if rev.MaxConcurrent > 0 {
		plan.MaxConcurrent = types.Int64Value(rev.MaxConcurrent)
	}
}

func markRevisionUnknown(plan *agentModel, configHarness types.String) {
	plan.ID, plan.RevisionID, plan.AdmittedDocument, plan.GatewayDocument = types.StringUnknown(), types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
	plan.HarnessVersion, plan.Status, plan.ActivatedAt, plan.Endpoint = types.StringUnknown(), types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
	plan.Revision, plan.MaxConcurrent, plan.RevisionReason = types.Int64Unknown(), types.Int64Unknown(), types.StringUnknown()
	plan.StartupPhases = types.ListUnknown(phaseType)
	if configHarness.IsNull() {
		plan.Harness = types.StringUnknown()
	}
}

// admitForApply checks everything again before the first write (AD6).
func admitForApply(ctx context.Context, plan agentModel, diags *diagnostics) (*admission.Revision, admission.Compute, bool) {
	// At apply every input is known. The planned harness is the configured or
	// the resolved one; resolving again from a resolved harness is the same.
	in, known := agentInput(ctx, plan, plan.Harness, diags)
	if diags.HasError() {
		return nil, in.Compute, false
	}
	if !known {
		diags.AddError("INVALID_REQUEST: the agent's inputs are still unknown at apply", "Terraform passed unknown values to apply; run the apply again.")
		return nil, in.Compute, false
	}
	rev, errs := admission.Admit(in)
	if len(errs) > 0 {
		addAdmissionErrors(diags, path.Empty(), errs)
		return nil, in.Compute, false
	}
	return rev, in.Compute, true
}

func (r *agentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if d, ok := req.ProviderData.(*Data); ok {
		r.data = d
	}
}

func (r *agentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := plan.Timeouts.Create(ctx, defaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rev, c, ok := admitForApply(ctx, plan, &resp.Diagnostics)
	if !ok {
		return
	}
	refs := recordReferences(ctx, plan, &resp.Diagnostics)
	out, diags := gated(ctx, r.providerData(), rev, revisionChanges(rev, nil), func() (deployOutcome, diagnostics) {
		return deploy(ctx, r.providerData(), executor.Deployment{Revision: rev, Compute: c, Mode: executor.ModeActivate,
			N: plan.Revision.ValueInt64(), References: refs})
	})
	resp.Diagnostics.Append(diags...)
	if !out.Wrote {
		return // nothing reached the target: nothing to keep in state
	}
	// A failed create that wrote stays in state (Terraform taints it), so
	// the next apply converges.
	plan.Status, plan.ActivatedAt, plan.Endpoint, plan.StartupPhases = out.Status, out.ActivatedAt, out.Endpoint, out.Phases
	saveAgent(ctx, &resp.State, resp.Identity, plan, &resp.Diagnostics)
}

func (r *agentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := plan.Timeouts.Update(ctx, defaultUpdateTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rev, c, ok := admitForApply(ctx, plan, &resp.Diagnostics)
	if !ok {
		return
	}
	if state.RevisionID.Equal(plan.RevisionID) {
		if unretired(state) {
			// The revision serves; an earlier apply stopped before retiring
			// what earlier revisions left (AC4): finish that, deploy nothing.
			n := state.Revision.ValueInt64()
			out, diags := deploy(ctx, r.providerData(), executor.Deployment{Revision: rev, Compute: c, Mode: executor.ModeFinish,
				N: n, Serving: n, References: recordReferences(ctx, plan, &resp.Diagnostics)})
			resp.Diagnostics.Append(diags...)
			if diags.HasError() {
				return // state keeps the finding: the next plan offers the finish again
			}
			plan.Status, plan.ActivatedAt, plan.Endpoint = out.Status, out.ActivatedAt, out.Endpoint
		}
		if !unretired(state) && (networkDrifted(state) || networkChanged(ctx, state, plan, c, &resp.Diagnostics)) {
			// The compute's network policy or exposure changed, or a
			// refresh found a policy deleted or the Service edited: write
			// them, outside revision identity (no new revision, no restart).
			n := state.Revision.ValueInt64()
			endpoint, diags := syncNetwork(ctx, r.providerData(), executor.Deployment{Revision: rev, Compute: c, Mode: executor.ModeSettings,
				N: n, Serving: n, References: recordReferences(ctx, plan, &resp.Diagnostics)})
			if diags.HasError() {
				resp.Diagnostics.Append(diags...)
				return // state keeps the previous compute: the next plan offers the change again
			}
			if plan.Status.IsUnknown() {
				plan.Status = types.StringValue("active")
			}
			if endpoint != "" {
				plan.Endpoint = types.StringValue(endpoint)
			}
		}
		// Otherwise nothing that runs changed (a referenced object changed
		// in a way that does not matter): record it, deploy nothing.
		saveAgent(ctx, &resp.State, resp.Identity, plan, &resp.Diagnostics)
		return
	}
	// The revision state holds is the one the target should serve, also
	// when a refresh found it drifted: the stale guard (AC3) and a
	// dedicated replacement's stop-earlier step (AC2) then still apply.
	serving := state.Revision.ValueInt64()
	refs := recordReferences(ctx, plan, &resp.Diagnostics)
	out, diags := gated(ctx, r.providerData(), rev, revisionChanges(rev, servingRevision(ctx, state)), func() (deployOutcome, diagnostics) {
		return deploy(ctx, r.providerData(), executor.Deployment{Revision: rev, Compute: c, Mode: executor.ModeActivate,
			N: plan.Revision.ValueInt64(), Serving: serving, References: refs})
	})
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return // a failed update keeps the previous state: the next plan shows the change again
	}
	plan.Status, plan.ActivatedAt, plan.Endpoint, plan.StartupPhases = out.Status, out.ActivatedAt, out.Endpoint, out.Phases
	saveAgent(ctx, &resp.State, resp.Identity, plan, &resp.Diagnostics)
}

func (r *agentResource) providerData() *Data {
	if r.data == nil {
		return &Data{}
	}
	return r.data
}

// Read refreshes the agent from its target and turns drift into a planned
// redeploy: a revision_id the plan cannot match.
func (r *agentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state agentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The identity is written first: every return below keeps it, also one
	// that removes an imported agent that does not exist.
	if id, ok := agentIdentityOf(ctx, state.Compute, state.ID.ValueString(), state.Name.ValueString()); ok {
		setIdentity(ctx, resp.Identity, id.object(), &resp.Diagnostics)
	}
	wf := work("agent "+state.Name.ValueString(), "read")
	var ignored diag.Diagnostics
	if c, known := computeFromObject(ctx, state.Compute, &ignored); (known || state.Compute.IsNull()) &&
		r.providerData().unrefreshed(&resp.Diagnostics, fmt.Sprintf("Agent %q", state.Name.ValueString()), c.Kind) {
		return
	}
	readTimeout, d := state.Timeouts.Read(ctx, defaultReadTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := readDeadline(ctx, readTimeout)
	defer cancel()
	ex, a, ok := r.locate(ctx, state, wf, &resp.Diagnostics)
	if !ok {
		return // not known yet: state is what we have
	}
	obs, err := ex.Read(ctx, a)
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	if !obs.Exists && state.Revision.IsNull() {
		resp.State.RemoveResource(ctx) // imported name that does not exist
		return
	}
	if state.Compute.IsNull() && obs.References != "" {
		// An import: the references the agent's last apply recorded make
		// the imported state whole (references.go).
		if err := decodeReferences(ctx, obs.References, &state); err != nil {
			resp.Diagnostics.AddWarning("The imported agent's references were not read back",
				fmt.Sprintf("Agent %q: %v. Write its compute, configuration and harness_auth in its configuration (the resources they name) before you plan.", state.Name.ValueString(), err))
		}
	}
	status, drifted := observedStatus(obs)
	state.Status = types.StringValue(status)
	if drifted {
		state.RevisionID = types.StringValue("drifted")
	} else {
		// What runs is the activated revision: state follows it. When its
		// apply did not finish retiring earlier revisions, the status says
		// so, and the next apply finishes it.
		state.Revision, state.RevisionID = types.Int64Value(obs.Revision), types.StringValue(obs.RevisionID)
		if !obs.ActivatedAt.IsZero() {
			state.ActivatedAt = types.StringValue(obs.ActivatedAt.UTC().Format(time.RFC3339))
		}
		if obs.Endpoint != "" {
			state.Endpoint = types.StringValue(obs.Endpoint)
		}
	}
	if (state.ID.IsNull() || state.ID.ValueString() == "") && a.Compute != nil {
		state.ID = types.StringValue(agentID(*a.Compute, a.Name))
	}
	tflog.Debug(ctx, "agent refreshed", executor.Fields(wf, map[string]any{"work.outcome": state.Status.ValueString(), "compute_kind": ex.Kind()}))
	saveAgent(ctx, &resp.State, resp.Identity, state, &resp.Diagnostics)
}

// locate finds an agent's executor and names the agent for it
// (locateAgent).
func (r *agentResource) locate(ctx context.Context, m agentModel, fields map[string]any, diags *diag.Diagnostics) (executor.Executor, executor.Agent, bool) {
	a := executor.Agent{Name: m.Name.ValueString(), Harness: m.Harness.ValueString(), ExecutionMode: m.ExecutionMode.ValueString(), Log: logTo(ctx, fields)}
	return r.providerData().locateAgent(ctx, a, m.Compute, m.ID.ValueString(), diags)
}

// importExecutor is the executor an import id is for (Data.importExecutor).
func (r *agentResource) importExecutor(ctx context.Context, id string) (executor.Executor, string, error) {
	return r.providerData().importExecutor(ctx, id)
}

func (r *agentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state agentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, d := state.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ex, a, ok := r.locate(ctx, state, work("agent "+state.Name.ValueString(), "delete"), &resp.Diagnostics)
	if !ok {
		return
	}
	if err := ex.Delete(ctx, a); err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	if a.RetainsState() { // a Kubernetes compute's state.retain_on_destroy
		resp.Diagnostics.AddWarning("The agent's state claim was kept",
			fmt.Sprintf("Agent %q was destroyed, but its compute sets state.retain_on_destroy, so its PersistentVolumeClaim %s in namespace %s and the state in it (sessions, channel pairings, memory, workspace) were kept. "+
				"An agent of the same name in this namespace mounts it again only when its compute sets state.adopt_retained = true; delete the claim yourself when its state is no longer needed (kubectl delete pvc %s -n %s).",
				a.Name, render.StateClaimName(a.Name), a.Compute.Kubernetes().Namespace, render.StateClaimName(a.Name), a.Compute.Kubernetes().Namespace))
	}
}

// ImportState adopts an agent by an id its compute kind's executor
// recognises: HOST/NAME, HOST:PORT/NAME or ssh://HOST[:PORT]/NAME on SSH,
// NAMESPACE/NAME on Kubernetes. Read fills its revision from the cluster
// or host, and the next plan adds the configuration without a redeploy
// when the running revision matches.
func (r *agentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importID := req.ID
	if importID == "" && req.Identity != nil {
		// An import block's identity (Terraform 1.12+): the id it names.
		var o types.Object
		resp.Diagnostics.Append(req.Identity.Get(ctx, &o)...)
		if resp.Diagnostics.HasError() {
			return
		}
		id, err := identityFromObject(o).importID()
		if err != nil {
			resp.Diagnostics.AddError("INVALID_REQUEST: unexpected import identity", err.Error())
			return
		}
		importID = id
	}
	ex, name, err := r.importExecutor(ctx, importID)
	var f *executor.Failure
	switch {
	case errors.As(err, &f):
		addFailure(&resp.Diagnostics, "", err)
	case err != nil:
		resp.Diagnostics.AddError("INVALID_REQUEST: unexpected import ID", err.Error())
	case ex == nil:
		resp.Diagnostics.AddError("INVALID_REQUEST: unexpected import ID",
			fmt.Sprintf("import ID %q must be NAMESPACE/NAME on Kubernetes (such as occ-acme/support) or HOST/NAME, HOST:PORT/NAME or ssh://HOST[:PORT]/NAME on SSH", importID))
	default:
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), importID)...)
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
		if id, ok := agentIdentityOf(ctx, types.ObjectNull(computeRefType()), importID, name); ok {
			setIdentity(ctx, resp.Identity, id.object(), &resp.Diagnostics)
		}
	}
}

// statusUnretired starts the status of an agent whose activated revision
// runs while the apply that activated it did not finish retiring earlier
// revisions (executor.DriftUnretired).
const statusUnretired = "unretired: "

// unretired reports whether state records such an agent.
func unretired(m agentModel) bool {
	return strings.HasPrefix(m.Status.ValueString(), statusUnretired)
}

// observedStatus is the status attribute of an observed agent, and
// whether what runs is not the activated revision (drifted: the plan
// deploys a new one). Unretired and network-policy findings are not
// drift: the activated revision serves.
func observedStatus(obs executor.Observed) (status string, drifted bool) {
	switch obs.Drift {
	case executor.DriftNone:
		return "active", false
	case executor.DriftUnretired:
		return statusUnretired + obs.DriftDetail, false
	case executor.DriftNetworkPolicy:
		return statusNetworkPolicy + obs.DriftDetail, false
	case executor.DriftExposure:
		return statusExposure + obs.DriftDetail, false
	}
	return statusDrifted + obs.DriftDetail, true
}

// statusDrifted starts the status of an agent whose running workload is
// not the activated revision: the plan deploys a new one.
const statusDrifted = "drifted: "

// statusNetworkPolicy starts the status of an agent whose activated
// revision runs while a NetworkPolicy its compute asks for was deleted
// (executor.DriftNetworkPolicy): the next apply writes it again, without
// a new revision.
const statusNetworkPolicy = "network policy missing: "

// statusExposure starts the status of an agent whose activated revision
// runs while its Service lacks the exposure its compute asks for
// (executor.DriftExposure): the next apply sets it again, without a new
// revision.
const statusExposure = "service exposure differs: "

// networkDrifted reports whether state records an agent whose network
// policies or Service exposure the next apply writes back.
func networkDrifted(m agentModel) bool {
	return strings.HasPrefix(m.Status.ValueString(), statusNetworkPolicy) || exposureDrifted(m)
}

// exposureDrifted reports whether state records an edited exposure.
func exposureDrifted(m agentModel) bool {
	return strings.HasPrefix(m.Status.ValueString(), statusExposure)
}

// networkChanged reports whether the planned compute's settings that no
// revision freezes (its kind's unfrozen settings: a Kubernetes compute's
// network policy and exposure) differ from the ones state's compute had;
// c is the planned compute.
func networkChanged(ctx context.Context, state, plan agentModel, c admission.Compute, diags *diagnostics) bool {
	return unfrozenChanged(ctx, state, plan, c, diags, func(r kindRow) func(admission.Compute) any { return r.unfrozen })
}

// exposureChanged reports whether the planned compute's settings that
// shape the agent's endpoint (a Kubernetes compute's exposure) differ from
// the ones state's compute had.
func exposureChanged(ctx context.Context, state, plan agentModel, c admission.Compute, diags *diagnostics) bool {
	return unfrozenChanged(ctx, state, plan, c, diags, func(r kindRow) func(admission.Compute) any { return r.endpoint })
}

// unfrozenChanged compares what settingsOf reads of the planned compute c
// and of state's compute: changed when c differs from state's, state's is
// not known, or the two read differently; never on a kind without them.
func unfrozenChanged(ctx context.Context, state, plan agentModel, c admission.Compute, diags *diagnostics, settingsOf func(kindRow) func(admission.Compute) any) bool {
	read := settingsOf(executors[c.Kind])
	if read == nil || state.Compute.IsNull() || state.Compute.Equal(plan.Compute) {
		return false
	}
	old, known := computeFromObject(ctx, state.Compute, diags)
	return !known || old.Kind != c.Kind || !reflect.DeepEqual(read(old), read(c))
}
