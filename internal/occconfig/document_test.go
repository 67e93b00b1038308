package occconfig

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) Document {
	t.Helper()
	d, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return d
}

func TestParse_JSONAndJSON5(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // canonical form
	}{
		{"plain json", `{"a": 1, "b": "x", "c": [true, false, null]}`, `{"a":1,"b":"x","c":[true,false,null]}`},
		{"empty object", `{}`, `{}`},
		{"line comment", "{\n // note\n \"a\": 1 // after\n}", `{"a":1}`},
		{"block comment", `{/* lead */ "a": /* mid */ 1 /* end */}`, `{"a":1}`},
		{"trailing commas", `{"a": [1, 2,], "b": {"c": 3,},}`, `{"a":[1,2],"b":{"c":3}}`},
		{"unquoted keys", `{agents: {defaults: {maxConcurrent: 4}}}`, `{"agents":{"defaults":{"maxConcurrent":4}}}`},
		{"identifier keys with $ and _", `{$schema: "s", _x: 1}`, `{"$schema":"s","_x":1}`},
		{"single quotes", `{'a': 'it"s', b: 'x'}`, `{"a":"it\"s","b":"x"}`},
		{"hex numbers", `{a: 0x1F, b: 0XfF, c: -0x10}`, `{"a":31,"b":255,"c":-16}`},
		{"plus and minus", `{a: +1, b: -1, c: +1.5, d: -2.5}`, `{"a":1,"b":-1,"c":1.5,"d":-2.5}`},
		{"leading dot decimal", `{a: .5, b: -.25}`, `{"a":0.5,"b":-0.25}`},
		{"trailing dot decimal", `{a: 5., b: -3.}`, `{"a":5,"b":-3}`},
		{"exponents", `{a: 1e3, b: 2.5E-1, c: 1e21}`, `{"a":1000,"b":0.25,"c":1e+21}`},
		{"big integer kept exact", `{a: 123456789012345678901234567890}`, `{"a":123456789012345678901234567890}`},
		{"no html escaping", `{a: "<b>&</b>"}`, `{"a":"<b>&</b>"}`},
		{"unicode escape", `{a: "\u00e9\u2028"}`, `{"a":"é\u2028"}`},
		{"nested arrays of objects", `{a: [{b: 1}, [2, {c: 'd'}]]}`, `{"a":[{"b":1},[2,{"c":"d"}]]}`},
		{"duplicate key keeps last", `{"a": 1, "a": 2}`, `{"a":2}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, tc.src)
			if got := string(Canonical(d)); got != tc.want {
				t.Errorf("Canonical = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParse_NumberTypes(t *testing.T) {
	d := mustParse(t, `{i: 1, f: 1.5, h: 0x10, whole: 2.0, big: 99999999999999999999, neg: -7}`)
	checks := map[string]any{
		"i":     int64(1),
		"f":     1.5,
		"h":     int64(16),
		"whole": int64(2),
		"big":   json.Number("99999999999999999999"),
		"neg":   int64(-7),
	}
	for k, want := range checks {
		if got := d[k]; got != want {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
}

func TestCanonical_StableAcrossSpellings(t *testing.T) {
	base := `{"a":1,"b":{"c":[1,2],"d":"x"}}`
	variants := []string{
		`{"b":{"d":"x","c":[1,2]},"a":1}`,
		"{\n  b: {\n    d: 'x',\n    c: [1, 2,],\n  },\n  a: 1, // one\n}",
		`{"a":1.0,"b":{"c":[1e0,0x2],"d":"x"}}`,
		`{"a":0x1,"b":{"c":[+1,2.0],"d":"x"}}`,
		`{"a":1e0,"b":{"c":[10e-1,20E-1],"d":"x"}}`,
		`{ "a" : 1 , "b" : { "c" : [ 1 , 2 ] , "d" : "x" } }`,
	}
	want := string(Canonical(mustParse(t, base)))
	if want != base {
		t.Fatalf("canonical of %s = %s", base, want)
	}
	wantDigest := Digest(mustParse(t, base))
	for _, v := range variants {
		d := mustParse(t, v)
		if got := string(Canonical(d)); got != want {
			t.Errorf("Canonical(%q) = %s, want %s", v, got, want)
		}
		if got := Digest(d); got != wantDigest {
			t.Errorf("Digest(%q) = %s, want %s", v, got, wantDigest)
		}
	}
}

func TestDigest(t *testing.T) {
	a := mustParse(t, `{a: 1, b: [1, 2]}`)
	same := mustParse(t, `{"b": [1, 2.0], "a": 0x1}`)
	tests := []struct {
		name  string
		other string
	}{
		{"different value", `{a: 2, b: [1, 2]}`},
		{"different array order", `{a: 1, b: [2, 1]}`},
		{"number vs string", `{a: "1", b: [1, 2]}`},
		{"extra key", `{a: 1, b: [1, 2], c: null}`},
		{"non-integral", `{a: 1.5, b: [1, 2]}`},
	}
	d := Digest(a)
	if len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
		t.Fatalf("Digest = %q, want 64 lowercase hex digits", d)
	}
	if Digest(same) != d {
		t.Errorf("equal documents have different digests: %s vs %s", Digest(same), d)
	}
	// Digest of a Document and of the plain map it holds agree.
	if Digest(map[string]any(a)) != d {
		t.Errorf("Digest(map) != Digest(Document)")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if Digest(mustParse(t, tc.other)) == d {
				t.Errorf("Digest(%s) equals Digest of the base document", tc.other)
			}
		})
	}
}

func TestParse_SyntaxErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string // substring
	}{
		{"missing value", `{"a": }`, 1, 7, "invalid character '}'"},
		{"bad value on line 3", "{\n  \"a\": 1,\n  \"b\": x\n}", 3, 8, "invalid character 'x'"},
		{"unterminated", `{`, 1, 2, "unexpected end"},
		{"unterminated after newline", "{\n  a: 1,\n", 3, 1, "unexpected end"},
		{"bad escape", `{a: "\x41"}`, 1, 7, "escape"},
		{"missing colon", "{\n\ta 1}", 2, 4, "invalid character '1'"},
		{"trailing content", `{} x`, 1, 4, "after the root object"},
		{"trailing second object", "{a: 1}\n{b: 2}", 2, 1, "after the root object"},
		{"trailing content after comment", "{} // c\n  x", 2, 3, "after the root object"},
		{"trailing after block comment", "{} /* c */ 1", 1, 12, "after the root object"},
		{"unterminated trailing comment", "{} /* c", 1, 4, "after the root object"},
		{"trailing content beyond read-ahead", "{}" + strings.Repeat(" ", 2000) + "x", 1, 2003, "after the root object"},
		{"trailing content after long document", "{a: \"" + strings.Repeat("y", 3000) + "\"}\nz", 2, 1, "after the root object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.src)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error = %v (%T), want *SyntaxError", tc.src, err, err)
			}
			if se.Line != tc.line || se.Column != tc.col {
				t.Errorf("position = line %d, column %d, want line %d, column %d (%s)", se.Line, se.Column, tc.line, tc.col, se.Msg)
			}
			if !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("message %q does not contain %q", se.Msg, tc.msg)
			}
			if !strings.HasPrefix(se.Error(), "line ") {
				t.Errorf("Error() = %q", se.Error())
			}
		})
	}
}

func TestParse_TrailingCommentsAndSpaceAccepted(t *testing.T) {
	for _, src := range []string{
		"{} // trailing",
		"{} /* trailing */",
		"{}\n// one\n/* two */\n// three",
		"{a: 1}  \n\t\r\n",
		"{}" + strings.Repeat(" ", 2000) + "// far away",
		"// leading\n{a: 1}",
	} {
		if _, err := Parse(src); err != nil {
			t.Errorf("Parse(%q) = %v, want success", src, err)
		}
	}
}

func TestParse_RootMustBeObject(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{`[1, 2]`, "not an array"},
		{`"x"`, "not a string"},
		{`1`, "not a number"},
		{`true`, "not a boolean"},
		{`null`, "not null"},
		{``, "empty"},
		{"  \n\t", "empty"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.src)
		var ve *ValueError
		if !errors.As(err, &ve) {
			t.Errorf("Parse(%q) error = %v (%T), want *ValueError", tc.src, err, err)
			continue
		}
		if len(ve.Path) != 0 {
			t.Errorf("Parse(%q) path = %s, want the root", tc.src, ve.Path)
		}
		if !strings.Contains(ve.Msg, tc.want) {
			t.Errorf("Parse(%q) message %q does not contain %q", tc.src, ve.Msg, tc.want)
		}
	}
}

func TestParse_NonFiniteRefusedWithPath(t *testing.T) {
	tests := []struct {
		src  string
		path string
	}{
		{`{a: NaN}`, "a"},
		{`{a: Infinity}`, "a"},
		{`{a: -Infinity}`, "a"},
		{`{a: +Infinity}`, "a"},
		{`{agents: {defaults: {maxConcurrent: NaN}}}`, "agents.defaults.maxConcurrent"},
		{`{a: [1, 2, Infinity]}`, "a[2]"},
		{`{"x-y": {"openai/gpt-5": [NaN]}}`, `["x-y"]["openai/gpt-5"][0]`},
		{`{a: 1e400}`, "a"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.src)
		var ve *ValueError
		if !errors.As(err, &ve) {
			t.Errorf("Parse(%q) error = %v (%T), want *ValueError", tc.src, err, err)
			continue
		}
		if got := ve.Path.String(); got != tc.path {
			t.Errorf("Parse(%q) path = %s, want %s", tc.src, got, tc.path)
		}
		if !strings.HasPrefix(ve.Error(), tc.path+": ") {
			t.Errorf("Error() = %q, want prefix %q", ve.Error(), tc.path+": ")
		}
	}
}

func TestClone_IsDeep(t *testing.T) {
	src := mustParse(t, `{a: {b: [1, {c: "x"}]}, d: "y"}`)
	before := string(Canonical(src))
	c := Clone(src)
	if string(Canonical(c)) != before {
		t.Fatalf("clone differs: %s", Canonical(c))
	}
	c["d"] = "changed"
	c["a"].(map[string]any)["new"] = true
	arr := c["a"].(map[string]any)["b"].([]any)
	arr[0] = int64(99)
	arr[1].(map[string]any)["c"] = "changed"
	Set(c, Keys("a", "deep", "er"), 1)
	Delete(c, Keys("a", "b"))
	if got := string(Canonical(src)); got != before {
		t.Errorf("editing the clone changed the source: %s, want %s", got, before)
	}
}

// nested is a document whose innermost container sits depth levels deep
// (the root object is level 1): {a: {a: ... inner ...}} with the innermost
// level written open+close (for example "[]" or "{}").
func nested(depth int, open, close string) string {
	var b strings.Builder
	b.WriteString("{")
	for range depth - 2 {
		b.WriteString("a: " + open)
	}
	if depth > 1 {
		b.WriteString("a: " + open + close)
	}
	for range depth - 2 {
		b.WriteString(close)
	}
	b.WriteString("}")
	return b.String()
}

// padded is a valid document of exactly n bytes, already canonical.
func padded(n int) string {
	return `{"a":"` + strings.Repeat("x", n-len(`{"a":""}`)) + `"}`
}

// TestParse_Limits: a document is refused above MaxDocumentBytes of source
// or of canonical form, or nested deeper than MaxDocumentDepth, with an
// error that names the limit; one at the limits parses; brackets inside
// strings and comments are not nesting; no depth exhausts the stack.
func TestParse_Limits(t *testing.T) {
	deepPath := strings.TrimSuffix(strings.Repeat("a.", MaxDocumentDepth), ".")
	tests := []struct {
		name string
		src  string
		want string // "" accepts; otherwise the whole error, or a substring when it starts with "~"
	}{
		{"size at the limit", padded(MaxDocumentBytes), ""},
		{"size one byte over", padded(MaxDocumentBytes + 1), "the configuration document is 1.0 MiB (1048577 bytes); the limit is 1 MiB; make it smaller"},
		{"size far over", padded(5 << 20), "the configuration document is 5 MiB; the limit is 1 MiB; make it smaller"},
		{"size of white space over", "{}" + strings.Repeat(" ", MaxDocumentBytes), "~the limit is 1 MiB"},
		// 1e20 is written 100000000000000000000 in canonical form.
		{"canonical form over", `{"a":[` + strings.Repeat("1e20,", 60_000) + `]}`,
			"the configuration document is 1.3 MiB (1320007 bytes) in canonical JSON; the limit is 1 MiB; make it smaller"},
		{"canonical form at the limit", `{"a":[` + strings.Repeat("1e20,", 47_000) + `"` + strings.Repeat("x", 14_566) + `"]}`, ""},
		{"canonical form one byte over", `{"a":[` + strings.Repeat("1e20,", 47_000) + `"` + strings.Repeat("x", 14_567) + `"]}`,
			"the configuration document is 1.0 MiB (1048577 bytes) in canonical JSON; the limit is 1 MiB; make it smaller"},
		{"objects at the depth limit", nested(MaxDocumentDepth, "{", "}"), ""},
		{"arrays at the depth limit", `{a:` + strings.Repeat("[", MaxDocumentDepth-1) + strings.Repeat("]", MaxDocumentDepth-1) + `}`, ""},
		{"objects one level over", nested(MaxDocumentDepth+1, "{", "}"),
			"the configuration document nests deeper than 64 levels at " + deepPath + "; flatten it"},
		{"arrays one level over", `{a:` + strings.Repeat("[", MaxDocumentDepth) + strings.Repeat("]", MaxDocumentDepth) + `}`,
			"the configuration document nests deeper than 64 levels at a" + strings.Repeat("[0]", MaxDocumentDepth-1) + "; flatten it"},
		{"path names keys and indexes", `{agents: {"default's": [1, {x: 0}, ` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `]}}`,
			`the configuration document nests deeper than 64 levels at agents["default's"][2]` + strings.Repeat("[0]", 61) + "; flatten it"},
		{"long keys are cut", `{` + strings.Repeat(`"`+strings.Repeat("k", 40)+`": {`, 70) + strings.Repeat("}", 71),
			"~levels at " + strings.Repeat(strings.Repeat("k", 40)+".", 2) + strings.Repeat("k", 38) + "…" + strings.Repeat("k", 38) + strings.Repeat("."+strings.Repeat("k", 40), 2) + "; flatten it"},
		{"100000 open brackets", strings.Repeat("[", 100_000), "~nests deeper than 64 levels at [0][0][0]"},
		{"100000 open braces", strings.Repeat("{a:", 100_000), "~nests deeper than 64 levels at a.a.a"},
		{"100000 balanced levels", `{a:` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`, "~nests deeper than 64 levels"},
		{"as deep as the size allows", `{a:` + strings.Repeat("[", MaxDocumentBytes/2-2) + strings.Repeat("]", MaxDocumentBytes/2-2) + `}`, "~nests deeper than 64 levels"},
		{"brackets in strings and comments", `{a: "[[[[` + strings.Repeat("[{", 100) + `", b: '` + strings.Repeat("{", 100) + `\'', // ` + strings.Repeat("[", 100) +
			"\r c: 1, /* " + strings.Repeat("[", 100) + ` */ d: "\"` + strings.Repeat("[", 100) + `"}`, ""},
		{"brackets after the root are not its nesting", `{} // ` + strings.Repeat("[", 100), ""},
		// The decoder ends a block comment at the first '/' after a '*':
		// what follows is content, and is nesting.
		{"block comment ends as the decoder ends it", `{a: /* * / ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `, b: 1 /**/}`, "~nests deeper than 64 levels at a[0][0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse(tc.src)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse = %v, want success", err)
				}
				if n := len(Canonical(d)); n > MaxDocumentBytes {
					t.Errorf("canonical form is %d bytes", n)
				}
				return
			}
			var ve *ValueError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse error = %v (%T), want *ValueError", err, err)
			}
			if sub, ok := strings.CutPrefix(tc.want, "~"); ok {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q does not contain %q", err, sub)
				}
			} else if err.Error() != tc.want {
				t.Errorf("error\n %q, want\n %q", err, tc.want)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

// TestNormalise_DepthLimit: normalise bounds its own recursion, whatever
// reaches it (Parse refuses the text first).
func TestNormalise_DepthLimit(t *testing.T) {
	build := func(depth int) any {
		var v any = []any{}
		for range depth - 1 {
			v = []any{v}
		}
		return v
	}
	if _, err := normalise(build(MaxDocumentDepth), nil); err != nil {
		t.Errorf("depth %d: %v", MaxDocumentDepth, err)
	}
	_, err := normalise(build(MaxDocumentDepth+1), nil)
	if err == nil || !strings.Contains(err.Error(), "nests deeper than 64 levels at [0][0]") {
		t.Errorf("depth %d: %v", MaxDocumentDepth+1, err)
	}
}
