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
