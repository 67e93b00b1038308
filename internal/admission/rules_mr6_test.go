package admission

import "testing"

// rule MR6: what dedicated Codex cannot honour of the selected provider is
// refused at plan, at the key, so that no admitted topology fails its
// turns and the key never goes to a host the document did not name. Found
// on the real runtimes: OpenClaw 2026.9.6 routes an openai model at a
// baseUrl of its own to its own runtime, never to Codex (the dedicated
// gateway has no key), and its Codex harness refuses a provider with
// request transport overrides.
func TestMR6_DedicatedCodexCannotHonour(t *testing.T) {
	const plugin = `plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "websocket"}}}}}, `
	tests := []struct {
		name string
		doc  string
		want *refusal
	}{
		{"openai at OpenAI", `{` + plugin + `agents: {defaults: {model: "openai/gpt-5"}}}`, nil},
		{"codex at a compatible endpoint", `{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {codex: {baseUrl: "https://llm.example/v1", models: [{id: "gpt-5-codex", name: "m"}]}}}}`, nil},
		{"openai at an endpoint of its own", `{` + plugin + `agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {baseUrl: "https://llm.example/v1", models: [{id: "gpt-5", name: "m"}]}}}}`,
			&refusal{InvalidRequest, "MR6", attrConfig, "models.providers.openai.baseUrl"}},
		{"codex with headers", `{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {codex: {baseUrl: "https://llm.example/v1", headers: {"x-team": "a"}, models: [{id: "gpt-5-codex", name: "m"}]}}}}`,
			&refusal{InvalidRequest, "MR6", attrConfig, "models.providers.codex.headers"}},
		{"openai with a request timeout", `{` + plugin + `agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {timeoutSeconds: 30, models: [{id: "gpt-5", name: "m"}]}}}}`,
			&refusal{InvalidRequest, "MR6", attrConfig, "models.providers.openai.timeoutSeconds"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Admit(withDoc(dedicatedCodexInput(), tc.doc))
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}
	// An embedded OpenClaw agent runs its own provider entry as written.
	emb := withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {baseUrl: "https://llm.example/v1", headers: {"x-team": "a"}, models: [{id: "gpt-5", name: "m"}]}}}}`)
	emb.Agent.Harness = HarnessOpenClaw
	admitOK(t, emb)
}
