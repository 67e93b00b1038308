package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// computeModel is occ_compute's state, and the shape occ_agent,
// occ_credential_source and data.occ_installation take it in.
type computeModel struct {
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Kind         types.String `tfsdk:"kind"`
	Kubernetes   types.Object `tfsdk:"kubernetes"`
	SSH          types.Object `tfsdk:"ssh"`
	Installation types.Object `tfsdk:"installation"`
}

type kubernetesModel struct {
	Namespace           types.String `tfsdk:"namespace"`
	RuntimeImage        types.String `tfsdk:"runtime_image"`
	NativeWorkerSupport types.Bool   `tfsdk:"native_worker_support"`
	CodexImage          types.String `tfsdk:"codex_image"`
	CPULimit            types.String `tfsdk:"cpu_limit"`
	MemoryLimit         types.String `tfsdk:"memory_limit"`
	NodeWorkers         types.Int64  `tfsdk:"node_workers"`
	PodAnnotations      types.Map    `tfsdk:"pod_annotations"`
	State               types.Object `tfsdk:"state"`
	PodLabels           types.Map    `tfsdk:"pod_labels"`
	NodeSelector        types.Map    `tfsdk:"node_selector"`
	Tolerations         types.List   `tfsdk:"tolerations"`
	PriorityClassName   types.String `tfsdk:"priority_class_name"`
	CPURequest          types.String `tfsdk:"cpu_request"`
	MemoryRequest       types.String `tfsdk:"memory_request"`
	ImagePullSecrets    types.List   `tfsdk:"image_pull_secrets"`
	ImagePullPolicy     types.String `tfsdk:"image_pull_policy"`
	Logging             types.Object `tfsdk:"logging"`
	SandboxDriver       types.Object `tfsdk:"sandbox_driver"`
	CredentialGateway   types.Object `tfsdk:"credential_gateway"`
	NetworkPolicy       types.Object `tfsdk:"network_policy"`
	Service             types.Object `tfsdk:"service"`
}

type stateModel struct {
	Enabled         types.Bool   `tfsdk:"enabled"`
	Size            types.String `tfsdk:"size"`
	StorageClass    types.String `tfsdk:"storage_class"`
	AccessMode      types.String `tfsdk:"access_mode"`
	RetainOnDestroy types.Bool   `tfsdk:"retain_on_destroy"`
}

type tolerationModel struct {
	Key               types.String `tfsdk:"key"`
	Operator          types.String `tfsdk:"operator"`
	Value             types.String `tfsdk:"value"`
	Effect            types.String `tfsdk:"effect"`
	TolerationSeconds types.Int64  `tfsdk:"toleration_seconds"`
}

type loggingModel struct {
	Ownership types.String `tfsdk:"ownership"`
	Level     types.String `tfsdk:"level"`
}

type sandboxDriverModel struct {
	Name             types.String `tfsdk:"name"`
	Facets           types.Set    `tfsdk:"facets"`
	RequiredProfile  types.String `tfsdk:"required_profile"`
	GatewayNamespace types.String `tfsdk:"gateway_namespace"`
	GatewayService   types.String `tfsdk:"gateway_service"`
}

type credentialGatewayModel struct {
	Name types.String `tfsdk:"name"`
}

type sshModel struct {
	Host                  types.String `tfsdk:"host"`
	Port                  types.Int64  `tfsdk:"port"`
	HostKey               types.String `tfsdk:"host_key"`
	InsecureIgnoreHostKey types.Bool   `tfsdk:"insecure_ignore_host_key"`
	User                  types.String `tfsdk:"user"`
	OpenClawPath          types.String `tfsdk:"openclaw_path"`
	ConfigDir             types.String `tfsdk:"config_dir"`
	Bastion               types.Object `tfsdk:"bastion"`
}

type bastionModel struct {
	Host    types.String `tfsdk:"host"`
	Port    types.Int64  `tfsdk:"port"`
	User    types.String `tfsdk:"user"`
	HostKey types.String `tfsdk:"host_key"`
}

var objectAsOptions = basetypes.ObjectAsOptions{}

// decodeObject decodes a known, non-null object into T; ok is false for a
// null or unknown object.
func decodeObject[T any](ctx context.Context, o types.Object, diags *diag.Diagnostics) (T, bool) {
	var out T
	if o.IsNull() || o.IsUnknown() {
		return out, false
	}
	d := o.As(ctx, &out, objectAsOptions)
	diags.Append(d...)
	return out, !d.HasError()
}

