package sshexec

import (
	"strings"
	"testing"
)

const pinnedKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHPvWGJQ0YPgQdiedKaM18KfSQNuvDhlMYl5yykHBSiY test-host"

// Issue 27: a host_key line is the host's key as authorized_keys or
// ssh-keyscan write it; a known_hosts line marked @revoked (a key never to
// accept) or @cert-authority (a CA, not the host's key) is refused, and so
// the executor never pins it.
func TestParseHostKey(t *testing.T) {
	for _, tc := range []struct {
		name, line, err string
	}{
		{"authorized_keys line", pinnedKey, ""},
		{"keyscan line", "10.0.0.5 " + pinnedKey, ""},
		{"revoked", "@revoked 10.0.0.5 " + pinnedKey, "marked @revoked"},
		{"revoked any host", "@revoked * " + pinnedKey, "marked @revoked"},
		{"cert authority", "@cert-authority *.example " + pinnedKey, "marked @cert-authority"},
		{"not a key", "not-a-key", "not a public key line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseHostKey(tc.line)
			switch {
			case tc.err == "" && (err != nil || k == nil):
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("ParseHostKey = %v, %v; want an error saying %q", k, err, tc.err)
			}
			// The executor's pinning reads host_key the same way.
			if _, _, perr := pinnedKeys(tc.line, new(Error)); (perr == nil) != (tc.err == "") {
				t.Fatalf("pinnedKeys error %v, want one: %v", perr, tc.err != "")
			}
		})
	}
}
