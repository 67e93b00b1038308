// Package sandboxapi is the contract between the provider and a sandbox
// driver on Kubernetes: the kubernetes-sigs agent-sandbox API the driver
// serves (agents.x-k8s.io/v1alpha1 Sandbox), the annotations the provider
// writes on a Sandbox, the conditions the driver reports on it, and where
// the driver's gateway is found. It is plain data: no I/O.
//
// The shape follows the public agent-sandbox API: spec.podTemplate
// {metadata{labels,annotations}, spec (a PodSpec)}, spec.replicas (0 or 1),
// spec.service; status.conditions (metav1.Condition), status.replicas,
// status.selector, status.podIPs, status.serviceFQDN, status.service.
package sandboxapi

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The agent-sandbox API.
const (
	Group    = "agents.x-k8s.io"
	Version  = "v1alpha1"
	Resource = "sandboxes"
	Kind     = "Sandbox"
	// CRDName is the CustomResourceDefinition's name.
	CRDName = Resource + "." + Group
)

// GVR is the Sandbox resource.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// GroupVersion is "agents.x-k8s.io/v1alpha1".
var GroupVersion = Group + "/" + Version

// Conditions on status.conditions.
const (
	// ConditionReady is the agent-sandbox Ready condition: True once the
	// Sandbox's Pod is Ready.
	ConditionReady = "Ready"
	// AttachmentConditionPrefix + attachment name is the condition the
	// driver's Credential Gateway sets per credential attachment: True
	// (reason "Attached") once the egress proxy holds the key for it,
	// False with a reason and message when it cannot (AU3).
	AttachmentConditionPrefix = "attachments.occ-platform.io/"
)

// TerminalReasons are the Ready=False reasons by which a driver says it
// cannot and will not provision a Sandbox as asked (an incompatibility,
// OS1: "fail explicitly"); the provider fails at once instead of waiting
// for its deadline. Any other reason is progress still to come.
var TerminalReasons = []string{"Unsupported", "InvalidPodTemplate", "PodCreateFailed"}

// AttachmentCondition is the condition type of one attachment.
func AttachmentCondition(name string) string { return AttachmentConditionPrefix + name }

// Annotations the provider writes on a Sandbox's metadata.
const (
	// AnnotationAttachments is a JSON list of Attachment: the credentials
	// the Credential Gateway must attach to the Sandbox before it may serve.
	AnnotationAttachments = "occ-platform.io/credential-attachments"
	// AnnotationRequiredProfile is the enforced worker placement profile
	// (cloudWorkers.requiredProfile, ND4) the driver must place the
	// Sandbox by.
	AnnotationRequiredProfile = "occ-platform.io/required-profile"
	// AnnotationFacets lists the facets the Sandbox needs, comma-separated
	// (networking,filesystem,process).
	AnnotationFacets = "occ-platform.io/facets"
)

// Placeholder is the credential a harness behind a Credential Gateway
// holds in its Attachment.Env instead of the key (AU3).
//
// The egress contract (ours, "occ credential-gateway egress v1"; OpenShell
// publishes none a test can run): the driver routes the Sandbox's outbound
// HTTP through its Credential Gateway's egress proxy, which replaces
// Placeholder in a request's Authorization or x-api-key header with the
// key the gateway holds for the Sandbox's attachment, and passes any other
// request unchanged. A Sandbox with no held key for its attachment has the
// attachment's condition False; its placeholder never reaches a model as a
// key it could accept. The test driver (internal/testenv/kubeenv) implements
// this contract for plain HTTP, with the Sandbox's connections to the
// model redirected to its proxy in the node's network namespace.
const Placeholder = "openshell-placeholder"

// Attachment is one credential the Credential Gateway attaches to a
// Sandbox: the harness sees only a placeholder in Env; the egress proxy
// inserts the key of SourceType from Gateway.
type Attachment struct {
	// Name is the attachment's name: the credential source's name.
	Name string `json:"name"`
	// Gateway is the Credential Gateway's name.
	Gateway string `json:"gateway"`
	// SourceType is "openai_api_key" or "codex_oauth".
	SourceType string `json:"sourceType"`
	// Env is the variable that holds the placeholder in the harness.
	Env string `json:"env,omitempty"`
}

// EncodeAttachments is the value of AnnotationAttachments.
func EncodeAttachments(a []Attachment) string {
	if a == nil {
		a = []Attachment{}
	}
	b, _ := json.Marshal(a)
	return string(b)
}

// DecodeAttachments reads AnnotationAttachments.
func DecodeAttachments(s string) ([]Attachment, error) {
	if s == "" {
		return nil, nil
	}
	var a []Attachment
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationAttachments, err)
	}
	return a, nil
}

// Where the driver's gateway is found. The OpenShell Helm chart installs
// its gateway as a Service in its release namespace; the gateway is ready
// while that Service has a ready endpoint (its readiness probe is /readyz).
const (
	DefaultGatewayNamespace = "openshell"
	DefaultGatewayService   = "openshell"
	// LabelServiceName is the EndpointSlice label naming its Service.
	LabelServiceName = "kubernetes.io/service-name"
)
