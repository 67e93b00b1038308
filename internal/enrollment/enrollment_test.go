package enrollment

import (
	"strings"
	"testing"
)

// rule ND2: the verifier admits exactly its token; the target file names
// its broker and its token, or it is refused.
func TestND2_VerifierAndTarget(t *testing.T) {
	const token = "3f1c9e0b7a2d"
	d := Digest(token)
	for _, tc := range []struct {
		name, token, verifier string
		want                  bool
	}{
		{"its token", token, d, true},
		{"its token, verifier with a newline", token, d + "\n", true},
		{"another token", token + "x", d, false},
		{"no token", "", Digest(""), false},
		{"the digest as the token", d, d, false},
		{"a verifier that is not hex", token, strings.Repeat("z", 64), false},
		{"a short verifier", token, d[:32], false},
	} {
		if got := Verify(tc.token, tc.verifier); got != tc.want {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want)
		}
	}
	b, err := Target{URL: "http://gw:18791/v1/enroll", Token: token}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Decode(b); err != nil || got.URL != "http://gw:18791/v1/enroll" || got.Token != token {
		t.Errorf("Decode(Encode) = %+v, %v", got, err)
	}
	for _, bad := range []string{``, `not json`, `{"url":"http://gw"}`, `{"token":"t"}`, `{"gateway":"ws://gw:18789","token":"t","oneUse":true}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "t\"") {
			t.Errorf("Decode(%q): the error quotes the file: %v", bad, err)
		}
	}
}
