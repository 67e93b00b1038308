package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

var (
	_ resource.Resource                   = (*credentialSourceResource)(nil)
	_ resource.ResourceWithValidateConfig = (*credentialSourceResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*credentialSourceResource)(nil)
	_ resource.ResourceWithImportState    = (*credentialSourceResource)(nil)
	_ resource.ResourceWithIdentity       = (*credentialSourceResource)(nil)
	_ resource.ResourceWithConfigure      = (*credentialSourceResource)(nil)
	_ resource.ResourceWithUpgradeState   = (*credentialSourceResource)(nil)
)

// NewCredentialSourceResource is occ_credential_source: where an Agent's
// model credential comes from. Its method is the Agent's auth binding.
func NewCredentialSourceResource() resource.Resource { return &credentialSourceResource{} }

type credentialSourceResource struct {
	data *Data
}

// sourceRefModel is everything of a credential source but its write-only
// value: the shape occ_agent takes it in.
type sourceRefModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Compute         types.Object `tfsdk:"compute"`
	Method          types.String `tfsdk:"method"`
	ValueWOVersion  types.Int64  `tfsdk:"value_wo_version"`
	SecretRef       types.Object `tfsdk:"secret_ref"`
	ServiceAccount  types.String `tfsdk:"service_account"`
	SourceType      types.String `tfsdk:"source_type"`
	EnvironmentFile types.String `tfsdk:"environment_file"`
	Generation      types.Int64  `tfsdk:"generation"`
	SecretName      types.String `tfsdk:"secret_name"`
}

