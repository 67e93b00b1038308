package render

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// Paths, ports and names of native OpenClaw (the node host and the
// enrollment broker beside its gateway).
const (
	NodeConfigDir = "/etc/openclaw-node"
	// NodeHome is the node's own storage (an emptyDir of its Pod): its
	// OpenClaw state (device identity, paired device token, worker bundles
	// and workspaces) and the connect target. The gateway never mounts it.
	NodeHome     = "/home/node"
	NodeStateDir = NodeHome + "/.openclaw"
	// ConnectTarget is the file `openclaw connect --target-file` reads and
	// removes: the wrapper writes the setup code there before every start
	// (a Secret volume is read-only, and OpenClaw deletes the file).
	ConnectTarget = NodeHome + "/.occ/connect-target"
	// EnrollmentDir holds the node's one-use enrollment target (ND2), a
	// private file mounted only into the node.
	EnrollmentDir  = "/var/run/occ/enrollment"
	EnrollmentFile = "target"
	// VerifierDir holds, in the enrollment broker only, the digest of the
	// target's token.
	VerifierDir  = "/var/run/occ/enrollment-verifier"
	VerifierFile = "sha256"
	// BrokerHome is the broker's own state: the setup code it issued.
	BrokerHome = "/var/lib/occ-enrollment"
	// EnrollPort is the broker's port in the gateway Pod.
	EnrollPort = int32(enrollment.Port)
	// GatewayTokenEnv carries the gateway's token: OpenClaw refuses to
	// listen beyond loopback without a shared secret, and the broker needs
	// it to ask the gateway for a setup code. Only the gateway Pod has it.
	GatewayTokenEnv = "OPENCLAW_GATEWAY_TOKEN"
	GatewayTokenKey = "token"
	// ClusterDomain is the cluster's DNS domain. The node reaches its
	// gateway over plaintext ws:// inside the cluster, which OpenClaw
	// accepts only for loopback, private IP literals and names under
	// .local or .ts.net (otherwise it needs
	// OPENCLAW_ALLOW_INSECURE_PRIVATE_WS=1), and the gateway issues setup
	// codes only for such URLs: the fully qualified Service name, under
	// cluster.local, is one.
	ClusterDomain = "cluster.local"
)

// Sandbox is one agent-sandbox Sandbox that contains a revision's
// dedicated harness (HM5: the sandbox contains the whole revision; one
// harness shared by all its sessions).
type Sandbox struct {
	Name        string
	Component   string
	Labels      map[string]string
	Annotations map[string]string
	Template    *corev1ac.PodTemplateSpecApplyConfiguration
}

