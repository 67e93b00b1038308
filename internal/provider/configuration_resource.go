package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

var (
	_ resource.Resource                   = (*configurationResource)(nil)
	_ resource.ResourceWithValidateConfig = (*configurationResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*configurationResource)(nil)
	_ resource.ResourceWithImportState    = (*configurationResource)(nil)
	_ resource.ResourceWithIdentity       = (*configurationResource)(nil)
)

// NewConfigurationResource is occ_configuration: a saved native OpenClaw
// configuration with an identity and a generation.
func NewConfigurationResource() resource.Resource { return &configurationResource{} }

type configurationResource struct{}

// configurationRefModel is a configuration as occ_agent takes it: without
// the document text, so that reformatting the document (same canonical
// form) changes nothing for the agents that use it.
type configurationRefModel struct {
	ID                types.String `tfsdk:"id"`
	Name              types.String `tfsdk:"name"`
	SecretBindings    types.Map    `tfsdk:"secret_bindings"`
	Generation        types.Int64  `tfsdk:"generation"`
	Digest            types.String `tfsdk:"digest"`
	CanonicalDocument types.String `tfsdk:"canonical_document"`
}

type configurationModel struct {
	configurationRefModel
	Document types.String `tfsdk:"document"`
}

type secretBindingModel struct {
	Secret types.String `tfsdk:"secret"`
	Key    types.String `tfsdk:"key"`
}

func (r *configurationResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_configuration"
}

// IdentitySchema: the configuration's name (nameIdentityModel).
func (r *configurationResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("configuration")
}

func (r *configurationResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = configurationSchema()
}

func configurationSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "A native OpenClaw configuration (JSON or JSON5) that Agents run with. Saving it checks the save-time rules " +
			"at plan: the root keys OpenClaw accepts, no `agents.list` roster (MR9), model references (MR1, MR2), runtime policies (MR3) " +
			"and the provider consistency of fallbacks and catalogs (MR8). `generation` grows on every semantic change; reformatting, " +
			"comments and key order are no change: they update `document` in place and keep `generation`, `digest` and " +
			"`canonical_document`, so no `occ_agent` using the configuration changes. Keys the platform writes itself (the gateway's " +
			"bind, port, mode and auth on Kubernetes, discovery and update checks, a dedicated harness's wiring) are refused at the Agent's " +
			"plan when they hold another value (rule AD3): the Configuration keys guide lists them.\n\n" +
			"Root keys: OpenClaw's root object is strict (an unknown root key makes the gateway exit with code 78), so the provider " +
			"accepts exactly the root keys of the pinned runtime's schema (OpenClaw " + admission.PinnedOpenClawVersion + "): " +
			"`" + strings.Join(admission.RootKeys, "`, `") + "`. Inside them the document is passed through as written, except " +
			"where admission transforms the revision (platform logging, dedicated Codex's `maxConcurrent`, the retired `agents.defaults.agentRuntime`); " +
			"see `occ_agent.admitted_document`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The configuration's identity (its name).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "The configuration's name, a DNS label. Changing it replaces the configuration (a new identity)."},
			"document": schema.StringAttribute{Required: true,
				MarkdownDescription: "The native configuration document, JSON or JSON5, such as `file(\"openclaw.json5\")` or `jsonencode({...})`."},
			"secret_bindings": schema.MapNestedAttribute{
				Optional: true,
				MarkdownDescription: "Kubernetes Secrets that supply channel and gateway feature credentials (memory embeddings included), " +
					"by binding name (rule AU6): binding `telegram` reaches the gateway container, and only it, as `${TELEGRAM}` (upper " +
					"case, `-` as `_`). Model credentials never go here; they come through the Agent's `harness_auth`. A binding that " +
					"would set a variable the platform, a model SDK, a proxy, TLS trust or a loader reads, or that points at a model " +
					"credential or token Secret, is refused at plan (`INVALID_REQUEST`); the *Rules* guide lists them. Kubernetes " +
					"computes only (an SSH compute refuses them); a missing Secret fails the Agent's apply as `CONTAINER_CONFIG_FAILED`.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"secret": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()}, MarkdownDescription: "The Secret's name."},
					"key":    schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)}, MarkdownDescription: "The key inside the Secret."},
				}},
			},
			"generation": schema.Int64Attribute{Computed: true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
				MarkdownDescription: "Starts at 1 and grows by one on every semantic change of the document or its secret bindings."},
			"digest": schema.StringAttribute{Computed: true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				MarkdownDescription: "sha256 of the canonical document, in hex."},
			"canonical_document": schema.StringAttribute{Computed: true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				MarkdownDescription: "The document as canonical JSON: keys sorted, no insignificant white space."},
		},
	}
}

