package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identity (Terraform 1.12 and later): the attributes that find a
// resource's object again, kept by Terraform beside state, written in an
// `import` block's `identity` instead of an import id string, and returned
// by the occ_agent list resource for `terraform query`. Older clients and
// OpenTofu ignore it; the import id strings keep working everywhere.

// nameIdentityModel is the identity of a logical object (occ_compute,
// occ_configuration, occ_credential_source): its name, since it lives only
// in state.
type nameIdentityModel struct {
	Name types.String `tfsdk:"name"`
}

func nameIdentitySchema(what string) identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{RequiredForImport: true,
			Description: "The " + what + "'s name. It lives only in state, so importing it records the name and the next plan fills its settings from configuration."},
	}}
}

// setIdentity writes v as the resource's identity; identity is nil when
// the framework passes none (never for a resource with an identity schema).
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, v any, diags *diag.Diagnostics) {
	if identity != nil {
		diags.Append(identity.Set(ctx, v)...)
	}
}

// setNameIdentity writes a logical object's identity from its name.
func setNameIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, name types.String, diags *diag.Diagnostics) {
	setIdentity(ctx, identity, nameIdentityModel{Name: name}, diags)
}

// importedName is the import id of a logical object: the id string, or
// the name its import block's identity gives.
func importedName(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) string {
	if req.ID != "" || req.Identity == nil {
		return req.ID
	}
	var m nameIdentityModel
	diags.Append(req.Identity.Get(ctx, &m)...)
	return m.Name.ValueString()
}

// agentIdentityModel is an occ_agent's identity: its name and where it
// runs, a Kubernetes namespace (of the provider's cluster) or an SSH host
// and port.
type agentIdentityModel struct {
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
	Host      types.String `tfsdk:"host"`
	Port      types.Int64  `tfsdk:"port"`
}

func agentIdentitySchema() identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{RequiredForImport: true, Description: "The Agent's name."},
		"namespace": identityschema.StringAttribute{OptionalForImport: true,
			Description: "Kubernetes: the tenant namespace the Agent runs in, on the provider's cluster. Set this or `host`, not both."},
		"host": identityschema.StringAttribute{OptionalForImport: true,
			Description: "SSH: the host the Agent runs on, as the compute's `ssh.host` writes it. Set this or `namespace`, not both."},
		"port": identityschema.Int64Attribute{OptionalForImport: true,
			Description: "SSH: the host's SSH port. Default: 22."},
	}}
}

// sshIdentity is the identity of agent on an SSH host.
func sshIdentity(host string, port int64, agent string) agentIdentityModel {
	if port == 0 {
		port = 22
	}
	return agentIdentityModel{Name: types.StringValue(agent), Namespace: types.StringNull(), Host: types.StringValue(host), Port: types.Int64Value(port)}
}

// kubeIdentity is the identity of agent in a Kubernetes namespace.
func kubeIdentity(namespace, agent string) agentIdentityModel {
	return agentIdentityModel{Name: types.StringValue(agent), Namespace: types.StringValue(namespace), Host: types.StringNull(), Port: types.Int64Null()}
}

// agentIdentityOf is the identity of an agent: from its compute when state
// holds it, else (an import whose compute is not in state yet) from its id,
// read as each kind in importOrder would read it. ok is false when neither
// says.
func agentIdentityOf(ctx context.Context, compute types.Object, id, agent string) (agentIdentityModel, bool) {
	var ignored diag.Diagnostics
	if c, known := computeFromObject(ctx, compute, &ignored); known {
		if e, ok := executors[c.Kind]; ok {
			return e.identity(c, agent), true
		}
		return agentIdentityModel{}, false
	}
	for _, kind := range importOrder {
		if m, ok := executors[kind].identityOfID(id); ok {
			return m, true
		}
	}
	return agentIdentityModel{}, false
}

// importID is the import id an identity names; err names the identity
// attribute to fix.
func (m agentIdentityModel) importID() (string, error) {
	name := m.Name.ValueString()
	if name == "" {
		return "", fmt.Errorf("identity.name must be set: the Agent's name")
	}
	switch targetFaultOf(m.Namespace.ValueString() != "", m.Host.ValueString() != "", m.Port) {
	case targetBoth:
		return "", fmt.Errorf("identity sets both namespace and host: set namespace for an Agent on Kubernetes, or host (and port) for one on an SSH host")
	case targetNeither:
		return "", fmt.Errorf("identity must set namespace (an Agent on Kubernetes) or host (an Agent on an SSH host)")
	case targetPortWithNamespace:
		return "", fmt.Errorf("identity.port is for an SSH host: remove it, or set host instead of namespace")
	case targetBadPort:
		return "", fmt.Errorf("identity.port %d is not a TCP port: write 1 to 65535, or leave it out for 22", m.Port.ValueInt64())
	}
	if m.Namespace.ValueString() == "" {
		m.Namespace = types.StringNull()
	}
	if m.Host.ValueString() == "" {
		m.Host = types.StringNull()
	}
	_, row, ok := claimingKind(m)
	if !ok {
		return "", fmt.Errorf("identity must set namespace (an Agent on Kubernetes) or host (an Agent on an SSH host)")
	}
	return row.importID(m), nil
}

// targetFault is what is wrong with where an agent identity or an
// occ_agent list block points: it names exactly one of a Kubernetes
// namespace and an SSH host, a port only with a host, and a TCP port.
type targetFault int

const (
	targetOK targetFault = iota
	targetBoth
	targetNeither
	targetPortWithNamespace
	targetBadPort
)

// targetFaultOf judges a target that names a namespace (hasNS), a host
// (hasHost) and port; each caller says it in its own attribute's words.
func targetFaultOf(hasNS, hasHost bool, port types.Int64) targetFault {
	switch {
	case hasNS && hasHost:
		return targetBoth
	case !hasNS && !hasHost:
		return targetNeither
	case hasNS && !port.IsNull():
		return targetPortWithNamespace
	case !port.IsNull() && (port.ValueInt64() < 1 || port.ValueInt64() > 65535):
		return targetBadPort
	}
	return targetOK
}
