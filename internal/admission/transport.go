package admission

import (
	"fmt"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// checkProbeTransport applies PR11 on Kubernetes, where the startup probe
// calls the primary model: the primary provider's transport settings
// (baseUrl, api) are literal metadata the probe reads as written. An
// environment reference ("${VAR}") or a SecretRef object there would leave
// the probe calling the wrong endpoint (or none), so it is refused. The key
// itself may be a ${VAR} reference (the provider's apiKey), and the
// OPENAI_API_KEY / ANTHROPIC_API_KEY alias stays supported.
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

// CodexProvider is the id of the model provider OCC defines for a
// dedicated Codex harness whose endpoint is a compatible one (PR3).
const CodexProvider = "occ"

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
