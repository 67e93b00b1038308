package admission

import (
	"slices"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// withDoc returns in with its Configuration document replaced.
func withDoc(in Input, src string) Input {
	in.Configuration.Document = mustDoc(src)
	return in
}

// rule MR1
func TestMR1_ModelRefParsing(t *testing.T) {
	ok := []struct {
		in, provider, model string
	}{
		{"openai/gpt-5", "openai", "gpt-5"},
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{"openai/vendor/model", "openai", "vendor/model"},
		{"codex/vendor/org/model", "codex", "vendor/org/model"},
		{"z.ai/glm-4.6", "z.ai", "glm-4.6"},
		{"openrouter/meta-llama/llama-3.1-405b:free", "openrouter", "meta-llama/llama-3.1-405b:free"},
	}
	for _, tc := range ok {
		ref, err := ParseModelRef(tc.in)
		if err != nil || ref.Provider != tc.provider || ref.Model != tc.model {
			t.Errorf("ParseModelRef(%q) = %+v, %v; want %s + %s", tc.in, ref, err, tc.provider, tc.model)
			continue
		}
		if ref.String() != tc.in {
			t.Errorf("String() = %q, want %q", ref.String(), tc.in)
		}
	}
	bad := []string{"", "gpt-5", "/gpt-5", "openai/", "/", "//", "openai//gpt-5", "openai/gpt-5/", "openai/a//b",
		"openai/ gpt-5", " openai/gpt-5", "openai/gpt-5\n", "open ai/gpt-5"}
	for _, s := range bad {
		if ref, err := ParseModelRef(s); err == nil {
			t.Errorf("ParseModelRef(%q) = %+v, want an error", s, ref)
		}
	}

	// Through Admit: the fault points into the configuration document.
	tests := []struct {
		name string
		doc  string
		want *refusal
	}{
		{"string primary", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, nil},
		{"object primary", `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5"}}}}`, nil},
		{"id with slashes", `{agents: {defaults: {model: {primary: "anthropic/vendor/claude", fallbacks: ["anthropic/a/b"]}}}}`, nil},
		{"no provider", `{agents: {defaults: {model: "claude-sonnet-4-5"}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model"}},
		{"empty model id", `{agents: {defaults: {model: "anthropic/"}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model"}},
		{"empty segment", `{agents: {defaults: {model: {primary: "anthropic/a//b"}}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model.primary"}},
		{"not a string", `{agents: {defaults: {model: 5}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model"}},
		{"fallback not a string", `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: [1]}}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model.fallbacks[0]"}},
		{"fallbacks not an array", `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: "anthropic/x"}}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model.fallbacks"}},
		{"bad entry model", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {model: "nope"}}}}`, &refusal{InvalidRequest, "MR1", attrConfig, "agents.entries.main.model"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(withDoc(k8sEmbeddedInput(), tc.doc))
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.PrimaryModel == nil || rev.PrimaryModel.Provider != "anthropic" {
					t.Errorf("primary = %+v", rev.PrimaryModel)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}
}

// rule MR1
//
// FuzzParseModelRef: never panics; on success the provider has no slash,
// provider + "/" + model is the input, and no segment is empty.
func FuzzParseModelRef(f *testing.F) {
	for _, s := range []string{
		"openai/gpt-5", "openai/vendor/model", "codex/vendor/org/model", "codex/openai-compatible/vendor/org/model",
		"", "/", "//", "gpt-5", "/gpt-5", "openai/", "openai//x", "openai/x/", "a/b/c/d/e/f",
		"open ai/x", "openai/x\u00a0y", "é/ü", "\xff/\xfe", "z.ai/glm-4.6", "openrouter/meta-llama/llama-3.1:free",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseModelRef(s)
		if err != nil {
			if ref != (ModelRef{}) {
				t.Fatalf("ParseModelRef(%q) returned %+v with error %v", s, ref, err)
			}
			return
		}
		if ref.Provider == "" || ref.Model == "" {
			t.Fatalf("ParseModelRef(%q) = %+v: empty part", s, ref)
		}
		for _, r := range ref.Provider {
			if r == '/' {
				t.Fatalf("provider %q contains a slash", ref.Provider)
			}
		}
		if ref.Provider+"/"+ref.Model != s || ref.String() != s {
			t.Fatalf("ParseModelRef(%q) = %+v does not round-trip", s, ref)
		}
		start := 0
		for i := 0; i <= len(ref.Model); i++ {
			if i == len(ref.Model) || ref.Model[i] == '/' {
				if i == start {
					t.Fatalf("ParseModelRef(%q): empty segment in %q", s, ref.Model)
				}
				start = i + 1
			}
		}
	})
}

// rule MR2
func TestMR2_CatalogIDWithOrWithoutPrefix(t *testing.T) {
	norm := []struct{ provider, id, want string }{
		{"codex", "codex/gpt-5-codex", "gpt-5-codex"},
		{"codex", "gpt-5-codex", "gpt-5-codex"},
		{"openai", "openai/vendor/model", "vendor/model"},
		{"openai", "vendor/model", "vendor/model"},
		{"codex", "openai/gpt-5", "openai/gpt-5"}, // only the provider's own prefix is removed
		{"codex", "codex/codex/x", "codex/x"},     // only once
	}
	for _, tc := range norm {
		if got := NormalizeCatalogID(tc.provider, tc.id); got != tc.want {
			t.Errorf("NormalizeCatalogID(%q, %q) = %q, want %q", tc.provider, tc.id, got, tc.want)
		}
	}

	// A catalog key (or provider model id) names the primary with or
	// without its prefix; the runtime policy found there selects the harness.
	noHarness := func(doc string) Input {
		in := withDoc(dedicatedCodexInput(), doc)
		in.Agent.Harness = ""
		return in
	}
	tests := []struct {
		name string
		in   Input
		want *refusal
	}{
		{"catalog key with prefix", noHarness(`{agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "codex"}}}}}}`), nil},
		{"catalog key without prefix", noHarness(`{agents: {defaults: {model: "codex/gpt-5-codex", models: {"gpt-5-codex": {agentRuntime: {id: "codex"}}}}}}`), nil},
		{"entry catalog key without prefix", noHarness(`{agents: {defaults: {model: "codex/gpt-5-codex"}, entries: {main: {models: {"gpt-5-codex": {agentRuntime: {id: "codex"}}}}}}}`), nil},
		{"provider model id with and without prefix", noHarness(`{models: {providers: {codex: {models: [{id: "gpt-5-codex", agentRuntime: {id: "codex"}}, {id: "codex/gpt-5-mini", agentRuntime: {id: "codex"}}]}}},
			agents: {defaults: {model: {primary: "codex/gpt-5-codex", fallbacks: ["codex/gpt-5-mini"]}}}}`), nil},
		{"id with slashes without prefix", noHarness(`{agents: {defaults: {model: "codex/vendor/org/model", models: {"vendor/org/model": {agentRuntime: {id: "codex"}}}}}}`), nil},
		// Refused: a foreign prefix is not stripped, so the entry names another model.
		{"provider model id with a foreign prefix", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{id: "openai/gpt-5-codex"}]}}}, agents: {defaults: {model: "codex/gpt-5-codex"}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "models.providers.codex.models[0].id"}},
		// Refused: a near-miss key is not the primary, so no policy applies and codex needs one.
		{"catalog key not matching", noHarness(`{agents: {defaults: {model: "codex/gpt-5-codex", models: {"gpt-5-codex-mini": {agentRuntime: {id: "codex"}}}}}}`),
			&refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.Harness != HarnessCodex {
					t.Errorf("harness = %q, want codex", rev.Harness)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}
}

// rule MR3
func TestMR3_RuntimePolicyConflicts(t *testing.T) {
	const codexPolicies = `{models: {providers: {codex: {agentRuntime: {id: "codex"}}}},
		agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "codex"}}}}}}`
	noHarness := func(in Input) Input { in.Agent.Harness = ""; return in }
	tests := []struct {
		name        string
		in          Input
		wantHarness string
		want        *refusal
	}{
		{"provider and model agree", noHarness(withDoc(dedicatedCodexInput(), codexPolicies)), HarnessCodex, nil},
		{"agent harness agrees with document", withDoc(dedicatedCodexInput(), codexPolicies), HarnessCodex, nil},
		// rule MR3: the platform names only openclaw and codex; upstream's
		// aliases are refused with the id to write instead.
		{"upstream alias codex-app-server is refused", noHarness(withDoc(dedicatedCodexInput(), `{agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "codex-app-server"}}}}}}`)),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.defaults.models["codex/gpt-5-codex"].agentRuntime.id`}},
		{"upstream alias pi is refused", withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "openai/gpt-5", models: {"openai/gpt-5": {agentRuntime: {id: "pi"}}}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.defaults.models["openai/gpt-5"].agentRuntime.id`}},
		{"upstream auto is refused", withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-sonnet-4-5": {agentRuntime: {id: "auto"}}}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.defaults.models["anthropic/claude-sonnet-4-5"].agentRuntime.id`}},
		{"upstream default is refused on a provider", withDoc(k8sEmbeddedInput(), `{models: {providers: {anthropic: {agentRuntime: {id: "default"}}}}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, "models.providers.anthropic.agentRuntime.id"}},
		{"entry repeats the primary", withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {model: "anthropic/claude-sonnet-4-5"}}}}`), HarnessOpenClaw, nil},
		{"provider vs model conflict",
			noHarness(withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {agentRuntime: {id: "codex"}}}}, agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "openclaw"}}}}}}`)),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.defaults.models["codex/gpt-5-codex"].agentRuntime.id`}},
		{"entry catalog vs defaults catalog conflict",
			noHarness(withDoc(dedicatedCodexInput(), `{agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "codex"}}}}, entries: {main: {models: {"gpt-5-codex": {agentRuntime: {id: "openclaw"}}}}}}}`)),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.entries.main.models["gpt-5-codex"].agentRuntime.id`}},
		{"agent harness vs document policy",
			func() Input {
				in := withDoc(dedicatedCodexInput(), codexPolicies)
				in.Agent.Harness, in.Agent.ExecutionMode = HarnessOpenClaw, ModeEmbedded
				return in
			}(),
			"", &refusal{InvalidRequest, "MR3", attrHarness, "models.providers.codex.agentRuntime.id"}},
		{"unsupported runtime id",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-sonnet-4-5": {agentRuntime: {id: "claude-code"}}}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.defaults.models["anthropic/claude-sonnet-4-5"].agentRuntime.id`}},
		{"unsupported provider runtime id",
			withDoc(k8sEmbeddedInput(), `{models: {providers: {anthropic: {agentRuntime: {id: 7}}}}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, "models.providers.anthropic.agentRuntime.id"}},
		{"agentRuntime not an object",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-sonnet-4-5": {agentRuntime: "codex"}}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, `agents.defaults.models["anthropic/claude-sonnet-4-5"].agentRuntime`}},
		{"legacy defaults agentRuntime is no policy (ignored upstream)",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", agentRuntime: {id: "codex"}}}}`),
			HarnessOpenClaw, nil},
		{"credentials alone make a built-in provider explicitly configured (MR5)",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, models: {providers: {anthropic: {apiKey: "${ANTHROPIC_API_KEY}"}}}}`),
			"", &refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
		{"a built-in provider with its own endpoint is custom",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, models: {providers: {anthropic: {baseUrl: "https://llm.example/v1"}}}}`),
			"", &refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
		{"entry selects another primary",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {model: "anthropic/claude-opus-4-1"}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, "agents.entries.main.model"}},
		// rule MR3: without agents.defaults.model, the entries' own primary
		// is the Agent's when every entry selects the same one.
		{"entry primary without defaults primary",
			withDoc(k8sEmbeddedInput(), `{agents: {entries: {main: {model: {primary: "anthropic/claude-sonnet-4-5"}}}}}`),
			HarnessOpenClaw, nil},
		{"entries agree without defaults primary",
			withDoc(k8sEmbeddedInput(), `{agents: {ownership: "explicit", entries: {main: {model: "anthropic/claude-sonnet-4-5"}, ops: {model: {primary: "anthropic/claude-sonnet-4-5"}}}}}`),
			HarnessOpenClaw, nil},
		{"entries disagree without defaults primary",
			withDoc(k8sEmbeddedInput(), `{agents: {ownership: "explicit", entries: {main: {model: "anthropic/claude-sonnet-4-5"}, ops: {model: "anthropic/claude-opus-4-1"}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, "agents.entries.ops.model"}},
		{"an entry without a model beside one with, without defaults primary",
			withDoc(k8sEmbeddedInput(), `{agents: {ownership: "explicit", entries: {main: {model: "anthropic/claude-sonnet-4-5"}, ops: {}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, "agents.entries.ops"}},
		{"fallbacks without primary",
			withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: {fallbacks: ["anthropic/claude-sonnet-4-5"]}}}}`),
			"", &refusal{InvalidRequest, "MR3", attrConfig, "agents.defaults.model"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.Harness != tc.wantHarness {
					t.Errorf("harness = %q, want %q", rev.Harness, tc.wantHarness)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}

	// The legacy key is removed from the revision, with advice.
	legacy := withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", agentRuntime: {id: "codex"}}}}`)
	rev, errs := Admit(legacy)
	if len(errs) > 0 {
		t.Fatalf("legacy key refused: %v", errs)
	}
	if _, ok := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("agents", "defaults", "agentRuntime")); ok {
		t.Error("agents.defaults.agentRuntime kept in the admitted document")
	}
	if len(rev.Warnings) != 1 || rev.Warnings[0].Rule != "MR3" {
		t.Errorf("warnings = %+v, want one MR3 advice", rev.Warnings)
	}

	// Save time: CheckDocument reports document-only conflicts without an Agent.
	errs = CheckDocument(mustDoc(`{models: {providers: {codex: {agentRuntime: {id: "codex"}}}}, agents: {defaults: {model: "codex/gpt-5-codex", models: {"gpt-5-codex": {agentRuntime: {id: "openclaw"}}}}}}`))
	if len(errs) != 1 || errs[0].Rule != "MR3" || errs[0].DocPath.String() != `agents.defaults.models["gpt-5-codex"].agentRuntime.id` {
		t.Errorf("CheckDocument conflict = %v", errs)
	}
	if errs := CheckDocument(mustDoc(codexPolicies)); len(errs) != 0 {
		t.Errorf("CheckDocument(agreeing policies) = %v", errs)
	}
}

