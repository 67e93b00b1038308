package admission

import (
	"fmt"
	"testing"
)

// rule PR11: on Kubernetes the primary provider's transport settings are
// literal metadata the startup probe reads as written; an environment or
// Secret reference there is refused, while the selected provider's
// ${OPENAI_API_KEY} alias stays allowed as the apiKey (any other variable
// is refused: TestPR11_ModelKeyReferences). SSH computes run no model probe.
func TestPR11_ProbeTransportIsLiteral(t *testing.T) {
	const custom = `{agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {%s, models: [{id: "gpt-5", name: "m"}]}}}}`
	doc := func(settings string) string { return fmt.Sprintf(custom, settings) }
	emb := func(settings string) Input {
		in := withDoc(k8sEmbeddedInput(), doc(settings))
		in.Agent.Harness = HarnessOpenClaw
		return in
	}
	tests := []admitCase{
		{"literal baseUrl and api, key from the environment", emb(`baseUrl: "https://llm.internal/v1", api: "openai-responses", apiKey: "${OPENAI_API_KEY}"`), nil},
		{"baseUrl from the environment", emb(`baseUrl: "${LLM_URL}", api: "openai-responses"`),
			&refusal{InvalidRequest, "PR11", attrConfig, "models.providers.openai.baseUrl"}},
		{"api from the environment", emb(`baseUrl: "https://llm.internal/v1", api: "${LLM_API}"`),
			&refusal{InvalidRequest, "PR11", attrConfig, "models.providers.openai.api"}},
		{"baseUrl as a SecretRef", emb(`baseUrl: {source: "env", provider: "default", id: "LLM_URL"}, api: "openai-responses"`),
			&refusal{InvalidRequest, "PR11", attrConfig, "models.providers.openai.baseUrl"}},
		{"another provider's settings are not probed", withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, models: {providers: {other: {baseUrl: "${X}", models: []}}}}`), nil},
	}
	runAdmitCases(t, tests)
}

// rule PR11, kept beyond embedded revisions on purpose: the platform words
// PR11 for the embedded probe, but a dedicated harness runs a native model
// probe before serving too (PR1 on the native node, PR2 for Codex) and
// reads its provider's transport settings as written, in an environment
// that holds only its model credential (secret bindings reach the gateway
// alone, AU6): a ${VAR} baseUrl or api would resolve to nothing there. So
// dedicated revisions are refused the same way, and their model key may
// refer only to the alias harness_auth fills.
func TestPR11_DedicatedRevisionsToo(t *testing.T) {
	codex := func(doc string) Input { return withDoc(dedicatedCodexInput(), doc) }
	tests := []admitCase{
		{"codex: literal baseUrl", codex(`{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {codex: {baseUrl: "https://llm.internal/v1"}}}}`), nil},
		{"codex: baseUrl from the environment", codex(`{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {codex: {baseUrl: "${LLM_URL}"}}}}`),
			&refusal{InvalidRequest, "PR11", attrConfig, "models.providers.codex.baseUrl"}},
	}
	runAdmitCases(t, tests)
}
