// Package render turns an admitted revision into what runs: Kubernetes
// objects (as server-side apply configurations) and, for SSH hosts, a
// systemd unit and files. It is pure: a revision in, values out.
package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Identity labels on every object (LG4), and annotations.
const (
	LabelAgent     = "occ-platform.io/agent"
	LabelRevision  = "occ-platform.io/revision"
	LabelComponent = "occ-platform.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelName and LabelVersion: the service name and version of what a
	// component runs; LabelRevisionID: the revision's content id (LG4).
	LabelName       = "app.kubernetes.io/name"
	LabelVersion    = "app.kubernetes.io/version"
	LabelRevisionID = "occ-platform.io/revision-id"
	ManagedBy       = "terraform-provider-occ"

	AnnotationRevisionID = "occ-platform.io/revision-id"
	// AnnotationCompute names, on a namespace the provider created, the
	// compute it was created for (its destroy deletes it again).
	AnnotationCompute = "occ-platform.io/compute"
	// AnnotationRetained marks, with the time, a state claim that an
	// agent's destroy kept (state.retain_on_destroy): a later agent of the
	// name mounts it only when its compute says so (state.adopt_retained).
	AnnotationRetained = "occ-platform.io/retained-at"

	ComponentGateway = "gateway"
	ComponentHarness = "harness"
	// ComponentNode is the native node host of dedicated OpenClaw, which
	// ND6 refuses: nothing renders it any more, but an agent deployed as
	// dedicated OpenClaw before ND6 still has one, which a refresh reads
	// (TopologyOf) and destroy removes by the agent's label.
	ComponentNode = "node"

	// FieldManager is the one server-side apply field manager.
	FieldManager = "terraform-provider-occ"
)

// Ports and paths of the runtime contract.
const (
	GatewayPort   = admission.GatewayPort
	AppServerPort = 18790
	ConfigDir     = "/etc/openclaw"
	ConfigFile    = "openclaw.json"
	ProbeFile     = admission.ProbeFile
	Workspace     = "/home/node/workspace" // MR7
	CodexConfig   = "/etc/codex"
	CodexHome     = "/var/lib/codex"
	// HarnessWorkspace is where the dedicated Codex harness works: its own
	// writable workspace, apart from the gateway's (MR7).
	HarnessWorkspace = "/home/codex/workspace"
	// Wrapper is the startup wrapper in the runtime images (cmd/occ-runtime).
	Wrapper = "/usr/local/bin/occ-runtime"
	// Init is the init process of the runtime images (Debian's tini): PID 1
	// of every runtime container, so that the runtime the wrapper becomes
	// has a parent that reaps its children and forwards signals.
	Init = "/usr/bin/tini"
	// AppServerTokenDir holds, in the dedicated Codex harness only, the
	// app server's capability token (key AppServerTokenKey of the
	// AppServerTokenSecret) as a read-only file.
	AppServerTokenDir = "/var/run/secrets/occ/app-server"
	AppServerTokenKey = "token"
	// AppServerTokenEnv carries the token into the gateway, where the Codex
	// plugin resolves it as the env SecretRef of appServer.authToken.
	AppServerTokenEnv = admission.AppServerTokenEnv
	// GatewayTokenEnv carries the gateway's token (key GatewayTokenKey of
	// the GatewayTokenSecret): OpenClaw refuses to listen beyond loopback
	// without a shared secret. Only the gateway Pod has it.
	GatewayTokenEnv = "OPENCLAW_GATEWAY_TOKEN"
	GatewayTokenKey = "token"
)

// Objects is one revision's Kubernetes objects, in apply order. The Service
// is applied by the activation gate only once the revision is ready (AC3).
type Objects struct {
	Namespace       string
	ServiceAccounts []*corev1ac.ServiceAccountApplyConfiguration
	ConfigMaps      []*corev1ac.ConfigMapApplyConfiguration
	Deployments     []*appsv1ac.DeploymentApplyConfiguration
	Service         *corev1ac.ServiceApplyConfiguration
	// ServingComponent is the component the Service selects.
	ServingComponent string
	// Sandboxes hold a sandboxed revision's dedicated harness (OS1, HM5).
	Sandboxes []*Sandbox
	// StateClaim is the agent's gateway state (StateClaimName): one claim
	// per agent, never per revision, created before the workloads and kept
	// across revisions; nil when the compute keeps state on an emptyDir.
	StateClaim *corev1ac.PersistentVolumeClaimApplyConfiguration
	// HarnessService is the address the gateway reaches an unsandboxed
	// dedicated Codex harness at (HarnessServiceName): it selects the
	// harness of this revision and is applied before the workloads, or nil
	// (a sandboxed harness is reached through its Sandbox's own Service).
	HarnessService *corev1ac.ServiceApplyConfiguration
	// NetworkPolicies are the agent's, from the compute's network policy
	// (NetworkPolicies), per agent and outside revision identity; none
	// when the compute disables them (the executor then deletes the
	// agent's).
	NetworkPolicies []*networkingv1ac.NetworkPolicyApplyConfiguration
	// Exposure is the compute's exposure of the agent's Service, outside
	// revision identity; ExposedService is the agent's Service with it,
	// as a deploy writes it (the activation adds its own annotations).
	Exposure       admission.Exposure
	ExposedService *corev1.Service
}

// Names of an agent's objects.
func GatewayName(agent string) string            { return agent + "-gateway" }
func HarnessName(agent string) string            { return agent + "-harness" }
func ServiceName(agent string) string            { return agent }
func ConfigMapName(agent string, n int64) string { return fmt.Sprintf("%s-r%d", agent, n) }
func HarnessConfigMapName(agent string, n int64) string {
	return fmt.Sprintf("%s-harness-r%d", agent, n)
}