// rule MR4
func TestMR4_CustomEndpointRewriteGatewayOnly(t *testing.T) {
	const custom = `{
		models: {providers: {codex: {baseUrl: "https://llm.internal.example/v1",
			models: [{id: "vendor/org/model", contextWindow: 200000}, {id: "codex/vendor/org/fallback"}]}}},
		agents: {defaults: {
			model: {primary: "codex/vendor/org/model", fallbacks: ["codex/vendor/org/fallback", "codex/openai-compatible/already"]},
			models: {"codex/vendor/org/model": {alias: "main", agentRuntime: {id: "codex"}}},
		}},
	}`
	in := withDoc(dedicatedCodexInput(), custom)
	stored := canon(in.Configuration.Document)
	rev := admitOK(t, in)

	gw := rev.GatewayDocument
	checks := []struct {
		path occconfig.Path
		want string
	}{
		{occconfig.Keys("agents", "defaults", "model", "primary"), `"codex/openai-compatible/vendor/org/model"`},
		{occconfig.Keys("agents", "defaults", "model", "fallbacks"), `["codex/openai-compatible/vendor/org/fallback","codex/openai-compatible/already"]`},
		{occconfig.Keys("agents", "defaults", "models"), `{"codex/openai-compatible/vendor/org/model":{"agentRuntime":{"id":"codex"},"alias":"main"}}`},
		{occconfig.Keys("models", "providers", "codex", "models"), `[{"contextWindow":200000,"id":"openai-compatible/vendor/org/model"},{"id":"openai-compatible/vendor/org/fallback"}]`},
		{occconfig.Keys("models", "providers", "codex", "baseUrl"), `"https://llm.internal.example/v1"`},
	}
	for _, c := range checks {
		got, _ := occconfig.Lookup(gw, c.path)
		if canon(got) != c.want {
			t.Errorf("gateway %s = %s, want %s", c.path, canon(got), c.want)
		}
	}
	// Not rewritten: the stored configuration, the revision's record of it, the probe model.
	if canon(in.Configuration.Document) != stored {
		t.Errorf("stored configuration changed: %s", canon(in.Configuration.Document))
	}
	if p, _ := occconfig.String(rev.AdmittedDocument, occconfig.Keys("agents", "defaults", "model", "primary")); p != "codex/vendor/org/model" {
		t.Errorf("admitted primary = %q, want the stored reference", p)
	}
	if m := occconfig.Object(rev.AdmittedDocument, occconfig.Keys("agents", "defaults", "models")); m["codex/vendor/org/model"] == nil {
		t.Errorf("admitted catalog was rewritten: %v", m)
	}
	if rev.Probe.Model != "codex/vendor/org/model" {
		t.Errorf("probe model = %q, want codex/vendor/org/model", rev.Probe.Model)
	}
	if rev.PrimaryModel.String() != "codex/vendor/org/model" {
		t.Errorf("primary = %s", rev.PrimaryModel)
	}
	wantFallbacks := []ModelRef{{"codex", "vendor/org/fallback"}, {"codex", "openai-compatible/already"}}
	if !slices.Equal(rev.Fallbacks, wantFallbacks) {
		t.Errorf("fallbacks = %v, want %v", rev.Fallbacks, wantFallbacks)
	}
	if rev.Probe.Transport != "responses-https" {
		t.Errorf("probe transport = %q, want responses-https", rev.Probe.Transport)
	}

	// Without a custom endpoint the gateway document is the admitted one.
	plain := admitOK(t, dedicatedCodexInput())
	if canon(plain.GatewayDocument) != canon(plain.AdmittedDocument) {
		t.Errorf("gateway document differs without a custom endpoint:\n%s\n%s", canon(plain.GatewayDocument), canon(plain.AdmittedDocument))
	}
	if plain.Probe.Transport != "responses-websocket" {
		t.Errorf("transport = %q, want responses-websocket", plain.Probe.Transport)
	}

	for in, want := range map[string]string{
		"codex/vendor/org/model":                   "codex/openai-compatible/vendor/org/model",
		"codex/gpt-5-codex":                        "codex/openai-compatible/gpt-5-codex",
		"codex/openai-compatible/vendor/org/model": "codex/openai-compatible/vendor/org/model",
		"openai/vendor/org/model":                  "openai/vendor/org/model",
		"codexx/model":                             "codexx/model",
	} {
		if got := rewriteCodexRef(in); got != want {
			t.Errorf("rewriteCodexRef(%q) = %q, want %q", in, got, want)
		}
	}

	// Refused side: the rewrite does not widen what the models array may hold.
	extra := withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {baseUrl: "https://llm.internal.example/v1",
		models: [{id: "vendor/org/model"}, {id: "vendor/org/other"}]}}}, agents: {defaults: {model: "codex/vendor/org/model"}}}`)
	_, errs := Admit(extra)
	checkRefusal(t, errs, refusal{InvalidRequest, "MR8", attrConfig, "models.providers.codex.models[1].id"})
}

// rule MR5
func TestMR5_Resolver(t *testing.T) {
	tests := []struct {
		name         string
		doc          string
		harness      string
		wantHarness  string
		wantExplicit bool
		wantErr      string // DocPath of an MR5 refusal
	}{
		{"no model candidate", `{}`, "", HarnessOpenClaw, false, ""},
		{"no model candidate, agent policy", `{}`, HarnessCodex, HarnessCodex, true, ""},
		{"built-in anthropic", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "", HarnessOpenClaw, false, ""},
		{"built-in google", `{agents: {defaults: {model: "google/gemini-2.5-pro"}}}`, "", HarnessOpenClaw, false, ""},
		{"built-in, agent policy", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, HarnessOpenClaw, HarnessOpenClaw, true, ""},
		{"openai with agent policy", `{agents: {defaults: {model: "openai/gpt-5"}}}`, HarnessOpenClaw, HarnessOpenClaw, true, ""},
		{"openai with provider policy", `{models: {providers: {openai: {agentRuntime: {id: "openclaw"}}}}, agents: {defaults: {model: "openai/gpt-5"}}}`, "", HarnessOpenClaw, true, ""},
		{"plugin disabled is not routing", `{plugins: {entries: {anthropic: {enabled: false}}}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "", HarnessOpenClaw, false, ""},
		{"openai without policy", `{agents: {defaults: {model: "openai/gpt-5"}}}`, "", "", false, "agents.defaults.model"},
		{"codex without policy", `{agents: {defaults: {model: {primary: "codex/gpt-5-codex"}}}}`, "", "", false, "agents.defaults.model.primary"},
		{"configured built-in provider", `{models: {providers: {anthropic: {baseUrl: "https://proxy.example/v1"}}}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "", "", false, "agents.defaults.model"},
		{"custom provider", `{models: {providers: {acme: {baseUrl: "https://acme.example/v1", models: [{id: "m1"}]}}}, agents: {defaults: {model: "acme/m1"}}}`, "", "", false, "agents.defaults.model"},
		{"plugin-routed provider", `{plugins: {entries: {anthropic: {enabled: true}}}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "", "", false, "agents.defaults.model"},
		{"codex plugin routes openai", `{plugins: {entries: {codex: {}}}, agents: {defaults: {model: "openai/gpt-5"}}}`, "", "", false, "agents.defaults.model"},
		{"unknown provider", `{agents: {defaults: {model: "acme/m1"}}}`, "", "", false, "agents.defaults.model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, errs := Resolve(mustDoc(tc.doc), tc.harness)
			if tc.wantErr != "" {
				if res.Harness != "" {
					t.Errorf("harness = %q, want none", res.Harness)
				}
				if len(errs) != 1 || errs[0].Rule != "MR5" || errs[0].Class != InvalidRequest || errs[0].DocPath.String() != tc.wantErr {
					t.Fatalf("errs = %v, want one INVALID_REQUEST MR5 at %s", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("errs = %v", errs)
			}
			if res.Harness != tc.wantHarness || res.Explicit != tc.wantExplicit {
				t.Errorf("Resolve = %s explicit=%v, want %s explicit=%v", res.Harness, res.Explicit, tc.wantHarness, tc.wantExplicit)
			}
		})
	}

	// Through Admit: the refusal is INVALID_REQUEST on the configuration.
	_, errs := Admit(withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "openai/gpt-5"}}}`))
	checkRefusal(t, errs, refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"})
	// A provider OpenClaw does not know must be declared with baseUrl and models.
	_, errs = Admit(withDoc(k8sEmbeddedInput(), `{models: {providers: {acme: {agentRuntime: {id: "openclaw"}}}}, agents: {defaults: {model: "acme/m1"}}}`))
	checkRefusal(t, errs, refusal{InvalidRequest, "MR5", attrConfig, "models.providers.acme"})
	// The agent's own harness is the policy that makes openai admissible.
	in := withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "openai/gpt-5"}}}`)
	in.Agent.Harness = HarnessOpenClaw
	if rev := admitOK(t, in); rev.Harness != HarnessOpenClaw || rev.Credential.EnvVar != "OPENAI_API_KEY" {
		t.Errorf("revision = %s %s", rev.Harness, rev.Credential.EnvVar)
	}
}

