package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ resource.Resource                   = (*computeResource)(nil)
	_ resource.ResourceWithValidateConfig = (*computeResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*computeResource)(nil)
	_ resource.ResourceWithImportState    = (*computeResource)(nil)
	_ resource.ResourceWithIdentity       = (*computeResource)(nil)
	_ resource.ResourceWithConfigure      = (*computeResource)(nil)
	_ resource.ResourceWithUpgradeState   = (*computeResource)(nil)
)

// NewComputeResource is the occ_compute resource: where Agents run, a
// Kubernetes namespace or an SSH host. Its settings live in state and
// occ_agent takes it by value; a Kubernetes compute also checks the
// cluster on create (reachability, permissions, the tenant namespace) and
// reads its sandbox driver live.
func NewComputeResource() resource.Resource { return &computeResource{} }

type computeResource struct{ data *Data }

// privateNamespaceCreated marks, in private state, a tenant namespace this
// compute created, which destroy deletes again.
const privateNamespaceCreated = "namespace_created"

func (r *computeResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if d, ok := req.ProviderData.(*Data); ok {
		r.data = d
	}
}

func (r *computeResource) providerData() *Data {
	if r.data == nil {
		return &Data{}
	}
	return r.data
}

func (r *computeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_compute"
}

// IdentitySchema: the compute's name (nameIdentityModel).
func (r *computeResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("compute")
}

func (r *computeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = computeSchema()
}

func computeSchema() schema.Schema {
	s := schema.Schema{
		// Version 1 adds settings (UpgradeState).
		Version: 1,
		MarkdownDescription: "Where Agents run: a Kubernetes tenant namespace or an SSH host under systemd. Exactly one of `kubernetes` or " +
			"`ssh`. Admission at plan needs neither the cluster nor the host (a refresh of a compute with a sandbox driver reads its installation live). Creating a Kubernetes compute checks that the cluster answers, creates " +
			"the tenant namespace when it is missing (destroy deletes it again only if the provider created it for this compute and " +
			"nothing is left in it: neither objects someone else created nor Agents another configuration deploys there), and checks with SelfSubjectAccessReviews every permission the provider will use there; a missing " +
			"one fails with the list. With a sandbox driver, `installation` is read live from the cluster on create and refresh. Pass the " +
			"compute whole to `occ_agent` (`compute = occ_compute.prod`); any change to its settings plans a new revision of every Agent on it, except `kubernetes.network_policy` and `kubernetes.service`, which are applied to the running Agents without one.",
		Attributes: map[string]schema.Attribute{
			"timeouts": targetTimeouts("compute", "its cluster or host (the namespace, the permission checks, a sandbox driver's installation)", "a sandbox driver's installation", "releasing what it created (its namespace, once empty)"),
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The compute's identity (its name).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "The compute's name, a DNS label. Changing it replaces the compute."},
			"kind": schema.StringAttribute{Computed: true, MarkdownDescription: "`kubernetes` or `ssh`, from the block that is set. A compute cannot change kind in place."},
			"settings": schema.StringAttribute{Computed: true,
				MarkdownDescription: "The block that is set, with every default filled in, as canonical JSON keyed by the block's name (`{\"kubernetes\": {…}}`). " +
					"This is what a reference to the compute carries (`occ_agent`'s and `occ_credential_source`'s `compute`, and the data sources' and actions'): " +
					"one value in place of the block's attributes, which keeps plans of many agents fast. Known at plan once the block is."},
			"installation": schema.SingleNestedAttribute{
				Computed:            true,
				MarkdownDescription: "The capabilities an Agent can use on this compute (rule ND5). Without a sandbox driver they follow from the declared settings; with one they are read live from the cluster on create and refresh (`sandbox_driver_unavailable` is true while its gateway is not ready).",
				Attributes: map[string]schema.Attribute{
					"execution_modes": schema.ListAttribute{Computed: true, ElementType: types.StringType,
						MarkdownDescription: "The OpenClaw execution modes an Agent can deploy in: `embedded` (dedicated OpenClaw is refused, rule ND6)."},
					"native_workers_support": schema.StringAttribute{Computed: true,
						MarkdownDescription: nativeWorkersSupportDescription},
					"sandbox_driver_unavailable": schema.BoolAttribute{Computed: true,
						MarkdownDescription: "True during a sandbox driver outage."},
				},
			},
		},
	}
	// Each compute kind's block (kubernetes, ssh) is its registration's.
	for _, kind := range kindOrder {
		row := executors[kind]
		s.Attributes[row.block] = row.blockSchema()
	}
	return s
}

