package admission

import (
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