// fullyKnown reports whether a value and everything inside it is known. It
// walks the framework values directly: converting to tftypes first costs
// more than the whole admission on large plans.
func fullyKnown(v attr.Value) bool {
	if v == nil {
		return true
	}
	if v.IsUnknown() {
		return false
	}
	if v.IsNull() {
		return true
	}
	var elems []attr.Value
	switch t := v.(type) {
	case basetypes.ObjectValue:
		for _, a := range t.Attributes() {
			if !fullyKnown(a) {
				return false
			}
		}
		return true
	case basetypes.ListValue:
		elems = t.Elements()
	case basetypes.SetValue:
		elems = t.Elements()
	case basetypes.MapValue:
		for _, e := range t.Elements() {
			if !fullyKnown(e) {
				return false
			}
		}
		return true
	}
	for _, e := range elems {
		if !fullyKnown(e) {
			return false
		}
	}
	return true
}

// computeFromObject converts a compute object (occ_compute's state shape)
// into admission's Compute; known is false when anything admission needs
// is still unknown.
func computeFromObject(ctx context.Context, o types.Object, diags *diag.Diagnostics) (admission.Compute, bool) {
	m, ok := decodeObject[computeRefModel](ctx, o, diags)
	if !ok {
		return admission.Compute{}, false
	}
	return computeFromModel(ctx, computeModel{ID: m.ID, Name: m.Name, Kind: m.Kind, Kubernetes: m.Kubernetes, SSH: m.SSH}, diags)
}

// computeRefModel is the compute as other objects take it: without its
// live installation, so that a driver outage read on refresh changes no
// Agent's plan (deploy reads the driver itself).
type computeRefModel struct {
	ID         types.String `tfsdk:"id"`
	Name       types.String `tfsdk:"name"`
	Kind       types.String `tfsdk:"kind"`
	Kubernetes types.Object `tfsdk:"kubernetes"`
	SSH        types.Object `tfsdk:"ssh"`
}

// computeRefType is the attribute type of a by-value compute reference.
func computeRefType() map[string]attr.Type {
	return refType(computeSchema(), []string{"installation"}, nil)
}

func computeFromModel(ctx context.Context, m computeModel, diags *diag.Diagnostics) (admission.Compute, bool) {
	if !fullyKnown(m.Name) || !fullyKnown(m.Kubernetes) || !fullyKnown(m.SSH) {
		return admission.Compute{}, false
	}
	c := admission.Compute{ID: m.Name.ValueString(), Name: m.Name.ValueString()}
	if !m.ID.IsNull() && !m.ID.IsUnknown() {
		c.ID = m.ID.ValueString()
	}
	if k, ok := decodeObject[kubernetesModel](ctx, m.Kubernetes, diags); ok {
		c.Kind = admission.KindKubernetes
		c.Namespace = k.Namespace.ValueString()
		c.RuntimeImage = k.RuntimeImage.ValueString()
		c.NativeWorkerSupport = k.NativeWorkerSupport.ValueBool()
		c.CodexImage = k.CodexImage.ValueString()
		c.CPUMillis = cpuMillis(k.CPULimit.ValueString())
		c.MemoryLimit = k.MemoryLimit.ValueString()
		c.NodeWorkers = k.NodeWorkers.ValueInt64()
		if !k.PodAnnotations.IsNull() {
			diags.Append(k.PodAnnotations.ElementsAs(ctx, &c.PodAnnotations, false)...)
		}
		if st, ok := decodeObject[stateModel](ctx, k.State, diags); ok && st.Enabled.ValueBool() {
			c.State = &admission.State{Size: st.Size.ValueString(), StorageClass: st.StorageClass.ValueString(),
				AccessMode: st.AccessMode.ValueString(), RetainOnDestroy: st.RetainOnDestroy.ValueBool()}
		}
		podSettingsFromModel(ctx, k, &c, diags)
		c.LoggingOwnership, c.LoggingLevel = admission.LoggingPlatform, "info"
		if l, ok := decodeObject[loggingModel](ctx, k.Logging, diags); ok {
			c.LoggingOwnership = l.Ownership.ValueString()
			if !l.Level.IsNull() {
				c.LoggingLevel = l.Level.ValueString()
			}
		}
		if d, ok := decodeObject[sandboxDriverModel](ctx, k.SandboxDriver, diags); ok {
			sd := &admission.SandboxDriver{Name: d.Name.ValueString(), RequiredProfile: d.RequiredProfile.ValueString(),
				GatewayNamespace: d.GatewayNamespace.ValueString(), GatewayService: d.GatewayService.ValueString()}
			diags.Append(d.Facets.ElementsAs(ctx, &sd.Facets, false)...)
			c.SandboxDriver = sd
		}
		if g, ok := decodeObject[credentialGatewayModel](ctx, k.CredentialGateway, diags); ok {
			c.CredentialGateway = &admission.CredentialGateway{Name: g.Name.ValueString()}
		}
		c.NetworkPolicy = networkPolicyFrom(ctx, k.NetworkPolicy, diags)
		c.Exposure = exposureFrom(ctx, k.Service, diags)
	}
	if s, ok := decodeObject[sshModel](ctx, m.SSH, diags); ok {
		c.Kind = admission.KindSSH
		c.Host, c.Port = s.Host.ValueString(), s.Port.ValueInt64()
		c.OpenClawPath, c.ConfigDir = s.OpenClawPath.ValueString(), s.ConfigDir.ValueString()
		c.HostKey, c.User, c.InsecureIgnoreHostKey = s.HostKey.ValueString(), s.User.ValueString(), s.InsecureIgnoreHostKey.ValueBool()
		if b, ok := decodeObject[bastionModel](ctx, s.Bastion, diags); ok {
			c.Bastion = &admission.Bastion{Host: b.Host.ValueString(), Port: b.Port.ValueInt64(), User: b.User.ValueString(), HostKey: b.HostKey.ValueString()}
		}
	}
	return c, c.Kind != ""
}

