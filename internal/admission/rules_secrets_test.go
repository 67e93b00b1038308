package admission

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// Secrets and hostile input: what a binding may point at and be called,
// what a model provider's credential may refer to, and what a model
// reference may hold.

// rule AU6: a secret binding never points at the agent's own model
// credential Secret, neither the credential source's secret_ref (any key)
// nor a provider-written occ-cred-* Secret, so that no gateway receives the
// harness credential through a binding. Refused as INVALID_REQUEST, like
// the other refusals of a binding itself (bindings.go).
func TestAU6_BindingToCredentialSecretRefused(t *testing.T) {
	ref := func(name, key string) SecretRef { return SecretRef{Name: name, Key: key} }
	written := func(in Input) Input {
		in.Source.SecretRef, in.Source.HasValue, in.Source.SecretName = nil, true, "occ-cred-model-key-v2"
		return in
	}
	pat := dedicatedCodexInput()
	pat.Source = patSource(k8sComputeID)
	tests := []struct {
		name     string
		in       Input
		bindings map[string]SecretRef
		refused  string // "": admitted; else a phrase the message holds
	}{
		{"a channel's own Secret", k8sEmbeddedInput(), map[string]SecretRef{"telegram": ref("tg-bot", "token")}, ""},
		{"the source's secret_ref, its key", k8sEmbeddedInput(), map[string]SecretRef{"telegram": ref("model-key", "api-key")}, `secret_bindings["telegram"]`},
		{"the source's secret_ref, another key", k8sEmbeddedInput(), map[string]SecretRef{"memory-embeddings": ref("model-key", "other")}, `secret_bindings["memory-embeddings"]`},
		{"a dedicated gateway and the harness's secret_ref", dedicatedCodexInput(), map[string]SecretRef{"slack": ref("model-key", "api-key")}, "harness_auth"},
		{"a codex_pat Secret", pat, map[string]SecretRef{"slack": ref("codex-pat", "token")}, `Secret "codex-pat"`},
		{"the provider-written Secret of the source", written(k8sEmbeddedInput()), map[string]SecretRef{"telegram": ref("occ-cred-model-key-v2", "value")}, "occ-cred-"},
		{"another source's provider-written Secret", k8sEmbeddedInput(), map[string]SecretRef{"telegram": ref("occ-cred-other-v1", "value")}, "occ-cred-"},
		{"a provider-written Secret while the source is a secret_ref", k8sEmbeddedInput(), map[string]SecretRef{"telegram": ref(CredentialSecretPrefix+"model-key-v1", "value")}, "harness_auth"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Configuration.SecretBindings = tc.bindings
			_, errs := Admit(in)
			if tc.refused == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			checkRefusal(t, errs, refusal{InvalidRequest, "AU6", attrConfig, ""})
			msg := errs[0].Message
			for _, want := range []string{tc.refused, "bind the channel's own Secret", "harness_auth"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not hold %q", msg, want)
				}
			}
		})
	}

	// At the configuration (plan of occ_configuration): a provider-written
	// credential Secret is refused by its name alone, at the binding.
	_, errs := CheckSecretBindings(map[string]SecretRef{"telegram": ref("occ-cred-model-key-v1", "value")}, []string{"secret_bindings"})
	if len(errs) != 1 || errs[0].Rule != "AU6" || errs[0].Class != InvalidRequest || len(errs[0].Attribute) != 2 || errs[0].Attribute[1] != "telegram" ||
		!strings.Contains(errs[0].Message, "harness_auth") {
		t.Fatalf("CheckSecretBindings errs = %v, want one AU6 INVALID_REQUEST at secret_bindings[telegram] naming harness_auth", errs)
	}
}