// nativeWorkerSupportDeprecation is the warning a configuration that sets
// the deprecated kubernetes.native_worker_support gets (rule ND6).
// imageDigestAdvice is why to pin an image by digest.
const imageDigestAdvice = "A reference `[registry/]name[:tag][@sha256:digest]`; pin it by digest (`name:tag@sha256:…`) to run the same bytes on every node and in every later revision: " +
	"a tag can be moved to another image, a digest names exactly one, and the revision (whose id covers the reference) then fixes what runs."

const nativeWorkerSupportDeprecation = "native_worker_support no longer admits anything: dedicated OpenClaw is refused at plan whatever it says (rule ND6), " +
	"because no OpenClaw release up to " + admission.NativeInferenceCheckedVersion + " runs a native worker's inference on the node. Remove it."

// nativeWorkersSupportDescription describes the installation's
// native_workers_support, kept for configurations that read it (rule ND6).
const nativeWorkersSupportDescription = "Always null: no runtime supports native workers, so no installation offers dedicated OpenClaw " +
	"(rule ND6: no OpenClaw release up to " + admission.NativeInferenceCheckedVersion + " runs a native worker's inference on the node). " +
	"Kept so that configurations that read it keep working."

// Schema defaults of the runtime containers' limits; a request is checked
// against the default when its limit is unset.
const (
	defaultCPULimit    = "2"
	defaultMemoryLimit = "4Gi"
)

var loggingAttrTypes = map[string]attr.Type{"ownership": types.StringType, "level": types.StringType}

var stateAttrTypes = map[string]attr.Type{"enabled": types.BoolType, "size": types.StringType, "storage_class": types.StringType,
	"access_mode": types.StringType, "retain_on_destroy": types.BoolType, "adopt_retained": types.BoolType}

// defaultStateSize is the state claim's default size: what the OpenClaw
// Kubernetes operator users compare with gives its instances.
const defaultStateSize = "10Gi"

var installationAttrTypes = map[string]attr.Type{
	"execution_modes":            types.ListType{ElemType: types.StringType},
	"native_workers_support":     types.StringType,
	"sandbox_driver_unavailable": types.BoolType,
}