// podSettingsFromModel copies the runtime Pods' placement, labels,
// requests and pull settings; an unset one stays the zero value, which
// renders what Kubernetes defaults to and changes no revision id.
func podSettingsFromModel(ctx context.Context, k kubernetesModel, c *admission.Compute, diags *diag.Diagnostics) {
	if !k.PodLabels.IsNull() {
		diags.Append(k.PodLabels.ElementsAs(ctx, &c.PodLabels, false)...)
	}
	if !k.NodeSelector.IsNull() {
		diags.Append(k.NodeSelector.ElementsAs(ctx, &c.NodeSelector, false)...)
	}
	if !k.Tolerations.IsNull() {
		var ts []tolerationModel
		diags.Append(k.Tolerations.ElementsAs(ctx, &ts, false)...)
		for _, t := range ts {
			tol := admission.Toleration{Key: t.Key.ValueString(), Operator: t.Operator.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()}
			if !t.TolerationSeconds.IsNull() {
				secs := t.TolerationSeconds.ValueInt64()
				tol.TolerationSeconds = &secs
			}
			c.Tolerations = append(c.Tolerations, tol)
		}
	}
	if !k.ImagePullSecrets.IsNull() {
		diags.Append(k.ImagePullSecrets.ElementsAs(ctx, &c.ImagePullSecrets, false)...)
	}
	c.PriorityClassName = k.PriorityClassName.ValueString()
	c.CPURequestMillis = cpuMillis(k.CPURequest.ValueString()) // 0 when unset: the limit
	c.MemoryRequest = k.MemoryRequest.ValueString()
	c.ImagePullPolicy = k.ImagePullPolicy.ValueString()
}

func installationObject(inst admission.Installation, diags *diag.Diagnostics) types.Object {
	modes, d := types.ListValueFrom(context.Background(), types.StringType, inst.ExecutionModes)
	diags.Append(d...)
	obj, d := types.ObjectValue(installationAttrTypes, map[string]attr.Value{
		"execution_modes": modes,
		// rule ND6: no runtime supports native workers; kept for configurations that read it.
		"native_workers_support":     types.StringNull(),
		"sandbox_driver_unavailable": types.BoolValue(inst.SandboxDriverUnavailable),
	})
	diags.Append(d...)
	return obj
}

// setTopLevel replaces top-level attributes of an object value in place.
func setTopLevel(ctx context.Context, raw *tftypes.Value, values map[string]attr.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	var attrs map[string]tftypes.Value
	if err := raw.As(&attrs); err != nil {
		diags.AddError("Internal error: unexpected plan shape", err.Error())
		return diags
	}
	for name, v := range values {
		tv, err := v.ToTerraformValue(ctx)
		if err != nil {
			diags.AddError("Internal error: cannot encode "+name, err.Error())
			return diags
		}
		attrs[name] = tv
	}
	*raw = tftypes.NewValue(raw.Type(), attrs)
	return diags
}
