package occconfig

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; it fails only with a *SyntaxError or a
// *ValueError; on success the canonical form re-parses to a document with
// identical canonical bytes and digest.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"a": 1, "b": [true, false, null], "c": {"d": "e"}}`,
		"{\n // comment\n a: 1, /* block */ b: 'x',\n}",
		`{a: 0x1F, b: +1, c: -.5, d: 5., e: 1e21, f: -0x10}`,
		`{a: 123456789012345678901234567890, b: -99999999999999999999}`,
		`{a: 1e16, b: 9007199254740993, c: 1.7976931348623157e308, d: 5e-324}`,
		`{a: NaN}`,
		`{a: [1, Infinity]}`,
		`{} // trailing`,
		`{} x`,
		`[1, 2]`,
		`{"\u2028": "<&>", "é": "\ud83d\ude00"}`,
		"{\"\xff\": 1, \"\xfe\": 2}",
		`{agents: {defaults: {model: {primary: "openai/gpt-5", fallbacks: ["openai/a"]}, models: {"openai/gpt-5": {agentRuntime: {id: "codex"}}}}}}`,
		`{"a": 1, "a": 2}`,
		`{a: -0, b: -0.0, c: 0e5}`,
		`{`,
		``,
		`{a: "\x41"}`,
		"{}" + strings.Repeat(" ", 600) + "x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		doc, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			var ve *ValueError
			if !errors.As(err, &se) && !errors.As(err, &ve) {
				t.Fatalf("Parse error %T %v is neither *SyntaxError nor *ValueError", err, err)
			}
			if se != nil && (se.Line < 1 || se.Column < 1) {
				t.Fatalf("syntax error position line %d column %d", se.Line, se.Column)
			}
			return
		}
		if doc == nil {
			t.Fatalf("Parse(%q) returned a nil document without an error", src)
		}
		canon := Canonical(doc)
		again, err := Parse(string(canon))
		if err != nil {
			t.Fatalf("canonical form %s does not re-parse: %v", canon, err)
		}
		if c2 := Canonical(again); !bytes.Equal(c2, canon) {
			t.Fatalf("canonical form is not stable:\n first %s\nsecond %s", canon, c2)
		}
		if Digest(again) != Digest(doc) {
			t.Fatalf("digest changed across re-parse")
		}
		if Digest(Clone(doc)) != Digest(doc) {
			t.Fatalf("clone has a different digest")
		}
	})
}
