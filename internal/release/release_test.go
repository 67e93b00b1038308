package release

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

func TestDefaultImages(t *testing.T) {
	defer func(o, c string) { OpenClawImageDigest, CodexImageDigest = o, c }(OpenClawImageDigest, CodexImageDigest)
	OpenClawImageDigest, CodexImageDigest = "", ""
	if RuntimeImage() != admission.PinnedRuntimeImage || CodexImage() != admission.PinnedCodexImage || Check() != nil {
		t.Errorf("unstamped: %s, %s, %v; want the tags", RuntimeImage(), CodexImage(), Check())
	}
	d := "sha256:" + strings.Repeat("ab", 32)
	OpenClawImageDigest, CodexImageDigest = d, d
	for _, image := range []string{RuntimeImage(), CodexImage()} {
		r, err := admission.ParseImage(image)
		if err != nil || !r.Pinned() || r.Digest != d || r.Tag == "" {
			t.Errorf("stamped: %s parses as %+v, %v; want the tag and the digest", image, r, err)
		}
	}
	if err := Check(); err != nil {
		t.Error(err)
	}
	CodexImageDigest = "sha256:abc"
	if err := Check(); err == nil || !strings.Contains(err.Error(), "not an image reference") {
		t.Errorf("a broken stamp: %v", err)
	}
}
