package provider

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/release"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// The kubernetes block of occ_compute: its schema, its model, its
// conversion into admission.KubernetesCompute and its static checks; the
// provider's registry (executors.go) hands them out.

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
	EphemeralStorage    types.String `tfsdk:"ephemeral_storage_limit"`
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
	AdoptRetained   types.Bool   `tfsdk:"adopt_retained"`
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

// kubernetesBlockSchema is occ_compute's kubernetes block.
func kubernetesBlockSchema() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: "A Kubernetes tenant namespace.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "The tenant namespace the Agents run in; created when missing. Changing it replaces the compute (its Agents redeploy into the new namespace)."},
			"runtime_image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(release.RuntimeImage()),
				Validators: []validator.String{imageReference{}},
				MarkdownDescription: fmt.Sprintf("The OpenClaw runtime image. Default: the pinned runtime image `%s` (OpenClaw %s), with the digest of the image released with this provider version. ", admission.PinnedRuntimeImage, admission.PinnedOpenClawVersion) +
					imageDigestAdvice},
			"native_worker_support": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				DeprecationMessage: nativeWorkerSupportDeprecation,
				MarkdownDescription: "Deprecated: it no longer admits anything. It declared that a custom `runtime_image` supports native workers, for dedicated OpenClaw; " +
					"dedicated OpenClaw is now refused at plan whatever it says (rule ND6), because no OpenClaw release up to " + admission.NativeInferenceCheckedVersion +
					" runs a native worker's inference on the node: the pinned runtime sends a worker's model calls through the gateway, with the gateway's credential. " +
					"It is still refused on the pinned image, which is no custom image. Remove it (where it was `true`, that gives the compute's Agents a new revision, as any change of a compute setting does)."},
			"codex_image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(release.CodexImage()),
				Validators:          []validator.String{imageReference{}},
				MarkdownDescription: fmt.Sprintf("The Codex app-server image for dedicated Codex. Default: `%s`, with the digest of the image released with this provider version. ", admission.PinnedCodexImage) + imageDigestAdvice},
			"cpu_limit": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultCPULimit),
				Validators:          []validator.String{quantity{what: "CPU"}},
				MarkdownDescription: "CPU limit of each runtime container. It sets the startup probe's budget (20 s plus 45 CPU-seconds at this limit, rule PR1) and dedicated Codex's default `maxConcurrent` (max(8, 4 × parallelism), the parallelism being this limit in whole CPUs rounded down, at least 1; rule HM7). Default `2`. In this project's tests on a real node an embedded agent of the pinned OpenClaw was activated 23 to 33 s after the apply began at `1` and about 2 minutes after at `250m`, and did not start at `90m` (its startup migrations time out; the apply fails with `CRASH_LOOP`, exit code 78). The plan does not refuse a lower limit."},
			"memory_limit": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMemoryLimit),
				Validators:          []validator.String{quantity{what: "memory"}},
				MarkdownDescription: "Memory limit of each runtime container. Default `4Gi`. In this project's tests on a real node the gateway of an embedded agent of the pinned OpenClaw was killed for memory (`OOMKilled`) on its first turn at `1Gi`, and answered at `1536Mi`. The plan does not refuse a lower limit."},
			"cpu_request": schema.StringAttribute{Optional: true,
				Validators:          []validator.String{quantity{what: "CPU"}, notAboveLimit{limit: "cpu_limit", defaultLimit: defaultCPULimit}},
				MarkdownDescription: "CPU request of each runtime container (a Kubernetes quantity such as `500m`), at most `cpu_limit`. Unset, the request equals `cpu_limit` (the Pods are Guaranteed). The startup probe's budget and `maxConcurrent` follow the limit, not the request. Part of the revision."},
			"memory_request": schema.StringAttribute{Optional: true,
				Validators:          []validator.String{quantity{what: "memory"}, notAboveLimit{limit: "memory_limit", defaultLimit: defaultMemoryLimit}},
				MarkdownDescription: "Memory request of each runtime container (a Kubernetes quantity such as `1Gi`), at most `memory_limit`. Unset, the request equals `memory_limit`. Part of the revision."},
			"ephemeral_storage_limit": schema.StringAttribute{Optional: true,
				Validators: []validator.String{quantity{what: "storage"}},
				MarkdownDescription: "The most node-local disk each runtime container may fill (its logs; the root filesystems are read-only) and the size limit of each of its Pods' `emptyDir` volumes (`/tmp`, and the gateway's state when `state` is off), as a Kubernetes quantity. " +
					"Past it the kubelet evicts the Pod, so no agent fills the node its neighbours run on. Unset: `" + admission.DefaultEphemeralStorageLimit + "`. " +
					"It asks the scheduler for no room (the request is 0). Part of the revision."},
			"node_workers": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(admission.DefaultNodeWorkers),
				Validators: []validator.Int64{int64validator.Between(1, 256)},
				MarkdownDescription: "Session-owned workers a native OpenClaw node host admits; further sessions are refused while all are taken (rule HM6). Default 8. " +
					"Only dedicated OpenClaw runs a node host, and it is refused at plan (rule ND6), so no admitted Agent uses it today."},
			"pod_annotations": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Annotations on every runtime Pod (for example a service mesh's or a scraper's). Changing them plans a new revision."},
			"state": schema.SingleNestedAttribute{
				Optional: true, Computed: true,
				Default: objectdefault.StaticValue(types.ObjectValueMust(stateAttrTypes, map[string]attr.Value{
					"enabled": types.BoolValue(true), "size": types.StringValue(defaultStateSize), "storage_class": types.StringNull(),
					"access_mode": types.StringValue(string(corev1.ReadWriteOnce)), "retain_on_destroy": types.BoolValue(false), "adopt_retained": types.BoolValue(false)})),
				MarkdownDescription: "Each agent's gateway state on a PersistentVolumeClaim of its own, `NAME-state`: the state directory (sessions, transcripts, channel pairings, memory) and the main workspace, all of `/home/node`. " +
					"The claim belongs to the agent, not to a revision: every revision and every Pod restart or reschedule mounts the same claim. On by default (`" + defaultStateSize + "`, the cluster's default StorageClass, `ReadWriteOnce`); " +
					"`enabled = false` keeps the state on an emptyDir that every new revision, restart and reschedule wipes. " +
					"The dedicated Codex harness's workspace and Codex home stay ephemeral. " +
					"A claim that cannot bind (no default StorageClass, a class that does not exist) or that a quota refuses fails the apply at once with `STATE_CLAIM_FAILED`. " +
					"Changing `size`, `storage_class` or `access_mode` gives the agent a new revision; a larger size grows the claim in place where its class allows expansion, and what Kubernetes cannot change (a class, an access mode, a smaller size) is refused at apply before anything is written.",
				Attributes: map[string]schema.Attribute{
					"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
						MarkdownDescription: "Keep the gateway's state on the agent's claim. Default `true`; `false` for throwaway agents. Turning it off keeps an existing claim (destroy removes it)."},
					"size": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultStateSize),
						Validators:          []validator.String{quantity{what: "storage"}},
						MarkdownDescription: "The claim's requested size. Default `" + defaultStateSize + "`. It may grow (where the class allows expansion), never shrink."},
					"storage_class": schema.StringAttribute{Optional: true, Validators: []validator.String{dnsSubdomain{what: "StorageClass"}},
						MarkdownDescription: "The claim's StorageClass; unset: the cluster's default class. Fixed once the claim exists."},
					"access_mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(string(corev1.ReadWriteOnce)),
						Validators:          []validator.String{oneOfValues(string(corev1.ReadWriteOnce), string(corev1.ReadWriteOncePod), string(corev1.ReadWriteMany))},
						MarkdownDescription: "`ReadWriteOnce` (default), `ReadWriteOncePod` or `ReadWriteMany`. One gateway runs at a time (rule AC1), so `ReadWriteOnce` is enough. Fixed once the claim exists."},
					"retain_on_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "Keep the claim when the agent is destroyed (destroy says so in a warning, and marks the claim retained). A later agent of the same name in this namespace, from this configuration or another, mounts it again only with `adopt_retained = true`; without it, its create fails with `RESOURCE_CONFLICT` before anything is written. Default `false`: destroy deletes the claim and the state in it. Not part of the revision."},
					"adopt_retained": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "Let a new agent mount the state claim an earlier destroy of an agent of the same name kept (`retain_on_destroy`): its sessions, channel pairings, memory and workspace. Default `false`: such a claim fails the create with `RESOURCE_CONFLICT`, naming the claim, so that no agent continues another's state unasked. Not part of the revision."},
				},
			},
			"pod_labels": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelMap{platform: true}},
				MarkdownDescription: "Labels on every runtime Pod (not on the Deployments or Sandboxes), for example for a cost report or a network policy. " +
					"Keys and values must be Kubernetes label keys and values. The platform's identity labels always win: a key under `occ-platform.io/`, " +
					"`app.kubernetes.io/managed-by`, `app.kubernetes.io/name` or `app.kubernetes.io/version` is refused at plan (rule LG4). Part of the revision."},
			"node_selector": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelMap{}},
				MarkdownDescription: "Node labels every runtime Pod must run on (the Pods' `nodeSelector`): keys and values are Kubernetes label keys and values. Part of the revision."},
			"tolerations": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "Taints every runtime Pod tolerates, shaped like the Kubernetes `tolerations` of a Pod. Part of the revision.",
				NestedObject: schema.NestedAttributeObject{
					Validators: []validator.Object{toleration{}},
					Attributes: map[string]schema.Attribute{
						"key": schema.StringAttribute{Optional: true,
							MarkdownDescription: "The taint key to tolerate, a Kubernetes label key. Unset (with `operator = \"Exists\"`): every taint."},
						"operator": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("Equal"),
							Validators:          []validator.String{oneOfValues(admission.TolerationOperators...)},
							MarkdownDescription: "`Equal` (default: the taint's value must be `value`) or `Exists` (any value; then `value` is unset)."},
						"value": schema.StringAttribute{Optional: true,
							MarkdownDescription: "The taint value to tolerate with `operator = \"Equal\"`, a Kubernetes label value."},
						"effect": schema.StringAttribute{Optional: true,
							Validators:          []validator.String{oneOfValues(append([]string{""}, admission.TolerationEffects...)...)},
							MarkdownDescription: "The taint effect to tolerate: `NoSchedule`, `PreferNoSchedule` or `NoExecute`; unset or empty: every effect."},
						"toleration_seconds": schema.Int64Attribute{Optional: true,
							MarkdownDescription: "With `effect = \"NoExecute\"`: how long a Pod stays on a node after the taint appears; unset: for ever."},
					},
				},
			},
			"priority_class_name": schema.StringAttribute{Optional: true, Validators: []validator.String{dnsSubdomain{what: "PriorityClass"}},
				MarkdownDescription: "The PriorityClass of every runtime Pod. The class must exist in the cluster (the provider does not create it): the API server refuses every Pod of a class that does not, and the apply fails with `REPLICA_FAILURE` within seconds, naming the class. Part of the revision."},
			"image_pull_secrets": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				Validators:          []validator.List{listvalidator.ValueStringsAre(dnsSubdomain{what: "Secret"}), uniqueValues{}},
				MarkdownDescription: "Names of `kubernetes.io/dockerconfigjson` Secrets every runtime Pod pulls its images with, for images in a private registry. The Secrets must exist in `namespace`; the provider does not create them. A Secret that does not exist does not fail the apply by itself: the kubelet warns (event `FailedToRetrieveImagePullSecret`) and pulls without it, and a registry that then refuses fails the apply with `IMAGE_PULL_FAILED`. Part of the revision."},
			"image_pull_policy": schema.StringAttribute{Optional: true, Validators: []validator.String{oneOfValues(admission.ImagePullPolicies...)},
				MarkdownDescription: "The image pull policy of every runtime container: `Always`, `IfNotPresent` or `Never`. Unset: Kubernetes' default (`IfNotPresent` for a tagged image, `Always` for `:latest` or no tag). Part of the revision."},
			"logging": schema.SingleNestedAttribute{
				Optional: true, Computed: true,
				Default: objectdefault.StaticValue(types.ObjectValueMust(loggingAttrTypes, map[string]attr.Value{
					"ownership": types.StringValue(admission.LoggingPlatform), "level": types.StringValue("info")})),
				MarkdownDescription: "Who owns runtime logging. `platform` (default): admission stamps `logging.level`, a matching `consoleLevel`, JSON console style and disabled native OTLP log export (rule AD4). `driver`: the compute driver owns logging and the document's logging is kept as written, and the Codex app server gets no LOG_FORMAT, RUST_LOG or [otel] settings (rules AD5, LG3). Only a compute driver the platform trusts may declare it: the Kubernetes compute, whose operator sets it here (an SSH host has no `logging`).",
				Attributes: map[string]schema.Attribute{
					"ownership": schema.StringAttribute{Required: true, Validators: []validator.String{oneOfRule("AD5", admission.LoggingPlatform, admission.LoggingDriver)},
						MarkdownDescription: "`platform` or `driver`."},
					"level": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("info"),
						Validators:          []validator.String{oneOfRule("AD4", admission.LogLevels...)},
						MarkdownDescription: "The admitted log level with platform ownership: one of silent, fatal, error, warn, info, debug, trace."},
				},
			},
			"sandbox_driver": schema.SingleNestedAttribute{
				Optional:            true,
				MarkdownDescription: "The sandbox driver that contains dedicated Codex, one Sandbox per revision (rules ND4, OS1). Dedicated OpenClaw is refused at plan whatever the driver (rule ND6).",
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, Validators: []validator.String{oneOfRule("OS1", admission.SandboxDrivers...)},
						MarkdownDescription: "The driver: `openshell` (bundled)."},
					"facets": schema.SetAttribute{Optional: true, ElementType: types.StringType,
						Validators:          []validator.Set{setvalidator.ValueStringsAre(oneOfRule("ND7", admission.Facets...))},
						MarkdownDescription: "The facets the driver provides: `networking`, `filesystem`, `process`. Each Sandbox asks for them (the `occ-platform.io/facets` annotation of the [sandbox driver extension](../guides/sandbox-extension)); a driver that lacks one refuses it, and the apply fails with `SANDBOX_PROVISIONING_FAILED`."},
					"required_profile": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
						MarkdownDescription: "The placement profile the driver must place each Sandbox's Pod by (the `occ-platform.io/required-profile` annotation of the [sandbox driver extension](../guides/sandbox-extension)); a driver without that profile refuses the Sandbox, and the apply fails with `SANDBOX_PROVISIONING_FAILED`. " +
							"It admits no dedicated OpenClaw: OpenClaw has no setting that places every session on a node (there is no `cloudWorkers.requiredProfile`), and dedicated OpenClaw is refused (rule ND6)."},
					"gateway_namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(sandboxapi.DefaultGatewayNamespace),
						Validators:          []validator.String{dnsLabel()},
						MarkdownDescription: "The namespace of the driver's gateway (the OpenShell Helm release). Default `openshell`."},
					"gateway_service": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(sandboxapi.DefaultGatewayService),
						Validators:          []validator.String{dnsLabel()},
						MarkdownDescription: "The driver's gateway Service; the driver is available while it has a ready endpoint. Default `openshell`."},
				},
			},
			"credential_gateway": schema.SingleNestedAttribute{
				Optional:            true,
				MarkdownDescription: "The Credential Gateway that supplies model keys through the sandbox egress proxy (rule AU3). While it is selected, Secret-backed and account auth methods are refused (rule AU4).",
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
						MarkdownDescription: "The gateway's name."},
				},
			},
			"network_policy": networkPolicySchema(),
			"service":        serviceExposureSchema(),
		},
	}
}

