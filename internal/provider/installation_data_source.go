package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

var _ datasource.DataSource = (*installationDataSource)(nil)

// NewInstallationDataSource is data.occ_installation: the capabilities of a
// compute (rule ND5).
func NewInstallationDataSource() datasource.DataSource { return &installationDataSource{} }

type installationDataSource struct{}

type installationDataModel struct {
	Compute                  types.Object `tfsdk:"compute"`
	ExecutionModes           types.List   `tfsdk:"execution_modes"`
	NativeWorkersSupport     types.String `tfsdk:"native_workers_support"`
	SandboxDriverUnavailable types.Bool   `tfsdk:"sandbox_driver_unavailable"`
}

func (d *installationDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_installation"
}

func (d *installationDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The capabilities an Agent can use on a compute (rule ND5): the OpenClaw execution modes it can deploy in, " +
			"native worker support (ND6) and sandbox driver outage. In this version they are derived from the compute's declared settings " +
			"(the same values as `occ_compute.installation`); a driver outage is reported once the Kubernetes executor reads the driver live.",
		Attributes: map[string]schema.Attribute{
			"compute": schema.ObjectAttribute{Required: true, AttributeTypes: refType(computeSchema(), nil, nil),
				MarkdownDescription: "The compute: `compute = occ_compute.<name>`."},
			"execution_modes": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The OpenClaw execution modes an Agent can deploy in."},
			"native_workers_support": schema.StringAttribute{Computed: true,
				MarkdownDescription: "`pinned-runtime`, `declared`, or null when the installation omits native workers."},
			"sandbox_driver_unavailable": schema.BoolAttribute{Computed: true,
				MarkdownDescription: "True during a sandbox driver outage."},
		},
	}
}

func (d *installationDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m installationDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, known := computeFromObject(ctx, m.Compute, &resp.Diagnostics)
	if !known {
		addAttrError(&resp.Diagnostics, path.Root("compute"), "INVALID_REQUEST: the compute is incomplete",
			"Pass the whole compute: compute = occ_compute.<name>.")
		return
	}
	inst := installationObject(admission.ComputeInstallation(c), &resp.Diagnostics)
	attrs := inst.Attributes()
	m.ExecutionModes = attrs["execution_modes"].(types.List)
	m.NativeWorkersSupport = attrs["native_workers_support"].(types.String)
	m.SandboxDriverUnavailable = attrs["sandbox_driver_unavailable"].(types.Bool)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