// rule MR6
func TestMR6_DedicatedCodexProviders(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want *refusal
	}{
		{"native codex provider", `{agents: {defaults: {model: "codex/gpt-5-codex"}}}`, nil},
		{"openai with codex plugin websocket", `{plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "websocket"}}}}}, agents: {defaults: {model: "openai/gpt-5"}}}`, nil},
		{"openai without plugin", `{agents: {defaults: {model: "openai/gpt-5"}}}`, &refusal{InvalidRequest, "MR6", attrConfig, "agents.defaults.model"}},
		{"openai with plugin on stdio", `{plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "stdio"}}}}}, agents: {defaults: {model: "openai/gpt-5"}}}`, &refusal{InvalidRequest, "MR6", attrConfig, "agents.defaults.model"}},
		{"openai with plugin not explicitly enabled", `{plugins: {entries: {codex: {config: {appServer: {transport: "websocket"}}}}}, agents: {defaults: {model: "openai/gpt-5"}}}`, &refusal{InvalidRequest, "MR6", attrConfig, "agents.defaults.model"}},
		{"openai with plugin disabled", `{plugins: {entries: {codex: {enabled: false, config: {appServer: {transport: "websocket"}}}}}, agents: {defaults: {model: "openai/gpt-5"}}}`, &refusal{InvalidRequest, "MR6", attrConfig, "agents.defaults.model"}},
		{"anthropic", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, &refusal{InvalidRequest, "MR6", attrConfig, "agents.defaults.model"}},
		{"no primary model to probe", `{}`, &refusal{InvalidRequest, "PR2", attrConfig, "agents.defaults.model"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(withDoc(dedicatedCodexInput(), tc.doc))
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.Harness != HarnessCodex || rev.ExecutionMode != ModeDedicated {
					t.Errorf("revision = %s %s", rev.Harness, rev.ExecutionMode)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
		})
	}
	// MR6 is a dedicated-Codex rule: embedded OpenClaw may run openai without the plugin.
	admitOK(t, embeddedWithModel(openaiModel))
}