// kubernetesSettings converts a known kubernetes block.
func kubernetesSettings(ctx context.Context, o types.Object, diags *diag.Diagnostics) any {
	k, _ := decodeObject[kubernetesModel](ctx, o, diags)
	return kubernetesComputeFrom(ctx, k, diags)
}

// validateKubernetesBlock holds the block's static checks that span attributes.
func validateKubernetesBlock(ctx context.Context, o types.Object, _ path.Path, diags *diag.Diagnostics) {
	if k, ok := decodeObject[kubernetesModel](ctx, o, diags); ok && !k.RuntimeImage.IsUnknown() {
		// rule ND6, judged in admission: the deprecated declaration is refused on the pinned image.
		if e := admission.CheckNativeWorkerDeclaration(k.RuntimeImage.ValueString(), k.NativeWorkerSupport.ValueBool()); e != nil {
			addAdmissionErrors(diags, path.Empty(), e)
		}
	}
}

// kubernetesComputeFrom converts a compute's kubernetes block.
func kubernetesComputeFrom(ctx context.Context, k kubernetesModel, diags *diag.Diagnostics) admission.KubernetesCompute {
	c := admission.KubernetesCompute{
		Namespace:           k.Namespace.ValueString(),
		RuntimeImage:        k.RuntimeImage.ValueString(),
		NativeWorkerSupport: k.NativeWorkerSupport.ValueBool(),
		CodexImage:          k.CodexImage.ValueString(),
		CPUMillis:           cpuMillis(k.CPULimit.ValueString()),
		MemoryLimit:         k.MemoryLimit.ValueString(),
		NodeWorkers:         k.NodeWorkers.ValueInt64(),
	}
	if !k.PodAnnotations.IsNull() {
		diags.Append(k.PodAnnotations.ElementsAs(ctx, &c.PodAnnotations, false)...)
	}
	if st, ok := decodeObject[stateModel](ctx, k.State, diags); ok && st.Enabled.ValueBool() {
		c.State = &admission.State{Size: st.Size.ValueString(), StorageClass: st.StorageClass.ValueString(),
			AccessMode: st.AccessMode.ValueString(), RetainOnDestroy: st.RetainOnDestroy.ValueBool(), AdoptRetained: st.AdoptRetained.ValueBool()}
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
	return c
}

// podSettingsFromModel copies the runtime Pods' placement, labels,
// requests and pull settings; an unset one stays the zero value, which
// renders what Kubernetes defaults to and changes no revision id.
func podSettingsFromModel(ctx context.Context, k kubernetesModel, c *admission.KubernetesCompute, diags *diag.Diagnostics) {
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
	c.EphemeralStorageLimit = k.EphemeralStorage.ValueString()
	c.ImagePullPolicy = k.ImagePullPolicy.ValueString()
}