// HarnessServiceName is the Service of an unsandboxed dedicated Codex
// harness: the host of the gateway's appServer.url.
func HarnessServiceName(agent string) string { return HarnessName(agent) }

// AppServerTokenSecret holds the token of the harness's websocket listener;
// the executor creates it once per agent with random bytes.
func AppServerTokenSecret(agent string) string { return agent + admission.AppServerTokenSecretSuffix }

// GatewayTokenSecret holds an agent's gateway token; the executor
// creates it once per agent with random bytes. Only the gateway Pod reads it.
func GatewayTokenSecret(agent string) string { return agent + admission.GatewayTokenSecretSuffix }

// Labels are the identity labels of a component of a revision (LG4): the
// Agent, the revision's number and content id, the component, its service
// name and version, set by the provider on every workload and its Pods and
// never taken from what the runtime logs.
func Labels(rev *admission.Revision, n int64, component string) map[string]string {
	name, version := serviceIdentity(rev, component)
	return map[string]string{
		LabelAgent: rev.Agent, LabelRevision: strconv.FormatInt(n, 10), LabelRevisionID: rev.ID(), LabelComponent: component,
		LabelManagedBy: ManagedBy, LabelName: name, LabelVersion: version,
	}
}

// serviceIdentity is the service name and version of what a component
// runs: the OpenClaw gateway or the Codex app server. A custom
// image's version is not known to the provider: "custom-image".
func serviceIdentity(rev *admission.Revision, component string) (name, version string) {
	harness := admission.HarnessOpenClaw
	switch component {
	case ComponentHarness:
		name, harness = "codex-app-server", admission.HarnessCodex
	default:
		name = "openclaw-gateway"
	}
	c := admission.Compute{Settings: admission.KubernetesCompute{RuntimeImage: rev.ComputeSettings.Kubernetes().RuntimeImage, CodexImage: rev.ComputeSettings.Kubernetes().CodexImage}}
	_, version, _ = strings.Cut(admission.HarnessVersion(harness, c), "@")
	if strings.HasPrefix(version, "image:") {
		version = "custom-image"
	}
	return name, version
}

// AgentLabels label what belongs to an agent's component and outlives its
// revisions (ServiceAccounts, NetworkPolicies, the state claim, the
// tokens): the agent and the component, no
// revision. Destroy deletes them by the agent's label.
func AgentLabels(agent, component string) map[string]string {
	return map[string]string{LabelAgent: agent, LabelComponent: component, LabelManagedBy: ManagedBy}
}

// Selector selects a component's Pods of any revision.
func Selector(agent, component string) map[string]string {
	return map[string]string{LabelAgent: agent, LabelComponent: component}
}

// Kubernetes renders revision n of rev on compute c: every object its
// deploy writes (Objects.InOrder gives them in the order they are
// applied). What the compute sets outside revision identity, its network
// policy, its Service's exposure and its sandbox driver's namespace,
// shapes the NetworkPolicies and the Service only, never what the
// revision's id covers; a zero c gives the default policies and a
// ClusterIP Service.
func Kubernetes(rev *admission.Revision, n int64, c admission.Compute) (*Objects, error) {
	cs := rev.ComputeSettings
	if cs.Kind != admission.KindKubernetes || cs.Kubernetes().Namespace == "" {
		return nil, fmt.Errorf("render: revision of agent %q is not for a Kubernetes compute", rev.Agent)
	}
	var objs *Objects
	var err error
	switch {
	case rev.Harness == admission.HarnessOpenClaw && rev.ExecutionMode == admission.ModeEmbedded:
		objs, err = embedded(rev, n)
	case rev.Harness == admission.HarnessCodex && rev.ExecutionMode == admission.ModeDedicated:
		objs, err = dedicatedCodex(rev, n)
	default:
		return nil, fmt.Errorf("render: %s %s is not rendered by this version of the provider", rev.Harness, rev.ExecutionMode)
	}
	if err != nil {
		return nil, err
	}
	if objs.StateClaim, err = stateClaim(rev); err != nil {
		return nil, err
	}
	driverNS := ""
	if c.Kubernetes().SandboxDriver != nil {
		driverNS, _ = DriverGateway(c.Kubernetes().SandboxDriver)
	}
	objs.NetworkPolicies = NetworkPolicies(rev, c.Kubernetes().NetworkPolicy, driverNS)
	objs.Exposure = c.Kubernetes().Exposure
	objs.ExposedService = objs.exposedService()
	return objs, nil
}

// Object is one rendered object, named by its kind and name.
type Object struct {
	Kind, Name string
	// Value is the apply configuration (or, for a Sandbox, the object)
	// the executor writes.
	Value any
}

// InOrder is every object of the revision in the order its deploy applies
// them: the state claim (it outlives revisions, and a Pod waits for it),
// the ServiceAccounts and ConfigMaps the workloads name, the agent's
// NetworkPolicies before any workload of the revision runs, the harness's
// Service before either workload, the Sandboxes and Deployments, and last
// the agent's Service, which the activation writes once the revision is
// ready (ExposedService). The executor's own steps (the agent's tokens,
// stopping earlier revisions, the gate) fall between them.
func (o *Objects) InOrder() []Object {
	var out []Object
	if o.StateClaim != nil {
		out = append(out, Object{"PersistentVolumeClaim", *o.StateClaim.Name, o.StateClaim})
	}
	for _, sa := range o.ServiceAccounts {
		out = append(out, Object{"ServiceAccount", *sa.Name, sa})
	}
	for _, cm := range o.ConfigMaps {
		out = append(out, Object{"ConfigMap", *cm.Name, cm})
	}
	for _, p := range o.NetworkPolicies {
		out = append(out, Object{"NetworkPolicy", *p.Name, p})
	}
	if o.HarnessService != nil {
		out = append(out, Object{"Service", *o.HarnessService.Name, o.HarnessService})
	}
	for _, s := range o.Sandboxes {
		out = append(out, Object{"Sandbox", s.Name, s})
	}
	for _, d := range o.Deployments {
		out = append(out, Object{"Deployment", *d.Name, d})
	}
	out = append(out, Object{"Service", *o.Service.Name, o.ExposedService})
	return out
}