// rule AU6 (issue 27): a binding may not point at the Secret holding an
// agent's gateway or app-server token, its own or a neighbour's: the
// token would reach a gateway that must not hold it. A Secret that only
// contains such a word elsewhere stays bindable.
func TestAU6_BindingToAgentTokenSecretRefused(t *testing.T) {
	for _, tc := range []struct {
		secret string
		refuse string // "" when bindable
	}{
		{"billing-gateway-token", "gateway token"},
		{"support-app-server-token", "app-server token"},
		{"a-gateway-token", "gateway token"},
		{"telegram-bot", ""},
		{"gateway-token-rotation-notes", ""},
	} {
		t.Run(tc.secret, func(t *testing.T) {
			_, errs := CheckSecretBindings(map[string]SecretRef{"telegram": {Name: tc.secret, Key: "token"}}, []string{"secret_bindings"})
			switch {
			case tc.refuse == "" && len(errs) > 0:
				t.Fatalf("refused: %v", errs)
			case tc.refuse != "" && (len(errs) != 1 || errs[0].Rule != "AU6" || errs[0].Class != InvalidRequest ||
				len(errs[0].Attribute) != 2 || errs[0].Attribute[1] != "telegram" || !strings.Contains(errs[0].Message, tc.refuse) ||
				!strings.Contains(errs[0].Message, tc.secret)):
				t.Fatalf("errs = %v, want one AU6 INVALID_REQUEST at secret_bindings[telegram] naming %q and the %s", errs, tc.secret, tc.refuse)
			}
		})
	}
}

// rules AU6, PR11: a binding may not set a variable that the platform sets,
// that a model SDK reads as a model credential or endpoint, that redirects
// or un-trusts the gateway's traffic, or that loads code into it. Other
// *_API_KEY names (a tool's or channel's own key) stay bindable.
func TestAU6_ReservedBindingVariables(t *testing.T) {
	refused := []string{
		"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http-proxy",
		"NODE_TLS_REJECT_UNAUTHORIZED", "NODE_EXTRA_CA_CERTS", "LD_PRELOAD", "LD_LIBRARY_PATH",
		"GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "XAI_API_KEY",
		"DEEPSEEK_API_KEY", "TOGETHER_API_KEY", "AZURE_OPENAI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "ANTHROPIC_AUTH_TOKEN", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "cerebras-api-key",
	}
	for _, name := range refused {
		t.Run("refused "+name, func(t *testing.T) {
			env := BindingEnvVar(name)
			_, errs := CheckSecretBindings(map[string]SecretRef{name: {Name: "s", Key: "k"}}, []string{"secret_bindings"})
			if len(errs) != 1 || errs[0].Rule != "AU6" || errs[0].Class != InvalidRequest || !strings.Contains(errs[0].Message, env) {
				t.Fatalf("errs = %v, want one AU6 INVALID_REQUEST naming %s", errs, env)
			}
			if !ReservedBindingVariable(env) {
				t.Errorf("ReservedBindingVariable(%s) = false", env)
			}
		})
	}
	for _, name := range []string{"telegram", "SLACK_BOT_TOKEN", "memory-embeddings", "GOOGLE_MAPS_API_KEY", "BRAVE_API_KEY", "VOYAGE_API_KEY", "PROXY_URL"} {
		t.Run("bindable "+name, func(t *testing.T) {
			if _, errs := CheckSecretBindings(map[string]SecretRef{name: {Name: "s", Key: "k"}}, []string{"secret_bindings"}); len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
		})
	}
	// The documented list is the list enforced.
	for _, env := range ReservedBindingVariables() {
		if !ReservedBindingVariable(env) {
			t.Errorf("documented %s is not reserved", env)
		}
	}
}

