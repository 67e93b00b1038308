package provider

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

func agentConfig(compute, document, source, agentExtra string) string {
	return compute + `
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(` + document + `)
}
` + source + `
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
` + agentExtra + `
}`
}

// sshAgentConfig is embedded OpenClaw on an SSH compute at host, with the
// host's runtime credentials.
func sshAgentConfig(host string) string {
	return agentConfig(`
resource "occ_compute" "k" {
  name = "edge"
  ssh  = { host = "`+host+`", host_key = "`+testHostKey+`" }
}`, anthropicDoc, `
resource "occ_credential_source" "s" {
  name             = "host"
  compute          = occ_compute.k
  method           = "runtime"
  environment_file = "/etc/occ/openclaw.env"
}`, "")
}

const anthropicDoc = `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } }`

// TestAccAgent_PlanShowsAdmittedRevision: the exact revision is in the plan.
func TestAccAgent_PlanShowsAdmittedRevision(t *testing.T) {
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             agentConfig(testComputeK8s, `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }, logging = { redactSensitive = "tools" } }`, testSourceSecretRef, ""),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
				// rule AD4: the platform logging stamp; rule AD3: the platform's
				// Kubernetes wiring, which runs, is in the plan; rule HM7: no
				// maxConcurrent outside dedicated Codex (the runtime's default).
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("admitted_document"), knownvalue.StringExact(
					`{"agents":{"defaults":{"model":"anthropic/claude-sonnet-4-5"}},"diagnostics":{"otel":{"logs":false}},"discovery":{"mdns":{"mode":"off"}},`+
						`"gateway":{"auth":{"mode":"token"},"bind":"lan","controlUi":{"enabled":false},"mode":"local","port":18789},`+
						`"logging":{"consoleLevel":"info","consoleStyle":"json","level":"info"},"models":{"catalogRefresh":{"enabled":false}},"update":{"checkOnStart":false}}`)),
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("harness"), knownvalue.StringExact("openclaw")),
				// rule HM2: embedded on create.
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("execution_mode"), knownvalue.StringExact("embedded")),
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("harness_version"), knownvalue.StringExact("openclaw@"+admission.PinnedOpenClawVersion)),
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("max_concurrent"), knownvalue.Null()),
				plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("id"), knownvalue.StringExact("occ-acme/support")),
				plancheck.ExpectUnknownValue("occ_agent.a", tfjsonpath.New("status")),
			}},
		}},
	})
}

// TestAccAgent_UnknownInputsDeferToApply: a document unknown at plan defers
// admission; the plan succeeds with the revision unknown.
func TestAccAgent_UnknownInputsDeferToApply(t *testing.T) {
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `resource "terraform_data" "model" {}
` + agentConfig(testComputeK8s, `{ agents = { defaults = { model = "anthropic/${terraform_data.model.id}" } } }`, testSourceSecretRef, ""),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue("occ_agent.a", tfjsonpath.New("revision")),
				plancheck.ExpectUnknownValue("occ_agent.a", tfjsonpath.New("admitted_document")),
			}},
		}},
	})
}

// TestAccAgent_SSHApplyWithoutLoginWritesNothing: apply to an SSH compute
// without an SSH user says so before connecting: the plan's preflight,
// and with it off the apply, in the same words; nothing is written,
// nothing is kept in state.
func TestAccAgent_SSHApplyWithoutLoginWritesNothing(t *testing.T) {
	for preflight, ends := range map[string]string{"true": foundByPreflight, "false": `Nothing\s+was\s+written`} {
		t.Run("preflight="+preflight, func(t *testing.T) {
			t.Setenv(preflightEnv, preflight)
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      sshAgentConfig("127.0.0.1"),
					ExpectError: mustRegexp(`INVALID_REQUEST: cannot connect to SSH host 127.0.0.1:22[\s\S]*no SSH user[\s\S]*` + ends),
				}},
			})
		})
	}
}

