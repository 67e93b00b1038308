package admission

import (
	"strings"
	"testing"
)

const testDigest = "sha256:0691db88b5b76cbf3f5ed906537e4638fdbb37176ff8f1e348cbc451c7bc508a"

// rule AD3: a compute's images are references the runtimes read, tagged
// or pinned by digest; a digest-pinned image of the platform's repository
// keeps its version as the harness identity.
func TestAD3_ImageReferences(t *testing.T) {
	for _, tc := range []struct {
		in                string
		name, tag, digest string
		err               string
	}{
		{in: PinnedCodexImage, name: "ghcr.io/occ-platform/runtime/codex", tag: PinnedCodexVersion},
		{in: PinnedCodexImage + "@" + testDigest, name: "ghcr.io/occ-platform/runtime/codex", tag: PinnedCodexVersion, digest: testDigest},
		{in: "registry.example/rt@" + testDigest, name: "registry.example/rt", digest: testDigest},
		{in: "busybox", name: "docker.io/library/busybox"},
		{in: "localhost:5000/a/b:1", name: "localhost:5000/a/b", tag: "1"},
		{in: "", err: "not an image reference"},
		{in: "registry.example/RT:1", err: "must be lowercase"},
		{in: "Registry.example/rt:1", name: "Registry.example/rt", tag: "1"}, // a host name is not case-sensitive
		{in: "registry.example/rt:1@sha256:abc", err: "invalid reference format"},
		{in: "registry.example/rt:1@md5:" + strings.Repeat("a", 32), err: "unsupported digest algorithm"},
		{in: "registry.example/rt:" + strings.Repeat("t", 129), err: "not an image reference"},
		{in: "registry.example/rt:1 ", err: "not an image reference"},
	} {
		got, err := ParseImage(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseImage(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseImage(%q): %v", tc.in, err)
		case got.Name != tc.name || got.Tag != tc.tag || got.Digest != tc.digest || got.Pinned() != (tc.digest != ""):
			t.Errorf("ParseImage(%q) = %+v; want %s %s %s", tc.in, got, tc.name, tc.tag, tc.digest)
		}
	}
	for image, want := range map[string]string{
		PinnedCodexImage + "@" + testDigest:                   "codex@" + PinnedCodexVersion,
		"ghcr.io/occ-platform/runtime/codex:0.170.0":          "codex@0.170.0",
		"ghcr.io/occ-platform/runtime/codex@" + testDigest:    "codex@image:ghcr.io/occ-platform/runtime/codex@" + testDigest,
		"ghcr.io/occ-platform/runtime/codex-fork:0.169.0":     "codex@image:ghcr.io/occ-platform/runtime/codex-fork:0.169.0",
		"mirror.example/ghcr.io/occ-platform/runtime/codex:1": "codex@image:mirror.example/ghcr.io/occ-platform/runtime/codex:1",
	} {
		if got := HarnessVersion(HarnessCodex, Compute{Settings: KubernetesCompute{CodexImage: image}}); got != want {
			t.Errorf("HarnessVersion(codex, %q) = %q, want %q", image, got, want)
		}
	}
}

// FuzzParseImage: a compute's image reference is the user's text; the
// parser never panics, and what it accepts has a name.
func FuzzParseImage(f *testing.F) {
	for _, s := range []string{PinnedRuntimeImage, PinnedCodexImage + "@" + testDigest, "busybox", "a:b@c:d", "::", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseImage(s)
		if err == nil && r.Name == "" {
			t.Fatalf("ParseImage(%q) accepted a reference without a name", s)
		}
	})
}