// ValidateConfig holds the static checks that span attributes.
func (r *computeResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	m := getCompute(ctx, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	checkOneKind(m, &resp.Diagnostics)
	for _, kind := range kindOrder {
		if row := executors[kind]; row.validate != nil {
			if o, ok := m.Blocks[row.block]; ok && !o.IsNull() && !o.IsUnknown() {
				row.validate(ctx, o, path.Root(row.block), &resp.Diagnostics)
			}
		}
	}
}

// checkOneKind: a compute is exactly one kind's block. An unknown one is
// judged again in the plan that knows it.
func checkOneKind(m computeModel, diags *diag.Diagnostics) {
	var set, names, hints []string
	for _, kind := range kindOrder {
		row := executors[kind]
		names, hints = append(names, row.block), append(hints, row.hint)
		switch b := m.Blocks[row.block]; {
		case b.IsUnknown():
			return
		case !b.IsNull():
			set = append(set, row.block)
		}
	}
	switch {
	case len(set) > 1:
		addAttrError(diags, path.Root(set[len(set)-1]), fmt.Sprintf("INVALID_REQUEST: a compute is either %s, not both", strings.Join(set, " or ")),
			fmt.Sprintf("Set only one of %s; declare a second occ_compute for the other target.", strings.Join(set, " or ")))
	case len(set) == 0:
		diags.AddError("INVALID_REQUEST: a compute needs "+strings.Join(names, " or "), "Set "+strings.Join(hints, ", or ")+".")
	}
}

// ModifyPlan fills the computed identity, kind and installation from the
// planned settings, so that agents see them at plan.
func (r *computeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	plan := getCompute(ctx, req.Plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if checkOneKind(plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	if !plan.Name.IsUnknown() {
		plan.ID = plan.Name
	}
	kind, row, _, set := plan.block()
	plan.Kind = types.StringUnknown()
	if set {
		plan.Kind = types.StringValue(kind)
	}
	var state *computeModel
	if !req.State.Raw.IsNull() {
		s := getCompute(ctx, req.State, &resp.Diagnostics)
		state = &s
		if !plan.Kind.IsUnknown() && !state.Kind.IsNull() && !state.Kind.Equal(plan.Kind) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("kind"))
		}
	}
	plan.Installation = types.ObjectUnknown(installationAttrTypes)
	plan.Settings = computeSettings(ctx, plan, &resp.Diagnostics)
	c, known := computeFromModel(ctx, plan, &resp.Diagnostics)
	switch {
	case !known:
	case row.readsInstallation == nil || !row.readsInstallation(c):
		// Nothing to read live: the capabilities follow from the settings.
		plan.Installation = installationObject(admission.ComputeInstallation(c), &resp.Diagnostics)
	case state != nil && state.Blocks[row.block].Equal(plan.Blocks[row.block]) && !state.Installation.IsNull():
		// Unchanged settings: keep what the last refresh read live.
		plan.Installation = state.Installation
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan.object(&resp.Diagnostics))...)
}

func (r *computeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan := getCompute(ctx, req.Plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	c, _ := computeFromModel(ctx, plan, &resp.Diagnostics)
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, &resp.Diagnostics)
	defer cancel()
	prep, ok := r.prepare(ctx, c, "compute-create", plan.Installation.IsUnknown(), &resp.Diagnostics)
	if !ok {
		return
	}
	if prep.Created {
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateNamespaceCreated, []byte("true"))...)
	}
	if prep.Installation != nil {
		plan.Installation = installationObject(*prep.Installation, &resp.Diagnostics)
	}
	if plan.Installation.IsUnknown() {
		plan.Installation = installationObject(admission.ComputeInstallation(c), &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, plan.object(&resp.Diagnostics))...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

// prepare hands a compute to its kind's executor: on Kubernetes the
// cluster answers, the tenant namespace exists (created when missing),
// every permission is held; with readInstallation, the installation is
// read live. A failure after creating the namespace deletes it again.
func (r *computeResource) prepare(ctx context.Context, c admission.Compute, op string, readInstallation bool, diags *diag.Diagnostics) (executor.Prepared, bool) {
	ex, err := r.providerData().executor(ctx, c.Kind)
	if err != nil {
		addFailure(diags, "", err)
		return executor.Prepared{}, false
	}
	fields := work("compute "+c.Name, op)
	tflog.Info(ctx, "preparing the compute", executor.Fields(fields, map[string]any{"compute_kind": c.Kind}))
	prep, err := ex.Prepare(ctx, executor.Prepare{Compute: c, ReadInstallation: readInstallation, Log: logTo(ctx, fields)})
	if err != nil {
		addFailure(diags, "", err)
		return executor.Prepared{}, false
	}
	return prep, true
}

// Read refreshes what the compute offers when its executor reads it live
// (a Kubernetes compute with a sandbox driver). A target that cannot be
// reached keeps the last reading, with a warning: planning must not need
// the cluster.
func (r *computeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state := getCompute(ctx, req.State, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, state.Timeouts.Read, &resp.Diagnostics)
	defer cancel()
	setNameIdentity(ctx, resp.Identity, state.Name, &resp.Diagnostics)
	c, known := computeFromModel(ctx, state, &resp.Diagnostics)
	if !known || r.providerData().unrefreshed(&resp.Diagnostics, fmt.Sprintf("Compute %q", c.Name), c.Kind) {
		return
	}
	ex, err := r.providerData().executor(ctx, c.Kind)
	var inst admission.Installation
	live := true
	if err == nil {
		inst, live, err = ex.Inspect(ctx, c)
	}
	if err != nil {
		resp.Diagnostics.AddWarning("The sandbox driver could not be read; installation is the last reading",
			fmt.Sprintf("Compute %q: %v", c.Name, err))
		return
	}
	if !live {
		return // nothing is read live: the capabilities follow from the settings
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("installation"), installationObject(inst, &resp.Diagnostics))...)
}

