package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func configurationWithDocument(doc string) string {
	return `
resource "occ_configuration" "c" {
  name     = "support"
  document = <<-EOT
` + doc + `
EOT
}`
}

func TestAccConfiguration_GenerationFollowsSemanticChanges(t *testing.T) {
	const canonical = `{"agents":{"defaults":{"model":{"fallbacks":["anthropic/claude-haiku-4-5"],"primary":"anthropic/claude-sonnet-4-5"}}}}`
	gen := func(n int64) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("occ_configuration.c", tfjsonpath.New("generation"), knownvalue.Int64Exact(n))
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: configurationWithDocument(`{"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-5", "fallbacks": ["anthropic/claude-haiku-4-5"]}}}}`),
				ConfigStateChecks: []statecheck.StateCheck{
					gen(1),
					statecheck.ExpectKnownValue("occ_configuration.c", tfjsonpath.New("canonical_document"), knownvalue.StringExact(canonical)),
					statecheck.ExpectKnownValue("occ_configuration.c", tfjsonpath.New("id"), knownvalue.StringExact("support")),
				},
			},
			{
				// JSON5, comments, other key order and white space: the text is
				// updated in place, the generation and canonical form are not.
				Config: configurationWithDocument(`// the support agent
{
  agents: {
    defaults: {
      model: {
        fallbacks: ['anthropic/claude-haiku-4-5',],
        primary: "anthropic/claude-sonnet-4-5",
      },
    },
  },
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_configuration.c", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_configuration.c", tfjsonpath.New("generation"), knownvalue.Int64Exact(1)),
					plancheck.ExpectKnownValue("occ_configuration.c", tfjsonpath.New("canonical_document"), knownvalue.StringExact(canonical)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{gen(1)},
			},
			{
				// A semantic change: generation + 1.
				Config: configurationWithDocument(`{"agents": {"defaults": {"model": "anthropic/claude-opus-4-1"}}}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_configuration.c", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_configuration.c", tfjsonpath.New("generation"), knownvalue.Int64Exact(2)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{gen(2)},
			},
			{
				// Secret bindings are part of the configuration: generation + 1 (rule AU6).
				Config: `
resource "occ_configuration" "c" {
  name            = "support"
  document        = jsonencode({ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } })
  secret_bindings = { telegram = { secret = "tg-bot", key = "token" } }
}`,
				ConfigStateChecks: []statecheck.StateCheck{gen(3)},
			},
			{
				ResourceName:  "occ_configuration.c",
				ImportState:   true,
				ImportStateId: "support@3",
				ImportStateCheck: func(s []*terraform.InstanceState) error {
					return expectAttrs(s, map[string]string{"id": "support", "name": "support", "generation": "3"})
				},
			},
		},
	})
}

// TestAccConfiguration_SaveTimeRules: the save-time rules refuse at plan,
// pointing at the document (rules MR1, MR3, MR8, MR9).
func TestAccConfiguration_SaveTimeRules(t *testing.T) {
	cases := map[string]struct{ doc, err string }{
		"MR9 agents.list":      {`{"agents": {"list": [{"id": "main"}]}}`, `INVALID_REQUEST:[\s\S]*agents\.list[\s\S]*Rule MR9`},
		"MR9 unknown root key": {`{"agnets": {}}`, `INVALID_REQUEST:[\s\S]*"agnets" is not a root key[\s\S]*Rule MR9`},
		"MR1 empty model id":   {`{"agents": {"defaults": {"model": "openai/"}}}`, `INVALID_REQUEST:[\s\S]*empty model id[\s\S]*Rule MR1`},
		"MR8 fallback provider": {`{"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-5", "fallbacks": ["openai/gpt-5"]}}}}`,
			`INVALID_REQUEST:[\s\S]*fallbacks\[0\][\s\S]*Rule MR8`},
		"MR8 models array": {`{"agents": {"defaults": {"model": "openai/gpt-5"}}, "models": {"providers": {"openai": {"models": [{"id": "gpt-4o", "name": "GPT-4o"}]}}}}`,
			`INVALID_REQUEST:[\s\S]*openai/gpt-4o is neither the primary model nor a fallback[\s\S]*Rule MR8`},
		"MR3 bad runtime id": {`{"agents": {"defaults": {"model": "openai/gpt-5"}}, "models": {"providers": {"openai": {"agentRuntime": {"id": "claude-cli"}}}}}`,
			`INVALID_REQUEST:[\s\S]*agentRuntime.id "claude-cli" is not supported[\s\S]*Rule MR3`},
		"MR3 upstream alias": {`{"agents": {"defaults": {"model": "openai/gpt-5", "models": {"openai/gpt-5": {"agentRuntime": {"id": "pi"}}}}}}`,
			`INVALID_REQUEST:[\s\S]*agentRuntime.id "pi" is not supported by OCC[\s\S]*write "openclaw"[\s\S]*Rule MR3`},
		"MR3 entries disagree": {`{"agents": {"ownership": "explicit", "entries": {"main": {"model": "openai/gpt-5"}, "ops": {"model": "openai/gpt-5-mini"}}}}`,
			`INVALID_REQUEST:[\s\S]*agent entry "ops" selects openai/gpt-5-mini[\s\S]*Rule MR3`},
		"MR3 policy conflict": {`{"agents": {"defaults": {"model": "openai/gpt-5", "models": {"openai/gpt-5": {"agentRuntime": {"id": "codex"}}}}}, "models": {"providers": {"openai": {"agentRuntime": {"id": "openclaw"}}}}}`,
			`INVALID_REQUEST:[\s\S]*conflict[\s\S]*Rule MR3`},
		"not JSON": {`{"agents": `, `INVALID_REQUEST: the configuration document is not valid JSON or JSON5[\s\S]*line`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: configurationWithDocument(tc.doc), ExpectError: mustRegexp(tc.err)}},
			})
		})
	}
}

// rule AU6: secret binding names are judged at plan, on the binding.
func TestAccConfiguration_SecretBindingNames(t *testing.T) {
	for name, tc := range map[string]struct{ bindings, err string }{
		"model credential": {`{ openai_api_key = { secret = "k", key = "v" } }`,
			`INVALID_REQUEST: binding "openai_api_key" would set OPENAI_API_KEY[\s\S]*credential source[\s\S]*Rule AU6`},
		"ambiguous": {`{ slack-token = { secret = "a", key = "v" }, slack_token = { secret = "b", key = "v" } }`,
			`INVALID_REQUEST: bindings "slack-token" and "slack_token" both become SLACK_TOKEN[\s\S]*Rule AU6`},
	} {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{Config: `
resource "occ_configuration" "c" {
  name            = "support"
  document        = jsonencode({ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } })
  secret_bindings = ` + tc.bindings + `
}`, ExpectError: mustRegexp(tc.err)}},
			})
		})
	}
}
