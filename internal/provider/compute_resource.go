package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/release"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

var (
	_ resource.Resource                   = (*computeResource)(nil)
	_ resource.ResourceWithValidateConfig = (*computeResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*computeResource)(nil)
	_ resource.ResourceWithImportState    = (*computeResource)(nil)
	_ resource.ResourceWithIdentity       = (*computeResource)(nil)
	_ resource.ResourceWithConfigure      = (*computeResource)(nil)
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
	return schema.Schema{
		MarkdownDescription: "Where Agents run: a Kubernetes tenant namespace or an SSH host under systemd. Exactly one of `kubernetes` or " +
			"`ssh`. Admission at plan needs neither the cluster nor the host (a refresh of a compute with a sandbox driver reads its installation live). Creating a Kubernetes compute checks that the cluster answers, creates " +
			"the tenant namespace when it is missing (destroy deletes it again only if the provider created it for this compute and " +
			"nothing is left in it: neither objects someone else created nor Agents another configuration deploys there), and checks with SelfSubjectAccessReviews every permission the provider will use there; a missing " +
			"one fails with the list. With a sandbox driver, `installation` is read live from the cluster on create and refresh. Pass the " +
			"compute whole to `occ_agent` (`compute = occ_compute.prod`); any change to its settings plans a new revision of every Agent on it, except `kubernetes.network_policy` and `kubernetes.service`, which are applied to the running Agents without one.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The compute's identity (its name).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{dnsLabel()},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "The compute's name, a DNS label. Changing it replaces the compute."},
			"kind": schema.StringAttribute{Computed: true, MarkdownDescription: "`kubernetes` or `ssh`, from the block that is set. A compute cannot change kind in place."},
			"kubernetes": schema.SingleNestedAttribute{
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
						MarkdownDescription: "CPU limit of each runtime container. It sets the startup probe's budget (20 s plus 45 CPU-seconds at this limit, rule PR1) and dedicated Codex's default `maxConcurrent` (max(8, 4 × parallelism), the parallelism being this limit in whole CPUs rounded down, at least 1; rule HM7). Default `2`."},
					"memory_limit": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMemoryLimit),
						Validators:          []validator.String{quantity{what: "memory"}},
						MarkdownDescription: "Memory limit of each runtime container. Default `4Gi`."},
					"cpu_request": schema.StringAttribute{Optional: true,
						Validators:          []validator.String{quantity{what: "CPU"}, notAboveLimit{limit: "cpu_limit", defaultLimit: defaultCPULimit}},
						MarkdownDescription: "CPU request of each runtime container (a Kubernetes quantity such as `500m`), at most `cpu_limit`. Unset, the request equals `cpu_limit` (the Pods are Guaranteed). The startup probe's budget and `maxConcurrent` follow the limit, not the request. Part of the revision."},
					"memory_request": schema.StringAttribute{Optional: true,
						Validators:          []validator.String{quantity{what: "memory"}, notAboveLimit{limit: "memory_limit", defaultLimit: defaultMemoryLimit}},
						MarkdownDescription: "Memory request of each runtime container (a Kubernetes quantity such as `1Gi`), at most `memory_limit`. Unset, the request equals `memory_limit`. Part of the revision."},
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
							"access_mode": types.StringValue(string(corev1.ReadWriteOnce)), "retain_on_destroy": types.BoolValue(false)})),
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
								MarkdownDescription: "Keep the claim when the agent is destroyed (destroy says so in a warning); a later agent of the same name in this namespace mounts it again. Default `false`: destroy deletes the claim and the state in it. Not part of the revision."},
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
								MarkdownDescription: "The facets the driver provides: `networking`, `filesystem`, `process`."},
							"required_profile": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
								MarkdownDescription: "A placement profile passed to the driver on each Sandbox (the `occ-platform.io/required-profile` annotation). " +
									"It admits nothing: OpenClaw has no setting that places every session on a node (there is no `cloudWorkers.requiredProfile`), and dedicated OpenClaw is refused (rule ND6)."},
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
			},
			"ssh": schema.SingleNestedAttribute{
				Optional:            true,
				MarkdownDescription: "An SSH host with systemd. It runs embedded OpenClaw only, with auth method `runtime` (rules SS1, AU5).",
				Attributes: map[string]schema.Attribute{
					"host": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
						MarkdownDescription: "Host name or address."},
					"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(22),
						Validators: []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "SSH port. Default 22."},
					"host_key": schema.StringAttribute{Optional: true, Validators: []validator.String{authorizedKey{}},
						MarkdownDescription: "The host's public key (`ssh-ed25519 AAAA…`); always verified. Several keys, one per line, while the host's key is rotated: the host must present one of them " +
							"(for example `file(\"keys/edge.pub\")` holding the old and the new key). Not part of the revision. Required unless `insecure_ignore_host_key = true`; setting both is refused."},
					"bastion": schema.SingleNestedAttribute{Optional: true,
						MarkdownDescription: "A jump host the provider reaches `host` through, as OpenSSH's `ProxyJump` and the `bastion_*` settings of Terraform's own connection block: it logs in to the bastion " +
							"with the provider's `ssh` credentials, then opens a TCP channel from there to `host`:`port`, whose host key is verified as without a bastion. The bastion must allow TCP forwarding " +
							"(`AllowTcpForwarding`, on by default). Not part of the revision: changing it restarts no agent.",
						Attributes: map[string]schema.Attribute{
							"host": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
								MarkdownDescription: "The bastion's host name or address."},
							"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(22),
								Validators: []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "The bastion's SSH port. Default 22."},
							"user": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
								MarkdownDescription: "The login user on the bastion; default: the host's login user."},
							"host_key": schema.StringAttribute{Required: true, Validators: []validator.String{authorizedKey{}},
								MarkdownDescription: "The bastion's public key (`ssh-ed25519 AAAA…`), or several, one per line; always verified."},
						},
					},
					"insecure_ignore_host_key": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "Skip host key verification, for throwaway test hosts without a known key. Off by default; the provider warns when it is on, and refuses it together with `host_key` (it would silently discard the key)."},
					"user": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
						MarkdownDescription: "Login user; default: the provider's `ssh.user`."},
					"openclaw_path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("/usr/bin/openclaw"),
						Validators: []validator.String{absolutePath{}}, MarkdownDescription: "The `openclaw` binary on the host. Default `/usr/bin/openclaw`."},
					"config_dir": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("/etc/openclaw"),
						Validators: []validator.String{absolutePath{}}, MarkdownDescription: "Where revision configurations are written. Default `/etc/openclaw`."},
				},
			},
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
	"access_mode": types.StringType, "retain_on_destroy": types.BoolType}

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
	var m computeModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	checkOneKind(m, &resp.Diagnostics)
	if k, ok := decodeObject[kubernetesModel](ctx, m.Kubernetes, &resp.Diagnostics); ok && !k.RuntimeImage.IsUnknown() {
		// rule ND6, judged in admission: the deprecated declaration is refused on the pinned image.
		if e := admission.CheckNativeWorkerDeclaration(k.RuntimeImage.ValueString(), k.NativeWorkerSupport.ValueBool()); e != nil {
			addAdmissionErrors(&resp.Diagnostics, path.Empty(), e)
		}
	}
	if s, ok := decodeObject[sshModel](ctx, m.SSH, &resp.Diagnostics); ok {
		at := path.Root("ssh")
		ignore := s.InsecureIgnoreHostKey.ValueBool()
		if s.HostKey.IsNull() && !ignore && !s.InsecureIgnoreHostKey.IsUnknown() {
			addAttrError(&resp.Diagnostics, at.AtName("host_key"), "INVALID_REQUEST: the SSH host key is missing",
				"The provider always verifies the host's key. Set ssh.host_key to the host's public key (for example the output of `cat /etc/ssh/ssh_host_ed25519_key.pub` on the host), or, only for a throwaway test host, set insecure_ignore_host_key = true.")
		}
		if ignore && !s.HostKey.IsNull() && !s.HostKey.IsUnknown() {
			// Skipping the check would silently discard the configured key.
			addAttrError(&resp.Diagnostics, at.AtName("insecure_ignore_host_key"), "INVALID_REQUEST: ssh.host_key and ssh.insecure_ignore_host_key are both set",
				"insecure_ignore_host_key = true would skip verifying the host_key you set, so a machine in the middle could pose as the host. "+
					"Remove insecure_ignore_host_key to verify the host against ssh.host_key (recommended), or, only for a throwaway test host, remove ssh.host_key.")
		} else if ignore {
			resp.Diagnostics.AddAttributeWarning(at.AtName("insecure_ignore_host_key"), "SSH host key verification is off",
				"insecure_ignore_host_key = true accepts any host key, so a machine in the middle can read the revision and the journal. Set host_key instead.")
		}
	}
}