// ValidateConfig parses the document and applies the save-time rules.
func (r *configurationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var bindings types.Map
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("secret_bindings"), &bindings)...)
	if refs, ok := secretBindings(ctx, bindings, &resp.Diagnostics); ok {
		_, errs := admission.CheckSecretBindings(refs, []string{"secret_bindings"})
		for _, e := range errs {
			addAttrError(&resp.Diagnostics, path.Root("secret_bindings").AtMapKey(e.Attribute[1]), summary(e), detail(e))
		}
	}
	var doc types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("document"), &doc)...)
	if resp.Diagnostics.HasError() || doc.IsNull() || doc.IsUnknown() {
		return
	}
	checkDocument(doc.ValueString(), path.Root("document"), &resp.Diagnostics)
}

// checkDocument parses a document and reports save-time refusals and advice.
func checkDocument(src string, at path.Path, diags *diag.Diagnostics) (occconfig.Document, bool) {
	d, err := occconfig.Parse(src)
	if err != nil {
		addDocumentError(diags, at, err)
		return nil, false
	}
	if errs := admission.CheckDocument(d); len(errs) > 0 {
		for _, e := range errs {
			e.Attribute = nil
		}
		addAdmissionErrors(diags, at, errs)
		return nil, false
	}
	addWarnings(diags, at, admission.DocumentWarnings(d))
	return d, true
}

// ModifyPlan computes canonical form, digest and generation at plan.
func (r *configurationResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, state configurationModel
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
	if !fullyKnown(plan.Document) || !fullyKnown(plan.SecretBindings) {
		plan.Digest, plan.CanonicalDocument, plan.Generation = types.StringUnknown(), types.StringUnknown(), types.Int64Unknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	doc, err := occconfig.Parse(plan.Document.ValueString())
	if err != nil {
		addDocumentError(&resp.Diagnostics, path.Root("document"), err)
		return
	}
	plan.CanonicalDocument = types.StringValue(string(occconfig.Canonical(doc)))
	plan.Digest = types.StringValue(occconfig.Digest(doc))
	plan.Generation = nextGeneration(hasState, state.Generation, state.Digest.IsNull(),
		!state.Digest.Equal(plan.Digest) || !state.SecretBindings.Equal(plan.SecretBindings))
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// nextGeneration is the generation rule of logical objects: 1 on create;
// kept after an import (which recorded no settings yet) and when nothing
// that matters changed; previous + 1 otherwise.
func nextGeneration(hasState bool, prior types.Int64, imported, changed bool) types.Int64 {
	switch {
	case !hasState:
		return types.Int64Value(1)
	case imported && !prior.IsNull():
		return prior
	case imported:
		return types.Int64Value(1)
	case changed:
		return types.Int64Value(prior.ValueInt64() + 1)
	default:
		return prior
	}
}

func (r *configurationResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan configurationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

// Read keeps state: a logical object's identity, generation and document
// live there. Only the resource identity is written (state from before it
// existed has none).
func (r *configurationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var name types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("name"), &name)...)
	setNameIdentity(ctx, resp.Identity, name, &resp.Diagnostics)
}

func (r *configurationResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan configurationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

func (r *configurationResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// ImportState adopts a configuration by "NAME" or "NAME@GENERATION".
func (r *configurationResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importLogicalByName(ctx, req, resp, true)
}

// secretBindings reads a known secret_bindings map; ok is false while any of
// it is unknown (the check then runs at apply).
func secretBindings(ctx context.Context, m types.Map, diags *diag.Diagnostics) (map[string]admission.SecretRef, bool) {
	if m.IsNull() {
		return nil, true
	}
	if !fullyKnown(m) {
		return nil, false
	}
	var raw map[string]secretBindingModel
	if d := m.ElementsAs(ctx, &raw, false); d.HasError() {
		diags.Append(d...)
		return nil, false
	}
	out := make(map[string]admission.SecretRef, len(raw))
	for k, b := range raw {
		out[k] = admission.SecretRef{Name: b.Secret.ValueString(), Key: b.Key.ValueString()}
	}
	return out, true
}
