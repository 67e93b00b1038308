package admission

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ModelRef is a native model reference: provider and model id. The id may
// itself contain slashes (rule MR1).
type ModelRef struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// String is the full reference, provider/model.
func (r ModelRef) String() string { return r.Provider + "/" + r.Model }

// ParseModelRef splits a reference at its first slash (MR1). Both parts
// must be non-empty, and no segment of the id may be empty or padded.
func ParseModelRef(s string) (ModelRef, error) {
	if s == "" {
		return ModelRef{}, fmt.Errorf("a model reference is empty; write provider/model, such as anthropic/claude-sonnet-4-5")
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return ModelRef{}, fmt.Errorf("model reference %q contains white space; write provider/model without spaces", s)
	}
	if err := printable(s); err != nil {
		return ModelRef{}, err
	}
	provider, model, ok := strings.Cut(s, "/")
	if !ok {
		return ModelRef{}, fmt.Errorf("model reference %q has no provider; write provider/model, such as openai/%s", s, s)
	}
	if provider == "" {
		return ModelRef{}, fmt.Errorf("model reference %q has an empty provider before the first slash", s)
	}
	if model == "" {
		return ModelRef{}, fmt.Errorf("model reference %q has an empty model id after the provider", s)
	}
	for _, seg := range strings.Split(model, "/") {
		if seg == "" {
			return ModelRef{}, fmt.Errorf("model reference %q has an empty segment in its model id", s)
		}
	}
	return ModelRef{Provider: provider, Model: model}, nil
}

// NormalizeCatalogID returns the model id of a catalog entry under provider:
// a catalog id is accepted with or without its provider prefix (MR2).
func NormalizeCatalogID(provider, id string) string {
	return strings.TrimPrefix(id, provider+"/")
}

// printable refuses invalid UTF-8 and any control or other non-printing
// character (escape sequences, NUL, zero-width and bidirectional
// formatting characters, unassigned code points), naming its position: a
// reference is shown in plans, logs and labels, where such a character
// would hide or disguise what runs.
func printable(s string) error {
	pos := 0
	for off := 0; off < len(s); {
		r, size := utf8.DecodeRuneInString(s[off:])
		pos++
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Errorf("model reference %q is not valid UTF-8 at character %d (byte %d); write provider/model in printable characters", s, pos, off+1)
		case unicode.IsControl(r) || !unicode.IsPrint(r):
			return fmt.Errorf("model reference %q holds the non-printing character U+%04X at character %d; write provider/model in printable characters", s, r, pos)
		}
		off += size
	}
	return nil
}
