// Package provider is the Terraform glue of the OCC provider: schemas, plan
// modifiers, validators and CRUD that call the pure admission core.
package provider

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/rollout"
	"github.com/occ-platform/terraform-provider-occ/internal/sshexec"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/occ-platform/occ"

var (
	_ provider.Provider                       = (*occProvider)(nil)
	_ provider.ProviderWithFunctions          = (*occProvider)(nil)
	_ provider.ProviderWithValidateConfig     = (*occProvider)(nil)
	_ provider.ProviderWithListResources      = (*occProvider)(nil)
	_ provider.ProviderWithActions            = (*occProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*occProvider)(nil)
)

type occProvider struct {
	version string
	commit  string
}

// New returns the provider factory for providerserver.Serve and tests.
func New(version, commit string) func() provider.Provider {
	return func() provider.Provider {
		return &occProvider{version: version, commit: commit}
	}
}

// providerModel holds connection settings only; no resource state holds a
// connection secret.
type providerModel struct {
	Kubernetes types.Object `tfsdk:"kubernetes"`
	SSH        types.Object `tfsdk:"ssh"`
	Preflight  types.Bool   `tfsdk:"preflight"`
	Rollout    types.Object `tfsdk:"rollout"`
}

type providerKubernetesModel struct {
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigPaths          types.List   `tfsdk:"config_paths"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	Exec                 types.Object `tfsdk:"exec"`
	ProxyURL             types.String `tfsdk:"proxy_url"`
	TLSServerName        types.String `tfsdk:"tls_server_name"`
	ConfigContextCluster types.String `tfsdk:"config_context_cluster"`
	ConfigContextAuth    types.String `tfsdk:"config_context_auth_info"`
}

type providerSSHModel struct {
	User                 types.String `tfsdk:"user"`
	PrivateKey           types.String `tfsdk:"private_key"`
	PrivateKeyPassphrase types.String `tfsdk:"private_key_passphrase"`
	Certificate          types.String `tfsdk:"certificate"`
	Agent                types.Bool   `tfsdk:"agent"`
	KnownHostsFile       types.String `tfsdk:"known_hosts_file"`
	ConnectTimeout       types.String `tfsdk:"connect_timeout"`
}

// Data is what Configure hands to resources and data sources. The
// Kubernetes client is built on first use, once per provider instance: a
// plan never needs the cluster.
type Data struct {
	Version    string
	Kubernetes *providerKubernetesModel
	SSH        *providerSSHModel
	// unknown names, per compute kind, the provider settings not known
	// yet (connection.go): no connection of that kind is made.
	unknown map[string][]string

	kubeOnce sync.Once
	kubeExec *kube.Executor
	kubeErr  error

	sshOnce sync.Once
	sshExec *sshexec.Executor

	// preflightOn says whether plans read the targets (preflight.go).
	preflightOn bool
	preflights  preflights
	// rollout is the gate the agents of one apply share (rollout.go);
	// nil without the provider's rollout setting.
	rollout *rollout.Gate
	// gateways are the open occ_agent_tunnel ways in (gateway_access.go).
	gateways openGateways
}

// wrapKubeTransport wraps the Kubernetes client's transport. It is nil
// but in the fault tests, where the test binary serves as the plugin and
// kills itself right after a chosen write (fault_kill_acc_test.go).
var wrapKubeTransport func(http.RoundTripper) http.RoundTripper

// KubeExecutor returns the provider's Kubernetes executor.
func (d *Data) KubeExecutor(ctx context.Context) (*kube.Executor, error) {
	d.kubeOnce.Do(func() {
		s := kube.Settings{UserAgent: "terraform-provider-occ/" + d.Version}
		if k := d.Kubernetes; k != nil {
			s.ConfigPath, s.ConfigContext, s.Host = k.ConfigPath.ValueString(), k.ConfigContext.ValueString(), k.Host.ValueString()
			s.Token, s.ClusterCACertificate = k.Token.ValueString(), k.ClusterCACertificate.ValueString()
			s.ClientCertificate, s.ClientKey, s.Insecure = k.ClientCertificate.ValueString(), k.ClientKey.ValueString(), k.Insecure.ValueBool()
			if !k.ConfigPaths.IsNull() {
				var paths []string
				k.ConfigPaths.ElementsAs(ctx, &paths, false)
				s.ConfigPaths = paths
			}
			if !k.Exec.IsNull() && !k.Exec.IsUnknown() {
				var ex providerExecModel
				k.Exec.As(ctx, &ex, objectAsOptions)
				s.Exec = &kube.ExecSettings{APIVersion: ex.APIVersion.ValueString(), Command: ex.Command.ValueString()}
				ex.Args.ElementsAs(ctx, &s.Exec.Args, false)
				ex.Env.ElementsAs(ctx, &s.Exec.Env, false)
			}
		}
		if k := d.Kubernetes; k != nil {
			s.ProxyURL, s.TLSServerName = k.ProxyURL.ValueString(), k.TLSServerName.ValueString()
			s.ConfigContextCluster, s.ConfigContextAuthInfo = k.ConfigContextCluster.ValueString(), k.ConfigContextAuth.ValueString()
		}
		cfg, err := kube.RESTConfig(kube.FromEnv(s, os.Getenv))
		if err != nil {
			d.kubeErr = err
			return
		}
		if wrapKubeTransport != nil {
			cfg.Wrap(wrapKubeTransport)
		}
		d.kubeExec, d.kubeErr = kube.New(cfg)
	})
	return d.kubeExec, d.kubeErr
}

type providerExecModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

func (p *occProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "occ"
	resp.Version = p.version
}

func (p *occProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The OCC provider runs AI agents on Kubernetes and SSH hosts as code. `terraform plan` admits or refuses " +
			"each Agent's combination of harness, execution mode, model providers, auth binding, sandbox driver and credential gateway, " +
			"and shows the exact revision that would run. The provider block holds connection settings: admission at plan needs no server; the preflight (on by default) then reads, at plan, the cluster or host each new revision would deploy to, and a refresh reads what is in state back from its cluster or host.",
		Attributes: map[string]schema.Attribute{
			"preflight": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Check, at plan, each Agent that would deploy a new revision against its cluster or host, reading only, so that the plan fails with the code and next step " +
					"the apply would give (an Agent no node has room for, a namespace's quota, LimitRange or Pod Security level, an object the API server would refuse, a StorageClass or " +
					"PriorityClass that does not exist, a permission the provider lacks, an SSH host whose key, systemd or port would refuse it) and warns of what may fail (room that agents " +
					"planned before it would take). Default `true`, or the environment variable `OCC_PREFLIGHT`; it runs only when the connection is known at plan. Set `false` for plans " +
					"that must not contact targets. See the Preflight and rollouts guide."},
			"rollout": rolloutSchema(),
			"kubernetes": schema.SingleNestedAttribute{
				Optional: true,
				MarkdownDescription: "How to reach Kubernetes computes. Each setting left out is read from the environment variable the " +
					"hashicorp/kubernetes provider reads (`KUBE_CONFIG_PATH`, `KUBE_CONFIG_PATHS`, `KUBE_CTX`, `KUBE_CTX_CLUSTER`, `KUBE_CTX_AUTH_INFO`, " +
					"`KUBE_HOST`, `KUBE_TOKEN`, `KUBE_CLIENT_CERT_DATA`, `KUBE_CLIENT_KEY_DATA`, `KUBE_CLUSTER_CA_CERT_DATA`, `KUBE_INSECURE`, " +
					"`KUBE_PROXY_URL`, `KUBE_TLS_SERVER_NAME`). With no kubeconfig path and no `host`, the provider then reads `KUBECONFIG` " +
					"(unlike the hashicorp/kubernetes provider, which ignores it: agents should reach the cluster kubectl reaches unless told otherwise), " +
					"then `~/.kube/config`, then, in a Pod (`KUBERNETES_SERVICE_HOST` set), its ServiceAccount, as kubectl does (in-cluster configuration): " +
					"the API server at `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`, the token and CA certificate mounted under " +
					"`/var/run/secrets/kubernetes.io/serviceaccount/`. Over it, `token`, `client_certificate` and `client_key`, or `exec` replace the " +
					"ServiceAccount token, and `cluster_ca_certificate`, `insecure`, `proxy_url` and `tls_server_name` apply as they do over a kubeconfig; " +
					"the `config_context` settings name kubeconfig entries, so they are an error there. " +
					"These fallbacks serve only settings left out: a setting whose value Terraform learns only at apply (a module output) is not empty " +
					"during the plan, and the provider makes no Kubernetes connection until it is known (refreshes keep their state with a warning; the `occ_agent` data source fails naming it).",
				Attributes: map[string]schema.Attribute{
					"proxy_url":                schema.StringAttribute{Optional: true, MarkdownDescription: "An HTTP(S) or SOCKS5 proxy to the API server."},
					"tls_server_name":          schema.StringAttribute{Optional: true, MarkdownDescription: "The server name the API server's certificate is checked for."},
					"config_context_cluster":   schema.StringAttribute{Optional: true, MarkdownDescription: "The kubeconfig cluster to use instead of the context's."},
					"config_context_auth_info": schema.StringAttribute{Optional: true, MarkdownDescription: "The kubeconfig user to use instead of the context's."},
					"config_path":              schema.StringAttribute{Optional: true, MarkdownDescription: "Path to a kubeconfig file."},
					"config_paths":             schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Kubeconfig files merged in order."},
					"config_context":           schema.StringAttribute{Optional: true, MarkdownDescription: "The kubeconfig context to use."},
					"host":                     schema.StringAttribute{Optional: true, MarkdownDescription: "The API server URL, instead of a kubeconfig."},
					"token":                    schema.StringAttribute{Optional: true, Sensitive: true, MarkdownDescription: "A bearer token for `host`."},
					"cluster_ca_certificate": schema.StringAttribute{Optional: true,
						MarkdownDescription: "PEM CA bundle that signs the API server's certificate."},
					"client_certificate": schema.StringAttribute{Optional: true, MarkdownDescription: "PEM client certificate for `host`."},
					"client_key":         schema.StringAttribute{Optional: true, Sensitive: true, MarkdownDescription: "PEM client key for `host`."},
					"insecure": schema.BoolAttribute{Optional: true,
						MarkdownDescription: "Skip TLS verification of the API server. Off by default; the provider warns when it is on."},
					"exec": schema.SingleNestedAttribute{
						Optional:            true,
						MarkdownDescription: "A client-go exec credential plugin.",
						Attributes: map[string]schema.Attribute{
							"api_version": schema.StringAttribute{Required: true, MarkdownDescription: "The plugin's `client.authentication.k8s.io` API version."},
							"command":     schema.StringAttribute{Required: true, MarkdownDescription: "The plugin command."},
							"args":        schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Its arguments."},
							"env": schema.MapAttribute{Optional: true, Sensitive: true, ElementType: types.StringType,
								MarkdownDescription: "Extra environment variables for the plugin. Sensitive: values may be tokens."},
						},
					},
				},
			},
			"ssh": schema.SingleNestedAttribute{
				Optional:            true,
				MarkdownDescription: "Defaults for every SSH compute.",
				Attributes: map[string]schema.Attribute{
					"user":        schema.StringAttribute{Optional: true, MarkdownDescription: "The login user; a compute's own `ssh.user` wins."},
					"private_key": schema.StringAttribute{Optional: true, Sensitive: true, MarkdownDescription: "A PEM or OpenSSH private key. It also logs in to a compute's `bastion`."},
					"private_key_passphrase": schema.StringAttribute{Optional: true, Sensitive: true,
						MarkdownDescription: "The passphrase of an encrypted `private_key`. Never written to state, plans or logs; an incorrect one is refused before any host is contacted."},
					"certificate": schema.StringAttribute{Optional: true,
						MarkdownDescription: "An OpenSSH user certificate of `private_key` (the content of `id_ed25519-cert.pub`, signed with `ssh-keygen -s`), offered instead of the bare key to hosts that trust a user CA (`TrustedUserCAKeys`)."},
					"connect_timeout": schema.StringAttribute{Optional: true, Validators: []validator.String{positiveDuration{}},
						MarkdownDescription: "How long a TCP connect and SSH handshake may take, per hop (`30s`, `2m`). Default `30s`; an operation's own timeout may end it earlier."},
					"agent": schema.BoolAttribute{Optional: true, MarkdownDescription: "Authenticate with the SSH agent: at `SSH_AUTH_SOCK` (a Unix socket, or on Windows a named pipe), or, on Windows without it, the Windows OpenSSH agent service's pipe `\\\\.\\pipe\\openssh-ssh-agent`. It also logs in to a compute's `bastion`."},
					"known_hosts_file": schema.StringAttribute{Optional: true,
						MarkdownDescription: "A known_hosts file that verifies a host reached by an agent's id rather than by a compute in state: `terraform import` of an agent, " +
							"the refreshes of an imported agent until its configuration sets `compute`, the `occ_agent` data source looked up by `id`, and the `occ_agent` list resource (`terraform query`). " +
							"Plain and hashed host entries of any key type OpenSSH writes are read, and the host is asked for a key type the file records for it. " +
							"Default `~/.ssh/known_hosts`."},
				},
			},
		},
	}
}

// validateSSHCredentials refuses, before any host is contacted, a private
// key that does not parse with its passphrase or a certificate that does
// not certify it (values not known yet are checked when the provider
// connects).
func validateSSHCredentials(ctx context.Context, o types.Object, diags *diag.Diagnostics) {
	if o.IsNull() || o.IsUnknown() {
		return
	}
	var s providerSSHModel
	diags.Append(o.As(ctx, &s, objectAsOptions)...)
	if diags.HasError() || s.PrivateKey.IsUnknown() || s.PrivateKeyPassphrase.IsUnknown() || s.Certificate.IsUnknown() {
		return
	}
	err := sshexec.CheckCredentials(sshexec.Credentials{PrivateKey: s.PrivateKey.ValueString(), Passphrase: s.PrivateKeyPassphrase.ValueString(), Certificate: s.Certificate.ValueString()})
	if err == nil {
		return
	}
	at := path.Root("ssh").AtName("private_key")
	var ce *sshexec.CredentialError
	if errors.As(err, &ce) {
		at = path.Root("ssh").AtName(ce.Setting)
	}
	addAttrError(diags, at, "INVALID_REQUEST: the SSH credentials cannot be used", err.Error()+".")
}

func (p *occProvider) ValidateConfig(ctx context.Context, req provider.ValidateConfigRequest, resp *provider.ValidateConfigResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	validateSSHCredentials(ctx, m.SSH, &resp.Diagnostics)
	if m.Kubernetes.IsNull() || m.Kubernetes.IsUnknown() {
		return
	}
	var k providerKubernetesModel
	resp.Diagnostics.Append(m.Kubernetes.As(ctx, &k, objectAsOptions)...)
	if k.Insecure.ValueBool() {
		resp.Diagnostics.AddAttributeWarning(path.Root("kubernetes").AtName("insecure"), "TLS verification of the API server is off",
			"kubernetes.insecure = true accepts any server certificate. Use it only against a local test cluster; set cluster_ca_certificate instead.")
	}
}

func (p *occProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	data := &Data{Version: p.version, unknown: map[string][]string{}}
	on, err := preflightOn(m.Preflight, os.Getenv)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("preflight"), "INVALID_REQUEST: the preflight setting cannot be read", err.Error()+". Set preflight in the provider block, or unset "+preflightEnv+".")
		return
	}
	data.preflightOn = on
	if data.rollout = rolloutGate(ctx, m.Rollout, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	for kind, block := range map[string]attr.Value{admission.KindKubernetes: m.Kubernetes, admission.KindSSH: m.SSH} {
		if u := unknownSettings(kind, block); len(u) > 0 {
			data.unknown[kind] = u
		}
	}
	if len(data.unknown) > 0 && req.ClientCapabilities.DeferralAllowed {
		// Terraform defers what this provider would read or plan until
		// the settings are known.
		resp.Deferred = &provider.Deferred{Reason: provider.DeferredReasonProviderConfigUnknown}
	}
	if !m.Kubernetes.IsNull() && !m.Kubernetes.IsUnknown() {
		data.Kubernetes = &providerKubernetesModel{}
		resp.Diagnostics.Append(m.Kubernetes.As(ctx, data.Kubernetes, objectAsOptions)...)
	}
	if !m.SSH.IsNull() && !m.SSH.IsUnknown() {
		data.SSH = &providerSSHModel{}
		resp.Diagnostics.Append(m.SSH.As(ctx, data.SSH, objectAsOptions)...)
	}
	tflog.Debug(ctx, "provider configured", map[string]any{"work.operation": "configure", "kubernetes_settings": data.Kubernetes != nil, "ssh_settings": data.SSH != nil})
	resp.ResourceData = data
	resp.DataSourceData = data
	resp.ListResourceData = data
	resp.ActionData = data
	resp.EphemeralResourceData = data
}

func (p *occProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewComputeResource,
		NewConfigurationResource,
		NewCredentialSourceResource,
		NewAgentResource,
	}
}

func (p *occProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewInstallationDataSource, NewAgentDataSource}
}

// ListResources: occ_agent, for `terraform query` (Terraform 1.14+).
func (p *occProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{NewAgentListResource}
}

// EphemeralResources: occ_agent_tunnel and occ_gateway_token (Terraform
// 1.10+).
func (p *occProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{NewAgentTunnelEphemeralResource, NewGatewayTokenEphemeralResource}
}

// Actions: occ_agent_turn and occ_agent_restart (Terraform 1.14+).
func (p *occProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{NewAgentTurnAction, NewAgentRestartAction}
}

func (p *occProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{NewParseModelRefFunction}
}