// rules PR11, AU6: harness_auth is the sole model-auth selector. On a
// compute that delivers the credential itself, a model provider's apiKey
// and its headers may refer to the environment only through the selected
// provider's alias (OPENAI_API_KEY or ANTHROPIC_API_KEY): a binding's
// variable (AU6) or any other variable (PR11) is refused, as ${VAR} or as
// an environment SecretRef, and so is a file or exec SecretRef. An SSH
// host's credentials file is the harness_auth source itself, so there any
// variable it defines may be named.
func TestPR11_ModelKeyReferences(t *testing.T) {
	// An explicitly configured provider needs an explicit runtime policy
	// (MR5): the agent's harness is one.
	anth := func(provider string) Input {
		in := withDoc(k8sEmbeddedInput(), fmt.Sprintf(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, models: {providers: {%s}}}`, provider))
		in.Agent.Harness = HarnessOpenClaw
		return in
	}
	bound := func(in Input) Input {
		in.Configuration.SecretBindings = map[string]SecretRef{"telegram": {Name: "tg-bot", Key: "token"}}
		return in
	}
	openai := func(provider string) Input {
		in := withDoc(k8sEmbeddedInput(), fmt.Sprintf(`{agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {%s}}}`, provider))
		in.Agent.Harness = HarnessOpenClaw
		return in
	}
	codex := func(provider string) Input {
		return withDoc(dedicatedCodexInput(), fmt.Sprintf(`{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {%s}}}`, provider))
	}
	ssh := func(provider string) Input {
		in := withDoc(sshInput(), fmt.Sprintf(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, models: {providers: {%s}}}`, provider))
		in.Agent.Harness = HarnessOpenClaw
		return in
	}
	const key = "models.providers.anthropic.apiKey"
	pr11 := func(doc string) *refusal { return &refusal{InvalidRequest, "PR11", attrConfig, doc} }
	tests := []struct {
		name string
		in   Input
		want *refusal
	}{
		{"the selected provider's alias", anth(`anthropic: {apiKey: "${ANTHROPIC_API_KEY}"}`), nil},
		{"the alias with a prefix", anth(`anthropic: {apiKey: "Bearer ${ANTHROPIC_API_KEY}"}`), nil},
		{"an escaped reference is literal", anth(`anthropic: {apiKey: "$${PROXY_KEY}"}`), nil},
		{"a lower-case name is not substituted", anth(`anthropic: {apiKey: "${proxy_key}"}`), nil},
		{"the alias as an env SecretRef", anth(`anthropic: {apiKey: {source: "env", provider: "default", id: "ANTHROPIC_API_KEY"}}`), nil},
		{"a literal header", anth(`anthropic: {headers: {"x-org": "acme"}}`), nil},
		{"the alias in a header", anth(`anthropic: {headers: {"x-api-key": "${ANTHROPIC_API_KEY}"}}`), nil},
		{"another variable", anth(`anthropic: {apiKey: "${PROXY_KEY}"}`), pr11(key)},
		{"the other provider's alias", anth(`anthropic: {apiKey: "${OPENAI_API_KEY}"}`), pr11(key)},
		{"one of two references", anth(`anthropic: {apiKey: "${ANTHROPIC_API_KEY}${PROXY_KEY}"}`), pr11(key)},
		{"a binding's variable", bound(anth(`anthropic: {apiKey: "${TELEGRAM}"}`)), &refusal{InvalidRequest, "AU6", attrConfig, key}},
		{"a binding's variable in a header", bound(anth(`anthropic: {headers: {"x-api-key": "${TELEGRAM}"}}`)),
			&refusal{InvalidRequest, "AU6", attrConfig, `models.providers.anthropic.headers["x-api-key"]`}},
		{"another variable in a header", anth(`anthropic: {headers: {Authorization: "Bearer ${PROXY_KEY}"}}`), pr11("models.providers.anthropic.headers.Authorization")},
		{"an env SecretRef to another variable", anth(`anthropic: {apiKey: {source: "env", provider: "default", id: "PROXY_KEY"}}`), pr11(key)},
		{"a file SecretRef", anth(`anthropic: {apiKey: {source: "file", provider: "keys", id: "/anthropic"}}`), pr11(key)},
		{"an exec SecretRef in a header", anth(`anthropic: {headers: {"x-api-key": {source: "exec", provider: "vault", id: "k"}}}`),
			pr11(`models.providers.anthropic.headers["x-api-key"]`)},
		{"a provider that is not the primary's", anth(`other: {baseUrl: "https://x.example/v1", models: [], apiKey: "${OTHER_KEY}"}`), pr11("models.providers.other.apiKey")},
		{"openai: its alias", openai(`openai: {apiKey: "${OPENAI_API_KEY}"}`), nil},
		{"openai: another variable", openai(`openai: {apiKey: "${PROXY_KEY}"}`), pr11("models.providers.openai.apiKey")},
		{"dedicated codex: its alias", codex(`codex: {apiKey: "${OPENAI_API_KEY}"}`), nil},
		{"dedicated codex: a binding's variable", bound(codex(`codex: {apiKey: "${TELEGRAM}"}`)), &refusal{InvalidRequest, "AU6", attrConfig, "models.providers.codex.apiKey"}},
		{"ssh: the host's credentials file is harness_auth", ssh(`anthropic: {apiKey: "${HOST_MODEL_KEY}"}`), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Admit(tc.in)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			checkRefusal(t, errs, *tc.want)
			if !strings.Contains(errs[0].Message, "harness_auth") {
				t.Errorf("message %q does not name harness_auth", errs[0].Message)
			}
		})
	}
}