type credentialSourceModel struct {
	sourceRefModel
	ValueWO  types.String   `tfsdk:"value_wo"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

type secretRefModel struct {
	Name types.String `tfsdk:"name"`
	Key  types.String `tfsdk:"key"`
}

func (r *credentialSourceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_credential_source"
}

// IdentitySchema: the credential source's name (nameIdentityModel).
func (r *credentialSourceResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("credential source")
}

func (r *credentialSourceResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = credentialSourceSchema()
}

// UpgradeState: version 0 held the compute reference whole.
func (r *credentialSourceResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	return map[int64]resource.StateUpgrader{0: computeRefUpgrader(credentialSourceSchema(), true)}
}

func credentialSourceSchema() schema.Schema {
	return schema.Schema{
		// Version 1: compute is {id, name, settings} (computeRefUpgrader).
		Version: 1,
		MarkdownDescription: "Where an Agent's model credential comes from. The `method` is the Agent's auth binding (rules AU1 to AU5): " +
			"`api_key` and `codex_pat` from a Kubernetes Secret (`value_wo` or `secret_ref`), `credential_source` from the Credential " +
			"Gateway (`source_type`), and `runtime` from an operator's " +
			"credentials file on an SSH host (`environment_file`). The value never reaches state, plan output, logs or diagnostics. " +
			"A source with `value_wo` or `secret_ref` reaches its compute's cluster on create and update: it prepares the " +
			"namespace as an Agent's deploy does (created when missing, permissions checked), and with `value_wo` writes the value to a " +
			"Secret of its own there (`occ-cred-NAME-vN`, one per `value_wo_version`; a rotation keeps the new and the previous " +
			"version), which destroy deletes.",
		Attributes: map[string]schema.Attribute{
			"timeouts": targetTimeouts("credential source", "its compute's cluster (creating or rotating its Secret)", "its Secret", "deleting its Secrets"),
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The source's identity (its name).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "The source's name, a DNS label. Changing it replaces the source."},
			"compute": schema.ObjectAttribute{Optional: true, AttributeTypes: computeRefType(),
				MarkdownDescription: passWhole("The compute the source lives in: required for Secret-backed and "+
					"ServiceAccount sources, whose Secret lives in its namespace. An Agent can only use a source of its own compute (rule AD1).", "compute", "occ_compute")},
			"method": schema.StringAttribute{Required: true, Validators: []validator.String{oneOfRule("AU1 to AU5", admission.AuthMethods...)},
				MarkdownDescription: "`api_key`, `codex_pat`, `credential_source` or `runtime`."},
			"value_wo": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
				MarkdownDescription: "The key or token, write-only: it reaches only the Kubernetes Secret the provider writes, never state or plan. " +
					"Needs Terraform or OpenTofu >= 1.11. Bump `value_wo_version` to rotate."},
			"value_wo_version": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "The version of `value_wo`; bump it to rotate the value (a new Secret that running revisions do not see until redeployed). " +
					"A rotation keeps the new and the previous version's Secret and deletes older ones; destroy deletes every Secret this source wrote. " +
					"Each source marks its Secrets with an owner id kept in its private state: a source of the same name in another configuration, " +
					"or a Secret made by hand under `occ-cred-NAME-vN`, is refused with `RESOURCE_CONFLICT` and never used or deleted."},
			"secret_ref": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "An existing Secret in the compute's namespace.",
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()}, MarkdownDescription: "The Secret's name."},
					"key":  schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)}, MarkdownDescription: "The key inside it."},
				}},
			"service_account": schema.StringAttribute{Optional: true, Validators: []validator.String{dnsLabel()},
				DeprecationMessage: "A codex_pat source from a ServiceAccount cannot log in and is refused (rule AU2): use secret_ref or value_wo with a Codex access token.",
				MarkdownDescription: "Refused (rule AU2): a Kubernetes ServiceAccount's token is not a Codex access token, so a `codex_pat` source from one could never log in. " +
					"Put a Codex access token in a Secret (`secret_ref`) or in `value_wo` instead."},
			"source_type": schema.StringAttribute{Optional: true, Validators: []validator.String{oneOfRule("AU3", admission.SourceTypes...)},
				MarkdownDescription: "`credential_source` only: `openai_api_key`. `codex_oauth` can be declared but an Agent that uses it is refused at plan: Codex would get neither a key nor a ChatGPT login, so its startup probe could never pass (rule AU3)."},
			"environment_file": schema.StringAttribute{Optional: true, Validators: []validator.String{absolutePath{}},
				MarkdownDescription: "`runtime` only, and required there: the operator's credentials file on the SSH host that systemd loads (`EnvironmentFile=`) at every start of the agent's unit, " +
					"outside version immutability: the model key and any channel credentials, as `NAME=value` lines (the document refers to them as `${NAME}`; SSH takes no `secret_bindings`). " +
					"It is required because the provider checks only the gateway's readiness on an SSH host: a missing file fails the start instead of every turn (an empty file is fine for a model that needs no key). " +
					"Each deploy refuses, before any write, a file another user could read or change: it must be root's, closed to other users and groups, in directories only root can write. " +
					"The provider never reads or writes it (rule AU5)."},
			"generation": schema.Int64Attribute{Computed: true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
				MarkdownDescription: "Starts at 1 and grows when the method, the value version or the reference changes."},
			"secret_name": schema.StringAttribute{Computed: true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				MarkdownDescription: "The Secret the value lives in: the provider's (one per `value_wo_version`) or `secret_ref.name`."},
		},
	}
}

// sourceShape says which attributes each method takes (static, ValidateConfig).
var sourceShape = map[string]struct{ allowed, oneOf []string }{
	admission.MethodAPIKey:           {allowed: []string{"value_wo", "value_wo_version", "secret_ref"}, oneOf: []string{"value_wo", "secret_ref"}},
	admission.MethodCodexPAT:         {allowed: []string{"value_wo", "value_wo_version", "secret_ref", "service_account"}, oneOf: []string{"value_wo", "secret_ref"}},
	admission.MethodCredentialSource: {allowed: []string{"source_type"}, oneOf: []string{"source_type"}},
	admission.MethodRuntime:          {allowed: []string{"environment_file"}, oneOf: []string{"environment_file"}},
}

func (r *credentialSourceResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m credentialSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Method.IsUnknown() || m.Method.IsNull() {
		return
	}
	method := m.Method.ValueString()
	shape, ok := sourceShape[method]
	if !ok {
		return // the OneOf validator reports it
	}
	set := map[string]bool{
		"value_wo": !m.ValueWO.IsNull(), "value_wo_version": !m.ValueWOVersion.IsNull(), "secret_ref": !m.SecretRef.IsNull(),
		"service_account": !m.ServiceAccount.IsNull(), "source_type": !m.SourceType.IsNull(), "environment_file": !m.EnvironmentFile.IsNull(),
	}
	allowed := map[string]bool{}
	for _, a := range shape.allowed {
		allowed[a] = true
	}
	for _, a := range []string{"value_wo", "value_wo_version", "secret_ref", "service_account", "source_type", "environment_file"} {
		if set[a] && !allowed[a] {
			addAttrError(&resp.Diagnostics, path.Root(a), fmt.Sprintf("INVALID_REQUEST: %s does not apply to method %q", a, method),
				fmt.Sprintf("Method %q takes %s. Remove %s, or choose the method it belongs to.", method, orList(shape.oneOf), a))
		}
	}
	if method == admission.MethodCodexPAT && !m.ServiceAccount.IsNull() && !m.ServiceAccount.IsUnknown() {
		// AU2: such a source could never log in.
		if e := admission.CheckAccountSource(m.ServiceAccount.ValueString(), []string{"service_account"}); e != nil {
			addAdmissionErrors(&resp.Diagnostics, path.Empty(), admission.Errors{e})
			return
		}
	}
	count := 0
	for _, a := range shape.oneOf {
		if set[a] {
			count++
		}
	}
	if count == 0 && method == admission.MethodRuntime {
		// AU5, SS2: kept on purpose (the platform names no file): the
		// provider checks only the gateway's readiness on an SSH host, so a
		// unit without its credentials would be reported ready and fail only
		// at its first turn; a named file systemd must read fails the start
		// instead, and it is where channel credentials go too.
		addAttrError(&resp.Diagnostics, path.Root("environment_file"), "INVALID_REQUEST: method \"runtime\" needs environment_file",
			"Name the credentials file systemd loads for the agent's unit (EnvironmentFile=), for example environment_file = \"/etc/occ/NAME.env\": "+
				"the model key and any channel credentials as NAME=value lines, root-owned, mode 0600. The provider checks only the gateway's readiness on an SSH host (rule SS2), "+
				"so without a file it could not tell a host that has the credentials from one that has none. A model that needs no key can use an empty file (rule AU5).")
		return
	}
	if count != 1 {
		addAttrError(&resp.Diagnostics, path.Root("method"), fmt.Sprintf("INVALID_REQUEST: method %q needs exactly one of %s", method, orList(shape.oneOf)),
			fmt.Sprintf("Set exactly one of %s for a %s source.", orList(shape.oneOf), method))
	}
	if set["value_wo"] != set["value_wo_version"] && allowed["value_wo"] {
		addAttrError(&resp.Diagnostics, path.Root("value_wo_version"), "INVALID_REQUEST: value_wo and value_wo_version go together",
			"value_wo is write-only, so Terraform cannot see when it changes: set value_wo_version = 1 with it, and bump the version to rotate.")
	}
	needsCompute := method == admission.MethodAPIKey || method == admission.MethodCodexPAT
	if needsCompute && m.Compute.IsNull() {
		addAttrError(&resp.Diagnostics, path.Root("compute"), fmt.Sprintf("INVALID_REQUEST: a %s source needs its compute", method),
			"The Secret lives in a Kubernetes compute's namespace: set compute = occ_compute.<name>.")
	}
}

func orList(as []string) string {
	if len(as) == 1 {
		return as[0]
	}
	out := ""
	for i, a := range as {
		switch {
		case i == 0:
			out = a
		case i == len(as)-1:
			out += " or " + a
		default:
			out += ", " + a
		}
	}
	return out
}

// ModifyPlan computes identity, generation and secret name at plan, and
// checks that the compute can hold the source.
func (r *credentialSourceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, state credentialSourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	hasState := !req.State.Raw.IsNull()
	if hasState {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.Name.IsUnknown() {
		plan.ID = plan.Name
	}
	if c, known := computeFromObject(ctx, plan.Compute, &resp.Diagnostics); known {
		// rule AU5, judged in admission: the compute's kind holds the method.
		if e := admission.CheckSourceCompute(plan.Method.ValueString(), c); e != nil {
			addAdmissionErrors(&resp.Diagnostics, path.Empty(), e)
		}
	}
	known := fullyKnown(plan.Name) && fullyKnown(plan.Method) && fullyKnown(plan.ValueWOVersion) && fullyKnown(plan.SecretRef) &&
		fullyKnown(plan.ServiceAccount) && fullyKnown(plan.SourceType) && fullyKnown(plan.EnvironmentFile) &&
		(plan.Compute.IsNull() || (!plan.Compute.IsUnknown() && fullyKnown(plan.Compute.Attributes()["id"])))
	switch {
	case !known:
		plan.Generation, plan.SecretName = types.Int64Unknown(), types.StringUnknown()
	default:
		changed := !state.Method.Equal(plan.Method) || !state.ValueWOVersion.Equal(plan.ValueWOVersion) || !state.SecretRef.Equal(plan.SecretRef) ||
			!state.ServiceAccount.Equal(plan.ServiceAccount) || !state.SourceType.Equal(plan.SourceType) ||
			!state.EnvironmentFile.Equal(plan.EnvironmentFile) || computeID(ctx, state.Compute) != computeID(ctx, plan.Compute)
		plan.Generation = nextGeneration(hasState, state.Generation, state.Method.IsNull(), changed)
		plan.SecretName = secretName(ctx, plan.sourceRefModel)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// secretName is where the value lives: one provider Secret per value
// version, so that running revisions keep their frozen source (AU7).
func secretName(ctx context.Context, m sourceRefModel) types.String {
	var diags diag.Diagnostics
	if ref, ok := decodeObject[secretRefModel](ctx, m.SecretRef, &diags); ok {
		return ref.Name
	}
	if !m.ValueWOVersion.IsNull() {
		return types.StringValue(fmt.Sprintf("occ-cred-%s-v%d", m.Name.ValueString(), m.ValueWOVersion.ValueInt64()))
	}
	return types.StringNull()
}

func computeID(ctx context.Context, o types.Object) string {
	if o.IsNull() || o.IsUnknown() {
		return ""
	}
	if v, ok := o.Attributes()["id"].(types.String); ok {
		return v.ValueString()
	}
	return ""
}

func (r *credentialSourceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if d, ok := req.ProviderData.(*Data); ok {
		r.data = d
	}
}

func (r *credentialSourceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan credentialSourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, &resp.Diagnostics)
	defer cancel()
	// The owner id tells this source's Secrets from those of a source of
	// the same name in another configuration (the executor's SecretStore labels them with it).
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	owner := hex.EncodeToString(b)
	resp.Diagnostics.Append(r.materialize(ctx, req.Config, plan, owner)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(setOwner(ctx, resp.Private, owner)...)
	plan.ValueWO = types.StringNull() // write-only: never stored
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

func (r *credentialSourceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state credentialSourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Update, &resp.Diagnostics)
	defer cancel()
	owner := ownerOf(ctx, req.Private)
	resp.Diagnostics.Append(r.materialize(ctx, req.Config, plan, owner)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// A rotation keeps the new value's Secret and the one before it (an
	// Agent of another configuration may not have redeployed yet); older
	// versions go.
	if c, ok := secretTarget(ctx, plan.sourceRefModel); ok && !plan.ValueWOVersion.IsNull() && !plan.SecretName.Equal(state.SecretName) {
		if store, ok, err := r.providerData().secretStore(ctx, c); err == nil && ok {
			if err := store.DeleteSecrets(ctx, c, plan.Name.ValueString(), owner, plan.SecretName.ValueString(), state.SecretName.ValueString()); err != nil {
				resp.Diagnostics.AddWarning("Earlier credential Secrets were not deleted",
					fmt.Sprintf("Credential source %q: versions older than the previous one were to be deleted, but: %v. The next rotation or the destroy retries.", plan.Name.ValueString(), err))
			}
		}
	}
	plan.ValueWO = types.StringNull()
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

// privateState is where a resource keeps provider-private values.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

const ownerKey = "credential_owner"

// ownerOf is the source's owner id from its private state; "" for a
// source created before owners (its Secrets carry none).
func ownerOf(ctx context.Context, p privateState) string {
	if p == nil {
		return ""
	}
	b, _ := p.GetKey(ctx, ownerKey)
	var owner string
	if len(b) > 0 && json.Unmarshal(b, &owner) != nil {
		return ""
	}
	return owner
}

func setOwner(ctx context.Context, p interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}, owner string) diag.Diagnostics {
	b, _ := json.Marshal(owner)
	return p.SetKey(ctx, ownerKey, b)
}

// secretTarget is the compute a source's values live on, when it is known.
func secretTarget(ctx context.Context, m sourceRefModel) (admission.Compute, bool) {
	var diags diag.Diagnostics
	c, known := computeFromObject(ctx, m.Compute, &diags)
	return c, known
}

// storingExecutor is an executor with the SecretStore capability.
type storingExecutor interface {
	executor.Executor
	executor.SecretStore
}

// secretStore is a compute's executor when it has the SecretStore
// capability; ok is false for a kind that keeps credentials its own way
// (nothing to write or check).
func (d *Data) secretStore(ctx context.Context, c admission.Compute) (store storingExecutor, ok bool, err error) {
	ex, err := d.executor(ctx, c.Kind)
	if err != nil {
		return nil, false, err
	}
	store, ok = ex.(storingExecutor)
	return store, ok, nil
}

// materialize writes the value into its Secret (one per value version), or
// checks that a referenced Secret holds its key. The value goes from the
// configuration to the API server and nowhere else (AU7).
func (r *credentialSourceResource) materialize(ctx context.Context, config tfsdk.Config, plan credentialSourceModel, owner string) diag.Diagnostics {
	var diags diag.Diagnostics
	c, ok := secretTarget(ctx, plan.sourceRefModel)
	if !ok {
		return diags
	}
	var value types.String
	diags.Append(config.GetAttribute(ctx, path.Root("value_wo"), &value)...)
	needsTarget := !value.IsNull() || !plan.SecretRef.IsNull()
	if !needsTarget || diags.HasError() {
		return diags
	}
	store, ok, err := r.providerData().secretStore(ctx, c)
	if err != nil {
		addFailure(&diags, "", err)
		return diags
	}
	if !ok {
		return diags
	}
	// The secret's place is its compute's: the executor prepares it as for
	// an agent (a namespace created when missing, permissions checked
	// once), with the compute's target alone.
	target := c
	if c.Kind == admission.KindKubernetes {
		// The namespace alone: no sandbox driver to check for a Secret.
		target.Settings = admission.KubernetesCompute{Namespace: c.Kubernetes().Namespace}
	}
	if _, err := store.Prepare(ctx, executor.Prepare{Compute: target}); err != nil {
		addFailure(&diags, "", err)
		return diags
	}
	if !value.IsNull() {
		if value.ValueString() == "" {
			addAttrError(&diags, path.Root("value_wo"), "INVALID_REQUEST: value_wo is empty", "Set the key or token; an empty credential cannot authenticate.")
			return diags
		}
		if err := store.WriteSecret(ctx, executor.Secret{Compute: c, Name: plan.SecretName.ValueString(), Source: plan.Name.ValueString(), Owner: owner, Value: []byte(value.ValueString())}); err != nil {
			var f *executor.Failure
			if errors.As(err, &f) {
				addFailure(&diags, "", err)
				return diags
			}
			diags.AddError("UNAVAILABLE: cannot write the credential Secret", err.Error())
		}
		return diags
	}
	ref, _ := decodeObject[secretRefModel](ctx, plan.SecretRef, &diags)
	ns := c.Kubernetes().Namespace
	exists, hasKey, err := store.HasSecretKey(ctx, c, ref.Name.ValueString(), ref.Key.ValueString())
	switch {
	case err != nil:
		diags.AddError("UNAVAILABLE: cannot read the referenced Secret", err.Error())
	case !exists:
		addAttrError(&diags, path.Root("secret_ref"), "RESOURCE_CONFLICT: the referenced Secret does not exist",
			fmt.Sprintf("Secret %q is not in namespace %q. Create it there, or point secret_ref at an existing Secret.", ref.Name.ValueString(), ns))
	case !hasKey:
		addAttrError(&diags, path.Root("secret_ref"), "RESOURCE_CONFLICT: the referenced Secret lacks the key",
			fmt.Sprintf("Secret %q in namespace %q has no key %q. Add the key, or set secret_ref.key to the key that holds the credential.", ref.Name.ValueString(), ns, ref.Key.ValueString()))
	}
	return diags
}

func (r *credentialSourceResource) providerData() *Data {
	if r.data == nil {
		return &Data{}
	}
	return r.data
}

// Read detects a deleted provider-written Secret: its name leaves state,
// so the next plan writes it again from the configured value.
func (r *credentialSourceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state credentialSourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	ctx, cancel := withTimeout(ctx, state.Timeouts.Read, &resp.Diagnostics)
	defer cancel()
	setNameIdentity(ctx, resp.Identity, state.Name, &resp.Diagnostics)
	c, ok := secretTarget(ctx, state.sourceRefModel)
	if resp.Diagnostics.HasError() || !ok || state.ValueWOVersion.IsNull() || state.SecretName.IsNull() ||
		r.providerData().unrefreshed(&resp.Diagnostics, fmt.Sprintf("Credential source %q", state.Name.ValueString()), c.Kind) {
		return
	}
	store, ok, err := r.providerData().secretStore(ctx, c)
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	if !ok {
		return
	}
	exists, owner, err := store.SecretOwner(ctx, c, state.SecretName.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("UNAVAILABLE: cannot refresh the credential source", err.Error())
		return
	}
	if !exists {
		// The next plan writes it again, as an update: the source keeps
		// its owner, so its other Secrets stay its own.
		state.SecretName = types.StringNull()
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	}
	if ownerOf(ctx, req.Private) == "" && owner != "" {
		// An imported source adopts the owner its Secret names.
		resp.Diagnostics.Append(setOwner(ctx, resp.Private, owner)...)
	}
}

func (r *credentialSourceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state credentialSourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	ctx, cancel := withTimeout(ctx, state.Timeouts.Delete, &resp.Diagnostics)
	defer cancel()
	c, ok := secretTarget(ctx, state.sourceRefModel)
	if resp.Diagnostics.HasError() || !ok || state.ValueWOVersion.IsNull() {
		return
	}
	store, ok, err := r.providerData().secretStore(ctx, c)
	if err != nil {
		addFailure(&resp.Diagnostics, "", err)
		return
	}
	if !ok {
		return
	}
	if err := store.DeleteSecrets(ctx, c, state.Name.ValueString(), ownerOf(ctx, req.Private)); err != nil {
		resp.Diagnostics.AddError("DELETE_FAILED: credential source "+state.Name.ValueString(), err.Error())
	}
}

// ImportState adopts a source by "NAME" or "NAME@GENERATION".
func (r *credentialSourceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importLogicalByName(ctx, req, resp, true)
}
