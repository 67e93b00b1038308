package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// defaultOnCreateKeepOnUpdate is HM2 as a plan modifier: an omitted value is
// the default on create and the previous value on update (no diff, no
// redeploy). The rule itself is admission.DefaultExecutionMode.
type defaultOnCreateKeepOnUpdate struct {
	apply func(planned, prior string) string
}

func (m defaultOnCreateKeepOnUpdate) Description(context.Context) string {
	return "defaults on create; an update that omits the value keeps the previous one"
}
func (m defaultOnCreateKeepOnUpdate) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (m defaultOnCreateKeepOnUpdate) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	resp.PlanValue = types.StringValue(m.apply("", req.StateValue.ValueString()))
}
