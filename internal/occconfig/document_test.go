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
