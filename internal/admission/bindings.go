package admission

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// SecretBindingEnv is how a Configuration's secret binding reaches the
// gateway (AU6): the Secret's key as an environment variable of the gateway
// container only (never a dedicated harness or a native node), named after
// the binding in upper case with '-' as '_', so that the document refers
// to binding "telegram" as "${TELEGRAM}" (OpenClaw substitutes only
// upper-case names).
type SecretBindingEnv struct {
	Binding string    `json:"binding"`
	EnvVar  string    `json:"env_var"`
	Secret  SecretRef `json:"secret"`
}

var bindingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// secretKey is what a Kubernetes Secret accepts as a key.
var secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Why a variable is reserved, as a refusal says it (AU6, PR11).
const (
	whyPlatform  = "which the platform sets itself"
	whyModel     = "which a model SDK reads as a model credential or endpoint"
	whyTransport = "which redirects the gateway's network traffic or changes what TLS it trusts"
	whyLoader    = "which loads code into the gateway's processes"
)

// reservedEnv are the variables a binding may not set (AU6: a binding
// supplies channel and gateway feature credentials, never the model
// credential; PR11: the model transport is not extra environment): the
// variables the platform sets in its containers, those model SDKs read as
// a model credential or endpoint, those that redirect or un-trust the
// gateway's traffic, and those that load code. Names are compared upper
// case (BindingEnvVar), so lower-case forms such as http_proxy are covered.
var reservedEnv = map[string]string{
	"HOME": whyPlatform, "PATH": whyPlatform, "TMPDIR": whyPlatform, "LOG_FORMAT": whyPlatform, "RUST_LOG": whyPlatform,

	EnvOpenAIAPIKey: whyModel, EnvAnthropicAPIKey: whyModel, // and every modelProviderKeyPrefixes name
	"ANTHROPIC_AUTH_TOKEN": whyModel, "OPENAI_BASE_URL": whyModel, "ANTHROPIC_BASE_URL": whyModel,
	"AWS_ACCESS_KEY_ID": whyModel, "AWS_SECRET_ACCESS_KEY": whyModel, "AWS_SESSION_TOKEN": whyModel, "AWS_BEARER_TOKEN_BEDROCK": whyModel,

	"HTTP_PROXY": whyTransport, "HTTPS_PROXY": whyTransport, "ALL_PROXY": whyTransport, "NO_PROXY": whyTransport,
	"NODE_TLS_REJECT_UNAUTHORIZED": whyTransport, "NODE_EXTRA_CA_CERTS": whyTransport, "SSL_CERT_FILE": whyTransport, "SSL_CERT_DIR": whyTransport,

	"NODE_OPTIONS": whyLoader, "NODE_PATH": whyLoader, "LD_PRELOAD": whyLoader, "LD_LIBRARY_PATH": whyLoader, "LD_AUDIT": whyLoader,
}

// modelProviderKeyPrefixes are model providers whose SDKs read the API key
// from PREFIX_API_KEY: that name is reserved (whyModel). Other *_API_KEY
// names (a tool's or a channel's own key, such as BRAVE_API_KEY or
// GOOGLE_MAPS_API_KEY) stay bindable.
var modelProviderKeyPrefixes = []string{
	"ANTHROPIC", "AZURE_OPENAI", "CEREBRAS", "COHERE", "DEEPSEEK", "FIREWORKS", "GEMINI", "GOOGLE", "GROQ", "MINIMAX",
	"MISTRAL", "MOONSHOT", "OPENAI", "OPENROUTER", "PERPLEXITY", "TOGETHER", "XAI", "ZAI",
}

var reservedPrefixes = []string{"OPENCLAW_", "CODEX_", "OCC_"}

// CredentialSecretPrefix begins the name of every Secret the provider
// writes for a credential source's write-only value (occ-cred-NAME-vN):
// a model credential, which no binding may point at (AU6).
const CredentialSecretPrefix = "occ-cred-"

