package admission

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Consumers of the model credential.
const (
	ConsumerGateway = "gateway" // the combined gateway/harness of embedded OpenClaw
	ConsumerHarness = "harness" // the dedicated harness only (AU6)
	ConsumerHost    = "host"    // systemd on an SSH host loads it (AU5)
	ConsumerProxy   = "sandbox-egress-proxy"
)

// CredentialDelivery is how the revision's harness receives its model
// credential, fixed by the auth binding (AU1 to AU5). It names no secret.
// Render sets exactly these variables (contract.go names them), so that
// what admission decided is what runs.
type CredentialDelivery struct {
	Method   string `json:"method"`
	Consumer string `json:"consumer"`
	// EnvVar is the variable the harness receives the credential in: the
	// key or token, or with Placeholder the placeholder the sandbox egress
	// proxy swaps for the key (AU3); empty when it receives none that way.
	EnvVar string `json:"env_var,omitempty"`
	// LoginMode is how Codex logs in (EnvCodexLoginMode): LoginAPIKeyStdin
	// or LoginCodexPAT; empty for OpenClaw.
	LoginMode string `json:"login_mode,omitempty"`
	// Placeholder is true when the harness gets only a placeholder and the
	// sandbox egress proxy inserts the key (AU3).
	Placeholder bool `json:"placeholder,omitempty"`
}

// MarshalJSON is the delivery's part of the revision's content address
// (Revision.ID). A placeholder delivery's variable and login mode follow
// from the source type and the harness, which the revision freezes already
// (Source.SourceType, Harness): they are left out, so that a placeholder
// delivery encodes, and a revision is addressed, as before they were named
// here.
func (d CredentialDelivery) MarshalJSON() ([]byte, error) {
	type plain CredentialDelivery
	p := plain(d)
	if p.Placeholder {
		p.EnvVar, p.LoginMode = "", ""
	}
	return json.Marshal(p)
}

