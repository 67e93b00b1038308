package render

import "github.com/occ-platform/terraform-provider-occ/internal/admission"

// Topology is which components a revision runs on Kubernetes: as
// Deployments, and the one a Sandbox per revision holds when the compute's
// sandbox driver contains the dedicated harness ("" for none). Deploy
// renders it; read and delete, which have only the agent's state, ask it.
type Topology struct {
	Deployments []string
	Sandbox     string
}

// TopologyOf is the topology of a harness and execution mode, sandboxed or
// not (Sandboxed).
func TopologyOf(harness, mode string, sandboxed bool) Topology {
	switch {
	case mode != admission.ModeDedicated:
		return Topology{Deployments: []string{ComponentGateway}}
	case sandboxed && harness == admission.HarnessOpenClaw:
		return Topology{Deployments: []string{ComponentGateway}, Sandbox: ComponentNode}
	case sandboxed:
		return Topology{Deployments: []string{ComponentGateway}, Sandbox: ComponentHarness}
	}
	return Topology{Deployments: []string{ComponentGateway, ComponentHarness}}
}

// Topology is the revision's own topology.
func (o *Objects) Topology() Topology {
	var t Topology
	for _, d := range o.Deployments {
		t.Deployments = append(t.Deployments, d.Spec.Template.Labels[LabelComponent])
	}
	for _, s := range o.Sandboxes {
		t.Sandbox = s.Component
	}
	return t
}