// The Secrets the provider writes for each agent's own tokens end in
// these suffixes (render.GatewayTokenSecret, render.AppServerTokenSecret):
// no binding may point at one, the agent's or another agent's, since the
// token would reach a gateway that must not hold it (AU6).
const (
	GatewayTokenSecretSuffix   = "-gateway-token"
	AppServerTokenSecretSuffix = "-app-server-token"
)

// agentTokenSecret reports whether a Secret name is one of an agent's
// token Secrets, and which.
func agentTokenSecret(name string) (string, bool) {
	switch {
	case strings.HasSuffix(name, GatewayTokenSecretSuffix):
		return "an agent's gateway token", true
	case strings.HasSuffix(name, AppServerTokenSecretSuffix):
		return "an agent's Codex app-server token", true
	}
	return "", false
}

// reservedWhy is why env is reserved, or "" when a binding may set it.
func reservedWhy(env string) string {
	if why := reservedEnv[env]; why != "" {
		return why
	}
	if p, ok := strings.CutSuffix(env, "_API_KEY"); ok && slices.Contains(modelProviderKeyPrefixes, p) {
		return whyModel
	}
	if hasReservedPrefix(env) {
		return whyPlatform
	}
	return ""
}

// ReservedBindingVariable reports whether a binding may not set env (AU6).
func ReservedBindingVariable(env string) bool { return reservedWhy(env) != "" }

// ReservedBindingVariables lists every reserved variable, sorted, the
// reserved prefixes as PREFIX*: what the secret_bindings documentation
// shows.
func ReservedBindingVariables() []string { return reservedFor("") }

// reservedFor lists the variables reserved for reason why ("": all),
// sorted, the reserved prefixes as PREFIX*: what a refusal names.
func reservedFor(why string) []string {
	var out []string
	for env, w := range reservedEnv {
		if why == "" || w == why {
			out = append(out, env)
		}
	}
	if why == "" || why == whyModel {
		for _, p := range modelProviderKeyPrefixes {
			if env := p + "_API_KEY"; reservedEnv[env] == "" {
				out = append(out, env)
			}
		}
	}
	if why == "" || why == whyPlatform {
		for _, p := range reservedPrefixes {
			out = append(out, p+"*")
		}
	}
	sort.Strings(out)
	return out
}

// BindingEnvVar is the environment variable binding name reaches the gateway as.
func BindingEnvVar(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// CheckSecretBindings judges a Configuration's secret bindings (AU6): names
// that make a usable, unambiguous variable that is not reserved
// (reservedWhy), Secret references Kubernetes accepts that are not a
// provider-written model credential Secret (CredentialSecretPrefix); the
// agent's own credential Secret is refused at admission
// (checkBindingsCredential), where the source is known. It returns the bindings as
// the gateway receives them, sorted by variable. attr is the attribute the
// bindings are reported under.
func CheckSecretBindings(bindings map[string]SecretRef, attr []string) ([]SecretBindingEnv, Errors) {
	var errs Errors
	refuse := func(name, msg string) {
		errs = append(errs, &Error{Class: InvalidRequest, Rule: "AU6", Attribute: append(append([]string{}, attr...), name), Message: msg})
	}
	var out []SecretBindingEnv
	byEnv := map[string]string{}
	names := make([]string, 0, len(bindings))
	for n := range bindings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ref := bindings[name]
		if !bindingName.MatchString(name) {
			refuse(name, fmt.Sprintf("binding name %q must start with a letter or '_' and hold only letters, digits, '_' and '-': it becomes the gateway's environment variable %s", name, BindingEnvVar(name)))
			continue
		}
		env := BindingEnvVar(name)
		if why := reservedWhy(env); why != "" {
			refuse(name, fmt.Sprintf("binding %q would set %s, %s; rename the binding after its feature (such as \"telegram\", which the document refers to as ${TELEGRAM}). "+
				"Reserved for the same reason: %s. The model credential reaches the harness only through harness_auth (the Agent's credential source)",
				name, env, why, strings.Join(reservedFor(why), ", ")))
			continue
		}
		if other, dup := byEnv[env]; dup {
			refuse(name, fmt.Sprintf("bindings %q and %q both become %s; rename one", other, name, env))
			continue
		}
		if strings.HasPrefix(ref.Name, CredentialSecretPrefix) {
			refuse(name, fmt.Sprintf("secret_bindings[%q] points at Secret %q, a model credential Secret the provider writes for a credential source (%s*); "+
				"bind the channel's own Secret: the model credential reaches the harness only through harness_auth", name, ref.Name, CredentialSecretPrefix))
			continue
		}
		if what, ok := agentTokenSecret(ref.Name); ok {
			refuse(name, fmt.Sprintf("secret_bindings[%q] points at Secret %q, the name of a Secret the provider writes for %s (*%s, *%s), "+
				"which only that agent's own components read; bind the channel's own Secret, under a name without those endings",
				name, ref.Name, what, GatewayTokenSecretSuffix, AppServerTokenSecretSuffix))
			continue
		}
		if !secretKey.MatchString(ref.Key) {
			refuse(name, fmt.Sprintf("key %q is not a valid Secret key (letters, digits, '-', '_' and '.')", ref.Key))
			continue
		}
		byEnv[env] = name
		out = append(out, SecretBindingEnv{Binding: name, EnvVar: env, Secret: ref})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EnvVar < out[j].EnvVar })
	return out, errs
}