const testComputeGateway = `
resource "occ_compute" "k" {
  name = "prod"
  kubernetes = {
    namespace          = "occ-acme"
    sandbox_driver     = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "p" }
    credential_gateway = { name = "keys" }
  }
}`

const testComputeCustomImage = `
resource "occ_compute" "k" {
  name = "prod"
  kubernetes = {
    namespace      = "occ-acme"
    runtime_image  = "registry.example/openclaw:custom"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "p" }
  }
}`

const testSourcePAT = `
resource "occ_credential_source" "s" {
  name       = "pat"
  compute    = occ_compute.k
  method     = "codex_pat"
  secret_ref = { name = "pat", key = "token" }
}`

// TestAccAgent_RuleFamiliesRefuseAtPlan: one refusal per rule family, with
// its code and the attribute it points at.
func TestAccAgent_RuleFamiliesRefuseAtPlan(t *testing.T) {
	cases := map[string]struct{ config, err string }{
		// rule HM1: codex has no embedded mode; HM2 made the omitted mode embedded.
		"HM1 codex embedded": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "codex/gpt-5-codex" } } }`, testSourceSecretRef, `harness = "codex"`),
			`INVALID_REQUEST: the codex harness has no embedded mode[\s\S]*Attribute execution_mode[\s\S]*Rule HM1`},
		// rule HM1: a harness the platform does not have.
		"HM1 unknown harness": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } }`, testSourceSecretRef, `harness = "claude"`),
			`INVALID_REQUEST: unsupported value "claude"[\s\S]*"openclaw", "codex"[\s\S]*rule HM1`},
		// rule MR5: openai needs an explicit runtime policy.
		"MR5 openai without policy": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "openai/gpt-5" } } }`, testSourceSecretRef, ""),
			`INVALID_REQUEST: openai/gpt-5 needs an explicit runtime policy[\s\S]*Attribute configuration[\s\S]*agents.defaults.model[\s\S]*Rule MR5`},
		// rule MR3: the agent's harness conflicts with the model's policy.
		"MR3 agent harness conflicts": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "openai/gpt-5", models = { "openai/gpt-5" = { agentRuntime = { id = "openclaw" } } } } } }`, testSourceSecretRef, `harness = "codex"
  execution_mode = "dedicated"`),
			`INVALID_REQUEST: runtime policies for openai/gpt-5 conflict[\s\S]*Rule MR3`},
		// rule MR6: dedicated Codex takes codex models.
		"MR6 dedicated codex with anthropic": {agentConfig(testComputeK8s, anthropicDoc, testSourceSecretRef, `harness = "codex"
  execution_mode = "dedicated"`),
			`INVALID_REQUEST: dedicated Codex accepts only the native codex provider[\s\S]*Rule MR6`},
		// rule AU4: with a credential gateway, Secret-backed methods conflict.
		"AU4 gateway and api_key": {agentConfig(testComputeGateway, `{ agents = { defaults = { model = "codex/gpt-5-codex" } } }`, testSourceSecretRef, `harness = "codex"
  execution_mode = "dedicated"`),
			`RESOURCE_CONFLICT: compute "prod" selects credential gateway "keys"[\s\S]*Attribute harness_auth.source[\s\S]*Rule AU4`},
		// rule AU2: codex_pat serves dedicated Codex only.
		"AU2 codex_pat on embedded": {agentConfig(testComputeK8s, anthropicDoc, testSourcePAT, ""),
			`INVALID_REQUEST: codex_pat authenticates dedicated Codex only[\s\S]*Rule AU2`},
		// rule AU1: embedded api_key needs an openai or anthropic primary.
		"AU1 api_key provider": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "mistral/mistral-large" } } }`, testSourceSecretRef, ""),
			`INVALID_REQUEST: embedded OpenClaw receives an api_key as OPENAI_API_KEY or ANTHROPIC_API_KEY[\s\S]*Rule AU1`},
		// rule ND6: dedicated OpenClaw cannot serve a turn, pinned image or
		// custom, whatever the driver: refused at execution_mode.
		"ND6 dedicated openclaw": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "openai/gpt-5" } } }`, testSourceSecretRef, `harness = "openclaw"
  execution_mode = "dedicated"`),
			`INVALID_REQUEST: dedicated OpenClaw cannot serve a turn[\s\S]*Attribute execution_mode[\s\S]*inference proxy[\s\S]*Rule ND6`},
		"ND6 dedicated openclaw on a custom image": {agentConfig(testComputeCustomImage, `{ agents = { defaults = { model = "openai/gpt-5" } } }`, testSourceSecretRef, `harness = "openclaw"
  execution_mode = "dedicated"`),
			`INVALID_REQUEST: dedicated OpenClaw cannot serve a turn[\s\S]*Attribute execution_mode[\s\S]*Rule ND6`},
		// rule AD3: a key the platform owns on Kubernetes is refused, naming
		// the key and the fix, at the configuration attribute.
		"AD3 user gateway.port on kubernetes": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }, gateway = { port = 8080 } }`, testSourceSecretRef, ""),
			`INVALID_REQUEST: the platform owns this key on Kubernetes[\s\S]*Attribute configuration[\s\S]*at gateway.port[\s\S]*remove gateway.port[\s\S]*18789\)[\s\S]*Rule AD3`},
		// rule AD3: a non-object where the platform's wiring goes is refused,
		// never skipped at render time.
		"AD3 gateway not an object": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }, gateway = "x" }`, testSourceSecretRef, ""),
			`INVALID_REQUEST: must be an object[\s\S]*Attribute configuration[\s\S]*at gateway: must be an[\s\S]*Rule AD3`},
		// rule AD1: the source must live in the agent's compute.
		"AD1 source of another compute": {testComputeK8s + `
resource "occ_compute" "other" {
  name       = "other"
  kubernetes = { namespace = "other" }
}
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(` + anthropicDoc + `)
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.other
  method     = "api_key"
  secret_ref = { name = "a", key = "b" }
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}`, `RESOURCE_CONFLICT: credential source "anthropic" lives in compute "other"[\s\S]*Rule AD1`},
		// rule MR5: credentials alone make a built-in provider explicitly configured.
		"MR5 apiKey alone without policy": {agentConfig(testComputeK8s, `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } }, models = { providers = { anthropic = { apiKey = "$${ANTHROPIC_API_KEY}" } } } }`, testSourceSecretRef, ""),
			`INVALID_REQUEST: anthropic/claude-sonnet-4-5 needs an explicit runtime policy[\s\S]*explicitly configured[\s\S]*Rule MR5`},
		// rules AU3, PR2: the codex_oauth source is refused, naming the fix.
		"AU3 codex_oauth": {agentConfig(testComputeGateway, `{ agents = { defaults = { model = "codex/gpt-5-codex" } } }`, `
resource "occ_credential_source" "s" {
  name        = "gw"
  method      = "credential_source"
  source_type = "codex_oauth"
}`, `harness = "codex"
  execution_mode = "dedicated"`),
			`INVALID_REQUEST: source_type "codex_oauth"[\s\S]*is not supported by this provider[\s\S]*source_type = "openai_api_key"[\s\S]*Rule AU3`},
		// rule AU6: an SSH host takes no secret bindings; the refusal names
		// the environment file the unit loads.
		"AU6 secret bindings on ssh": {`
resource "occ_compute" "k" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
}
resource "occ_configuration" "c" {
  name            = "support"
  document        = jsonencode({ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } })
  secret_bindings = { telegram = { secret = "tg-bot", key = "token" } }
}
resource "occ_credential_source" "s" {
  name             = "host"
  compute          = occ_compute.k
  method           = "runtime"
  environment_file = "/etc/occ/openclaw.env"
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}`, `RESOURCE_CONFLICT: the configuration has secret_bindings \(telegram\)[\s\S]*environment_file of the agent's runtime credential source[\s\S]*TELEGRAM=[\s\S]*Rule AU6`},
		// rule AU5 / SS1: an SSH compute runs embedded OpenClaw with runtime only.
		"HM1 dedicated on ssh": {`
resource "occ_compute" "k" {
  name = "edge"
  ssh  = { host = "10.0.0.5", host_key = "` + testHostKey + `" }
}
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode({ agents = { defaults = { model = "codex/gpt-5-codex" } } })
}
resource "occ_credential_source" "s" {
  name             = "host"
  compute          = occ_compute.k
  method           = "runtime"
  environment_file = "/etc/occ/openclaw.env"
}
resource "occ_agent" "a" {
  name           = "support"
  compute        = occ_compute.k
  configuration  = occ_configuration.c
  harness        = "codex"
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.s }
}`, `INVALID_REQUEST: codex dedicated runs on Kubernetes only[\s\S]*Rule HM1`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: tc.config, PlanOnly: true, ExpectError: mustRegexp(tc.err)}},
			})
		})
	}
}

