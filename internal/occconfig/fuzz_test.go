package occconfig

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/titanous/json5"
)

// FuzzParse: Parse never panics; it fails only with a *SyntaxError or a
// *ValueError with a message; on success the document keeps within the
// limits (MaxDocumentDepth, MaxDocumentBytes of canonical form, at most
// canonicalGrowth bytes of canonical form per byte of source), every value
// in it is found again by its Path, and the canonical form re-parses to a
// document with identical canonical bytes and digest. The nesting pre-scan
// never under-counts what the decoder nests (checked against a direct
// decode, which the small inputs of a fuzz run keep safe).
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
		// Limits and the nesting pre-scan.
		nested(MaxDocumentDepth, "{", "}"),
		nested(MaxDocumentDepth+1, "{", "}"),
		`{a:` + strings.Repeat("[", MaxDocumentDepth-1) + strings.Repeat("]", MaxDocumentDepth-1) + `}`,
		strings.Repeat("[", 200),
		strings.Repeat("{a:", 200),
		`{a: "[[[{{{", b: '{\'[', c: "\"[", // [[[` + "\r" + ` d: /* [[ */ 1}`,
		`{a: /* * / [[]] , b: 1 /**/}`,
		`{a: /* * / ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `, b: 1 /**/}`,
		`{} /* [[[[ */`,
		`{"k\"[": {'k\'{': [[], {}]}}`,
		`{a: [1e20, 1e20, 1e20,]}`,
		`1 [[[[`,
		"\"str\" {{{{",
		`{a: "\` + "\n" + `[[["}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, deep := nesting(src, MaxDocumentDepth); !deep {
			checkNestingBound(t, src)
		}
		doc, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			var ve *ValueError
			if !errors.As(err, &se) && !errors.As(err, &ve) {
				t.Fatalf("Parse error %T %v is neither *SyntaxError nor *ValueError", err, err)
			}
			if se != nil && (se.Line < 1 || se.Column < 1 || se.Msg == "") {
				t.Fatalf("syntax error position line %d column %d, message %q", se.Line, se.Column, se.Msg)
			}
			if ve != nil && ve.Msg == "" {
				t.Fatalf("value error without a message at %s", ve.Path)
			}
			return
		}
		if doc == nil {
			t.Fatalf("Parse(%q) returned a nil document without an error", src)
		}
		if d := depth(map[string]any(doc)); d > MaxDocumentDepth {
			t.Fatalf("accepted a document nested %d levels deep", d)
		}
		checkPaths(t, doc, map[string]any(doc), nil)
		canon := Canonical(doc)
		if len(canon) > MaxDocumentBytes {
			t.Fatalf("accepted a document of %d bytes in canonical form", len(canon))
		}
		if len(canon) > canonicalGrowth*len(src) {
			t.Fatalf("canonical form grew from %d to %d bytes, more than canonicalGrowth (%d) allows: %q -> %s",
				len(src), len(canon), canonicalGrowth, src, canon)
		}
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

// checkNestingBound decodes src directly and fails when the decoder nests
// deeper than MaxDocumentDepth: nesting said it does not.
func checkNestingBound(t *testing.T, src string) {
	t.Helper()
	var raw any
	dec := json5.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	if dec.Decode(&raw) != nil {
		return
	}
	if d := depth(raw); d > MaxDocumentDepth {
		t.Fatalf("nesting missed a value nested %d levels deep in %q", d, src)
	}
}

// depth is how many levels of objects and arrays v nests (0 for a scalar).
func depth(v any) int {
	deepest := 0
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			deepest = max(deepest, depth(e))
		}
	case []any:
		for _, e := range t {
			deepest = max(deepest, depth(e))
		}
	default:
		return 0
	}
	return deepest + 1
}

// checkPaths looks every value of v up again by its path from the root.
func checkPaths(t *testing.T, root Document, v any, p Path) {
	t.Helper()
	got, ok := Lookup(root, p)
	if !ok {
		t.Fatalf("Lookup(%s) found nothing", p)
	}
	if !bytes.Equal(Canonical(got), Canonical(v)) {
		t.Fatalf("Lookup(%s) = %s, want %s", p, Canonical(got), Canonical(v))
	}
	switch tv := v.(type) {
	case map[string]any:
		for k, e := range tv {
			checkPaths(t, root, e, p.Key(k))
		}
	case []any:
		for i, e := range tv {
			checkPaths(t, root, e, p.Index(i))
		}
	}
}