// rule MR1: a model reference holds no control or other non-printing
// character (NUL, escape sequences, zero-width and bidirectional
// formatting characters, invalid UTF-8); the refusal names the position.
func TestMR1_ModelRefControlCharacters(t *testing.T) {
	for _, tc := range []struct {
		in       string
		position string // "" when the ref is accepted
	}{
		{"openai/gpt-5", ""},
		{"openai/modèle-ü", ""},
		{"openai/gpt\x00-5", "character 11"},
		{"openai/gpt-5\x1b[31m", "character 13"},
		{"openai/gpt\x7f", "character 11"},
		{"openai/gpt\u200b-5", "character 11"},
		{"openai/gpt-5\u202e", "character 13"},
		{"\ufeffopenai/gpt-5", "character 1"},
		{"open\u00adai/gpt-5", "character 5"},
		{"openai/gpt\xff5", "character 11"},
		{"openai/\U000E0041", "character 8"},
	} {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			ref, err := ParseModelRef(tc.in)
			if tc.position == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseModelRef(%q) = %+v, want an error", tc.in, ref)
			}
			if !strings.Contains(err.Error(), tc.position) {
				t.Errorf("error %q does not name %s", err, tc.position)
			}
			if !utf8.ValidString(tc.in) {
				return // a parsed document holds valid UTF-8 only
			}
			// Through Admit: the document path of the reference.
			quoted, _ := json.Marshal(tc.in)
			in := withDoc(k8sEmbeddedInput(), fmt.Sprintf(`{agents: {defaults: {model: %s}}}`, quoted))
			_, errs := Admit(in)
			checkRefusal(t, errs, refusal{InvalidRequest, "MR1", attrConfig, "agents.defaults.model"})
		})
	}
}

// rule AU6: the rules page lists every variable a binding may not set and
// the Secrets it may not point at, from the code (issue 30: the
// attribute's description sends the user there).
func TestAU6_RulesPageListsTheReservedBindings(t *testing.T) {
	page := RulesMarkdown()
	i := strings.Index(page, "## Secret binding variables (AU6)")
	if i < 0 {
		t.Fatal("the rules page has no section on secret binding variables")
	}
	section := page[i:]
	for _, env := range ReservedBindingVariables() {
		if !strings.Contains(section, "`"+env+"`") {
			t.Errorf("the rules page does not list %s", env)
		}
	}
	for _, name := range []string{CredentialSecretPrefix + "*", "*" + GatewayTokenSecretSuffix, "*" + AppServerTokenSecretSuffix} {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("the rules page does not name the Secrets %s", name)
		}
	}
}