// TestAccAgent_AcceptedTopologiesPlan: each supported topology plans.
// Admission alone: the preflight is off (its SSH host is no host of the
// test environment, never to be contacted).
func TestAccAgent_AcceptedTopologiesPlan(t *testing.T) {
	t.Setenv(preflightEnv, "false")
	cases := map[string]string{
		"dedicated codex with codex_pat": agentConfig(testComputeK8s, `{ agents = { defaults = { model = "codex/gpt-5-codex" } } }`, testSourcePAT, `harness = "codex"
  execution_mode = "dedicated"`),
		"dedicated codex behind the credential gateway": agentConfig(testComputeGateway, `{ agents = { defaults = { model = "codex/gpt-5-codex" } } }`, `
resource "occ_credential_source" "s" {
  name        = "gw"
  method      = "credential_source"
  source_type = "openai_api_key"
}`, `harness = "codex"
  execution_mode = "dedicated"`),
		"embedded openclaw on ssh": sshAgentConfig("10.0.0.5"),
		// rule MR3: without agents.defaults.model, the one entry's primary is the agent's.
		"embedded openclaw with only an entry's primary": agentConfig(testComputeK8s, `{ agents = { entries = { main = { model = "anthropic/claude-sonnet-4-5" } } } }`, testSourceSecretRef, ""),
	}
	for name, config := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{Config: config, PlanOnly: true, ExpectNonEmptyPlan: true,
					ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
						plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					}}}},
			})
		})
	}
}

