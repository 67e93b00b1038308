// Package sandboxapi is the contract between the provider and a sandbox
// driver on Kubernetes, in two parts:
//
//   - upstream's: the kubernetes-sigs agent-sandbox API, agents.x-k8s.io/v1beta1
//     Sandbox as v1.0 serves it (spec.podTemplate {metadata{labels,
//     annotations}, spec (a PodSpec)}, spec.service, spec.operatingMode;
//     status.conditions with the Ready condition and its reasons,
//     status.service, status.serviceFQDN, status.podIPs, status.selector).
//     The agent-sandbox controller creates the Sandbox's Pod, named like the
//     Sandbox, from spec.podTemplate;
//   - ours, the OCC sandbox driver extension (Extension, versioned): what a
//     driver adds beside that controller for OCC (facets, the required
//     placement profile, credential attachments and the egress placeholder
//     swap). Every annotation and condition of it is declared here and
//     documented on the extension page (docs/guides/sandbox-extension.md).
//
// It is plain data: no I/O.
package sandboxapi

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The agent-sandbox API.
const (
	Group    = "agents.x-k8s.io"
	Version  = "v1beta1"
	Resource = "sandboxes"
	Kind     = "Sandbox"
	// CRDName is the CustomResourceDefinition's name.
	CRDName = Resource + "." + Group
)

// GVR is the Sandbox resource.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// GroupVersion is "agents.x-k8s.io/v1beta1".
var GroupVersion = Group + "/" + Version

// Upstream's Ready condition and the reasons agent-sandbox v1.0 gives it
// (api/v1beta1/sandbox_types.go).
const (
	// ConditionReady is True once the Sandbox's Pod is Running and Ready
	// with an address and its Service exists.
	ConditionReady = "Ready"
	// ReasonDependenciesReady is Ready=True's reason.
	ReasonDependenciesReady = "DependenciesReady"
	// ReasonDependenciesNotReady: the Pod or Service is not there or not
	// ready yet (progress still to come).
	ReasonDependenciesNotReady = "DependenciesNotReady"
	// ReasonReconcilerError: the controller's last attempt failed; its
	// message is "Error seen: " and the error (for a Pod the API server
	// refused, the API server's refusal). The controller retries forever.
	ReasonReconcilerError = "ReconcilerError"
	// ReasonPodSucceeded and ReasonPodFailed: the Pod reached a terminal
	// phase.
	ReasonPodSucceeded = "PodSucceeded"
	ReasonPodFailed    = "PodFailed"
	// ReasonMultiplePods: more than one Pod claims the Sandbox; the
	// controller will not choose.
	ReasonMultiplePods = "MultiplePods"
	// ReasonExpired: the Sandbox reached its shutdownTime.
	ReasonExpired = "SandboxExpired"
	// ReasonSuspended: spec.operatingMode is Suspended.
	ReasonSuspended = "SandboxSuspended"
)

// Terminal reports whether a Ready=False reason and message say the
// Sandbox will not become ready without a change (a new revision, an
// operator's repair): a terminal Pod, an ambiguous or expired or suspended
// Sandbox, or an extension refusal; or a ReconcilerError whose error is the
// API server refusing the Pod as invalid or forbidden (a bad Pod template,
// an admission or quota refusal), which the controller retries in vain.
// Any other reason is progress still to come.
func Terminal(reason, message string) bool {
	switch reason {
	case ReasonPodSucceeded, ReasonPodFailed, ReasonMultiplePods, ReasonExpired, ReasonSuspended:
		return true
	case ReasonReconcilerError:
		// apimachinery's StatusError texts: `Pod "x" is invalid: …`,
		// `pods "x" is forbidden: …`.
		return strings.Contains(message, " is invalid: ") || strings.Contains(message, " is forbidden: ")
	}
	return false
}

// Extension names the OCC sandbox driver extension and its version: the
// annotations below that the provider writes on a Sandbox, the conditions
// the driver writes back, and the egress contract (Placeholder). A driver
// that implements it runs beside the agent-sandbox controller.
const Extension = "occ-sandbox-extension/v1"

// The extension's conditions on a Sandbox's status.conditions.
const (
	// ConditionPlaced is the driver's verdict on what the Sandbox asks of
	// it (AnnotationFacets, AnnotationRequiredProfile): True (reason
	// ReasonPlaced) once it provides every facet and has released the
	// Sandbox's Pod for scheduling on the profile's nodes (SchedulingGate
	// removed, the profile's node selector added); False with
	// ReasonFacetUnsupported or ReasonProfileUnavailable when it will not,
	// and then the Pod stays gated. Absent: not judged yet.
	ConditionPlaced = "sandbox.occ-platform.io/Placed"
	// Reasons of ConditionPlaced.
	ReasonPlaced             = "Placed"
	ReasonFacetUnsupported   = "FacetUnsupported"
	ReasonProfileUnavailable = "ProfileUnavailable"

	// AttachmentConditionPrefix + attachment name is the condition the
	// driver's Credential Gateway sets per credential attachment: True
	// (reason "Attached") once the egress proxy holds the key for it,
	// False with a reason and message when it cannot (AU3).
	AttachmentConditionPrefix = "attachments.occ-platform.io/"
)

// AttachmentCondition is the condition type of one attachment.
func AttachmentCondition(name string) string { return AttachmentConditionPrefix + name }

// SchedulingGate is the scheduling gate the provider puts on a Sandbox's
// Pod template: the Pod the agent-sandbox controller creates stays
// unscheduled until the driver's extension has judged the facets and the
// profile, added the profile's node selector and removed the gate (a gated
// Pod's node selector may be added to; Kubernetes 1.30+).
const SchedulingGate = "occ-platform.io/sandbox-extension"

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
// The egress part of the extension (Extension; OpenShell publishes no
// contract a test can run): the driver routes the Sandbox's outbound
// HTTP through its Credential Gateway's egress proxy, which replaces
// Placeholder in a request's Authorization or x-api-key header with the
// key the gateway holds for the Sandbox's attachment, and passes any other
// request unchanged. A Sandbox with no held key for its attachment has the
// attachment's condition False; its placeholder never reaches a model as a
// key it could accept. The test driver (internal/testenv/kubeenv) implements
// this part for plain HTTP, with the Sandbox's connections to the
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

// Conditions decodes a Sandbox's status.conditions as read (raw): every
// entry that is a condition, in order; anything else is skipped.
func Conditions(raw []any) []metav1.Condition {
	var conds []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			conds = append(conds, c)
		}
	}
	return conds
}
