package provider

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseImportID: every id is either refused with a message that
// quotes it, or parses to a DNS-label name (and a positive generation)
// that formats back to an id parsing to the same.
func FuzzParseImportID(f *testing.F) {
	for _, s := range []string{"support", "support@3", "support@0", "support@-1", "@3", "a@b@c", "Support", "x@9223372036854775807", "x@9223372036854775808", strings.Repeat("a", 64), "sup port", "support@+3", "support@03"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		name, gen, err := parseImportID(id)
		if err != nil {
			if utf8.ValidString(id) && !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
				t.Fatalf("refusal %q does not quote the id", err)
			}
			return
		}
		if len(name) == 0 || !isDNSLabel(name) || gen < 0 {
			t.Fatalf("parseImportID(%q) = %q, %d", id, name, gen)
		}
		again := name
		if gen > 0 {
			again = fmt.Sprintf("%s@%d", name, gen)
		}
		if n2, g2, err := parseImportID(again); err != nil || n2 != name || g2 != gen {
			t.Fatalf("%q -> %q %d -> %q -> %q %d %v", id, name, gen, again, n2, g2, err)
		}
	})
}