// exposedService is the agent's Service with the compute's exposure
// (ExposeService).
func (o *Objects) exposedService() *corev1.Service {
	ac := o.Service
	ann := map[string]string{}
	for k, v := range ac.Annotations {
		ann[k] = v
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: *ac.Name, Namespace: o.Namespace, Labels: ac.Labels, Annotations: ann}}
	svc.Spec.Selector = ac.Spec.Selector
	for _, p := range ac.Spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: *p.Name, Port: *p.Port, TargetPort: *p.TargetPort, Protocol: corev1.ProtocolTCP})
	}
	ExposeService(svc, o.Exposure)
	return svc
}

// StateClaimName is the agent's gateway state claim. No other agent's
// claim can bear it: every claim the provider makes ends in "-state", and
// agent "a-state"'s is "a-state-state".
func StateClaimName(agent string) string { return agent + "-state" }

// StateMountPath is where the gateway's state claim is mounted: HOME, which
// holds the state directory (OPENCLAW_STATE_DIR: sessions, transcripts,
// channel pairings, memory) and the main workspace (MR7).
const StateMountPath = "/home/node"

// stateClaim is the agent's state claim: labelled with the agent and the
// gateway component but no revision (it outlives them), requesting the
// compute's size in its class ("" leaves the class to the cluster's
// default) and access mode.
func stateClaim(rev *admission.Revision) (*corev1ac.PersistentVolumeClaimApplyConfiguration, error) {
	st := rev.ComputeSettings.Kubernetes().State
	if st == nil {
		return nil, nil
	}
	size, err := resource.ParseQuantity(st.Size)
	if err != nil {
		return nil, fmt.Errorf("render: the compute's state.size %q is not a Kubernetes quantity: %w", st.Size, err)
	}
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.PersistentVolumeAccessMode(st.AccessMode)).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: size}))
	if st.StorageClass != "" {
		spec.WithStorageClassName(st.StorageClass)
	}
	return corev1ac.PersistentVolumeClaim(StateClaimName(rev.Agent), rev.ComputeSettings.Kubernetes().Namespace).
		WithLabels(AgentLabels(rev.Agent, ComponentGateway)).
		WithSpec(spec), nil
}

func embedded(rev *admission.Revision, n int64) (*Objects, error) {
	a, ns := rev.Agent, rev.ComputeSettings.Kubernetes().Namespace
	gw, err := GatewayDocument(rev, n)
	if err != nil {
		return nil, err
	}
	cm, err := configMap(rev, n, ConfigMapName(a, n), ComponentGateway, map[string]any{ConfigFile: gw, ProbeFile: rev.Probe})
	if err != nil {
		return nil, err
	}
	env := gatewayEnv()
	if rev.Credential.Consumer == admission.ConsumerGateway {
		env = append(env, credentialEnv(rev)...)
	}
	dep := gatewayDeployment(rev, n, []string{"--probe=" + ConfigDir + "/" + ProbeFile}, env)
	return &Objects{
		Namespace:        ns,
		ServiceAccounts:  []*corev1ac.ServiceAccountApplyConfiguration{serviceAccount(rev, GatewayName(a), ComponentGateway)},
		ConfigMaps:       []*corev1ac.ConfigMapApplyConfiguration{cm},
		Deployments:      []*appsv1ac.DeploymentApplyConfiguration{dep},
		Service:          service(rev, n, ComponentGateway),
		ServingComponent: ComponentGateway,
	}, nil
}