// rule MR8
func TestMR8_CatalogsAndFallbacks(t *testing.T) {
	emb := k8sEmbeddedInput
	codexNoHarness := func(doc string) Input {
		in := withDoc(dedicatedCodexInput(), doc)
		in.Agent.Harness = ""
		return in
	}
	tests := []admitCase{
		{"fallbacks keep the provider", withDoc(emb(), `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1"]}}}}`), nil},
		{"extra catalog model with matching runtime", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-opus-4-1": {agentRuntime: {id: "openclaw"}}}}}}`), nil},
		{"extra catalog model with provider runtime", withDoc(emb(), `{models: {providers: {anthropic: {agentRuntime: {id: "openclaw"}}}}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"claude-opus-4-1": {}}}}}`), nil},
		{"catalog holding the primary and a fallback", withDoc(emb(), `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1"]}, models: {"anthropic/claude-sonnet-4-5": {alias: "s"}, "claude-opus-4-1": {alias: "o"}}}}}`), nil},
		{"models array with primary and fallback", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{id: "codex/gpt-5-codex"}, {id: "gpt-5-mini"}]}}}, agents: {defaults: {model: {primary: "codex/gpt-5-codex", fallbacks: ["codex/gpt-5-mini"]}}}}`), nil},
		{"fallback leaves the provider", withDoc(emb(), `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1", "openai/gpt-5"]}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "agents.defaults.model.fallbacks[1]"}},
		{"catalog leaves the provider", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"openai/gpt-5": {}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, `agents.defaults.models["openai/gpt-5"]`}},
		{"entry catalog leaves the provider", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {models: {"google/gemini-2.5-pro": {}}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, `agents.entries.main.models["google/gemini-2.5-pro"]`}},
		{"extra catalog model without runtime", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-opus-4-1": {alias: "opus"}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, `agents.defaults.models["anthropic/claude-opus-4-1"]`}},
		{"extra entry catalog model without runtime", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {models: {"claude-opus-4-1": {}}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, `agents.entries.main.models["claude-opus-4-1"]`}},
		{"extra catalog model with another runtime", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-opus-4-1": {agentRuntime: {id: "codex"}}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, `agents.defaults.models["anthropic/claude-opus-4-1"]`}},
		{"fallback resolves to another harness", codexNoHarness(`{agents: {defaults: {model: {primary: "codex/a", fallbacks: ["codex/b"]}, models: {"codex/a": {agentRuntime: {id: "codex"}}, "codex/b": {agentRuntime: {id: "openclaw"}}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "agents.defaults.model.fallbacks[0]"}},
		{"fallback without a policy of its own", codexNoHarness(`{agents: {defaults: {model: {primary: "codex/a", fallbacks: ["codex/b"]}, models: {"codex/a": {agentRuntime: {id: "codex"}}}}}}`),
			&refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model.fallbacks[0]"}},
		{"entry fallbacks keep the provider", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1"]}}}}}`), nil},
		{"entry fallback leaves the provider", withDoc(emb(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["openai/gpt-5"]}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "agents.entries.main.model.fallbacks[0]"}},
		{"entry fallback resolves to another harness", codexNoHarness(`{agents: {defaults: {model: "codex/a", models: {"codex/a": {agentRuntime: {id: "codex"}}, "codex/b": {agentRuntime: {id: "openclaw"}}}}, entries: {main: {model: {primary: "codex/a", fallbacks: ["codex/b"]}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "agents.entries.main.model.fallbacks[0]"}},
		{"models array beyond primary and fallbacks", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{id: "gpt-5-codex"}, {id: "gpt-5-mini"}]}}}, agents: {defaults: {model: "codex/gpt-5-codex"}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "models.providers.codex.models[1].id"}},
		// MR8: "a provider's models array may hold only the resolved
		// primary and fallback models", fallbacks of defaults or entries.
		{"models array with an entry's fallback", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{id: "gpt-5-codex"}, {id: "codex/gpt-5-mini"}]}}}, agents: {defaults: {model: "codex/gpt-5-codex"}, entries: {main: {model: {primary: "codex/gpt-5-codex", fallbacks: ["codex/gpt-5-mini"]}}}}}`), nil},
		{"models array with an entry's fallback, id without prefix", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{id: "gpt-5-mini"}]}}}, agents: {defaults: {model: "codex/gpt-5-codex"}, entries: {main: {model: {primary: "codex/gpt-5-codex", fallbacks: ["codex/gpt-5-mini"]}}}}}`), nil},
		{"models array beyond the entry's fallbacks", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{id: "gpt-5-mini"}, {id: "gpt-5-nano"}]}}}, agents: {defaults: {model: "codex/gpt-5-codex"}, entries: {main: {model: {primary: "codex/gpt-5-codex", fallbacks: ["codex/gpt-5-mini"]}}}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "models.providers.codex.models[1].id"}},
		{"models array entry without id", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: [{name: "x"}]}}}, agents: {defaults: {model: "codex/gpt-5-codex"}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "models.providers.codex.models[0].id"}},
		{"models not an array", withDoc(dedicatedCodexInput(), `{models: {providers: {codex: {models: {id: "gpt-5-codex"}}}}, agents: {defaults: {model: "codex/gpt-5-codex"}}}`),
			&refusal{InvalidRequest, "MR8", attrConfig, "models.providers.codex.models"}},
	}
	runAdmitCases(t, tests)
}

// rule MR9
func TestMR9_RostersRefused(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // DocPath of the MR9 refusal; "" accepted
	}{
		{"no roster", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, ""},
		{"empty agents.list", `{agents: {list: [], defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, ""},
		{"one entry", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {}}}}`, ""},
		{"two entries, explicit ownership", `{agents: {ownership: "explicit", defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {}, helper: {}}}}`, ""},
		{"two entries, one default", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {main: {default: true}, helper: {}}}}`, ""},
		{"binding to a known entry", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {ops: {}}}, bindings: [{agentId: "ops"}]}`, ""},
		{"binding to the implicit main", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, bindings: [{agentId: "main"}]}`, ""},
		{"non-empty agents.list", `{agents: {list: [{id: "main"}], defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "agents.list"},
		{"unknown root key", `{agentz: {}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`, "agentz"},
		{"invalid entry id", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {"Main Agent": {}}}}`, `agents.entries["Main Agent"]`},
		{"empty entries", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {}}}`, "agents.entries"},
		{"entries not an object", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: [{id: "main"}]}}`, "agents.entries"},
		{"two defaults", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {a: {default: true}, b: {default: true}}}}`, "agents.entries"},
		{"two entries without ownership", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {a: {}, b: {}}}}`, "agents.entries"},
		{"binding to an unknown entry", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {ops: {}}}, bindings: [{agentId: "ops"}, {agentId: "sales"}]}`, "bindings[1].agentId"},
		{"binding to any id without entries (OpenClaw checks only against entries)", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, bindings: [{agentId: "sales"}]}`, ""},
		{"broadcast to known entries", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, ownership: "explicit", entries: {ops: {}, sales: {}}}, broadcast: {strategy: "parallel", "telegram:123": ["ops", "sales"]}}`, ""},
		{"broadcast to an unknown entry", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {ops: {}}}, broadcast: {"telegram:123": ["ops", "sales"]}}`, `broadcast["telegram:123"][1]`},
		{"broadcast group object to an unknown entry", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, broadcast: {"slack:C1": {agents: ["helper"]}}}`, `broadcast["slack:C1"].agents[0]`},
		{"heartbeat owner unknown", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", heartbeat: {agentId: "ghost"}}}}`, "agents.defaults.heartbeat.agentId"},
		{"talk agent unknown", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {ops: {}}}, talk: {agentId: "main"}}`, "talk.agentId"},
		{"system agent is the implicit main", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", systemAgent: {agentId: "main"}}}}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := mustDoc(tc.doc)
			saveErrs := CheckDocument(doc)
			_, errs := Admit(withDoc(k8sEmbeddedInput(), tc.doc))
			if tc.want == "" {
				if len(saveErrs) > 0 || len(errs) > 0 {
					t.Fatalf("refused: save %v, deploy %v", saveErrs, errs)
				}
				return
			}
			// Refused both at save and at deployment.
			if len(saveErrs) == 0 || saveErrs[0].Rule != "MR9" || saveErrs[0].DocPath.String() != tc.want {
				t.Errorf("CheckDocument = %v, want MR9 at %s", saveErrs, tc.want)
			}
			checkRefusal(t, errs, refusal{InvalidRequest, "MR9", attrConfig, tc.want})
		})
	}
}

// rule MR10
func TestMR10_FallbackOrderKept(t *testing.T) {
	const ordered = `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5",
		fallbacks: ["anthropic/claude-opus-4-1", "anthropic/claude-haiku-4-5", "anthropic/claude-3-7-sonnet"]}}}}`
	const reordered = `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5",
		fallbacks: ["anthropic/claude-3-7-sonnet", "anthropic/claude-opus-4-1", "anthropic/claude-haiku-4-5"]}}}}`
	rev := admitOK(t, withDoc(k8sEmbeddedInput(), ordered))
	want := []ModelRef{{"anthropic", "claude-opus-4-1"}, {"anthropic", "claude-haiku-4-5"}, {"anthropic", "claude-3-7-sonnet"}}
	if !slices.Equal(rev.Fallbacks, want) {
		t.Errorf("Fallbacks = %v, want %v", rev.Fallbacks, want)
	}
	got, _ := occconfig.Lookup(rev.AdmittedDocument, occconfig.Keys("agents", "defaults", "model", "fallbacks"))
	if canon(got) != `["anthropic/claude-opus-4-1","anthropic/claude-haiku-4-5","anthropic/claude-3-7-sonnet"]` {
		t.Errorf("admitted fallbacks = %s", canon(got))
	}
	// Fallback is not executed: the probe calls the primary; topology is unchanged.
	if rev.Probe.Model != anthropicModel || rev.ExecutionMode != ModeEmbedded || rev.Harness != HarnessOpenClaw {
		t.Errorf("probe %s, %s %s", rev.Probe.Model, rev.Harness, rev.ExecutionMode)
	}
	// The order is part of the frozen revision.
	other := admitOK(t, withDoc(k8sEmbeddedInput(), reordered))
	if other.ID() == rev.ID() {
		t.Errorf("reordering fallbacks kept revision %s", rev.ID())
	}
	if other.Fallbacks[0].Model != "claude-3-7-sonnet" {
		t.Errorf("reordered fallbacks = %v", other.Fallbacks)
	}
	// Refused side: a fallback that would change the provider (and so the topology) is refused.
	_, errs := Admit(withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["openai/gpt-5"]}}}}`))
	checkRefusal(t, errs, refusal{InvalidRequest, "MR8", attrConfig, "agents.defaults.model.fallbacks[0]"})
}