// TestHM2_ExecutionModePlanModifier: the mode defaults to embedded on create
// and an update that omits it keeps the previous mode. // rule HM2
func TestHM2_ExecutionModePlanModifier(t *testing.T) {
	m := defaultOnCreateKeepOnUpdate{apply: admission.DefaultExecutionMode}
	plan := tfsdk.Plan{Raw: tftypes.NewValue(tftypes.Object{}, map[string]tftypes.Value{})}
	cases := []struct {
		name          string
		config, state types.String
		want          string
	}{
		{"create, omitted", types.StringNull(), types.StringNull(), "embedded"},
		{"update, omitted, keeps dedicated", types.StringNull(), types.StringValue("dedicated"), "dedicated"},
		{"update, set", types.StringValue("embedded"), types.StringValue("dedicated"), "embedded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := &planmodifier.StringResponse{PlanValue: types.StringUnknown()}
			if !tc.config.IsNull() {
				resp.PlanValue = tc.config
			}
			m.PlanModifyString(context.Background(), planmodifier.StringRequest{ConfigValue: tc.config, StateValue: tc.state, PlanValue: resp.PlanValue, Plan: plan}, resp)
			if got := resp.PlanValue.ValueString(); got != tc.want {
				t.Fatalf("planned mode = %q, want %q", got, tc.want)
			}
		})
	}
}

// The timeouts' descriptions write their defaults as users write them.
func TestAgentTimeouts_DefaultsAsWritten(t *testing.T) {
	for d, want := range map[time.Duration]string{15 * time.Minute: "15m", 10 * time.Minute: "10m", 90 * time.Second: "90s", 2 * time.Hour: "2h"} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%v) = %q, want %q", d, got, want)
		}
	}
}
