package sshexec

import (
	"strings"
	"testing"
)

func TestParseTurnTarget(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      turnTarget
		err       string
	}{
		{"token from the environment", `{"gateway":{"port":18801,"auth":{"mode":"token"}}}` + "\n--occ-turn--\nsecret-1\n", turnTarget{18801, "token", "secret-1"}, ""},
		{"quoted token", `{"gateway":{"port":18801}}` + "\n--occ-turn--\n\"secret-2\"\n", turnTarget{18801, "", "secret-2"}, ""},
		{"default port, no token", `{}` + "\n--occ-turn--\n", turnTarget{18789, "", ""}, ""},
		{"token in the document wins", `{"gateway":{"auth":{"mode":"token","token":"doc-token"}}}` + "\n--occ-turn--\nenv-token\n", turnTarget{18789, "token", "doc-token"}, ""},
		{"an env reference is not a token", `{"gateway":{"auth":{"mode":"token","token":"${OPENCLAW_GATEWAY_TOKEN}"}}}` + "\n--occ-turn--\nenv-token\n", turnTarget{18789, "token", "env-token"}, ""},
		{"not a port", `{"gateway":{"port":"x"}}` + "\n--occ-turn--\n", turnTarget{}, "not a port"},
		{"no separator", `{}`, turnTarget{}, "separator"},
		{"not a document", "<html>\n--occ-turn--\n", turnTarget{}, "openclaw.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseTurnTarget(c.out)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("%+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func FuzzParseTurnTarget(f *testing.F) {
	f.Add(`{"gateway":{"port":18801,"auth":{"mode":"token"}}}` + "\n--occ-turn--\nsecret\n")
	f.Add("{}\n--occ-turn--\n")
	f.Add("{gateway: {port: 0}}\n--occ-turn--\n\n\n")
	f.Fuzz(func(t *testing.T, out string) {
		tt, err := parseTurnTarget(out)
		if err == nil && (tt.Port < 1 || tt.Port > 65535) {
			t.Fatalf("port %d accepted", tt.Port)
		}
		if strings.Contains(tt.Token, "\n") {
			t.Fatal("a token of more than one line")
		}
	})
}
