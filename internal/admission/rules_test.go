package admission

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ruleID is a rule id as code, tests, diagnostics and guides cite it.
var ruleID = regexp.MustCompile(`\b(?:HM|MR|AD|AU|PR|LG|ND|AC|OS|SS)[0-9]{1,2}\b`)

// The rules reference is generated from the table: no hand-kept copy can
// drift from it.
func TestRules_GuideIsGenerated(t *testing.T) {
	b, err := os.ReadFile("../../templates/guides/rules.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != RulesMarkdown() {
		t.Fatal("templates/guides/rules.md.tmpl differs from internal/admission/rules.go: run `make generate`")
	}
}

func TestRules_TableIsCompleteAndOrdered(t *testing.T) {
	seen := map[string]bool{}
	group := 0
	for _, r := range Rules {
		if seen[r.ID] {
			t.Errorf("%s is listed twice", r.ID)
		}
		seen[r.ID] = true
		if !ruleID.MatchString(r.ID) || ruleID.FindString(r.ID) != r.ID {
			t.Errorf("%q is not a rule id", r.ID)
		}
		if r.Summary == "" || strings.Contains(r.Summary, "\n") {
			t.Errorf("%s: the summary must be one line", r.ID)
		}
		i := slices.IndexFunc(RuleGroups, func(g RuleGroup) bool { return g.Prefix == RulePrefix(r.ID) })
		if i < group {
			t.Errorf("%s: out of its group's order", r.ID)
		}
		group = max(group, i)
	}
}

// Every rule id the sources cite (code and tests of every package, the
// startup wrapper, the guides) is in the table, and every entry is cited
// somewhere besides the table and the reference generated from it.
func TestRules_EveryCitedRuleIsListedAndEveryEntryCited(t *testing.T) {
	cited := map[string]string{} // id -> first file citing it
	scan := func(root string, keep func(string) bool) {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !keep(p) {
				return err
			}
			if filepath.Base(p) == "rules.go" && filepath.Base(filepath.Dir(p)) == "admission" || filepath.Base(p) == "rules.md.tmpl" {
				return nil // the table itself and its rendering
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, id := range ruleID.FindAllString(string(b), -1) {
				if _, ok := cited[id]; !ok {
					cited[id] = p
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	goFile := func(p string) bool { return strings.HasSuffix(p, ".go") }
	scan("..", goFile)
	scan("../../cmd", goFile)
	scan("../../templates", func(p string) bool { return strings.HasSuffix(p, ".tmpl") })
	if len(cited) < len(Rules)/2 {
		t.Fatalf("found only %d cited rule ids: the scan is broken", len(cited))
	}
	for id, p := range cited {
		if _, ok := LookupRule(id); !ok {
			t.Errorf("%s cites rule %s, which internal/admission/rules.go does not list", p, id)
		}
	}
	for _, r := range Rules {
		if _, ok := cited[r.ID]; !ok {
			t.Errorf("rule %s is listed but cited nowhere in the code, its tests or the guides", r.ID)
		}
	}
}

// CONTRIBUTING.md's table of where the rules are enforced names only rules the
// core has: every id it cites, ranges ("AD1 to AD5", "PR1/PR4") expanded,
// is in Rules.
func TestRules_ContributingTableNamesOnlyKnownRules(t *testing.T) {
	b, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## Where the rules are enforced")
	if start < 0 {
		t.Fatal("CONTRIBUTING.md has no section \"Where the rules are enforced\"")
	}
	section := text[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	known := map[string]bool{}
	for _, r := range Rules {
		known[r.ID] = true
	}
	rangeRe := regexp.MustCompile(`\b([A-Z]{2})(\d+) to ([A-Z]{2})(\d+)\b`)
	idRe := regexp.MustCompile(`\b[A-Z]{2}\d+\b`)
	cited := map[string]bool{}
	for _, m := range rangeRe.FindAllStringSubmatch(section, -1) {
		if m[1] != m[3] {
			t.Errorf("CONTRIBUTING.md range %q spans two families", m[0])
			continue
		}
		from, _ := strconv.Atoi(m[2])
		to, _ := strconv.Atoi(m[4])
		for i := from; i <= to; i++ {
			cited[fmt.Sprintf("%s%d", m[1], i)] = true
		}
	}
	for _, id := range idRe.FindAllString(section, -1) {
		cited[id] = true
	}
	if len(cited) < 20 {
		t.Fatalf("CONTRIBUTING.md's rule table cites only %d rules; the parser no longer reads it", len(cited))
	}
	for id := range cited {
		if !known[id] {
			t.Errorf("CONTRIBUTING.md's rule table cites %s, which is not in admission.Rules", id)
		}
	}
}
