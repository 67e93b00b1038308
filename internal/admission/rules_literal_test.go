package admission

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// rule AU7: a literal credential in a configuration document goes to
// state, the plan and a plain ConfigMap; admission says so at plan, naming
// the path and the fix. References and ordinary keys are not warned of.
func TestAU7_LiteralCredentialsWarn(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // document paths warned of
		fix       string   // in the first warning
	}{
		{"model provider key", `{models: {providers: {anthropic: {apiKey: "sk-ant-literal"}}}}`, []string{"models.providers.anthropic.apiKey"}, "harness_auth"},
		{"channel token", `{channels: {telegram: {botToken: "123:abc"}}}`, []string{"channels.telegram.botToken"}, "secret_bindings"},
		{"gateway auth token", `{gateway: {auth: {token: "hunter2"}}}`, []string{"gateway.auth.token"}, "${NAME}"},
		{"in an array", `{channels: {slack: {accounts: [{appToken: "xapp-1"}, {appToken: "${SLACK_APP}"}]}}}`, []string{"channels.slack.accounts[0].appToken"}, "secret_bindings"},
		{"a reference", `{channels: {telegram: {botToken: "${TELEGRAM}"}}}`, nil, ""},
		{"empty", `{channels: {telegram: {botToken: ""}}}`, nil, ""},
		{"ordinary keys", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", maxTokens: 4000, contextTokens: 8000}}}`, nil, ""},
		{"not a string", `{gateway: {auth: {token: {source: "env", id: "GW"}}}}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := occconfig.Parse(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var first string
			for _, w := range DocumentWarnings(doc) {
				if w.Rule != "AU7" {
					continue
				}
				if first == "" {
					first = w.Message
				}
				got = append(got, w.DocPath.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("warned of %v, want %v", got, tc.want)
			}
			if tc.fix != "" && !strings.Contains(first, tc.fix) {
				t.Errorf("warning %q does not give the fix (%s)", first, tc.fix)
			}
		})
	}
}

// rule AU7: a literal value with the shape of a live provider key is
// refused at save and at admission, naming the path and the kind of key
// and never the value; the same path is then not also warned of.
// Placeholders and references stay warnings or pass.
func TestAU7_LiteralKeysRefused(t *testing.T) {
	const anthropic = "sk-ant-api03-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	for _, tc := range []struct {
		name, doc string
		refused   string // document path refused, "" for none
		kind, fix string
	}{
		{"anthropic key", `{models: {providers: {anthropic: {apiKey: "` + anthropic + `"}}}}`, "models.providers.anthropic.apiKey", "Anthropic API key", "harness_auth"},
		{"openai key in a header", `{models: {providers: {openai: {baseUrl: "https://x", headers: {Authorization: "Bearer sk-proj-0123456789abcdefghijKLMNOP"}}}}}`, "models.providers.openai.headers.Authorization", "OpenAI-style", "harness_auth"},
		{"openrouter key", `{models: {providers: {openrouter: {apiKey: "sk-or-v1-0123456789abcdef0123456789"}}}}`, "models.providers.openrouter.apiKey", "OpenRouter", "harness_auth"},
		{"google key", `{tools: {web: {search: {apiKey: "AIzaSyA0123456789abcdefghijklmnopqrstu"}}}}`, "tools.web.search.apiKey", "Google API key", "environment_file"},
		{"telegram bot token", `{channels: {telegram: {botToken: "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"}}}`, "channels.telegram.botToken", "Telegram bot token", "${NAME}"},
		{"slack token in an array", `{channels: {slack: {accounts: [{botToken: "xoxb-1234567890-abcdefghij"}]}}}`, "channels.slack.accounts[0].botToken", "Slack token", "secret_bindings"},
		{"placeholder", `{models: {providers: {anthropic: {apiKey: "sk-ant-literal"}}}}`, "", "", ""},
		{"a reference", `{models: {providers: {openai: {baseUrl: "https://x", headers: {Authorization: "Bearer ${OPENAI_API_KEY}"}}}}}`, "", "", ""},
		{"a key under an ordinary name", `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, ui: {assistant: {name: "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz"}}}`, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := occconfig.Parse(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			var refused []*Error
			for _, e := range CheckDocument(doc) {
				if e.Rule == "AU7" {
					refused = append(refused, e)
				}
			}
			if tc.refused == "" {
				if len(refused) > 0 {
					t.Fatalf("refused %v; want no refusal", refused)
				}
				return
			}
			if len(refused) != 1 || refused[0].DocPath.String() != tc.refused || refused[0].Class != InvalidRequest {
				t.Fatalf("refused %v; want one INVALID_REQUEST at %s", refused, tc.refused)
			}
			msg := refused[0].Error()
			for _, want := range []string{tc.refused, tc.kind, tc.fix} {
				if !strings.Contains(msg, want) {
					t.Errorf("refusal %q does not say %q", msg, want)
				}
			}
			for _, secret := range []string{anthropic, "0123456789abcdef", "AAHdqTcv", "abcdefghij"} {
				if strings.Contains(msg, secret) {
					t.Errorf("refusal quotes the value: %q", msg)
				}
			}
			for _, w := range DocumentWarnings(doc) {
				if w.Rule == "AU7" && w.DocPath.String() == tc.refused {
					t.Errorf("the refused path is also warned of")
				}
			}
		})
	}
}