func dedicatedCodex(rev *admission.Revision, n int64) (*Objects, error) {
	a, ns := rev.Agent, rev.ComputeSettings.Kubernetes().Namespace
	gw, err := GatewayDocument(rev, n)
	if err != nil {
		return nil, err
	}
	gwCM, err := configMap(rev, n, ConfigMapName(a, n), ComponentGateway, map[string]any{ConfigFile: gw})
	if err != nil {
		return nil, err
	}
	hCM, err := configMap(rev, n, HarnessConfigMapName(a, n), ComponentHarness, map[string]any{ProbeFile: rev.Probe, "config.toml": codexConfig(rev)})
	if err != nil {
		return nil, err
	}
	// The gateway never receives the harness inference credential (AU6).
	// The gateway's Codex plugin sends the app server's token as a bearer
	// token; it reads it from the environment (appServer.authToken).
	gwEnv := append(gatewayEnv(), corev1ac.EnvVar().WithName(AppServerTokenEnv).WithValueFrom(
		corev1ac.EnvVarSource().WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(AppServerTokenSecret(a)).WithKey(AppServerTokenKey))))
	// The gateway's wrapper holds it, unready, until the harness reports
	// ready (PR10).
	gateway := gatewayDeployment(rev, n, []string{"--wait-peer=harness"}, gwEnv)
	var hEnv []*corev1ac.EnvVarApplyConfiguration
	if platformLogging(rev) {
		// LG3, only where the platform owns logging (AD4); with
		// driver-owned logging (AD5) the driver's configuration decides.
		hEnv = append(hEnv, envValue("LOG_FORMAT", "json"), envValue("RUST_LOG", logLevel(rev)+",codex_otel=off"))
	}
	hEnv = append(hEnv,
		envValue("CODEX_HOME", CodexHome),
		envValue("OCC_CODEX_CONFIG", CodexConfig+"/config.toml"),
		envValue("TMPDIR", "/tmp"),
	)
	hEnv = append(hEnv, credentialEnv(rev)...)
	harness := deployment(rev, n, HarnessName(a), ComponentHarness, HarnessName(a),
		container(rev, "harness", rev.ComputeSettings.Kubernetes().CodexImage, append([]string{"--container=harness", "--harness=codex", "--probe=" + CodexConfig + "/" + ProbeFile, "--"},
			AppServerCommand()...), hEnv, AppServerPort).
			WithWorkingDir(HarnessWorkspace). // MR7
			WithVolumeMounts(
				corev1ac.VolumeMount().WithName("codex-config").WithMountPath(CodexConfig).WithReadOnly(true),
				corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
				corev1ac.VolumeMount().WithName("codex-home").WithMountPath(CodexHome),
				corev1ac.VolumeMount().WithName("workspace").WithMountPath(HarnessWorkspace),
				corev1ac.VolumeMount().WithName("app-server-token").WithMountPath(AppServerTokenDir).WithReadOnly(true),
			),
		// Only the token's key, owned by root with the Pod's fsGroup (1000):
		// the harness reads it through its group, nobody else can.
		corev1ac.Volume().WithName("app-server-token").WithSecret(corev1ac.SecretVolumeSource().WithSecretName(AppServerTokenSecret(a)).
			WithItems(corev1ac.KeyToPath().WithKey(AppServerTokenKey).WithPath(AppServerTokenKey)).WithDefaultMode(0o440)),
		corev1ac.Volume().WithName("codex-config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(HarnessConfigMapName(a, n))),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(emptyDir(rev)),
		corev1ac.Volume().WithName("codex-home").WithEmptyDir(emptyDir(rev)),
		corev1ac.Volume().WithName("workspace").WithEmptyDir(emptyDir(rev)),
	)
	objs := &Objects{
		Namespace: ns,
		ServiceAccounts: []*corev1ac.ServiceAccountApplyConfiguration{
			serviceAccount(rev, GatewayName(a), ComponentGateway), serviceAccount(rev, HarnessName(a), ComponentHarness)},
		ConfigMaps:       []*corev1ac.ConfigMapApplyConfiguration{gwCM, hCM},
		Deployments:      []*appsv1ac.DeploymentApplyConfiguration{harness, gateway},
		Service:          service(rev, n, ComponentGateway),
		ServingComponent: ComponentGateway,
	}
	if Sandboxed(rev) {
		// The harness runs in the revision's Sandbox (OS1): the agent-sandbox
		// controller makes its Pod, the driver places it.
		objs.Deployments = []*appsv1ac.DeploymentApplyConfiguration{gateway}
		objs.Sandboxes = []*Sandbox{sandbox(rev, n, HarnessSandboxName(a, n), ComponentHarness, harness.Spec.Template)}
	} else {
		objs.HarnessService = harnessService(rev, n)
	}
	return objs, nil
}

// AppServerCommand is the dedicated Codex harness's runtime command: the
// app server on the Pod network, refusing every websocket client that does
// not present the capability token of the AppServerTokenSecret as
// "Authorization: Bearer <token>" (codex reads the token from the file
// and will not listen beyond loopback without --ws-auth).
func AppServerCommand() []string {
	return []string{"codex", "app-server", "--listen", fmt.Sprintf("ws://0.0.0.0:%d", AppServerPort),
		"--ws-auth", "capability-token", "--ws-token-file", AppServerTokenDir + "/" + AppServerTokenKey}
}

// harnessService is the gateway's way to its unsandboxed harness: a
// ClusterIP Service named HarnessServiceName that selects the harness of
// revision n (only one revision's harness runs: AC2).
func harnessService(rev *admission.Revision, n int64) *corev1ac.ServiceApplyConfiguration {
	sel := Selector(rev.Agent, ComponentHarness)
	sel[LabelRevision] = strconv.FormatInt(n, 10)
	return meta(corev1ac.Service(HarnessServiceName(rev.Agent), rev.ComputeSettings.Kubernetes().Namespace), rev, n, ComponentHarness).
		WithSpec(corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).WithSelector(sel).
			WithPorts(corev1ac.ServicePort().WithName("app-server").WithProtocol(corev1.ProtocolTCP).
				WithPort(AppServerPort).WithTargetPort(intstr.FromInt32(AppServerPort))))
}

// gatewayDeployment is the Agent's gateway: the OpenClaw gateway under the
// startup wrapper (wrapperArgs before "--"), its configuration mounted
// read-only, TMPDIR on an emptyDir, HOME (state and workspace) on the
// agent's state claim or, without one, an emptyDir.
func gatewayDeployment(rev *admission.Revision, n int64, wrapperArgs []string, env []*corev1ac.EnvVarApplyConfiguration) *appsv1ac.DeploymentApplyConfiguration {
	a := rev.Agent
	args := append([]string{"--container=gateway", "--harness=openclaw"}, wrapperArgs...)
	args = append(args, "--", "openclaw", "gateway", "run")
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName("config").WithMountPath(ConfigDir).WithReadOnly(true),
		corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
		corev1ac.VolumeMount().WithName("state").WithMountPath(StateMountPath),
	}
	state := corev1ac.Volume().WithName("state").WithEmptyDir(emptyDir(rev))
	if rev.ComputeSettings.Kubernetes().State != nil {
		// The same claim in every revision: the gateway's sessions,
		// pairings, memory and workspace survive a new revision, a
		// restart and a reschedule.
		state = corev1ac.Volume().WithName("state").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(StateClaimName(a)))
	}
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(ConfigMapName(a, n))),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(emptyDir(rev)),
		state,
	}
	// OpenClaw refuses to listen beyond loopback without a shared secret:
	// every gateway has the agent's own token (GatewayTokenSecret), which
	// only the gateway Pod reads.
	env = append(env, GatewayTokenEnvVar(a))
	// AU6: the configuration's secret bindings (channel and gateway feature
	// credentials) reach the gateway, and only the gateway.
	for _, b := range rev.SecretBindings {
		env = append(env, corev1ac.EnvVar().WithName(b.EnvVar).WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
			corev1ac.SecretKeySelector().WithName(b.Secret.Name).WithKey(b.Secret.Key))))
	}
	return deployment(rev, n, GatewayName(a), ComponentGateway, GatewayName(a),
		container(rev, "gateway", rev.ComputeSettings.Kubernetes().RuntimeImage, args, env, GatewayPort).WithVolumeMounts(mounts...), volumes...)
}

