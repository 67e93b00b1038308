package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// TestAccParseModelRef: the first slash splits; the model id keeps the rest
// (rule MR1).
func TestAccParseModelRef(t *testing.T) {
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_8_0)},
		Steps: []resource.TestStep{
			{
				Config: `output "ref" { value = provider::occ::parse_model_ref("openai/vendor/org/model") }`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownOutputValue("ref", knownvalue.ObjectExact(map[string]knownvalue.Check{
						"provider": knownvalue.StringExact("openai"),
						"model":    knownvalue.StringExact("vendor/org/model"),
					})),
				},
			},
			{
				Config:      `output "ref" { value = provider::occ::parse_model_ref("openai/") }`,
				ExpectError: mustRegexp(`INVALID_REQUEST: model reference "openai/" has an empty model id[\s\S]*MR1`),
			},
			{
				Config:      `output "ref" { value = provider::occ::parse_model_ref("gpt-5") }`,
				ExpectError: mustRegexp(`INVALID_REQUEST: model reference "gpt-5" has no provider`),
			},
		},
	})
}
