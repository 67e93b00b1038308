// Package release is what a provider build is stamped with beside its
// version: the digests of the runtime images it renders by default, so
// that a provider version always names the same bytes and an agent's
// revision (whose id covers the image reference) fixes what runs.
//
// The release workflow sets them with -ldflags -X from the images it
// publishes with the provider archives (.goreleaser.yml); a development
// build (make build, make install) from the images testenv/images.sh
// built for the same sources (scripts/image-ldflags.sh). A build without
// them (go test, go run) names the images by tag alone.
//
// The wrapper inside the images must not import this package: its digest
// would then depend on itself.
package release

import (
	"fmt"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// Set with -ldflags "-X <this package>.OpenClawImageDigest=sha256:…".
var (
	OpenClawImageDigest string
	CodexImageDigest    string
)

// RuntimeImage is the default OpenClaw runtime image: the pinned tag, and
// the digest the build was stamped with.
func RuntimeImage() string { return pin(admission.PinnedRuntimeImage, OpenClawImageDigest) }

// CodexImage is the default Codex harness image, as RuntimeImage.
func CodexImage() string { return pin(admission.PinnedCodexImage, CodexImageDigest) }

func pin(image, digest string) string {
	if digest == "" {
		return image
	}
	return image + "@" + digest
}

// Check reports a stamped digest that does not make an image reference
// (a broken build): the provider refuses to start rather than render it.
func Check() error {
	for _, image := range []string{RuntimeImage(), CodexImage()} {
		if _, err := admission.ParseImage(image); err != nil {
			return fmt.Errorf("this provider build names a default image that is not an image reference: %v", err)
		}
	}
	return nil
}