func hasReservedPrefix(env string) bool {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(env, p) {
			return true
		}
	}
	return false
}

// checkBindingsCredential is AU6 against the agent's own credential
// source: no binding points at the Secret its value lives in (the
// source's secret_ref, whatever the key, or the Secret the provider wrote
// for its write-only value), since the gateway, dedicated or not, would
// then receive the harness credential outside harness_auth.
//
// The class is INVALID_REQUEST, as for every refusal of a binding itself
// (CheckSecretBindings): the inputs contradict each other whatever the
// target, while RESOURCE_CONFLICT (checkBindingsCompute) is for a target
// that cannot take valid bindings.
func checkBindingsCredential(bindings []SecretBindingEnv, s CredentialSource) Errors {
	held := map[string]bool{}
	if s.SecretRef != nil && s.SecretRef.Name != "" {
		held[s.SecretRef.Name] = true
	}
	if s.SecretName != "" {
		held[s.SecretName] = true
	}
	var errs Errors
	for _, b := range bindings {
		if held[b.Secret.Name] {
			errs = append(errs, invalid("AU6", []string{"configuration"}, nil,
				"secret_bindings[%q] points at Secret %q, which holds the agent's model credential (credential source %q); "+
					"bind the channel's own Secret: the model credential reaches the harness only through harness_auth", b.Binding, b.Secret.Name, s.Name))
		}
	}
	return errs
}

// checkBindingsCompute refuses secret bindings a compute's kind cannot
// project (its row's SecretBindings): an SSH host has no Kubernetes
// Secrets; the host's credentials file supplies channel credentials there.
func checkBindingsCompute(bindings []SecretBindingEnv, c Compute) Errors {
	row := kindRow(c.Kind)
	if len(bindings) == 0 || row.SecretBindings {
		return nil
	}
	instead := ""
	if row.Words.BindingsInstead != "" {
		vars := make([]string, len(bindings))
		for i, b := range bindings {
			vars[i] = b.EnvVar + "=…"
		}
		instead = " and " + row.Words.BindingsInstead + " (here: " + strings.Join(vars, ", ") + ")"
	}
	return Errors{{Class: ResourceConflict, Rule: "AU6", Attribute: []string{"configuration"},
		Message: fmt.Sprintf("the configuration has secret_bindings (%s), which are Kubernetes Secrets; %s cannot project them. "+
			"Remove them%s, or run the Agent on %s", bindings[0].Binding, row.Words.Noun, instead, nouns(kindsWhere(func(k KindSupport) bool { return k.SecretBindings })))}}
}