// checkOneKind: a compute is exactly one of kubernetes or ssh. An unknown
// one is judged again in the plan that knows it.
func checkOneKind(m computeModel, diags *diag.Diagnostics) {
	switch {
	case m.Kubernetes.IsUnknown() || m.SSH.IsUnknown():
	case !m.Kubernetes.IsNull() && !m.SSH.IsNull():
		addAttrError(diags, path.Root("ssh"), "INVALID_REQUEST: a compute is either kubernetes or ssh, not both",
			"Set only one of kubernetes or ssh; declare a second occ_compute for the other target.")
	case m.Kubernetes.IsNull() && m.SSH.IsNull():
		diags.AddError("INVALID_REQUEST: a compute needs kubernetes or ssh",
			"Set kubernetes = { namespace = ... } for a Kubernetes tenant namespace, or ssh = { host = ..., host_key = ... } for an SSH host.")
	}
}

// ModifyPlan fills the computed identity, kind and installation from the
// planned settings, so that agents see them at plan.
func (r *computeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan computeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if checkOneKind(plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	if !plan.Name.IsUnknown() {
		plan.ID = plan.Name
	}
	switch {
	case !plan.Kubernetes.IsNull() && !plan.Kubernetes.IsUnknown():
		plan.Kind = types.StringValue(admission.KindKubernetes)
	case !plan.SSH.IsNull() && !plan.SSH.IsUnknown():
		plan.Kind = types.StringValue(admission.KindSSH)
	default:
		plan.Kind = types.StringUnknown()
	}
	var state *computeModel
	if !req.State.Raw.IsNull() {
		state = &computeModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
		if !plan.Kind.IsUnknown() && !state.Kind.IsNull() && !state.Kind.Equal(plan.Kind) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("kind"))
		}
	}
	plan.Installation = types.ObjectUnknown(installationAttrTypes)
	c, known := computeFromModel(ctx, plan, &resp.Diagnostics)
	switch {
	case !known:
	case c.SandboxDriver == nil:
		// Nothing to read live: the capabilities follow from the settings.
		plan.Installation = installationObject(admission.ComputeInstallation(c), &resp.Diagnostics)
	case state != nil && state.Kubernetes.Equal(plan.Kubernetes) && !state.Installation.IsNull():
		// Unchanged settings: keep what the last refresh read live.
		plan.Installation = state.Installation
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *computeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan computeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, _ := computeFromModel(ctx, plan, &resp.Diagnostics)
	ctx, cancel := context.WithTimeout(ctx, computeTimeout)
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
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
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

// computeTimeout bounds a compute's cluster checks and its namespace deletion.
const computeTimeout = 5 * time.Minute

// Read refreshes what the compute offers when its executor reads it live
// (a Kubernetes compute with a sandbox driver). A target that cannot be
// reached keeps the last reading, with a warning: planning must not need
// the cluster.
func (r *computeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state computeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	setNameIdentity(ctx, resp.Identity, state.Name, &resp.Diagnostics)
	c, known := computeFromModel(ctx, state, &resp.Diagnostics)
	if !known {
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
	var plan computeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, _ := computeFromModel(ctx, plan, &resp.Diagnostics)
	if plan.Installation.IsUnknown() {
		// Changed sandbox driver settings: read what the driver offers now.
		ctx, cancel := context.WithTimeout(ctx, computeTimeout)
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
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setNameIdentity(ctx, resp.Identity, plan.Name, &resp.Diagnostics)
}

// Delete hands the compute to its executor's Release: on Kubernetes the
// tenant namespace goes when the provider created it for this compute (at
// the compute's create, or re-created by a later deploy) and nothing is
// left in it; otherwise it is kept, with a warning that lists what is in it.
func (r *computeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	created, d := req.Private.GetKey(ctx, privateNamespaceCreated)
	resp.Diagnostics.Append(d...)
	var state computeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	c, known := computeFromModel(ctx, state, &resp.Diagnostics)
	if !known {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, computeTimeout)
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
