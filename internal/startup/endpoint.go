package startup

import (
	"fmt"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// OpenClaw's model APIs the probe speaks (models.providers.<p>.api).
const (
	APIResponses   = "openai-responses"
	APICompletions = "openai-completions"
	APIMessages    = "anthropic-messages"
)

// DefaultBaseURLs are the built-in providers' default endpoints.
var DefaultBaseURLs = map[string]string{
	"openai":    "https://api.openai.com/v1",
	"anthropic": "https://api.anthropic.com",
}

// Endpoint is where and how the embedded OpenClaw probe calls the primary
// model. Key is the credential: it goes into one request header and
// nowhere else.
type Endpoint struct {
	API     string
	BaseURL string
	Model   string
	// Default is true for a built-in provider at its default endpoint:
	// the probe then sends OpenClaw's upfront empty request first (PR7).
	Default bool
	Key     string
}

// ResolveEndpoint reads the primary model's provider from the admitted
// native configuration: its literal baseUrl and api (PR11: transport
// settings are literal metadata), its apiKey when it is a literal or a
// ${VAR} reference, else the variable admission delivers the primary
// provider's api_key in: OPENAI_API_KEY or ANTHROPIC_API_KEY by the
// provider, whatever its model API (admission.ProviderKeyEnv, AU1, PR11).
// defaults overrides DefaultBaseURLs (tests).
func ResolveEndpoint(doc occconfig.Document, model string, getenv func(string) string, defaults map[string]string) (Endpoint, error) {
	ref, err := admission.ParseModelRef(model)
	if err != nil {
		return Endpoint{}, err
	}
	prov := occconfig.Keys("models", "providers", ref.Provider)
	base, _ := occconfig.String(doc, prov.Key("baseUrl"))
	api, _ := occconfig.String(doc, prov.Key("api"))
	ep := Endpoint{Model: ref.Model, BaseURL: strings.TrimRight(strings.TrimSpace(base), "/"), API: api}
	if ep.BaseURL == "" {
		def, ok := defaults[ref.Provider]
		if !ok {
			def, ok = DefaultBaseURLs[ref.Provider]
		}
		if !ok {
			return Endpoint{}, fmt.Errorf("provider %q has no baseUrl and no default endpoint the probe knows", ref.Provider)
		}
		ep.BaseURL, ep.Default = strings.TrimRight(def, "/"), true
	}
	if ep.API == "" {
		switch ref.Provider {
		case "openai":
			ep.API = APIResponses
		case "anthropic":
			ep.API = APIMessages
		default:
			ep.API = APICompletions // OpenClaw's default for a custom baseUrl
		}
	}
	switch ep.API {
	case APIResponses, APICompletions, APIMessages:
	default:
		return Endpoint{}, fmt.Errorf("model API %q is not one the probe speaks", ep.API)
	}
	key, _ := occconfig.String(doc, prov.Key("apiKey"))
	key = strings.TrimSpace(key)
	if v, ok := strings.CutPrefix(key, "${"); ok && strings.HasSuffix(v, "}") {
		key = getenv(strings.TrimSuffix(v, "}"))
	}
	if env := admission.ProviderKeyEnv(ref.Provider); key == "" && env != "" {
		key = getenv(env)
	}
	ep.Key = key
	return ep, nil
}

// url is the request URL of the endpoint's API.
func (e Endpoint) url() string {
	switch e.API {
	case APIMessages:
		if strings.HasSuffix(e.BaseURL, "/v1") {
			return e.BaseURL + "/messages"
		}
		return e.BaseURL + "/v1/messages"
	case APICompletions:
		return e.BaseURL + "/chat/completions"
	default:
		return e.BaseURL + "/responses"
	}
}