// rule MR5: "explicitly configured providers … require an explicit
// supported runtime policy". A built-in provider with an entry of its own
// under models.providers is explicitly configured, whatever the entry sets
// (credentials alone included), and resolves only with a policy: the
// agent's harness, the provider's agentRuntime.id, or the model's. Without
// an entry, a built-in provider with no policy resolves to OpenClaw. The
// OpenShell driver's placeholder key (AD2) is the platform's, not the
// user's configuration, and makes no provider configured.
func TestMR5_ExplicitlyConfiguredProviders(t *testing.T) {
	const model = `agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}`
	harness := func(in Input, h string) Input { in.Agent.Harness = h; return in }
	for _, tc := range []struct {
		name string
		in   Input
		want *refusal // nil: admitted with OpenClaw
	}{
		{"no entry: built-in default", withDoc(k8sEmbeddedInput(), `{`+model+`}`), nil},
		{"empty entry is no configuration", withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {}}}}`), nil},
		{"an entry with only its own policy", withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {agentRuntime: {id: "openclaw"}}}}}`), nil},
		{"apiKey alone, no policy", withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {apiKey: "${ANTHROPIC_API_KEY}"}}}}`),
			&refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
		{"headers alone, no policy", withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {headers: {"x-org": "acme"}}}}}`),
			&refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
		{"baseUrl, no policy", withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {baseUrl: "https://llm.example/v1"}}}}`),
			&refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
		{"apiKey alone, agent harness", harness(withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {apiKey: "${ANTHROPIC_API_KEY}"}}}}`), HarnessOpenClaw), nil},
		{"apiKey alone, provider policy", withDoc(k8sEmbeddedInput(), `{`+model+`, models: {providers: {anthropic: {apiKey: "${ANTHROPIC_API_KEY}", agentRuntime: {id: "openclaw"}}}}}`), nil},
		{"apiKey alone, model policy", withDoc(k8sEmbeddedInput(), `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-sonnet-4-5": {agentRuntime: {id: "openclaw"}}}}}, models: {providers: {anthropic: {apiKey: "${ANTHROPIC_API_KEY}"}}}}`), nil},
		{"ssh: apiKey alone, no policy", withDoc(sshInput(), `{`+model+`, models: {providers: {anthropic: {apiKey: "${HOST_KEY}"}}}}`),
			&refusal{InvalidRequest, "MR5", attrConfig, "agents.defaults.model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev.Harness != HarnessOpenClaw {
					t.Errorf("harness = %q, want openclaw", rev.Harness)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
			if !strings.Contains(errs[0].Message, "explicitly configured") {
				t.Errorf("refusal %q does not say why", errs[0].Message)
			}
		})
	}
	// The driver's placeholder is not the user's configuration.
	doc := mustDoc(`{` + model + `, models: {providers: {anthropic: {apiKey: "` + PlaceholderCredential + `"}}}}`)
	if customProvider(doc, "anthropic") {
		t.Errorf("the OpenShell placeholder made anthropic explicitly configured")
	}
}

