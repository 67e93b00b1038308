package admission

import "fmt"

// Consumers of the model credential.
const (
	ConsumerGateway = "gateway" // the combined gateway/harness of embedded OpenClaw
	ConsumerHarness = "harness" // the dedicated harness only (AU6)
	ConsumerHost    = "host"    // systemd on an SSH host loads it (AU5)
	ConsumerProxy   = "sandbox-egress-proxy"
)

// CredentialDelivery is how the revision's harness receives its model
// credential, fixed by the auth binding (AU1 to AU5). It names no secret.
type CredentialDelivery struct {
	Method   string `json:"method"`
	Consumer string `json:"consumer"`
	// EnvVar is the variable the consumer receives the credential in.
	EnvVar string `json:"env_var,omitempty"`
	// LoginMode is how Codex logs in: "api_key_stdin" or "codex_pat".
	LoginMode string `json:"login_mode,omitempty"`
	// Placeholder is true when the harness gets only a placeholder and the
	// sandbox egress proxy inserts the key (AU3).
	Placeholder bool `json:"placeholder,omitempty"`
}

// providerKeyEnv maps a native provider to the API-key variable embedded
// OpenClaw reads (AU1, PR11).
func providerKeyEnv(provider string) string {
	switch provider {
	case "openai", "codex", "openai-compatible":
		return "OPENAI_API_KEY"
	case "anthropic":
		return "ANTHROPIC_API_KEY"
	}
	return ""
}

// CheckAuth applies the auth-binding matrix (AU1 to AU5) and AD1's source
// ownership to a resolved harness, mode, primary provider, Compute and
// source. It returns how the credential reaches the runtime.
func CheckAuth(harness, mode, primaryProvider string, c Compute, s CredentialSource) (CredentialDelivery, Errors) {
	attr := []string{"harness_auth", "source"}
	d := CredentialDelivery{Method: s.Method}
	var errs Errors
	gateway := c.CredentialGateway != nil
	dedicated := mode == ModeDedicated

	if s.ComputeID != "" && s.ComputeID != c.ID && s.Method != MethodCredentialSource {
		errs = append(errs, conflict("AD1", attr, "credential source %q lives in compute %q, not in the agent's compute %q; create a source in the agent's compute", s.Name, s.ComputeID, c.ID))
	}

	switch s.Method {
	case MethodRuntime:
		if c.Kind != KindSSH {
			return d, append(errs, conflict("AU5", attr, "method \"runtime\" loads host credentials under systemd and exists only on SSH computes; on Kubernetes use api_key, codex_pat or credential_source"))
		}
		if gateway {
			// AU4: a selected Credential Gateway admits no other credential
			// path; on SSH it cannot serve the agent (it pairs with the
			// OpenShell sandbox, Kubernetes only), so host credentials would bypass it.
			return d, append(errs, conflict("AU4", attr, "compute %q selects credential gateway %q, which serves only credential_source bindings of a dedicated harness in the OpenShell sandbox on Kubernetes; method \"runtime\" would bypass it. Remove credential_gateway from the SSH compute", c.Name, c.CredentialGateway.Name))
		}
		d.Consumer = ConsumerHost
		return d, errs
	case MethodAPIKey, MethodCodexPAT, MethodCredentialSource:
		if c.Kind == KindSSH {
			return d, append(errs, conflict("AU5", attr, "an SSH compute accepts only method \"runtime\" (systemd loads the operator's credentials file); %q is not available there", s.Method))
		}
	default:
		return d, append(errs, invalid("AU1", attr, nil, "auth method %q is not supported; use api_key, codex_pat, credential_source or runtime", s.Method))
	}

	if gateway && (s.Method == MethodAPIKey || s.Method == MethodCodexPAT) {
		return d, append(errs, conflict("AU4", attr, "compute %q selects credential gateway %q, so Secret-backed and account methods are refused; use a source with method = \"credential_source\", or remove credential_gateway from the compute", c.Name, c.CredentialGateway.Name))
	}

	switch s.Method {
	case MethodAPIKey:
		switch {
		case !dedicated:
			d.Consumer = ConsumerGateway
			d.EnvVar = providerKeyEnv(primaryProvider)
			if d.EnvVar == "" {
				errs = append(errs, invalid("AU1", attr, nil, "embedded OpenClaw receives an api_key as OPENAI_API_KEY or ANTHROPIC_API_KEY, chosen by the primary model's provider; provider %q has neither. Use an openai or anthropic primary model, or a credential_source binding", primaryProvider))
			}
		case harness == HarnessOpenClaw:
			d.Consumer, d.EnvVar = ConsumerHarness, "OPENAI_API_KEY"
			if providerKeyEnv(primaryProvider) != "OPENAI_API_KEY" {
				errs = append(errs, invalid("AU1", attr, nil, "dedicated OpenClaw receives an api_key only as OPENAI_API_KEY; the primary model's provider %q does not use it. Use an openai primary model", primaryProvider))
			}
		default:
			d.Consumer, d.EnvVar, d.LoginMode = ConsumerHarness, "OPENAI_API_KEY", "api_key_stdin"
		}
	case MethodCodexPAT:
		if harness != HarnessCodex || !dedicated {
			errs = append(errs, invalid("AU2", attr, nil, "codex_pat authenticates dedicated Codex only; this agent runs %s %s. Use api_key, or harness = \"codex\" with execution_mode = \"dedicated\"", harness, mode))
		}
		d.Consumer, d.EnvVar, d.LoginMode = ConsumerHarness, "CODEX_ACCESS_TOKEN", "codex_pat"
	case MethodCredentialSource:
		errs = append(errs, checkCredentialSource(harness, mode, c, s, attr)...)
		d.Consumer, d.Placeholder = ConsumerProxy, true
	}
	return d, errs
}

// checkCredentialSource applies AU3: a selected credential gateway, the
// paired OpenShell sandbox, a dedicated harness and a compatible source type.
func checkCredentialSource(harness, mode string, c Compute, s CredentialSource, attr []string) Errors {
	var errs Errors
	if mode != ModeDedicated {
		errs = append(errs, invalid("AU3", attr, nil, "credential_source feeds a dedicated harness through the sandbox egress proxy; embedded OpenClaw cannot use it. Set execution_mode = \"dedicated\" or use api_key"))
	}
	if c.CredentialGateway == nil {
		errs = append(errs, conflict("AU3", attr, "credential_source needs a credential gateway on the compute; add kubernetes.credential_gateway = { name = \"…\" } to compute %q", c.Name))
	}
	if c.SandboxDriver == nil || c.SandboxDriver.Name != DriverOpenShell {
		errs = append(errs, conflict("AU3", attr, "credential_source needs the paired OpenShell sandbox driver; add kubernetes.sandbox_driver = { name = %q, … } to compute %q", DriverOpenShell, c.Name))
	}
	switch s.SourceType {
	case SourceTypeOpenAIAPIKey:
	case SourceTypeCodexOAuth:
		if harness != HarnessCodex {
			errs = append(errs, invalid("AU3", attr, nil, "source_type %q (experimental) serves dedicated Codex only; use %q for OpenClaw", SourceTypeCodexOAuth, SourceTypeOpenAIAPIKey))
		}
	default:
		errs = append(errs, invalid("AU3", attr, nil, "source_type %s is not compatible; the bundled catalog offers %q (and %q for dedicated Codex)", quoteOrNone(s.SourceType), SourceTypeOpenAIAPIKey, SourceTypeCodexOAuth))
	}
	return errs
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}
