package startup

import (
	"regexp"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Class is a failure's closed failureClass (runtimerecord.FailureClasses).
type Class string

const (
	ClassNone        Class = ""
	ClassNetwork     Class = "network"      // connection failed, reset or dropped
	ClassTimeout     Class = "timeout"      // the attempt ran out of time
	ClassTLS         Class = "tls"          // certificate or handshake
	ClassDNS         Class = "dns"          // name resolution
	ClassAuth        Class = "auth"         // the provider rejected the credential
	ClassRateLimit   Class = "rate_limit"   // 429, quota or another limit
	ClassServerError Class = "server_error" // provider 5xx or overload
	ClassProtocol    Class = "protocol"     // an answer that is not a model answer (tool call, no text, other 4xx)
	ClassKilled      Class = "killed"       // the probe process died of a signal it was not sent by us
	ClassConfig      Class = "config"       // the probe could not be set up
	ClassUnknown     Class = "unknown"
)

// Retryable reports whether PR4 allows a retry after a failure of this
// class: a timeout, a transient failure (provider 5xx or overload, dropped
// connection, kill) or a network exit. A failure naming a credential, a
// TLS error or a limit is never retried, and nothing else is.
func (c Class) Retryable() bool {
	switch c {
	case ClassTimeout, ClassServerError, ClassNetwork, ClassKilled:
		return true
	}
	return false
}

// Outcome is what one probe attempt (or the whole probe) came to. Every
// field is drawn from a closed set or is a number.
type Outcome struct {
	Code        runtimerecord.Code
	Class       Class
	CauseKind   string
	CauseDetail string
	// ProviderCode is the HTTP status the provider answered, when known.
	ProviderCode int
	// Upfront is set when the upfront empty request was rejected (PR7).
	Upfront *UpfrontDetail
}

// UpfrontDetail describes the 401 to OpenClaw's upfront empty request.
type UpfrontDetail struct {
	HeaderMarker []string
	BodyShape    string
	ErrorCode    string
	ErrorType    string
}

// Ready is the successful outcome.
var Ready = Outcome{Code: runtimerecord.CodeReady}

// failure builds the outcome of one failed attempt of class c.
func failure(c Class, kind, detail string) Outcome {
	o := Outcome{Class: c, CauseKind: kind, CauseDetail: detail, Code: runtimerecord.CodeModelProbeFailed}
	switch c {
	case ClassTimeout:
		o.Code, o.CauseKind, o.CauseDetail = runtimerecord.CodeModelProbeTimeout, "", ""
	case ClassAuth:
		o.Code, o.CauseKind, o.CauseDetail = runtimerecord.CodeAuthenticationFailed, "", ""
	case ClassServerError:
		if o.CauseKind == "" {
			o.CauseKind, o.CauseDetail = "provider_error", "http_5xx"
		}
	}
	return o
}

// exhausted is the final outcome once a retry policy that allows a retry
// has run out: a provider that kept failing or stayed overloaded is
// UNAVAILABLE (PR6); every other outcome stands.
func (o Outcome) exhausted() Outcome {
	if o.Class == ClassServerError {
		o.Code, o.CauseKind, o.CauseDetail = runtimerecord.CodeUnavailable, "", ""
	}
	return o
}

// statusOutcome classifies an HTTP status of the provider.
func statusOutcome(status int) Outcome {
	var o Outcome
	switch {
	case status == 401 || status == 403:
		o = failure(ClassAuth, "", "")
	case status == 429:
		o = failure(ClassRateLimit, "provider_error", "http_429")
	case status == 404:
		o = failure(ClassProtocol, "provider_error", "invalid_model")
	case status >= 500:
		o = failure(ClassServerError, "provider_error", "http_5xx")
	default:
		o = failure(ClassProtocol, "provider_error", "http_4xx")
	}
	o.ProviderCode = status
	return o
}

var (
	urlRe       = regexp.MustCompile(`(?i)(url: )?[a-z][a-z0-9+.-]*://\S+`)
	authRe      = regexp.MustCompile(`(?i)\b(401|403)\b|unauthori[sz]ed|forbidden|invalid[_ ]api[_ ]key|incorrect api key|authentication|invalid (access )?token|token (is )?(expired|revoked|invalid)|not logged in`)
	tlsRe       = regexp.MustCompile(`(?i)certificate|\btls\b|\bssl\b|x509|unknownissuer|badsignature`)
	limitRe     = regexp.MustCompile(`(?i)\b429\b|too many requests|rate[_ ]limit|quota|\blimit\b|insufficient_quota`)
	dnsRe       = regexp.MustCompile(`(?i)\bdns\b|failed to lookup address|name resolution|no such host|name or service not known`)
	serverRe    = regexp.MustCompile(`(?i)status 5\d\d\b|high demand|overloaded|server_error|internal server error|service unavailable|bad gateway|gateway timeout`)
	networkRe   = regexp.MustCompile(`(?i)stream disconnected|connection failed|error sending request|connection (reset|refused|closed|aborted)|broken pipe|network error|websocket closed|error decoding response body|unexpected eof`)
	badModelRe  = regexp.MustCompile(`(?i)model.*(not found|does not exist|not supported|unsupported)|model_not_found|status 404\b`)
	status4xxRe = regexp.MustCompile(`(?i)status 4\d\d\b`)
)

// classifyMessage maps what Codex printed about a failed turn or login to
// a class and cause. The message is read, never kept: only the class
// leaves this function. URLs are dropped first so that a host or port
// cannot look like a status or a TLS error.
func classifyMessage(msg string) (Class, string, string) {
	m := urlRe.ReplaceAllString(msg, "")
	switch {
	case authRe.MatchString(m):
		return ClassAuth, "", ""
	case tlsRe.MatchString(m):
		return ClassTLS, "transport", "tls_handshake"
	case limitRe.MatchString(m):
		return ClassRateLimit, "provider_error", "http_429"
	case dnsRe.MatchString(m):
		return ClassDNS, "transport", "dns"
	case serverRe.MatchString(m):
		return ClassServerError, "provider_error", "http_5xx"
	case badModelRe.MatchString(m):
		return ClassProtocol, "provider_error", "invalid_model"
	case status4xxRe.MatchString(m):
		return ClassProtocol, "provider_error", "http_4xx"
	case strings.HasPrefix(strings.TrimSpace(m), "{") && strings.Contains(m, `"error"`):
		return ClassProtocol, "provider_error", "http_4xx" // Codex prints a 400's body as it came
	case networkRe.MatchString(m):
		detail := "connection_failed"
		switch lm := strings.ToLower(m); {
		case strings.Contains(lm, "stream disconnected") || strings.Contains(lm, "websocket closed") || strings.Contains(lm, "decoding response body"):
			detail = "stream_incomplete"
		case strings.Contains(lm, "reset"):
			detail = "connection_reset"
		case strings.Contains(lm, "refused"):
			detail = "connection_refused"
		}
		return ClassNetwork, "transport", detail
	}
	return ClassUnknown, "process_exit", "nonzero_exit"
}

// worst picks, of the classes seen in one attempt, the one that decides
// it: anything naming a credential, TLS or a limit wins over a transient
// class, so that such a failure is never retried (PR4).
func worst(a, b Class) Class {
	rank := func(c Class) int {
		switch c {
		case ClassAuth:
			return 9
		case ClassTLS:
			return 8
		case ClassRateLimit:
			return 7
		case ClassDNS:
			return 6
		case ClassProtocol:
			return 5
		case ClassServerError:
			return 4
		case ClassNetwork:
			return 3
		case ClassUnknown:
			return 2
		case ClassNone:
			return 0
		}
		return 1
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