// GatewayTokenEnvVar is the gateway's token, from the agent's
// GatewayTokenSecret.
func GatewayTokenEnvVar(agent string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(GatewayTokenEnv).WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
		corev1ac.SecretKeySelector().WithName(GatewayTokenSecret(agent)).WithKey(GatewayTokenKey)))
}

// GatewayDocument is the gateway's native configuration as it runs on
// Kubernetes: the revision's private gateway configuration (MR4 applied)
// with the deployment wiring the platform owns: listen on the Pod network
// at the contract's port with token auth (the token is
// OPENCLAW_GATEWAY_TOKEN, never in the file: OpenClaw 2026.9.6 refuses to
// bind beyond loopback without auth), no Control UI (OCC serves none to
// browsers), offline (no mDNS, no update check, no model catalog refresh:
// the gateway keeps the catalog of the pinned runtime the revision was
// admitted against; seen on the real node: without it every gateway looks
// catalog.openclaw.ai up), and for dedicated Codex the Codex plugin pointed
// at the harness over websocket. Which keys those are is
// admission.PlatformKeys, the list admission refuses user values of (AD3).
// Admission already froze the fixed ones into the revision's documents
// (admission.StampPlatformKeys); render writes them again (a revision of
// an older provider lacks them) and adds the computed one, the address of
// the revision's own harness, which names its revision number n.
func GatewayDocument(rev *admission.Revision, n int64) (occconfig.Document, error) {
	d := occconfig.Clone(rev.GatewayDocument)
	computed := map[string]any{}
	if rev.Harness == admission.HarnessCodex && rev.ExecutionMode == admission.ModeDedicated {
		host := HarnessServiceName(rev.Agent)
		if Sandboxed(rev) {
			host = HarnessSandboxName(rev.Agent, n)
		}
		computed[admission.PathCodexAppServerURL.String()] = fmt.Sprintf("ws://%s:%d", host, AppServerPort)
	}
	// A document admission would refuse (a non-object where a key goes)
	// fails closed (AD6) rather than running without the platform's wiring.
	if err := admission.WritePlatformKeys(d, admission.PlatformKeys(admission.KindKubernetes, rev.Harness, rev.ExecutionMode), computed); err != nil {
		return nil, err
	}
	return d, nil
}

// codexConfig is the host-owned Codex configuration (LG3): telemetry
// export off, prompts never logged, and for a compatible endpoint (PR3)
// the model and the provider the startup probe called, so that the app
// server's turns go where the probe passed (the probe defines the same
// provider on its command line, admission.CodexProviderSettings). The
// provider's id is the one the gateway's Codex plugin names in each
// thread it starts (openai-compatible, from MR4's references): a provider
// of another name fails every turn with "Model provider not found".
//
// With driver-owned logging (AD5) the file holds no logging: the [otel]
// table is left out, as are LOG_FORMAT and RUST_LOG (dedicatedCodex); the
// rendering policy of LG3 applies only to platform-owned logging.
func codexConfig(rev *admission.Revision) string {
	var b strings.Builder
	if platformLogging(rev) {
		b.WriteString("# Host-owned by OCC: telemetry export off, prompts never logged.\n")
	} else {
		b.WriteString("# Host-owned by OCC. Logging is owned by the compute's driver (logging.ownership = \"driver\"): no logging settings here.\n")
	}
	if base := strings.TrimRight(strings.TrimSpace(rev.Probe.BaseURL), "/"); base != "" {
		// Root keys come before the first table.
		if ref, err := admission.ParseModelRef(rev.Probe.Model); err == nil {
			fmt.Fprintf(&b, "model = %s\n", admission.TOMLString(ref.Model))
		}
		fmt.Fprintf(&b, "model_provider = %q\n\n[model_providers.%s]\n", admission.CodexProvider, admission.CodexProvider)
		for _, kv := range admission.CodexProviderSettings(base, rev.Probe.Transport) {
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
		b.WriteString("\n")
	}
	if platformLogging(rev) {
		b.WriteString("[otel]\nexporter = \"none\"\nlog_user_prompt = false\n")
	}
	return b.String()
}

// platformLogging reports whether the platform owns the revision's runtime
// logging (AD4, the default) rather than the compute's driver (AD5).
func platformLogging(rev *admission.Revision) bool {
	return rev.LoggingOwnership != admission.LoggingDriver
}

func logLevel(rev *admission.Revision) string {
	if rev.LoggingLevel == "" {
		return "info"
	}
	return rev.LoggingLevel
}

func meta[T interface {
	WithLabels(map[string]string) T
	WithAnnotations(map[string]string) T
}](obj T, rev *admission.Revision, n int64, component string) T {
	return obj.WithLabels(Labels(rev, n, component)).WithAnnotations(map[string]string{
		AnnotationRevisionID: rev.ID(),
	})
}

func serviceAccount(rev *admission.Revision, name, component string) *corev1ac.ServiceAccountApplyConfiguration {
	sa := corev1ac.ServiceAccount(name, rev.ComputeSettings.Kubernetes().Namespace).WithAutomountServiceAccountToken(false)
	// Service accounts outlive revisions: they carry the agent and component only.
	return sa.WithLabels(AgentLabels(rev.Agent, component))
}

// configMap is an immutable per-revision ConfigMap; string values are kept,
// others are encoded as canonical JSON.
func configMap(rev *admission.Revision, n int64, name, component string, files map[string]any) (*corev1ac.ConfigMapApplyConfiguration, error) {
	data := map[string]string{}
	for k, v := range files {
		switch t := v.(type) {
		case string:
			data[k] = t
		case occconfig.Document:
			data[k] = string(occconfig.Canonical(t))
		default:
			b, err := json.Marshal(t)
			if err != nil {
				return nil, fmt.Errorf("render: %s: %w", k, err)
			}
			data[k] = string(b)
		}
	}
	cm := meta(corev1ac.ConfigMap(name, rev.ComputeSettings.Kubernetes().Namespace), rev, n, component).WithImmutable(true).WithData(data)
	return cm, nil
}

func gatewayEnv() []*corev1ac.EnvVarApplyConfiguration {
	return []*corev1ac.EnvVarApplyConfiguration{
		envValue("OPENCLAW_CONFIG_PATH", ConfigDir+"/"+ConfigFile), // LG1
		envValue("OPENCLAW_STATE_DIR", "/home/node/.openclaw"),
		envValue("OPENCLAW_GATEWAY_PORT", strconv.Itoa(GatewayPort)),
		envValue("OPENCLAW_WORKSPACE", Workspace), // MR7
		envValue("HOME", "/home/node"),
		envValue("TMPDIR", "/tmp"), // PR1: the probe's temporary state
	}
}

func envValue(name, value string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).WithValue(value)
}

