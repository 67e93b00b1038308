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

// The by-value references are documented as "pass the resource whole",
// not as the referenced resource's fields, which read as if they had to be
// written out (templates/resources, templates/data-sources).
func TestDocs_ByValueReferencesListNoNestedFields(t *testing.T) {
	pages := docsPages(t)
	for page, refs := range map[string][]string{
		"resources/agent.md":                   {"compute", "configuration", "harness_auth.source"},
		"resources/credential_source.md":       {"compute"},
		"data-sources/installation.md":         {"compute"},
		"data-sources/agent.md":                {"compute"},
		"actions/agent_turn.md":                {"agent"},
		"actions/agent_restart.md":             {"agent"},
		"ephemeral-resources/agent_tunnel.md":  {"agent"},
		"ephemeral-resources/gateway_token.md": {"agent"},
	} {
		text := pages[page]
		for _, ref := range refs {
			section := "### Nested Schema for `" + ref + "`"
			i := strings.Index(text, section)
			if i < 0 {
				t.Errorf("%s: no section for %s", page, ref)
				continue
			}
			body := text[i+len(section):]
			if j := strings.Index(body, "\n### "); j >= 0 {
				body = body[:j]
			}
			if !strings.Contains(body, "passed whole") || strings.Contains(body, "\n- `") {
				t.Errorf("%s: the section for %s should say the resource is passed whole, and list no fields:%s", page, ref, body)
			}
			if strings.Contains(text, "### Nested Schema for `"+ref+".") {
				t.Errorf("%s: lists nested fields of %s", page, ref)
			}
		}
	}
}