func (r *computeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan := getCompute(ctx, req.Plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	c, _ := computeFromModel(ctx, plan, &resp.Diagnostics)
	if plan.Installation.IsUnknown() {
		// Changed sandbox driver settings: read what the driver offers now.
		ctx, cancel := withTimeout(ctx, plan.Timeouts.Update, &resp.Diagnostics)
		defer cancel()
		prep, ok := r.prepare(ctx, c, "compute-update", true, &resp.Diagnostics)
		if !ok {
			return
		}
		if prep.Installation != nil {
			plan.Installation = installationObject(*prep.Installation, &resp.Diagnostics)
		}
	}
	if plan.Installation.IsUnknown() {
		plan.Installation = installationObject(admission.ComputeInstallation(c), &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, plan.object(&resp.Diagnostics))...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

// Delete hands the compute to its executor's Release: on Kubernetes the
// tenant namespace goes when the provider created it for this compute (at
// the compute's create, or re-created by a later deploy) and nothing is
// left in it; otherwise it is kept, with a warning that lists what is in it.
func (r *computeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	created, d := req.Private.GetKey(ctx, privateNamespaceCreated)
	resp.Diagnostics.Append(d...)
	state := getCompute(ctx, req.State, &resp.Diagnostics)
	c, known := computeFromModel(ctx, state, &resp.Diagnostics)
	if !known {
		return
	}
	ctx, cancel := withTimeout(ctx, state.Timeouts.Delete, &resp.Diagnostics)
	defer cancel()
	fields := work("compute "+c.Name, "compute-delete")
	rel := executor.Release{Compute: c, Created: string(created) == "true", Log: logTo(ctx, fields)}
	ex, err := r.providerData().executor(ctx, c.Kind)
	if err != nil && !rel.Created {
		// Nothing this compute created is known to be left; an executor that
		// cannot be built keeps nothing from being forgotten here.
		resp.Diagnostics.AddWarning("Compute "+c.Name+" was not checked",
			fmt.Sprintf("The compute was removed, but its target could not be asked whether the provider created anything for it since: %v", err))
		return
	}
	if err == nil {
		var out executor.Released
		out, err = ex.Release(ctx, rel)
		addExecutorWarnings(&resp.Diagnostics, out.Kept)
	}
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
	}
}

// ImportState adopts a compute by name; the next plan fills its settings
// from configuration as an in-place update that writes nothing remote.
func (r *computeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importLogicalByName(ctx, req, resp, false)
}

// UpgradeState: a version 0 state has no settings; they are computed from
// its block, as the next plan would, so that neither the compute nor any
// agent on it plans a change for the upgrade alone.
func (r *computeResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	prior := computeSchema()
	prior.Version = 0
	delete(prior.Attributes, "settings")
	return map[int64]resource.StateUpgrader{
		0: {PriorSchema: &prior, StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
			var o types.Object
			resp.Diagnostics.Append(req.State.Get(ctx, &o)...)
			if resp.Diagnostics.HasError() {
				return
			}
			m := computeModelOf(o)
			m.Settings = computeSettings(ctx, m, &resp.Diagnostics)
			resp.Diagnostics.Append(resp.State.Set(ctx, m.object(&resp.Diagnostics))...)
		}},
	}
}
