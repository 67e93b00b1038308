package executor

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

const sentinel = "sk-SENTINEL-9f3c2a7e-do-not-leak"

// rule AU7: raw runtime output quoted in a diagnostic never carries a
// credential: neither a value the runtime was given, nor what looks like one.
func TestAU7_RedactorWithholdsCredentials(t *testing.T) {
	r := NewRedactor(sentinel, "0123456789abcdef0123", "short", "p@ss/w+rd=secret!")
	for _, tc := range []struct {
		name, in string
		leak     []string // must not remain
		keep     []string // must remain
	}{
		{"env dump", "ANTHROPIC_API_KEY=" + sentinel, []string{sentinel, "SENTINEL"}, []string{"ANTHROPIC_API_KEY="}},
		{"known value alone", "starting with key " + "0123456789abcdef0123" + " now", []string{"0123456789abcdef0123"}, []string{"starting with key", "now"}},
		{"known value base64", "cfg " + base64.StdEncoding.EncodeToString([]byte(sentinel)), []string{base64.StdEncoding.EncodeToString([]byte(sentinel))}, []string{"cfg"}},
		{"json field", `{"apiKey":"abc123-private","model":"anthropic/claude-sonnet-4-5"}`, []string{"abc123-private"}, []string{`"model":"anthropic/claude-sonnet-4-5"`}},
		{"yaml field", `  token: hunter2hunter2`, []string{"hunter2hunter2"}, []string{"token:"}},
		{"header", "Authorization: Bearer eyJhbGciOi.payloadpayload.signaturesig", []string{"eyJhbGciOi", "payloadpayload"}, []string{"Authorization:"}},
		{"x-api-key header", "x-api-key: abcdefgh12345678", []string{"abcdefgh12345678"}, []string{"x-api-key:"}},
		{"bare provider key", "using sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAA for requests", []string{"sk-ant-api03-AAAA"}, []string{"using", "for requests"}},
		{"github token", "GH ghp_0123456789abcdefghijABCDEFGHIJ", []string{"ghp_0123456789"}, []string{"GH"}},
		{"aws key", "id AKIAABCDEFGHIJKLMNOP", []string{"AKIAABCDEFGHIJKLMNOP"}, []string{"id"}},
		{"gateway token hex", "token is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", []string{"9f86d081884c7d659a2feaa0c55ad015"}, []string{"token is"}},
		{"terminal escapes", "\x1b[31mERROR\x1b[0m boot\x07 failed\r", []string{"\x1b", "\x07", "\r", "[31m"}, []string{"ERROR boot failed"}},
		{"escape inside a known value", "key " + sentinel[:10] + "\x1b[0m" + sentinel[10:], []string{sentinel}, []string{"key"}},
		{"digest kept", "image ghcr.io/openclaw/openclaw@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", nil, []string{"sha256:9f86d081884c7d659a2feaa0c55ad015"}},
		{"ordinary line kept", "gateway listening on 0.0.0.0:18789 (model anthropic/claude-sonnet-4-5)", nil, []string{"gateway listening on 0.0.0.0:18789 (model anthropic/claude-sonnet-4-5)"}},
		{"authentication failure kept", "Authentication failed: 401 invalid x-api-key", nil, []string{"Authentication failed: 401 invalid x-api-key"}},
		{"short known value not blanked", "a short line", nil, []string{"a short line"}},
		{"config error kept", `error Gateway failed to start: Invalid config at /etc/openclaw/support/r1/openclaw.json: | openclaw.json:1 — session: Unrecognized key: "bogus"`, nil,
			[]string{"/etc/openclaw/support/r1/openclaw.json", `Unrecognized key: "bogus"`}},
		{"long words kept", "openclaw-gateway-configuration-loader-initialisation done", nil, []string{"openclaw-gateway-configuration-loader-initialisation"}},
		{"compound key", "privateKey: abcdefgh", []string{"abcdefgh"}, []string{"privateKey:"}},
		{"basic auth", "basic_auth=user:pa55word", []string{"pa55word"}, []string{"basic_auth="}},
		// Issue 27: the shapes the redactor missed.
		{"api key in words", "API key: abcd1234efgh", []string{"abcd1234efgh"}, []string{"API key:"}},
		{"access token in words", "using access token = tok3n-value-here", []string{"tok3n-value-here"}, []string{"access token ="}},
		{"url password", "dial https://occ:s3cr3t-pass@proxy.internal:3128/v1 failed", []string{"s3cr3t-pass"}, []string{"https://occ:", "@proxy.internal:3128/v1 failed"}},
		{"url token as user", "clone https://ghs0123456789abcdefXYZ@github.com/o/r", []string{"ghs0123456789abcdefXYZ"}, []string{"https://", "@github.com/o/r"}},
		{"url plain user kept", "ssh://git@github.com/o/r", nil, []string{"ssh://git@github.com/o/r"}},
		{"query key", "GET https://generativelanguage.googleapis.com/v1/models?key=abcd1234&alt=json", []string{"abcd1234"}, []string{"?key=", "&alt=json"}},
		{"known value url-encoded", "form body user=occ&pw=" + url.QueryEscape("p@ss/w+rd=secret!") + "&x=1", []string{url.QueryEscape("p@ss/w+rd=secret!")}, []string{"form body user=occ&pw=", "&x=1"}},
		{"known value path-escaped", "GET /keys/" + url.PathEscape("p@ss/w+rd=secret!") + "/x", []string{url.PathEscape("p@ss/w+rd=secret!")}, []string{"GET /keys/", "/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Line(tc.in)
			for _, l := range tc.leak {
				if strings.Contains(got, l) {
					t.Errorf("Line(%q) = %q: still holds %q", tc.in, got, l)
				}
			}
			for _, k := range tc.keep {
				if !strings.Contains(got, k) {
					t.Errorf("Line(%q) = %q: lost %q", tc.in, got, k)
				}
			}
		})
	}
}

