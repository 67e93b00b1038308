package render

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
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

// Object is the Sandbox as the agents.x-k8s.io/v1beta1 API takes it: the
// agent-sandbox controller runs one Pod of the template (operatingMode
// Running, the default).
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
			// A headless Service named like the Sandbox: the gateway reaches
			// this revision's harness at its stable name.
			"service": true,
		},
	}, nil
}

// HarnessSandboxName names the Sandbox of revision n's harness.
func HarnessSandboxName(agent string, n int64) string { return fmt.Sprintf("%s-harness-r%d", agent, n) }

// NodeSandboxName names the Sandbox of revision n's native node host,
// which only an agent deployed as dedicated OpenClaw before ND6 refused it
// has: a refresh of such an agent still looks for it (TopologyOf).
func NodeSandboxName(agent string, n int64) string { return fmt.Sprintf("%s-node-r%d", agent, n) }

// NodeName names the native node host's ServiceAccount and NetworkPolicy
// (see NodeSandboxName).
func NodeName(agent string) string { return agent + "-node" }

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
	// The Pod waits for the driver's extension to place it (facets,
	// profile) before it is scheduled.
	if tmpl.Spec != nil {
		tmpl.Spec.WithSchedulingGates(corev1ac.PodSchedulingGate().WithName(sandboxapi.SchedulingGate))
	}
	return &Sandbox{Name: name, Component: component, Labels: Labels(rev, n, component), Annotations: annotations, Template: tmpl}
}

// DriverGateway is where a sandbox driver's gateway lives (its egress
// proxy, which a sandboxed component may reach), with the driver's
// defaults.
func DriverGateway(d *admission.SandboxDriver) (ns, svc string) {
	ns, svc = d.GatewayNamespace, d.GatewayService
	if ns == "" {
		ns = sandboxapi.DefaultGatewayNamespace
	}
	if svc == "" {
		svc = sandboxapi.DefaultGatewayService
	}
	return ns, svc
}
