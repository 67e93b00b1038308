package admission

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// checkProbeTransport applies PR11 on Kubernetes, where the startup probe
// calls the primary model: the primary provider's transport settings
// (baseUrl, api) are literal metadata the probe reads as written. An
// environment reference ("${VAR}") or a SecretRef object there would leave
// the probe calling the wrong endpoint (or none), so it is refused. The key
// itself is judged by checkModelCredentialRefs: only the selected
// provider's OPENAI_API_KEY / ANTHROPIC_API_KEY alias stays supported.
func checkProbeTransport(doc occconfig.Document, primary *ModelRef) Errors {
	if primary == nil {
		return nil
	}
	var errs Errors
	prov := occconfig.Keys("models", "providers", primary.Provider)
	for _, key := range []string{"baseUrl", "api"} {
		p := prov.Key(key)
		v, present := occconfig.Lookup(doc, p)
		if !present {
			continue
		}
		s, isString := v.(string)
		switch {
		case !isString:
			errs = append(errs, invalid("PR11", nil, p, "%s of the primary model's provider %q must be a literal string: the startup probe reads transport settings as written, not as a Secret or environment reference", key, primary.Provider))
		case strings.Contains(s, "${"):
			errs = append(errs, invalid("PR11", nil, p, "%s of the primary model's provider %q refers to the environment (%s); the startup probe reads transport settings as literal metadata, so write the value itself", key, primary.Provider, s))
		}
	}
	return errs
}

// envRefRe matches OpenClaw's environment substitution in a string value:
// ${NAME} with an upper-case name (OpenClaw substitutes no other); $${NAME}
// is the escaped literal "${NAME}".
var envRefRe = regexp.MustCompile(`\$?\$\{([A-Z_][A-Z0-9_]*)\}`)

// envRefs are the variables s refers to, in order.
func envRefs(s string) []string {
	var out []string
	for _, m := range envRefRe.FindAllStringSubmatch(s, -1) {
		if !strings.HasPrefix(m[0], "$$") {
			out = append(out, m[1])
		}
	}
	return out
}

// checkModelCredentialRefs applies PR11 and AU6 to every model provider's
// credential in the document (models.providers.<p>.apiKey and the values
// of models.providers.<p>.headers): harness_auth is the sole model-auth
// selector, and the platform delivers its credential in the selected
// (primary) provider's alias, OPENAI_API_KEY or ANTHROPIC_API_KEY
// (ProviderKeyEnv), which PR11 keeps supported. Any other reference to the
// environment, as ${VAR} or as an environment SecretRef, would feed a
// model a key from outside harness_auth: a secret binding's variable is
// refused under AU6 (a binding supplies channel and gateway feature
// credentials only), any other variable under PR11, and so is a file or
// exec SecretRef. Literal values are not judged here.
func checkModelCredentialRefs(doc occconfig.Document, primary *ModelRef, bindings map[string]SecretRef) Errors {
	alias := ""
	if primary != nil {
		alias = ProviderKeyEnv(primary.Provider)
	}
	bound := map[string]string{}
	for name := range bindings {
		bound[BindingEnvVar(name)] = name
	}
	var errs Errors
	for _, p := range sortedKeys(occconfig.Object(doc, pathProviders)) {
		prov := pathProviders.Key(p)
		if v, ok := occconfig.Lookup(doc, prov.Key("apiKey")); ok {
			if e := judgeModelCredential(v, prov.Key("apiKey"), "apiKey", p, alias, bound); e != nil {
				errs = append(errs, e)
			}
		}
		headers := occconfig.Object(doc, prov.Key("headers"))
		for _, h := range sortedKeys(headers) {
			if e := judgeModelCredential(headers[h], prov.Key("headers").Key(h), fmt.Sprintf("header %q", h), p, alias, bound); e != nil {
				errs = append(errs, e)
			}
		}
	}
	return errs
}

// judgeModelCredential judges one credential value of provider p at path
// at (what names it in the message): a string's ${VAR} references, or a
// SecretRef object ({source, provider, id}).
func judgeModelCredential(v any, at occconfig.Path, what, p, alias string, bound map[string]string) *Error {
	var refs []string
	switch t := v.(type) {
	case string:
		refs = envRefs(t)
	case map[string]any:
		source, _ := t["source"].(string)
		if source == "" {
			return nil
		}
		if source != "env" {
			return invalid("PR11", nil, at, "%s of model provider %q is a %q SecretRef, which reads a model key from outside harness_auth; %s",
				what, p, source, aliasAdvice(alias))
		}
		id, _ := t["id"].(string)
		refs = []string{id}
	}
	for _, ref := range refs {
		if name, ok := bound[ref]; ok {
			return invalid("AU6", nil, at, "%s of model provider %q refers to ${%s}, the variable of secret binding %q: a binding supplies channel and gateway feature credentials, never a model key. "+
				"Remove the reference and bind the channel's own Secret; %s", what, p, ref, name, aliasAdvice(alias))
		}
		if ref != alias {
			return invalid("PR11", nil, at, "%s of model provider %q refers to ${%s}, a variable harness_auth does not fill; %s",
				what, p, ref, aliasAdvice(alias))
		}
	}
	return nil
}

// aliasAdvice says where a model credential may come from.
func aliasAdvice(alias string) string {
	if alias == "" {
		return "the model credential reaches the harness only through harness_auth (the Agent's credential source), so leave the reference out"
	}
	return fmt.Sprintf("the model credential reaches the harness only through harness_auth (the Agent's credential source), "+
		"which the platform delivers as %s: refer to ${%s} or leave the value out", alias, alias)
}

// CodexProvider is the id of the model provider OCC defines for a
// dedicated Codex harness whose endpoint is a compatible one (PR3): the
// provider the gateway's configuration selects for such an endpoint
// (MR4's codex/openai-compatible/… references), which the Codex plugin
// names as the thread's modelProvider. So the probe, the app server's
// default and every turn the gateway starts use one definition.
const CodexProvider = CompatibleProvider

// CodexProviderSettings is that provider's definition, as Codex's
// model_providers.<id> keys and TOML values, for a probe's base URL and
// transport (PR3): the startup probe's `codex exec` and the app server
// that runs afterwards use the same one, so the endpoint the probe passed
// is the endpoint the turns go to.
func CodexProviderSettings(baseURL, transport string) [][2]string {
	ws := "true"
	if transport == "responses-https" {
		ws = "false"
	}
	return [][2]string{
		{"name", TOMLString(CodexProvider)},
		{"base_url", TOMLString(baseURL)},
		{"wire_api", `"responses"`},
		{"requires_openai_auth", "true"},
		{"supports_websockets", ws},
	}
}

// TOMLString quotes s as a TOML basic string (JSON's escapes are TOML's).
func TOMLString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
