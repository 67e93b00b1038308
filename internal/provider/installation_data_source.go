package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

var (
	_ datasource.DataSource              = (*installationDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*installationDataSource)(nil)
)

// NewInstallationDataSource is data.occ_installation: the capabilities of a
// compute (rule ND5).
func NewInstallationDataSource() datasource.DataSource { return &installationDataSource{} }

type installationDataSource struct{ data *Data }

func (d *installationDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if pd, ok := req.ProviderData.(*Data); ok {
		d.data = pd
	}
}

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
		MarkdownDescription: "The capabilities an Agent can use on a compute (rule ND5): the OpenClaw execution modes it can deploy in " +
			"and sandbox driver outage, read live: for a compute with a sandbox driver the provider asks the " +
			"cluster whether the driver is installed (the agent-sandbox API is served and its gateway Service exists) and whether its gateway is ready; " +
			"without a driver the capabilities follow from the compute's settings.",
		Attributes: map[string]schema.Attribute{
			"compute": schema.ObjectAttribute{Required: true, AttributeTypes: computeRefType(),
				MarkdownDescription: passWhole("The compute.", "compute", "occ_compute")},
			"execution_modes": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The OpenClaw execution modes an Agent can deploy in: `embedded` (dedicated OpenClaw is refused, rule ND6)."},
			"native_workers_support": schema.StringAttribute{Computed: true,
				MarkdownDescription: nativeWorkersSupportDescription},
			"sandbox_driver_unavailable": schema.BoolAttribute{Computed: true,
				MarkdownDescription: "True during a sandbox driver outage."},
		},
	}
}

func (d *installationDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, cancel := readDeadline(ctx, 0) // no timeouts of its own
	defer cancel()
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
	live := admission.ComputeInstallation(c)
	if row := executors[c.Kind]; row.readsInstallation != nil && row.readsInstallation(c) {
		// Only what the kind reads live (a Kubernetes sandbox driver) comes
		// from its executor's Inspect; the rest follows from the settings,
		// without a client.
		pd := d.data
		if pd == nil {
			pd = &Data{}
		}
		ex, err := pd.executor(ctx, c.Kind)
		if err == nil {
			live, _, err = ex.Inspect(ctx, c)
		}
		if err != nil {
			resp.Diagnostics.AddError("UNAVAILABLE: cannot read the sandbox driver", fmt.Sprintf("Compute %q: %v", c.Name, err))
			return
		}
	}
	inst := installationObject(live, &resp.Diagnostics)
	attrs := inst.Attributes()
	m.ExecutionModes = attrs["execution_modes"].(types.List)
	m.NativeWorkersSupport = attrs["native_workers_support"].(types.String)
	m.SandboxDriverUnavailable = attrs["sandbox_driver_unavailable"].(types.Bool)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
