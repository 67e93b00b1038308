package sandboxapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeAttachments feeds annotation values to DecodeAttachments.
// Properties: it never panics; an error comes with no attachments and
// names the annotation; "" is no attachments; decoded attachments hold
// valid UTF-8 only, re-encode (EncodeAttachments) to a JSON list, and
// decode from it to the same attachments, whose encoding is then a fixed
// point.
func FuzzDecodeAttachments(f *testing.F) {
	for _, seed := range []string{
		"",
		"[]",
		"null",
		EncodeAttachments([]Attachment{{Name: "openai", Gateway: "cg-main", SourceType: "openai_api_key", Env: "OPENAI_API_KEY"}}),
		EncodeAttachments([]Attachment{{Name: "a", Gateway: "g", SourceType: "codex_oauth"}, {Name: "b", Gateway: "g", SourceType: "openai_api_key"}}),
		`[{"name":"x","gateway":"y","sourceType":"z","extra":{"nested":[1,2,3]}}]`,
		`[{"NAME":"x","Gateway":"y"}]`,
		`[{"name":"x","name":"y"}]`,
		`[{"name":1}]`,
		`[{"name":"` + "\xff\xfe" + `"}]`,
		`[{"name":"\ud800"}]`,
		`[null, {}]`,
		`{"name":"x"}`,
		`"[]"`,
		`[`,
		`[] []`,
		`[{"name":"a"}]` + " \n\t",
		`[{"name":"` + strings.Repeat("a", 300) + `"}]`,
		strings.Repeat("[", 20000),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := DecodeAttachments(s)
		if err != nil {
			if a != nil {
				t.Fatalf("error %v with attachments %+v", err, a)
			}
			if !strings.HasPrefix(err.Error(), "annotation "+AnnotationAttachments+": ") {
				t.Fatalf("error %q does not name the annotation", err)
			}
			return
		}
		if s == "" && a != nil {
			t.Fatalf(`DecodeAttachments("") = %+v`, a)
		}
		for _, x := range a {
			for _, v := range []string{x.Name, x.Gateway, x.SourceType, x.Env} {
				if !utf8.ValidString(v) {
					t.Fatalf("decoded invalid UTF-8 %q", v)
				}
			}
		}
		enc := EncodeAttachments(a)
		var list []json.RawMessage
		if err := json.Unmarshal([]byte(enc), &list); err != nil || len(list) != len(a) {
			t.Fatalf("EncodeAttachments = %s, not a JSON list of %d (%v)", enc, len(a), err)
		}
		again, err := DecodeAttachments(enc)
		if err != nil {
			t.Fatalf("DecodeAttachments(%s): %v", enc, err)
		}
		if len(a) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(a, again) {
			t.Fatalf("round trip:\n%+v\n%+v", a, again)
		}
		if enc2 := EncodeAttachments(again); enc2 != enc {
			t.Fatalf("encoding is not a fixed point: %s vs %s", enc, enc2)
		}
	})
}

// FuzzEncodeAttachments: whatever the provider writes, the driver reads
// back exactly (invalid UTF-8 becomes U+FFFD, byte by byte, as
// encoding/json writes it).
func FuzzEncodeAttachments(f *testing.F) {
	f.Add("openai", "cg-main", "openai_api_key", "OPENAI_API_KEY", uint8(1))
	f.Add("", "", "", "", uint8(0))
	f.Add(`"],[{"name":"x`, "\u2028<&>", "\xff", "\x00\n", uint8(3))
	f.Fuzz(func(t *testing.T, name, gateway, sourceType, env string, n uint8) {
		want := make([]Attachment, int(n%4))
		for i := range want {
			want[i] = Attachment{Name: name, Gateway: gateway, SourceType: sourceType, Env: env}
		}
		got, err := DecodeAttachments(EncodeAttachments(want))
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			w := &want[i]
			w.Name, w.Gateway, w.SourceType, w.Env = string([]rune(w.Name)), string([]rune(w.Gateway)), string([]rune(w.SourceType)), string([]rune(w.Env))
		}
		if len(want) == 0 && len(got) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
}
