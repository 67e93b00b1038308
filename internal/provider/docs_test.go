package provider

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsPages is every rendered page under docs/, by its path there
// ("resources/agent.md").
func docsPages(t *testing.T) map[string]string {
	t.Helper()
	pages := map[string]string{}
	err := filepath.WalkDir("../../docs", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../../docs", p)
		pages[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages under docs/", len(pages))
	}
	return pages
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// The Registry serves docs/X/Y.md at .../docs/X/Y: a link between pages
// names the page without ".md" (relative, "failure-codes" or
// "../resources/agent"), and every page and in-page anchor it names exists.
func TestDocs_LinksWorkOnTheRegistry(t *testing.T) {
	pages := docsPages(t)
	for name, text := range pages {
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			if strings.HasSuffix(target, ".md") {
				t.Errorf("%s: link %q ends in .md, which the Registry does not serve; name the page without it", name, link)
				continue
			}
			page := name
			if target != "" && name == "index.md" {
				// The provider page is served at .../docs, without a
				// trailing slash: a relative link would leave docs/.
				t.Errorf("index.md: relative link %q resolves outside the docs on the Registry", link)
				continue
			}
			if target != "" {
				page = path.Join(path.Dir(name), target) + ".md"
				if _, ok := pages[page]; !ok {
					t.Errorf("%s: link %q names no page (%s)", name, link, page)
					continue
				}
			}
			if strings.HasPrefix(anchor, "nested") && !strings.Contains(pages[page], `<a id="`+anchor+`"></a>`) {
				t.Errorf("%s: link %q names no anchor of %s", name, link, page)
			}
		}
	}
}