// rule AU7: lines are bounded in number and length; a cut never splits a
// rune, and redaction happens before it.
func TestAU7_RedactorBoundsLines(t *testing.T) {
	r := NewRedactor(sentinel)
	var many []string
	for i := 0; i < 3*MaxQuotedLines; i++ {
		many = append(many, "line")
	}
	many[len(many)-1] = "last"
	out := r.Lines(many)
	if len(out) != MaxQuotedLines || out[len(out)-1] != "last" {
		t.Fatalf("Lines kept %d lines ending %q, want the last %d", len(out), out[len(out)-1], MaxQuotedLines)
	}
	long := strings.Repeat("é", MaxQuotedLineBytes) + " KEY=" + sentinel
	got := r.Line(long)
	if strings.Contains(got, "SENTINEL") || !strings.Contains(got, "more bytes withheld") || len(got) > MaxQuotedLineBytes+64 {
		t.Fatalf("Line(long) = %q (%d bytes)", got, len(got))
	}
	if !strings.HasPrefix(got, "é") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("Line(long) split a rune: %q", got[:16])
	}
	// Longest known value first: one that contains another goes whole.
	r2 := NewRedactor("abcdefgh", "abcdefgh-ijklmnop")
	if got := r2.Line("v=x abcdefgh-ijklmnop y"); strings.Contains(got, "ijklmnop") {
		t.Fatalf("nested known values: %q", got)
	}
}

func FuzzRedactor(f *testing.F) {
	f.Add("ANTHROPIC_API_KEY="+sentinel, sentinel)
	f.Add("\x1b]0;"+sentinel+"\x07", sentinel)
	f.Add(strings.Repeat("x", 500)+sentinel, sentinel)
	f.Fuzz(func(t *testing.T, line, secret string) {
		r := NewRedactor(secret)
		got := r.Line(line)
		if len(got) > MaxQuotedLineBytes+64 {
			t.Fatalf("line of %d bytes", len(got))
		}
		clean := strings.TrimSpace(secret)
		// A known value of a printable line never survives whole.
		if len(clean) >= minSecretLen && clean == strings.Map(func(c rune) rune {
			if c < 0x20 || c == 0x7f || c > 0x7e {
				return -1
			}
			return c
		}, clean) && strings.Contains(got, clean) && !strings.Contains(clean, Redacted) {
			t.Fatalf("Line(%q) with known %q = %q", line, clean, got)
		}
		if again := r.Line(got); len(again) > len(got)+64 {
			t.Fatalf("redaction grows: %q -> %q", got, again)
		}
	})
}