// rule MR3: upstream's other runtime ids are refused at save time, and the
// refusal says which of the platform's ids to write instead.
func TestMR3_UpstreamRuntimeAliasesNameTheFix(t *testing.T) {
	for id, want := range map[string]string{
		"pi":               `write "openclaw"`,
		"codex-app-server": `write "codex"`,
		"auto":             "remove agentRuntime and let the resolver choose",
		"default":          "remove agentRuntime and let the resolver choose",
	} {
		errs := CheckDocument(mustDoc(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", models: {"anthropic/claude-sonnet-4-5": {agentRuntime: {id: "` + id + `"}}}}}}`))
		if len(errs) != 1 || errs[0].Rule != "MR3" {
			t.Fatalf("%s: errs = %v, want one MR3 refusal", id, errs)
		}
		if msg := errs[0].Message; !strings.Contains(msg, want) || !strings.Contains(msg, `"openclaw" and "codex"`) {
			t.Errorf("%s: message %q does not name the fix %q", id, msg, want)
		}
	}
}

// rule MR3: an Agent whose only primary model is its entry's (no
// agents.defaults.model) runs with it as with the defaults': the probe
// calls it, the credential follows its provider (AU1), its fallbacks keep
// their order (MR10) and pass the same checks (MR8).
func TestMR3_EntryPrimaryIsTheAgentsPrimary(t *testing.T) {
	in := withDoc(k8sEmbeddedInput(), `{agents: {entries: {main: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1"]}}}},
		models: {providers: {anthropic: {agentRuntime: {id: "openclaw"}, models: [{id: "claude-sonnet-4-5"}, {id: "claude-opus-4-1"}]}}}}`)
	rev := admitOK(t, in)
	if rev.PrimaryModel == nil || rev.PrimaryModel.String() != "anthropic/claude-sonnet-4-5" || rev.Probe.Model != "anthropic/claude-sonnet-4-5" {
		t.Errorf("primary %v, probe model %q; want the entry's", rev.PrimaryModel, rev.Probe.Model)
	}
	if rev.Credential.EnvVar != EnvAnthropicAPIKey {
		t.Errorf("credential variable %q, want %s for the entry's anthropic primary", rev.Credential.EnvVar, EnvAnthropicAPIKey)
	}
	if len(rev.Fallbacks) != 1 || rev.Fallbacks[0].String() != "anthropic/claude-opus-4-1" {
		t.Errorf("fallbacks %v, want the entry's", rev.Fallbacks)
	}
	// The entry's fallback leaving the provider is refused once, at its path.
	bad := withDoc(k8sEmbeddedInput(), `{agents: {entries: {main: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["openai/gpt-5"]}}}}}`)
	_, errs := Admit(bad)
	if len(errs) != 1 || errs[0].Rule != "MR8" || errs[0].DocPath.String() != "agents.entries.main.model.fallbacks[0]" {
		t.Errorf("errs = %v, want one MR8 refusal at the entry's fallback", errs)
	}
}