// Object is the Sandbox as the agents.x-k8s.io/v1alpha1 API takes it.
func (s *Sandbox) Object(namespace string) (map[string]any, error) {
	b, err := json.Marshal(s.Template)
	if err != nil {
		return nil, fmt.Errorf("render: Sandbox %s: %w", s.Name, err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(b, &tmpl); err != nil {
		return nil, fmt.Errorf("render: Sandbox %s: %w", s.Name, err)
	}
	labels, annotations := map[string]any{}, map[string]any{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range s.Annotations {
		annotations[k] = v
	}
	return map[string]any{
		"apiVersion": sandboxapi.GroupVersion,
		"kind":       sandboxapi.Kind,
		"metadata":   map[string]any{"name": s.Name, "namespace": namespace, "labels": labels, "annotations": annotations},
		"spec": map[string]any{
			"podTemplate": tmpl,
			"replicas":    int64(1),
			// A headless Service named like the Sandbox: the gateway reaches
			// this revision's harness at its stable name.
			"service": true,
		},
	}, nil
}

// HarnessSandboxName names the Sandbox of revision n's harness.
func HarnessSandboxName(agent string, n int64) string { return fmt.Sprintf("%s-harness-r%d", agent, n) }

// NodeSandboxName names the Sandbox of revision n's native node host.
func NodeSandboxName(agent string, n int64) string { return fmt.Sprintf("%s-node-r%d", agent, n) }

// NodeName names the node host's ServiceAccount and ConfigMap prefix.
func NodeName(agent string) string { return agent + "-node" }

// NodeConfigMapName is the node's configuration of revision n.
func NodeConfigMapName(agent string, n int64) string { return fmt.Sprintf("%s-node-r%d", agent, n) }

// EnrollmentSecretName holds revision n's one-use enrollment target; only
// the node mounts it (ND2).
func EnrollmentSecretName(agent string, n int64) string {
	return fmt.Sprintf("%s-r%d-enrollment", agent, n)
}

// EnrollmentVerifierName holds the digest the broker checks the target
// against; the gateway Pod never holds the target itself.
func EnrollmentVerifierName(agent string, n int64) string {
	return fmt.Sprintf("%s-r%d-enrollment-verifier", agent, n)
}

// GatewayTokenSecret holds an agent's gateway token; the executor
// creates it once per agent with random bytes. Only the gateway Pod reads it.
func GatewayTokenSecret(agent string) string { return agent + "-gateway-token" }

// GatewayInternalName is the Service the node host enrolls through.
func GatewayInternalName(agent string) string { return GatewayName(agent) }

// GatewayHost is the gateway's fully qualified Service name (see
// ClusterDomain).
func GatewayHost(agent, namespace string) string {
	return fmt.Sprintf("%s.%s.svc.%s", GatewayInternalName(agent), namespace, ClusterDomain)
}

// NodeCommand is the native node's runtime command as OpenClaw 2026.9.6
// has it: `openclaw connect` in ephemeral mode (an environment-managed,
// disposable session host: it hosts worker sessions, installs no service
// and never updates itself) consuming its target from a private file
// (ND2). `openclaw node run` has neither an ephemeral mode nor a target
// file; its --pair would put the setup code on the command line.
func NodeCommand() []string {
	return []string{"openclaw", "connect", "--ephemeral", "--target-file", ConnectTarget}
}

// BrokerArgs are the wrapper's arguments of the enrollment broker beside
// the gateway of a native agent in namespace ns (cmd/occ-runtime).
func BrokerArgs(agent, ns string) []string {
	return []string{"enrollment-broker",
		fmt.Sprintf("--listen=:%d", EnrollPort),
		"--verifier=" + VerifierDir + "/" + VerifierFile,
		fmt.Sprintf("--public-url=ws://%s:%d", GatewayHost(agent, ns), GatewayPort),
		fmt.Sprintf("--gateway=ws://127.0.0.1:%d", GatewayPort),
		"--state=" + BrokerHome,
		"--", "openclaw"}
}

// Sandboxed reports whether a revision's harness runs in a Sandbox: a
// dedicated harness on a compute with a sandbox driver (OS1).
func Sandboxed(rev *admission.Revision) bool {
	return rev.Sandbox != nil && rev.ExecutionMode == admission.ModeDedicated
}

// Attachments are the credentials the Credential Gateway must attach to
// the revision's Sandbox before it may serve (AU3).
func Attachments(rev *admission.Revision) []sandboxapi.Attachment {
	if rev.Credential.Method != admission.MethodCredentialSource || rev.Sandbox == nil {
		return nil
	}
	// Env is the variable holding the placeholder the proxy swaps; none for
	// codex-oauth (admission decided it: rev.Credential).
	return []sandboxapi.Attachment{{Name: rev.Source.ID, Gateway: rev.Sandbox.CredentialGateway, SourceType: rev.Source.SourceType, Env: rev.Credential.EnvVar}}
}

// sandbox wraps a component's Pod template in the revision's Sandbox.
func sandbox(rev *admission.Revision, n int64, name, component string, tmpl *corev1ac.PodTemplateSpecApplyConfiguration) *Sandbox {
	annotations := map[string]string{
		AnnotationRevisionID:                 rev.ID(),
		sandboxapi.AnnotationFacets:          strings.Join(rev.Sandbox.Facets, ","),
		sandboxapi.AnnotationRequiredProfile: rev.Sandbox.RequiredProfile,
	}
	if rev.Sandbox.RequiredProfile == "" {
		delete(annotations, sandboxapi.AnnotationRequiredProfile)
	}
	if a := Attachments(rev); len(a) > 0 {
		annotations[sandboxapi.AnnotationAttachments] = sandboxapi.EncodeAttachments(a)
	}
	return &Sandbox{Name: name, Component: component, Labels: Labels(rev, n, component), Annotations: annotations, Template: tmpl}
}

// nativeOpenClaw renders dedicated native OpenClaw (ND1 to ND4, HM5, HM6):
// the Agent's own gateway as a Deployment, and the node host in the
// revision's Sandbox. The node enrolls through the gateway with a one-use
// target read from a private file (ND2) and runs its worker sessions with
// the model credential in its own environment and configuration (ND4); the
// gateway gets neither the credential nor the node's state.
//
// Enrollment as OpenClaw 2026.9.6 has it (see internal/enrollment): only
// the gateway issues a node's bootstrap token, so beside the gateway runs
// the platform's enrollment broker, which holds the digest of the node's
// secret and the gateway's token, and exchanges the secret, once, for a
// setup code of OpenClaw's node profile; the node's wrapper writes that
// code where `openclaw connect --ephemeral --target-file` consumes it, and
// the node pairs without a human (approvedVia "bootstrap"). The broker is
// ready once the node is paired and connected, so the gateway's Pod, and
// the revision, turn ready only with its node (ND3).
func nativeOpenClaw(rev *admission.Revision, n int64) (*Objects, error) {
	if rev.Sandbox == nil {
		return nil, fmt.Errorf("render: dedicated OpenClaw of agent %q needs a sandbox driver (ND4)", rev.Agent)
	}
	a, ns := rev.Agent, rev.ComputeSettings.Namespace
	gwDoc, err := NativeGatewayDocument(rev, n)
	if err != nil {
		return nil, err
	}
	gwCM, err := configMap(rev, n, ConfigMapName(a, n), ComponentGateway, map[string]any{ConfigFile: gwDoc})
	if err != nil {
		return nil, err
	}
	nodeCM, err := configMap(rev, n, NodeConfigMapName(a, n), ComponentNode, map[string]any{ConfigFile: NodeDocument(rev, n), ProbeFile: rev.Probe})
	if err != nil {
		return nil, err
	}
	gwToken := GatewayTokenEnvVar(a)
	gateway := gatewayDeployment(rev, n, nil, gatewayEnv(), nil)
	broker := container(rev, "enrollment", rev.ComputeSettings.RuntimeImage, nil, []*corev1ac.EnvVarApplyConfiguration{
		gwToken,
		envValue("HOME", BrokerHome),
		envValue("OPENCLAW_STATE_DIR", BrokerHome+"/state"),
		// No file there: the broker's OpenClaw CLI reads no configuration,
		// it only calls the gateway on loopback.
		envValue("OPENCLAW_CONFIG_PATH", BrokerHome+"/openclaw.json"),
		envValue("TMPDIR", "/tmp"),
	}, EnrollPort).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("enrollment-verifier").WithMountPath(VerifierDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("enrollment-state").WithMountPath(BrokerHome),
			corev1ac.VolumeMount().WithName("enrollment-tmp").WithMountPath("/tmp"),
		)
	// The broker takes its own arguments (no --health-port: it serves
	// /healthz and /readyz itself) and needs only what one OpenClaw CLI
	// call takes (about 220 MB).
	broker.Args = BrokerArgs(a, ns)
	// Its port is the internal Service's "enrollment": port names are
	// unique across a Pod's containers, and "http" is the gateway's.
	broker.Ports[0].WithName("enrollment")
	broker.WithResources(corev1ac.ResourceRequirements().
		WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}).
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}))
	gwSpec := gateway.Spec.Template.Spec
	gwSpec.WithContainers(broker).WithVolumes(
		// Only the digest's key, owned by root with the Pod's fsGroup (1000).
		corev1ac.Volume().WithName("enrollment-verifier").WithSecret(corev1ac.SecretVolumeSource().WithSecretName(EnrollmentVerifierName(a, n)).
			WithItems(corev1ac.KeyToPath().WithKey(VerifierFile).WithPath(VerifierFile)).WithDefaultMode(0o440)),
		corev1ac.Volume().WithName("enrollment-state").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName("enrollment-tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	)

	nodeEnv := []*corev1ac.EnvVarApplyConfiguration{
		envValue("OPENCLAW_CONFIG_PATH", NodeConfigDir+"/"+ConfigFile),
		envValue("OPENCLAW_STATE_DIR", NodeStateDir),
		envValue("HOME", NodeHome),
		envValue("TMPDIR", "/tmp"),
		envValue(enrollment.EnvFile, EnrollmentDir+"/"+EnrollmentFile),
		envValue(enrollment.EnvConnectTarget, ConnectTarget),
	}
	// Node-local inference: only the node gets the key, or the Credential
	// Gateway's placeholder (AU1, AU3, ND4).
	nodeEnv = append(nodeEnv, credentialEnv(rev)...)
	nodeArgs := append([]string{"--container=node", "--harness=openclaw", "--probe=" + NodeConfigDir + "/" + ProbeFile, "--"}, NodeCommand()...)
	node := withoutHTTPHealth(container(rev, "node", rev.ComputeSettings.RuntimeImage, nodeArgs, nodeEnv, GatewayPort)).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("node-config").WithMountPath(NodeConfigDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("enrollment").WithMountPath(EnrollmentDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
			corev1ac.VolumeMount().WithName("node-state").WithMountPath(NodeHome),
		)
	tmpl := podTemplate(rev, n, ComponentNode, NodeName(a), node,
		corev1ac.Volume().WithName("node-config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(NodeConfigMapName(a, n))),
		// Owned by root with the Pod's fsGroup (1000): the node reads it
		// through its group. 0440 is what a kubelet writes anyway (it adds
		// the fsGroup's read to every Secret file), and 0400 without the
		// group would lock the runtime user out.
		corev1ac.Volume().WithName("enrollment").WithSecret(corev1ac.SecretVolumeSource().WithSecretName(EnrollmentSecretName(a, n)).WithDefaultMode(0o440)),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName("node-state").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	)
	return &Objects{
		Namespace: ns,
		ServiceAccounts: []*corev1ac.ServiceAccountApplyConfiguration{
			serviceAccount(rev, GatewayName(a), ComponentGateway), serviceAccount(rev, NodeName(a), ComponentNode)},
		ConfigMaps:  []*corev1ac.ConfigMapApplyConfiguration{gwCM, nodeCM},
		Deployments: []*appsv1ac.DeploymentApplyConfiguration{gateway},
		Sandboxes:   []*Sandbox{sandbox(rev, n, NodeSandboxName(a, n), ComponentNode, tmpl)},
		Enrollment: &Enrollment{Target: EnrollmentSecretName(a, n), Verifier: EnrollmentVerifierName(a, n),
			URL: fmt.Sprintf("http://%s:%d%s", GatewayHost(a, ns), EnrollPort, enrollment.Path)},
		InternalService:  internalGatewayService(rev),
		Service:          service(rev, n, ComponentGateway),
		ServingComponent: ComponentGateway,
	}, nil
}

// withoutHTTPHealth takes the HTTP probes and the port off the node's
// container: the OpenClaw node host listens on no port (it only dials its
// gateway), so a kubelet probe could never pass and a liveness probe would
// kill it. Its readiness is judged where it shows: the broker beside the
// gateway is ready once the node is paired and connected. While a failed
// model probe holds the wrapper (PR5), its record fails the deployment.
func withoutHTTPHealth(c *corev1ac.ContainerApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	c.ReadinessProbe, c.StartupProbe, c.LivenessProbe, c.Ports = nil, nil, nil, nil
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--health-port=") {
			c.Args[i] = "--health-port=0" // nothing listens while held
		}
	}
	return c
}

// Enrollment names revision n's one-use node enrollment: the executor
// writes a fresh random token and the broker's URL into Target (mounted
// only in the node) and the token's digest into Verifier (mounted only in
// the broker).
type Enrollment struct {
	Target   string
	Verifier string
	// URL is where the node redeems its target.
	URL string
}

// NativeGatewayDocument is the gateway's configuration with a native node:
// the Kubernetes gateway document without models.providers (ND4: "Compute
// places model metadata and the credential reference only in the native
// node's configuration"; ND3: the gateway never infers; AU6), with token
// auth (the token is OPENCLAW_GATEWAY_TOKEN, never in the file: OpenClaw
// refuses, exit 78, to bind beyond loopback without a shared secret), no
// Control UI (OCC serves none; the Pod network reaches the gateway's
// port), and node pairing only through the platform's setup code: no
// silent pairing of local clients and no SSH probes back to a connecting
// node. The model selection (agents.defaults.model, the catalogs and the
// entries' models) stays: it is session policy, which the gateway keeps
// (ND2), and names a model without describing or reaching it.
// The pairing keys are in admission.PlatformKeys for native OpenClaw, so
// GatewayDocument writes them.
func NativeGatewayDocument(rev *admission.Revision, n int64) (occconfig.Document, error) {
	d, err := GatewayDocument(rev, n)
	if err != nil {
		return nil, err
	}
	stripModelProviders(d)
	return d, nil
}

// nodeSections are the parts of the admitted document a node host runs
// with: its models (node-local inference, ND4) and the logging the
// admission stamped (AD4) or kept (AD5). Channels, agents and the gateway
// stay with the gateway: their secret bindings reach only the gateway
// (AU6), and an unresolved reference would stop the node.
var nodeSections = []string{"models", "logging", "diagnostics"}

// NodeDocument is the node host's configuration, with only keys the pinned
// schema accepts: the admitted document's node sections (after the
// driver's transform, AD2) with node-local inference, whose model
// credential is an environment SecretRef the node alone resolves (ND4),
// and the session-owned workers (HM6) as nodeHost.workerRuns. Enforced
// worker placement is the Sandbox's required-profile annotation, which the
// driver enforces: OpenClaw 2026.9.6 has no cloudWorkers.requiredProfile
// (its cloudWorkers takes only desktop, preparedPool, profiles and
// projectProfiles), and a root key "node" does not exist either.
func NodeDocument(rev *admission.Revision, n int64) occconfig.Document {
	d := occconfig.Document{}
	for _, k := range nodeSections {
		if v, ok := rev.AdmittedDocument[k]; ok {
			d[k] = occconfig.Clone(occconfig.Document{k: v})[k]
		}
	}
	if c := rev.Credential; rev.PrimaryModel != nil && c.Method == admission.MethodAPIKey && c.EnvVar != "" {
		occconfig.Set(d, occconfig.Keys("models", "providers", rev.PrimaryModel.Provider, "apiKey"),
			map[string]any{"source": "env", "provider": "default", "id": c.EnvVar})
	}
	// HM6: at most NodeWorkers worker sessions, each in its own workspace
	// under the node's state; OpenClaw refuses a launch while all slots are
	// taken (after waiting up to 10 s for one) and never displaces a
	// running worker.
	occconfig.Set(d, occconfig.Keys("nodeHost", "workerRuns", "enabled"), true)
	occconfig.Set(d, occconfig.Keys("nodeHost", "workerRuns", "capacity"), rev.NodeWorkers)
	occconfig.Set(d, occconfig.Keys("nodeHost", "autoUpdate", "enabled"), false)
	occconfig.Set(d, occconfig.Keys("update", "checkOnStart"), false)
	return d
}

// stripModelProviders removes models.providers from a gateway document:
// with a native node the provider definitions (endpoints, APIs, model
// metadata) and credential references are the node's alone (ND4), the
// gateway never infers (ND3) and cannot read the credential (ND2, AU6).
// The rest of models (the platform's catalogRefresh) stays.
func stripModelProviders(d occconfig.Document) {
	occconfig.Delete(d, occconfig.Keys("models", "providers"))
}

// internalGatewayService is the Agent's gateway address for its node host:
// it selects the gateway of whichever revision runs (only one does, AC2),
// at the gateway's port and the enrollment broker's. It lists the gateway
// before its Pod is ready: the Pod turns ready only once the node has
// enrolled and connected through this very Service.
func internalGatewayService(rev *admission.Revision) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(GatewayInternalName(rev.Agent), rev.ComputeSettings.Namespace).
		WithLabels(AgentLabels(rev.Agent, ComponentGateway)).
		WithSpec(corev1ac.ServiceSpec().WithSelector(Selector(rev.Agent, ComponentGateway)).
			WithPublishNotReadyAddresses(true).
			WithPorts(
				corev1ac.ServicePort().WithName("http").WithPort(GatewayPort).WithTargetPort(intstr.FromInt32(GatewayPort)),
				corev1ac.ServicePort().WithName("enrollment").WithPort(EnrollPort).WithTargetPort(intstr.FromInt32(EnrollPort))))
}
