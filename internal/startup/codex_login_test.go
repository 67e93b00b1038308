package startup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// rule AU2, AU7 (kept on purpose; docs: the revisions guide): a managed
// ServiceAccount's token is read from its projected file at each start of
// the harness container, so a restart logs in with the token the kubelet
// issued last for the same ServiceAccount. The revision pins the account
// (TestAU2_CodexPATFromManagedServiceAccount), not one token.
func TestAU2_ManagedServiceAccountTokenIsReadAtEachStart(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	bin := filepath.Join(dir, "codex")
	// A codex that records the token it was given on stdin.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ncat > '"+seen+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	env := map[string]string{admission.EnvCodexAccessTokenFile: tokenFile}
	start := func(token string) string {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := &Codex{Bin: bin, Home: filepath.Join(dir, "home"), TmpDir: dir, LoginMode: LoginPAT,
			Getenv: func(k string) string { return env[k] }, Now: time.Now,
			Policy: Policy{MaxAttempts: 1, Attempt: 10 * time.Second, Budget: 10 * time.Second}}
		if r := c.Login(context.Background()); !r.OK {
			t.Fatalf("login failed: %+v", r)
		}
		b, err := os.ReadFile(seen)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := start("issued-first"); got != "issued-first\n" {
		t.Fatalf("first start logged in with %q", got)
	}
	// The kubelet rotated the file; the container restarts.
	if got := start("issued-later"); got != "issued-later\n" {
		t.Errorf("the restart logged in with %q, want the token current at its start", got)
	}
}
