package admission

import (
	"fmt"

	"github.com/distribution/reference"
)

// ImageRef is a container image reference as a compute names it.
type ImageRef struct {
	// Name is the repository, normalized as the container runtime reads
	// it ("busybox" is "docker.io/library/busybox").
	Name string
	// Tag and Digest are each empty when the reference has none.
	Tag, Digest string
}

// Pinned reports whether the reference names its image by digest: the
// only reference that always names the same bytes (a tag can be moved).
func (r ImageRef) Pinned() bool { return r.Digest != "" }

// ParseImage reads an image reference, `[registry/]name[:tag][@digest]`,
// by the grammar the container runtimes use (distribution/reference): the
// name in lower case, a tag of at most 128 characters, a digest of a known
// algorithm with its full hex length.
func ParseImage(s string) (ImageRef, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return ImageRef{}, fmt.Errorf("%q is not an image reference: %v", s, err)
	}
	r := ImageRef{Name: named.Name()}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	return r, nil
}
