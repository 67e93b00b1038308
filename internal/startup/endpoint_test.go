package startup

import (
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// rules AU1, PR11: the probe reads the key from the configuration's apiKey
// (a literal or a ${VAR} reference), else from the variable admission
// delivers the primary provider's api_key in, chosen by the provider and
// never by its model API.
func TestAU1_ProbeKeyVariableByProvider(t *testing.T) {
	env := map[string]string{
		admission.EnvOpenAIAPIKey: "openai-key", admission.EnvAnthropicAPIKey: "anthropic-key", "PROXY_KEY": "proxy-key",
	}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name, doc, model string
		api, key         string
	}{
		{"openai default", `{}`, "openai/gpt-5", APIResponses, "openai-key"},
		{"anthropic default", `{}`, "anthropic/claude-sonnet-4-5", APIMessages, "anthropic-key"},
		{"openai provider speaking messages", `{models: {providers: {openai: {baseUrl: "https://llm.example", api: "anthropic-messages"}}}}`,
			"openai/gpt-5", APIMessages, "openai-key"},
		{"anthropic provider speaking completions", `{models: {providers: {anthropic: {baseUrl: "https://llm.example/v1", api: "openai-completions"}}}}`,
			"anthropic/claude-sonnet-4-5", APICompletions, "anthropic-key"},
		{"compatible provider", `{models: {providers: {"openai-compatible": {baseUrl: "https://llm.example/v1"}}}}`,
			"openai-compatible/vendor/m", APICompletions, "openai-key"},
		{"apiKey reference wins", `{models: {providers: {openai: {apiKey: "${PROXY_KEY}"}}}}`, "openai/gpt-5", APIResponses, "proxy-key"},
		{"literal apiKey wins", `{models: {providers: {anthropic: {apiKey: "literal"}}}}`, "anthropic/claude-sonnet-4-5", APIMessages, "literal"},
		{"a provider without an alias gets no variable", `{models: {providers: {local: {baseUrl: "https://llm.example/v1"}}}}`,
			"local/m", APICompletions, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := occconfig.Parse(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			ep, err := ResolveEndpoint(doc, tc.model, getenv, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ep.API != tc.api || ep.Key != tc.key {
				t.Errorf("endpoint api %q key %q, want %q %q", ep.API, ep.Key, tc.api, tc.key)
			}
		})
	}
}

// rule AU1: what the wrapper reads is what admission delivered: for every
// embedded api_key revision admission admits, the probe's key comes from
// the delivery's variable.
func TestAU1_ProbeReadsTheAdmittedDelivery(t *testing.T) {
	for _, model := range []string{"openai/gpt-5", "anthropic/claude-sonnet-4-5", "codex/gpt-5-codex"} {
		doc, _ := occconfig.Parse(`{agents: {defaults: {model: "` + model + `"}}}`)
		rev, errs := admission.Admit(admission.Input{
			Agent:         admission.Agent{Name: "a", Harness: admission.HarnessOpenClaw},
			Configuration: admission.Configuration{ID: "c", Document: doc},
			Compute:       admission.Compute{ID: "k", Name: "k", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "ns"}},
			Source:        admission.CredentialSource{ID: "s", Method: admission.MethodAPIKey, ComputeID: "k", SecretRef: &admission.SecretRef{Name: "s", Key: "k"}},
		})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", model, errs)
		}
		env := map[string]string{rev.Credential.EnvVar: "delivered"}
		ep, err := ResolveEndpoint(rev.GatewayDocument, rev.Probe.Model, func(k string) string { return env[k] }, map[string]string{"codex": "https://llm.example/v1"})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if ep.Key != "delivered" {
			t.Errorf("%s: delivered in %s, the probe read another variable", model, rev.Credential.EnvVar)
		}
	}
	if LoginAPIKey != admission.LoginAPIKeyStdin || LoginPAT != admission.LoginCodexPAT {
		t.Errorf("login modes %q %q are not admission's", LoginAPIKey, LoginPAT)
	}
}