// CheckAuth applies the auth-binding matrix (AU1 to AU5) and AD1's source
// ownership to a resolved harness, mode, primary provider, Compute and
// source. It returns how the credential reaches the runtime.
func CheckAuth(harness, mode, primaryProvider string, c Compute, s CredentialSource) (CredentialDelivery, Errors) {
	attr := []string{"harness_auth", "source"}
	d := CredentialDelivery{Method: s.Method}
	var errs Errors
	gateway := c.Kubernetes().CredentialGateway != nil
	dedicated := mode == ModeDedicated

	if s.ComputeID != "" && s.ComputeID != c.ID && s.Method != MethodCredentialSource {
		errs = append(errs, conflict("AD1", attr, "credential source %q lives in compute %q, not in the agent's compute %q; create a source in the agent's compute", s.Name, s.ComputeID, c.ID))
	}
	if !slices.Contains(AuthMethods, s.Method) {
		return d, append(errs, invalid("AU1", attr, nil, "auth method %q is not supported; use api_key, codex_pat, credential_source or runtime", s.Method))
	}
	row := kindRow(c.Kind)
	if !row.AcceptsMethod(s.Method) {
		return d, append(errs, refuseMethod(row, s.Method, attr))
	}

	if s.Method == MethodRuntime {
		if gateway {
			// AU4: a selected Credential Gateway admits no other credential
			// path; on a kind without a sandbox driver it cannot serve the
			// agent (it pairs with the OpenShell sandbox), so host
			// credentials would bypass it.
			return d, append(errs, conflict("AU4", attr, "compute %q selects credential gateway %q, which serves only credential_source bindings of a dedicated harness in the OpenShell sandbox on %s; method \"runtime\" would bypass it. Remove credential_gateway from the %s compute",
				c.Name, c.Kubernetes().CredentialGateway.Name, titles(kindsWhere(func(k KindSupport) bool { return k.SandboxDriver })), row.Words.Title))
		}
		d.Consumer = ConsumerHost
		return d, errs
	}

	if gateway && (s.Method == MethodAPIKey || s.Method == MethodCodexPAT) {
		return d, append(errs, conflict("AU4", attr, "compute %q selects credential gateway %q, so Secret-backed and account methods are refused; use a source with method = \"credential_source\", or remove credential_gateway from the compute", c.Name, c.Kubernetes().CredentialGateway.Name))
	}

	switch s.Method {
	case MethodAPIKey:
		switch {
		case !dedicated:
			d.Consumer = ConsumerGateway
			d.EnvVar = ProviderKeyEnv(primaryProvider)
			if d.EnvVar == "" {
				errs = append(errs, invalid("AU1", attr, nil, "embedded OpenClaw receives an api_key as OPENAI_API_KEY or ANTHROPIC_API_KEY, chosen by the primary model's provider; provider %q has neither. Use an openai or anthropic primary model, or a credential_source binding", primaryProvider))
			}
		case harness == HarnessOpenClaw:
			d.Consumer, d.EnvVar = ConsumerHarness, EnvOpenAIAPIKey
			if ProviderKeyEnv(primaryProvider) != EnvOpenAIAPIKey {
				errs = append(errs, invalid("AU1", attr, nil, "dedicated OpenClaw receives an api_key only as OPENAI_API_KEY; the primary model's provider %q does not use it. Use an openai primary model", primaryProvider))
			}
		default:
			d.Consumer, d.EnvVar, d.LoginMode = ConsumerHarness, EnvOpenAIAPIKey, LoginAPIKeyStdin
		}
	case MethodCodexPAT:
		if harness != HarnessCodex || !dedicated {
			errs = append(errs, invalid("AU2", attr, nil, "codex_pat authenticates dedicated Codex only; this agent runs %s %s. Use api_key, or harness = \"codex\" with execution_mode = \"dedicated\"", harness, mode))
		}
		if e := CheckAccountSource(s.ServiceAccount, attr); e != nil {
			errs = append(errs, e)
		}
		d.Consumer, d.EnvVar, d.LoginMode = ConsumerHarness, EnvCodexAccessToken, LoginCodexPAT
	case MethodCredentialSource:
		errs = append(errs, checkCredentialSource(harness, mode, c, s, attr)...)
		// The OpenAI key's placeholder, in the variable the proxy swaps;
		// Codex logs in with it. (codex_oauth is refused above.)
		d.Consumer, d.Placeholder = ConsumerProxy, true
		d.EnvVar = EnvOpenAIAPIKey
		if harness == HarnessCodex {
			d.LoginMode = LoginAPIKeyStdin
		}
	}
	return d, errs
}

// refuseMethod is AU5 for an Agent whose source's method its compute's kind
// does not take: a kind with a single method names it; otherwise the
// refusal names the kinds the method exists on.
func refuseMethod(row KindSupport, method string, attr []string) *Error {
	if len(row.AuthMethods) == 1 {
		note := ""
		if row.Words.CredentialNote != "" {
			note = " (" + row.Words.CredentialNote + ")"
		}
		return conflict("AU5", attr, "%s accepts only method %q%s; %q is not available there", row.Words.Noun, row.AuthMethods[0], note, method)
	}
	note := ""
	if n := methodNotes[method]; n != "" {
		note = n + " and "
	}
	return conflict("AU5", attr, "method %q %sexists only on %s computes; on %s use %s", method, note, titles(kindsAccepting(method)), row.Words.Title, orList(row.AuthMethods))
}

// methodNotes say what a method does, where a refusal names it.
var methodNotes = map[string]string{MethodRuntime: "loads host credentials under systemd"}

func kindsAccepting(method string) []KindSupport {
	return kindsWhere(func(k KindSupport) bool { return k.AcceptsMethod(method) })
}