// credentialEnv is the model credential as its consumer receives it, read
// from what admission decided (rev.Credential, AU1 to AU3): the variable
// holding the key, token or placeholder, and Codex's login mode. A Secret
// is projected by reference (a codex_pat source from a ServiceAccount is
// refused at admission, AU2); a Credential Gateway's key is a placeholder the egress proxy swaps
// (AU3). The variables keep the order each delivery has always rendered
// in, so that an upgrade changes no Pod template.
func credentialEnv(rev *admission.Revision) []*corev1ac.EnvVarApplyConfiguration {
	c := rev.Credential
	var key *corev1ac.EnvVarApplyConfiguration
	switch {
	case c.EnvVar == "":
	case c.Placeholder:
		key = envValue(c.EnvVar, admission.PlaceholderCredential)
	default:
		key = secretEnv(c.EnvVar, rev.Source)
	}
	var login *corev1ac.EnvVarApplyConfiguration
	if c.LoginMode != "" {
		login = envValue(admission.EnvCodexLoginMode, c.LoginMode)
	}
	var env []*corev1ac.EnvVarApplyConfiguration
	order := []*corev1ac.EnvVarApplyConfiguration{login, key}
	if c.Placeholder {
		order = []*corev1ac.EnvVarApplyConfiguration{key, login}
	}
	for _, e := range order {
		if e != nil {
			env = append(env, e)
		}
	}
	return env
}

// secretEnv projects the credential source's Secret; the revision pins the
// Secret by name (one Secret per value version), never its bytes (AU7).
func secretEnv(name string, s admission.SourceBinding) *corev1ac.EnvVarApplyConfiguration {
	key := s.SecretKey
	if key == "" {
		key = "value"
	}
	return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
		corev1ac.SecretKeySelector().WithName(s.SecretName).WithKey(key)))
}

// StartupProbePeriod is the startup probe's period in seconds.
const StartupProbePeriod = 5

// startupAllowance is what a container may take to start beside the model
// probe: the Codex login (30 s) and the runtime's own start (plugin install,
// state migration, workspace setup, the gateway coming up).
const startupAllowance = 30*time.Second + 5*time.Minute

// StartupFailureThreshold sizes the startup probe so that the kubelet waits
// for the admitted probe budget at the container's CPU limit (PR1, PR4)
// plus startupAllowance before it may restart a container that does not
// answer yet.
func StartupFailureThreshold(rev *admission.Revision) int32 {
	window := rev.Probe.Budget(rev.ComputeSettings.Kubernetes().CPUMillis) + startupAllowance
	period := StartupProbePeriod * time.Second
	return int32((window + period - 1) / period)
}

// The readiness probe of every runtime container. Becoming ready takes
// one answer (the default success threshold), so activation is noticed
// within a period; dropping out of the agent's Service takes
// ReadinessFailures answers that are late or not 200, so that a gateway
// busy with a turn on a loaded node (a /readyz answered after the
// kubelet's default 1 s) keeps serving instead of refusing connections
// until the next probe. A container that exits is unready at once,
// whatever the threshold.
const (
	ReadinessPeriod   = 2 // seconds
	ReadinessTimeout  = 2 // seconds
	ReadinessFailures = 3
)

// Command is every runtime container's command, before the wrapper's
// arguments: tini running the wrapper, which later execs the runtime in
// its own process. The command replaces the image's entrypoint, so render
// names tini itself; without it the runtime would be PID 1, with nobody to
// reap the orphans its tools leave, and a PID 1 ignores every signal it
// has no handler for. tini forwards the kubelet's signals to its child
// alone (no -g: the runtime stops its own children in its drain, which a
// group signal would cut short). -s keeps tini the reaper where it is not
// PID 1 (a Pod that shares its PID namespace, as a sandbox driver may
// make it); as PID 1 it changes nothing.
func Command() []string { return []string{Init, "-s", "--", Wrapper} }

