package admission

// The runtime contract between what admission decides, what render puts
// into the workloads and what the startup wrapper (internal/startup,
// cmd/occ-runtime) reads there. Each name is defined here once; render and
// startup import it.

// Credential variables: where a consumer receives the model credential
// (AU1, AU2, AU3, PR11). Admission names the variable in
// CredentialDelivery.EnvVar; render sets it; the wrapper reads it.
const (
	EnvOpenAIAPIKey     = "OPENAI_API_KEY"
	EnvAnthropicAPIKey  = "ANTHROPIC_API_KEY"
	EnvCodexAccessToken = "CODEX_ACCESS_TOKEN"
	// EnvCodexLoginMode tells the wrapper how Codex logs in: one of the
	// Login* values (CredentialDelivery.LoginMode).
	EnvCodexLoginMode = "CODEX_LOGIN_MODE"
)

// Codex login modes, the values of EnvCodexLoginMode (AU1, AU2).
const (
	// LoginAPIKeyStdin: `codex login --with-api-key`, the key from
	// EnvOpenAIAPIKey on stdin.
	LoginAPIKeyStdin = "api_key_stdin"
	// LoginCodexPAT: `codex login --with-access-token`, the token from
	// EnvCodexAccessToken on stdin.
	LoginCodexPAT = "codex_pat"
)

// ProbeFile is the file name of the admitted probe settings (Probe as JSON)
// beside a container's configuration; the wrapper's --probe flag points at
// it (PR1, PR2).
const ProbeFile = "probe.json"

// ProviderKeyEnv is the API-key variable OpenClaw reads for a native
// provider's key when the configuration names none (AU1, PR11): by the
// provider, never by its model API. "" for a provider with no such alias.
// Admission delivers an api_key in this variable, and the startup probe
// reads the key from it.
func ProviderKeyEnv(provider string) string {
	switch provider {
	case "openai", "codex", "openai-compatible":
		return EnvOpenAIAPIKey
	case "anthropic":
		return EnvAnthropicAPIKey
	}
	return ""
}
