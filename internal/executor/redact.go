package executor

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Raw runtime output (a crashed container's previous log, a unit's
// journal, a failed command's stderr) is quoted in diagnostics because it
// is often the only clue; but a runtime that prints its environment or a
// request would put a credential in a Terraform run log (AU7). Every such
// line goes through a Redactor first: the values the executor knows the
// runtime holds are replaced wherever they appear, and so is whatever
// looks like a credential; lines are bounded in length and number, and
// control characters (terminal escapes) are dropped.
const (
	// MaxQuotedLines is the most raw lines a diagnostic quotes.
	MaxQuotedLines = 20
	// MaxQuotedLineBytes is the most bytes of one raw line a diagnostic
	// quotes; the rest is withheld.
	MaxQuotedLineBytes = 240
	// Redacted replaces what is withheld.
	Redacted = "[redacted]"
)

// minSecretLen is the shortest known value replaced verbatim: a shorter
// one would blank ordinary words.
const minSecretLen = 8

// assignment matches NAME=value, NAME: value and "name": "value" (env
// dumps, JSON, YAML, flags) where the name speaks of a credential: one
// ending in token, secret, password, credential(s), cookie or
// authorization, or a compound one ending in key or auth (apiKey,
// x-api-key, ANTHROPIC_API_KEY, basic_auth; a bare "key" or "auth" is too
// common in error messages: `Unrecognized key: "foo"`).
var assignment = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b([A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|credentials?|cookie|authorization)"?\s*[=:]\s*"?)([^\s"',;}]+)`),
	regexp.MustCompile(`(?i)\b([A-Za-z0-9_.-]+(?:key|auth)"?\s*[=:]\s*"?)([^\s"',;}]+)`),
}

// spaced matches a credential named in words, as a person or a log line
// writes it: "API key: X", "access token = X", "secret key X=".
var spaced = regexp.MustCompile(`(?i)\b((?:api|access|secret|private|auth|bearer|session|refresh)[ _-](?:key|token)s?"?\s*[=:]\s*"?)([^\s"',;}]+)`)

// userinfo matches the password of a URL's userinfo
// (https://user:PASSWORD@host); userToken a user part that is itself a
// token (https://TOKEN@host), replaced when it looks opaque.
var (
	userinfo  = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)([^/\s@]+)@`)
	userToken = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/\s:@]{16,})@`)
)

// query matches a credential in a URL's query string, under a name too
// bare for assignment (?key=, &sig=, &code=).
var query = regexp.MustCompile(`(?i)([?&](?:key|sig|signature|code|auth|pass|pwd)=)([^&\s"'#]+)`)

// scheme matches an Authorization scheme's credential.
var scheme = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{6,})`)

// shapes are well-known credential shapes: provider keys, Slack, GitHub,
// AWS, Google, JWTs.
var shapes = []*regexp.Regexp{
	regexp.MustCompile(`\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}`),
	regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),
	regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`),
}

// opaque matches a long opaque string (a hex or base64 token, such as the
// gateway's) standing on its own: not a path component, a file name or a
// content digest (preceded by "/", ".", ":" or "="), and holding both
// letters and digits (opaqueToken), so that long hyphenated words stay.
var opaque = regexp.MustCompile(`(^|[^A-Za-z0-9+/_.:=-])([A-Za-z0-9+_-]{32,}={0,2})`)

func opaqueToken(s string) bool {
	return strings.ContainsAny(s, "0123456789") && strings.IndexFunc(s, unicode.IsLetter) >= 0
}

// ansi is a terminal escape sequence: CSI (colours, cursor) or OSC
// (window titles), removed whole.
var ansi = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?")

// Redactor withholds credentials from raw lines.
type Redactor struct {
	known []string // longest first
}

// NewRedactor is a Redactor that also replaces the given values (and
// their base64 and URL-encoded forms) wherever they appear: the credentials the runtime
// was given.
func NewRedactor(known ...string) Redactor {
	var r Redactor
	seen := map[string]bool{}
	for _, v := range known {
		v = strings.TrimSpace(v)
		if len(v) < minSecretLen || seen[v] {
			continue
		}
		seen[v] = true
		r.known = append(r.known, v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
		// Its URL-encoded forms, as a request line or a URL quotes it.
		for _, enc := range []string{url.QueryEscape(v), url.PathEscape(v)} {
			if enc != v && !seen[enc] {
				seen[enc] = true
				r.known = append(r.known, enc)
			}
		}
	}
	// Longest first, so that a value containing another is replaced whole.
	for i := 1; i < len(r.known); i++ {
		for j := i; j > 0 && len(r.known[j]) > len(r.known[j-1]); j-- {
			r.known[j], r.known[j-1] = r.known[j-1], r.known[j]
		}
	}
	return r
}

// Lines is the last MaxQuotedLines of lines, each redacted and bounded.
func (r Redactor) Lines(lines []string) []string {
	if len(lines) > MaxQuotedLines {
		lines = lines[len(lines)-MaxQuotedLines:]
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, r.Line(l))
	}
	return out
}

// Line is one raw line without control characters, redacted, and at most
// MaxQuotedLineBytes long (redaction before the cut: a cut must not leave
// a credential's head that no longer matches).
func (r Redactor) Line(l string) string {
	// Control characters first: an escape sequence inside a value must
	// not hide it from the replacements.
	l = ansi.ReplaceAllString(l, "")
	l = strings.Map(func(c rune) rune {
		switch {
		case c == '\t':
			return ' '
		case unicode.IsControl(c) || c == utf8.RuneError || unicode.In(c, unicode.Cf):
			return -1
		}
		return c
	}, l)
	for _, v := range r.known {
		l = strings.ReplaceAll(l, v, Redacted)
	}
	l = RedactText(l)
	if len(l) > MaxQuotedLineBytes {
		cut := MaxQuotedLineBytes
		for cut > 0 && !utf8.RuneStart(l[cut]) {
			cut--
		}
		l = fmt.Sprintf("%s… (%d more bytes withheld)", l[:cut], len(l)-cut)
	}
	return l
}

// RedactText replaces what looks like a credential in s.
func RedactText(s string) string {
	s = scheme.ReplaceAllString(s, "${1}${2}"+Redacted)
	s = spaced.ReplaceAllString(s, "${1}"+Redacted)
	s = userinfo.ReplaceAllString(s, "${1}"+Redacted+"@")
	s = userToken.ReplaceAllStringFunc(s, func(m string) string {
		sub := userToken.FindStringSubmatch(m)
		if !opaqueToken(sub[2]) {
			return m
		}
		return sub[1] + Redacted + "@"
	})
	s = query.ReplaceAllString(s, "${1}"+Redacted)
	for _, p := range assignment {
		s = p.ReplaceAllString(s, "${1}"+Redacted)
	}
	for _, p := range shapes {
		s = p.ReplaceAllString(s, Redacted)
	}
	return opaque.ReplaceAllStringFunc(s, func(m string) string {
		sub := opaque.FindStringSubmatch(m)
		if !opaqueToken(sub[2]) {
			return m
		}
		return sub[1] + Redacted
	})
}
