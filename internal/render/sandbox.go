package render

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
)

// Paths of the native OpenClaw node host.
const (
	NodeConfigDir = "/etc/openclaw-node"
	// EnrollmentDir holds the node's one-use enrollment target (ND2), a
	// private file mounted only into the node.
	EnrollmentDir  = "/var/run/occ/enrollment"
	EnrollmentFile = "target"
	// VerifierDir holds, in the gateway, only the digest of the target.
	VerifierDir = "/var/run/occ/enrollment-verifier"
	NodeWorkers = "/home/node/workers"
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

// EnrollmentVerifierName holds the digest the gateway checks the target
// against; the gateway never holds the target itself.
func EnrollmentVerifierName(agent string, n int64) string {
	return fmt.Sprintf("%s-r%d-enrollment-verifier", agent, n)
}

// GatewayInternalName is the Service the node host enrolls through.
func GatewayInternalName(agent string) string { return GatewayName(agent) }

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
	return []sandboxapi.Attachment{{Name: rev.Source.ID, Gateway: rev.Sandbox.CredentialGateway, SourceType: rev.Source.SourceType, Env: placeholderEnv(rev)}}
}

func placeholderEnv(rev *admission.Revision) string {
	if rev.Source.SourceType == admission.SourceTypeCodexOAuth {
		return ""
	}
	return "OPENAI_API_KEY"
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

// placeholderCredential is the harness's view of a Credential Gateway key:
// a placeholder the egress proxy swaps for the key (AU3). No Secret.
func placeholderCredential(rev *admission.Revision) []*corev1ac.EnvVarApplyConfiguration {
	if rev.Source.SourceType == admission.SourceTypeCodexOAuth {
		// Experimental: Codex takes external ChatGPT tokens through the
		// proxy; the harness gets no key and logs in with none.
		return nil
	}
	env := []*corev1ac.EnvVarApplyConfiguration{envValue("OPENAI_API_KEY", admission.PlaceholderCredential)}
	if rev.Harness == admission.HarnessCodex {
		env = append(env, envValue("CODEX_LOGIN_MODE", "api_key_stdin"))
	}
	return env
}

// nativeOpenClaw renders dedicated native OpenClaw (ND1 to ND4, HM5, HM6):
// the Agent's own gateway as a Deployment, and the node host in the
// revision's Sandbox. The node enrolls through the gateway with a one-use
// target read from a private file (ND2) and runs inference and tools with
// the model credential in its own configuration (ND4); the gateway gets
// neither the credential nor the node's state.
func nativeOpenClaw(rev *admission.Revision, n int64) (*Objects, error) {
	if rev.Sandbox == nil {
		return nil, fmt.Errorf("render: dedicated OpenClaw of agent %q needs a sandbox driver (ND4)", rev.Agent)
	}
	a, ns := rev.Agent, rev.ComputeSettings.Namespace
	gwDoc := GatewayDocument(rev, n)
	stripInferenceCredentials(gwDoc)
	gwCM, err := configMap(rev, n, ConfigMapName(a, n), ComponentGateway, map[string]any{ConfigFile: gwDoc})
	if err != nil {
		return nil, err
	}
	nodeCM, err := configMap(rev, n, NodeConfigMapName(a, n), ComponentNode, map[string]any{ConfigFile: NodeDocument(rev, n), ProbeFile: rev.Probe})
	if err != nil {
		return nil, err
	}
	gwEnv := append(gatewayEnv(), envValue("OCC_NODE_ENROLLMENT_VERIFIER", VerifierDir+"/sha256"))
	gateway := gatewayDeployment(rev, n, []string{"--wait-peer=node"}, gwEnv,
		&secretMount{Name: "enrollment-verifier", Path: VerifierDir, Secret: EnrollmentVerifierName(a, n), Mode: 0o440})
	nodeEnv := []*corev1ac.EnvVarApplyConfiguration{
		envValue("OPENCLAW_CONFIG_PATH", NodeConfigDir+"/"+ConfigFile),
		envValue("OPENCLAW_STATE_DIR", "/home/node/.openclaw"),
		envValue("HOME", "/home/node"),
		envValue("TMPDIR", "/tmp"),
	}
	switch c := rev.Credential; {
	case c.Placeholder:
		nodeEnv = append(nodeEnv, placeholderCredential(rev)...)
	case c.Method == admission.MethodAPIKey:
		// Node-local inference: only the node gets the key (AU1, ND4).
		nodeEnv = append(nodeEnv, secretEnv("OPENAI_API_KEY", rev.Source))
	}
	nodeArgs := []string{"--container=node", "--harness=openclaw", "--probe=" + NodeConfigDir + "/" + ProbeFile, "--",
		"openclaw", "node", "run", "--connection=ephemeral", "--enrollment-file=" + EnrollmentDir + "/" + EnrollmentFile,
		fmt.Sprintf("--workers=%d", rev.NodeWorkers)}
	node := container(rev, "node", rev.ComputeSettings.RuntimeImage, nodeArgs, nodeEnv, GatewayPort).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("node-config").WithMountPath(NodeConfigDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("enrollment").WithMountPath(EnrollmentDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
			corev1ac.VolumeMount().WithName("node-state").WithMountPath("/home/node"),
		)
	tmpl := podTemplate(rev, n, ComponentNode, NodeName(a), node,
		corev1ac.Volume().WithName("node-config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(NodeConfigMapName(a, n))),
		corev1ac.Volume().WithName("enrollment").WithSecret(corev1ac.SecretVolumeSource().WithSecretName(EnrollmentSecretName(a, n)).WithDefaultMode(0o400)),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName("node-state").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	)
	return &Objects{
		Namespace: ns,
		ServiceAccounts: []*corev1ac.ServiceAccountApplyConfiguration{
			serviceAccount(rev, GatewayName(a), ComponentGateway), serviceAccount(rev, NodeName(a), ComponentNode)},
		ConfigMaps:       []*corev1ac.ConfigMapApplyConfiguration{gwCM, nodeCM},
		Deployments:      []*appsv1ac.DeploymentApplyConfiguration{gateway},
		Sandboxes:        []*Sandbox{sandbox(rev, n, NodeSandboxName(a, n), ComponentNode, tmpl)},
		Enrollment:       &Enrollment{Target: EnrollmentSecretName(a, n), Verifier: EnrollmentVerifierName(a, n), Gateway: fmt.Sprintf("ws://%s.%s.svc:%d", GatewayInternalName(a), ns, GatewayPort)},
		InternalService:  internalGatewayService(rev),
		Service:          service(rev, n, ComponentGateway),
		ServingComponent: ComponentGateway,
	}, nil
}

// Enrollment names revision n's one-use node enrollment: the executor
// writes a fresh random target into Target (mounted only in the node) and
// its sha256 into Verifier (mounted only in the gateway).
type Enrollment struct {
	Target   string
	Verifier string
	// Gateway is the address the node enrolls through.
	Gateway string
}

// NodeDocument is the node host's configuration: the admitted document
// (after the driver's transform, AD2) with node-local inference, whose
// model credential is an environment SecretRef the node alone resolves
// (ND4), the enforced worker placement and the session-owned workers (HM6).
func NodeDocument(rev *admission.Revision, n int64) occconfig.Document {
	d := occconfig.Clone(rev.AdmittedDocument)
	if rev.PrimaryModel != nil && rev.Credential.Method == admission.MethodAPIKey {
		occconfig.Set(d, occconfig.Keys("models", "providers", rev.PrimaryModel.Provider, "apiKey"),
			map[string]any{"source": "env", "provider": "default", "id": "OPENAI_API_KEY"})
	}
	if p := rev.Sandbox.RequiredProfile; p != "" {
		occconfig.Set(d, occconfig.Keys("cloudWorkers", "requiredProfile"), p)
	}
	occconfig.Set(d, occconfig.Keys("node", "connection", "mode"), "ephemeral")
	occconfig.Set(d, occconfig.Keys("node", "workers", "max"), rev.NodeWorkers)
	occconfig.Set(d, occconfig.Keys("node", "workers", "workspaceRoot"), NodeWorkers)
	return d
}

// stripInferenceCredentials removes every model credential reference from
// a gateway document: with a native node the gateway never infers (ND3)
// and cannot read the credential (ND2, AU6).
func stripInferenceCredentials(d occconfig.Document) {
	v, ok := occconfig.Lookup(d, occconfig.Keys("models", "providers"))
	if !ok {
		return
	}
	providers, _ := v.(map[string]any)
	for name := range providers {
		occconfig.Delete(d, occconfig.Keys("models", "providers", name, "apiKey"))
		occconfig.Delete(d, occconfig.Keys("models", "providers", name, "headers"))
	}
}

// internalGatewayService is the Agent's gateway address for its node host:
// it selects the gateway of whichever revision runs (only one does, AC2).
func internalGatewayService(rev *admission.Revision) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(GatewayInternalName(rev.Agent), rev.ComputeSettings.Namespace).
		WithLabels(map[string]string{LabelAgent: rev.Agent, LabelComponent: ComponentGateway, LabelManagedBy: ManagedBy}).
		WithSpec(corev1ac.ServiceSpec().WithSelector(Selector(rev.Agent, ComponentGateway)).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(GatewayPort)))
}
