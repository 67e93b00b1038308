package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

var _ function.Function = (*parseModelRefFunction)(nil)

// NewParseModelRefFunction is provider::occ::parse_model_ref (rule MR1).
func NewParseModelRefFunction() function.Function { return &parseModelRefFunction{} }

type parseModelRefFunction struct{}

var modelRefAttrTypes = map[string]attr.Type{"provider": types.StringType, "model": types.StringType}

func (f *parseModelRefFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "parse_model_ref"
}

func (f *parseModelRefFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "Splits a model reference into provider and model.",
		MarkdownDescription: "Splits a native model reference `provider/model` at its first slash (rule MR1): " +
			"`openai/vendor/model` is provider `openai` and model `vendor/model`. Empty parts are an error.",
		Parameters: []function.Parameter{
			function.StringParameter{Name: "ref", MarkdownDescription: "The model reference, such as `anthropic/claude-sonnet-4-5`."},
		},
		Return: function.ObjectReturn{AttributeTypes: modelRefAttrTypes},
	}
}

func (f *parseModelRefFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var ref string
	resp.Error = function.ConcatFuncErrors(req.Arguments.Get(ctx, &ref))
	if resp.Error != nil {
		return
	}
	parsed, err := admission.ParseModelRef(ref)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, "INVALID_REQUEST: "+err.Error()+" (rule MR1)")
		return
	}
	obj, diags := types.ObjectValue(modelRefAttrTypes, map[string]attr.Value{
		"provider": types.StringValue(parsed.Provider), "model": types.StringValue(parsed.Model)})
	resp.Error = function.FuncErrorFromDiags(ctx, diags)
	if resp.Error != nil {
		return
	}
	resp.Error = resp.Result.Set(ctx, obj)
}