// CheckSourceCompute applies AU5 to a credential source and the compute it
// lives in: the compute's kind must take the source's method (an SSH host
// only runtime, Kubernetes never runtime). A method that is not known is
// left to the method's own validation (nil). The refusal points at the
// source's compute attribute.
func CheckSourceCompute(method string, c Compute) *Error {
	if !slices.Contains(AuthMethods, method) {
		return nil
	}
	row := kindRow(c.Kind)
	if row.AcceptsMethod(method) {
		return nil
	}
	attr := []string{"compute"}
	if len(row.AuthMethods) == 1 {
		where := ""
		if row.Words.CredentialNote != "" {
			where = ", where " + row.Words.CredentialNote
		}
		return conflict("AU5", attr, "%s holds only %s credentials: compute %q is %s%s; method %q needs %s",
			row.Words.Noun, row.AuthMethods[0], c.Name, row.Words.Is, where, method, nouns(kindsAccepting(method)))
	}
	return conflict("AU5", attr, "%s rejects the %s method: compute %q is %s; method %q exists only on %s computes. Use %s",
		row.Words.Title, method, c.Name, row.Words.Is, method, titles(kindsAccepting(method)), orList(row.AuthMethods))
}

// checkCredentialSource applies AU3: a selected credential gateway, the
// paired OpenShell sandbox, a dedicated harness and a compatible source type.
func checkCredentialSource(harness, mode string, c Compute, s CredentialSource, attr []string) Errors {
	var errs Errors
	if mode != ModeDedicated {
		errs = append(errs, invalid("AU3", attr, nil, "credential_source feeds a dedicated harness through the sandbox egress proxy; embedded OpenClaw cannot use it. Set execution_mode = \"dedicated\" or use api_key"))
	}
	if c.Kubernetes().CredentialGateway == nil {
		errs = append(errs, conflict("AU3", attr, "credential_source needs a credential gateway on the compute; add kubernetes.credential_gateway = { name = \"…\" } to compute %q", c.Name))
	}
	if c.Kubernetes().SandboxDriver == nil || c.Kubernetes().SandboxDriver.Name != DriverOpenShell {
		errs = append(errs, conflict("AU3", attr, "credential_source needs the paired OpenShell sandbox driver; add kubernetes.sandbox_driver = { name = %q, … } to compute %q", DriverOpenShell, c.Name))
	}
	switch s.SourceType {
	case SourceTypeOpenAIAPIKey:
	case SourceTypeCodexOAuth:
		// The platform's experimental codex-oauth source (external ChatGPT
		// tokens through the egress proxy) is not supported by this
		// provider: the harness would get no key and no login, and the
		// native model probe Codex must pass before serving (PR2) runs in a
		// minimal environment with neither, so the revision could never
		// become ready.
		errs = append(errs, invalid("AU3", attr, nil, "source_type %q (the platform's experimental codex-oauth source) is not supported by this provider: "+
			"Codex would receive no key and no ChatGPT login, so the native model probe it must pass before serving (rule PR2) cannot succeed. "+
			"Use a credential source with source_type = %q, or, without a credential gateway, method = \"api_key\" or \"codex_pat\"", SourceTypeCodexOAuth, SourceTypeOpenAIAPIKey))
	default:
		errs = append(errs, invalid("AU3", attr, nil, "source_type %s is not compatible; the bundled catalog offers %q", quoteOrNone(s.SourceType), SourceTypeOpenAIAPIKey))
	}
	return errs
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// CheckAccountSource is AU2 for a codex_pat source that names an account
// instead of holding a token: refused. In the platform a service account
// is an OCC account whose model backend issues the access token; this
// provider has no such backend, and a Kubernetes ServiceAccount's token is
// not an OpenAI credential, so `codex login --with-access-token` would
// refuse it and the harness's startup probe could never pass. nil when
// serviceAccount is empty.
func CheckAccountSource(serviceAccount string, attr []string) *Error {
	if serviceAccount == "" {
		return nil
	}
	return invalid("AU2", attr, nil, "a codex_pat source from service account %q cannot log in: a Kubernetes ServiceAccount's token is not a Codex access token "+
		"(codex login --with-access-token would refuse it, and the harness's startup probe could never pass), and this provider has no account backend that issues one. "+
		"Put a Codex access token in a Secret of the compute's namespace and name it with secret_ref, or pass it in value_wo", serviceAccount)
}
