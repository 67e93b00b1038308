package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The ssh block of occ_compute: its schema, its model, its conversion into
// admission.SSHCompute and its static checks; the provider's registry
// (executors.go) hands them out.

type sshModel struct {
	Host                  types.String `tfsdk:"host"`
	Port                  types.Int64  `tfsdk:"port"`
	HostKey               types.String `tfsdk:"host_key"`
	InsecureIgnoreHostKey types.Bool   `tfsdk:"insecure_ignore_host_key"`
	User                  types.String `tfsdk:"user"`
	OpenClawPath          types.String `tfsdk:"openclaw_path"`
	ConfigDir             types.String `tfsdk:"config_dir"`
	Bastion               types.Object `tfsdk:"bastion"`
}

type bastionModel struct {
	Host    types.String `tfsdk:"host"`
	Port    types.Int64  `tfsdk:"port"`
	User    types.String `tfsdk:"user"`
	HostKey types.String `tfsdk:"host_key"`
}

// sshBlockSchema is occ_compute's ssh block.
func sshBlockSchema() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
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
				Validators: []validator.String{absolutePath{}, configDir{}}, MarkdownDescription: "Where revision configurations are written, in a directory `NAME` per agent. Default `/etc/openclaw`. " +
					"It may not be `" + render.StateRoot + "` or inside it (the service users own their state there), and each deploy refuses, before any write, a config_dir in a directory another user can write " +
					"(the activation runs as root from it) and an existing `NAME` directory holding files the provider did not write."},
		},
	}
}

// sshSettings converts a known ssh block.
func sshSettings(ctx context.Context, o types.Object, diags *diag.Diagnostics) any {
	s, _ := decodeObject[sshModel](ctx, o, diags)
	return sshComputeFrom(ctx, s, diags)
}

// validateSSHBlock holds the block's static checks that span attributes.
func validateSSHBlock(ctx context.Context, o types.Object, at path.Path, diags *diag.Diagnostics) {
	if s, ok := decodeObject[sshModel](ctx, o, diags); ok {
		ignore := s.InsecureIgnoreHostKey.ValueBool()
		if s.HostKey.IsNull() && !ignore && !s.InsecureIgnoreHostKey.IsUnknown() {
			addAttrError(diags, at.AtName("host_key"), "INVALID_REQUEST: the SSH host key is missing",
				"The provider always verifies the host's key. Set ssh.host_key to the host's public key (for example the output of `cat /etc/ssh/ssh_host_ed25519_key.pub` on the host), or, only for a throwaway test host, set insecure_ignore_host_key = true.")
		}
		if ignore && !s.HostKey.IsNull() && !s.HostKey.IsUnknown() {
			// Skipping the check would silently discard the configured key.
			addAttrError(diags, at.AtName("insecure_ignore_host_key"), "INVALID_REQUEST: ssh.host_key and ssh.insecure_ignore_host_key are both set",
				"insecure_ignore_host_key = true would skip verifying the host_key you set, so a machine in the middle could pose as the host. "+
					"Remove insecure_ignore_host_key to verify the host against ssh.host_key (recommended), or, only for a throwaway test host, remove ssh.host_key.")
		} else if ignore {
			diags.AddAttributeWarning(at.AtName("insecure_ignore_host_key"), "SSH host key verification is off",
				"insecure_ignore_host_key = true accepts any host key, so a machine in the middle can read the revision and the journal. Set host_key instead.")
		}
	}
}

// sshComputeFrom converts a compute's ssh block.
func sshComputeFrom(ctx context.Context, s sshModel, diags *diag.Diagnostics) admission.SSHCompute {
	c := admission.SSHCompute{Host: s.Host.ValueString(), Port: s.Port.ValueInt64(),
		OpenClawPath: s.OpenClawPath.ValueString(), ConfigDir: s.ConfigDir.ValueString(),
		HostKey: s.HostKey.ValueString(), User: s.User.ValueString(), InsecureIgnoreHostKey: s.InsecureIgnoreHostKey.ValueBool()}
	if b, ok := decodeObject[bastionModel](ctx, s.Bastion, diags); ok {
		c.Bastion = &admission.Bastion{Host: b.Host.ValueString(), Port: b.Port.ValueInt64(), User: b.User.ValueString(), HostKey: b.HostKey.ValueString()}
	}
	return c
}