func container(rev *admission.Revision, name, image string, args []string, env []*corev1ac.EnvVarApplyConfiguration, port int32) *corev1ac.ContainerApplyConfiguration {
	limits, requests := resources(rev.ComputeSettings)
	// The wrapper answers on the runtime's port while held (alive, not
	// ready: PR5), and the startup probe keeps the liveness probe away
	// until login, the model probe and the runtime's own start have had
	// their time, so a slow start is never killed and re-probed.
	args = append([]string{"--health-port=" + strconv.Itoa(int(port))}, args...)
	c := corev1ac.Container().WithName(name).WithImage(image).
		WithCommand(Command()...).WithArgs(args...).
		WithEnv(env...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(port)).
		WithResources(corev1ac.ResourceRequirements().WithLimits(limits).WithRequests(requests)).
		WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/readyz").WithPort(intstr.FromInt32(port))).
			WithPeriodSeconds(ReadinessPeriod).WithTimeoutSeconds(ReadinessTimeout).WithFailureThreshold(ReadinessFailures)).
		WithStartupProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromInt32(port))).
			WithPeriodSeconds(StartupProbePeriod).WithFailureThreshold(StartupFailureThreshold(rev))).
		WithLivenessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromInt32(port))).
			WithPeriodSeconds(10).WithFailureThreshold(6)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithRunAsNonRoot(true).WithRunAsUser(1000).WithReadOnlyRootFilesystem(true).WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	if p := rev.ComputeSettings.Kubernetes().ImagePullPolicy; p != "" {
		c.WithImagePullPolicy(corev1.PullPolicy(p))
	}
	return c
}

// resources are a runtime container's limits (the compute's CPU, memory
// and ephemeral-storage limits) and requests: the compute's requests where
// it sets them, else the limits, as they have always been; ephemeral
// storage is requested as 0, explicitly (Kubernetes would default the
// request to the limit): the limit bounds what a Pod may fill on its node
// (the kubelet evicts a Pod past it), and asks no room of the scheduler,
// which nodes that report no ephemeral storage could never give.
func resources(cs admission.ComputeSettings) (limits, requests corev1.ResourceList) {
	limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cs.Kubernetes().CPUMillis, resource.DecimalSI)}
	if m, err := resource.ParseQuantity(cs.Kubernetes().MemoryLimit); err == nil {
		limits[corev1.ResourceMemory] = m
	}
	limits[corev1.ResourceEphemeralStorage] = cs.Kubernetes().EphemeralStorage()
	requests = limits.DeepCopy()
	requests[corev1.ResourceEphemeralStorage] = resource.MustParse("0")
	if cs.Kubernetes().CPURequestMillis > 0 {
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(cs.Kubernetes().CPURequestMillis, resource.DecimalSI)
	}
	if m, err := resource.ParseQuantity(cs.Kubernetes().MemoryRequest); err == nil && cs.Kubernetes().MemoryRequest != "" {
		requests[corev1.ResourceMemory] = m
	}
	return limits, requests
}

// emptyDir is a runtime Pod's scratch volume: on the node's disk, at most
// the compute's ephemeral-storage limit (the kubelet evicts the Pod past
// it), so no agent fills the node its neighbours run on.
func emptyDir(rev *admission.Revision) *corev1ac.EmptyDirVolumeSourceApplyConfiguration {
	return corev1ac.EmptyDirVolumeSource().WithSizeLimit(rev.ComputeSettings.Kubernetes().EphemeralStorage())
}

func deployment(rev *admission.Revision, n int64, name, component, serviceAccount string, c *corev1ac.ContainerApplyConfiguration, volumes ...*corev1ac.VolumeApplyConfiguration) *appsv1ac.DeploymentApplyConfiguration {
	return meta(appsv1ac.Deployment(name, rev.ComputeSettings.Kubernetes().Namespace), rev, n, component).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			// AC1: one gateway at a time; cutover can stop the serving one.
			WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType)).
			// No ReplicaSet history: an earlier revision's Pod template names
			// ConfigMaps that retirement removed, so it could never run again
			// (a rollback is a Terraform apply), and nothing of an earlier
			// revision outlives its retirement.
			WithRevisionHistoryLimit(0).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(Selector(rev.Agent, component))).
			WithTemplate(podTemplate(rev, n, component, serviceAccount, c, volumes...)))
}

// podTemplate is a component's Pod: its own ServiceAccount without a
// token, non-root, the identity labels of revision n beside the
// operator's, and the compute's placement and pull settings. Every
// runtime Pod of every topology is one of these (a Sandbox's template
// included), so each setting reaches them all.
func podTemplate(rev *admission.Revision, n int64, component, serviceAccount string, c *corev1ac.ContainerApplyConfiguration, volumes ...*corev1ac.VolumeApplyConfiguration) *corev1ac.PodTemplateSpecApplyConfiguration {
	spec := corev1ac.PodSpec().
		WithServiceAccountName(serviceAccount).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(corev1ac.PodSecurityContext().WithFSGroup(1000)).
		WithContainers(c).
		WithVolumes(volumes...)
	placePod(spec, rev.ComputeSettings)
	return corev1ac.PodTemplateSpec().
		WithLabels(podLabels(rev, n, component)).
		WithAnnotations(podAnnotations(rev)).
		WithSpec(spec)
}

// placePod writes the compute's node selector, tolerations, priority class
// and image pull Secrets into a Pod spec; an unset one is left out, so
// that Kubernetes' default holds and the Pod is what it always was.
func placePod(spec *corev1ac.PodSpecApplyConfiguration, cs admission.ComputeSettings) {
	if len(cs.Kubernetes().NodeSelector) > 0 {
		spec.WithNodeSelector(cs.Kubernetes().NodeSelector)
	}
	for _, t := range cs.Kubernetes().Tolerations {
		tol := corev1ac.Toleration()
		if t.Key != "" {
			tol.WithKey(t.Key)
		}
		if t.Operator != "" {
			tol.WithOperator(corev1.TolerationOperator(t.Operator))
		}
		if t.Value != "" {
			tol.WithValue(t.Value)
		}
		if t.Effect != "" {
			tol.WithEffect(corev1.TaintEffect(t.Effect))
		}
		if t.TolerationSeconds != nil {
			tol.WithTolerationSeconds(*t.TolerationSeconds)
		}
		spec.WithTolerations(tol)
	}
	if cs.Kubernetes().PriorityClassName != "" {
		spec.WithPriorityClassName(cs.Kubernetes().PriorityClassName)
	}
	for _, name := range cs.Kubernetes().ImagePullSecrets {
		spec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(name))
	}
}

// podLabels are the operator's Pod labels plus the identity labels of
// revision n, which win (LG4): a Pod's identity is the platform's, and the
// Deployment's selector needs it.
func podLabels(rev *admission.Revision, n int64, component string) map[string]string {
	out := map[string]string{}
	for k, v := range rev.ComputeSettings.Kubernetes().PodLabels {
		out[k] = v
	}
	for k, v := range Labels(rev, n, component) {
		out[k] = v
	}
	return out
}

// PlatformLabelPrefix is the prefix of every label the platform owns.
const PlatformLabelPrefix = "occ-platform.io/"

// PlatformLabelKeys are the identity labels Labels sets outside
// PlatformLabelPrefix.
var PlatformLabelKeys = []string{LabelManagedBy, LabelName, LabelVersion}

// PlatformLabel reports whether a label key is the platform's: one of the
// identity labels Labels sets, or any key under PlatformLabelPrefix. A
// compute's pod_labels may not hold one (the identity always wins).
func PlatformLabel(key string) bool {
	return strings.HasPrefix(key, PlatformLabelPrefix) || slices.Contains(PlatformLabelKeys, key)
}

// podAnnotations are the operator's annotations plus the revision id (which
// wins: identity is the platform's).
func podAnnotations(rev *admission.Revision) map[string]string {
	out := map[string]string{}
	for k, v := range rev.ComputeSettings.Kubernetes().PodAnnotations {
		out[k] = v
	}
	out[AnnotationRevisionID] = rev.ID()
	return out
}

// service selects the serving component of revision n (AC3).
func service(rev *admission.Revision, n int64, component string) *corev1ac.ServiceApplyConfiguration {
	sel := Selector(rev.Agent, component)
	sel[LabelRevision] = strconv.FormatInt(n, 10)
	return corev1ac.Service(ServiceName(rev.Agent), rev.ComputeSettings.Kubernetes().Namespace).
		WithLabels(map[string]string{LabelAgent: rev.Agent, LabelRevision: strconv.FormatInt(n, 10), LabelManagedBy: ManagedBy}).
		WithAnnotations(map[string]string{AnnotationRevisionID: rev.ID()}).
		WithSpec(corev1ac.ServiceSpec().WithSelector(sel).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(GatewayPort).WithTargetPort(intstr.FromInt32(GatewayPort))))
}

// PodTemplates is every Pod template of the revision: its Deployments'
// and its Sandboxes'.
func (o *Objects) PodTemplates() []*corev1ac.PodTemplateSpecApplyConfiguration {
	var out []*corev1ac.PodTemplateSpecApplyConfiguration
	for _, d := range o.Deployments {
		if d.Spec != nil && d.Spec.Template != nil {
			out = append(out, d.Spec.Template)
		}
	}
	for _, s := range o.Sandboxes {
		if s.Template != nil {
			out = append(out, s.Template)
		}
	}
	return out
}

// SecretRefs names every Secret key the revision's Pods receive, whether
// a Deployment or a Sandbox runs them: in a container's environment
// (valueFrom or envFrom) or in a volume (a Secret's or a projected one).
// Secret -> keys; the key "" stands for every key of the Secret.
func (o *Objects) SecretRefs() map[string]map[string]bool {
	refs := map[string]map[string]bool{}
	want := func(name *string, key string) {
		if name == nil {
			return
		}
		if refs[*name] == nil {
			refs[*name] = map[string]bool{}
		}
		refs[*name][key] = true
	}
	for _, t := range o.PodTemplates() {
		ps := t.Spec
		if ps == nil {
			continue
		}
		for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
			for _, env := range c.Env {
				if r := env.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Key != nil {
					want(r.SecretKeyRef.Name, *r.SecretKeyRef.Key)
				}
			}
			for _, from := range c.EnvFrom {
				if from.SecretRef != nil {
					want(from.SecretRef.Name, "")
				}
			}
		}
		// A volume receives the keys its items list, or every key.
		volume := func(name *string, items []corev1ac.KeyToPathApplyConfiguration) {
			if len(items) == 0 {
				want(name, "")
			}
			for _, it := range items {
				if it.Key != nil {
					want(name, *it.Key)
				}
			}
		}
		for _, v := range ps.Volumes {
			if v.Secret != nil {
				volume(v.Secret.SecretName, v.Secret.Items)
			}
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.Secret != nil {
						volume(src.Secret.Name, src.Secret.Items)
					}
				}
			}
		}
	}
	return refs
}
