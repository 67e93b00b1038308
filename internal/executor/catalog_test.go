package executor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

func TestCatalog_EntriesAreCompleteAndUnique(t *testing.T) {
	seen := map[Code]bool{}
	for _, e := range Catalog {
		if seen[e.Code] {
			t.Errorf("%s is listed twice", e.Code)
		}
		seen[e.Code] = true
		if e.Meaning == "" || e.Advice == "" {
			t.Errorf("%s: meaning and advice are both required", e.Code)
		}
	}
	for _, c := range runtimerecord.Codes {
		if c.Held() && !Known(CodeRuntime(c)) {
			t.Errorf("runtime code %s is not in the catalog", c)
		}
	}
}

// The catalog's runtime rows are runtimerecord's held codes: each once,
// with SourceRuntime (UNAVAILABLE is the provider's row, which says the
// runtime's meaning too), and no runtime row that is not a held code.
func TestCatalog_RuntimeRowsAreTheHeldCodes(t *testing.T) {
	held := map[Code]bool{}
	for _, c := range runtimerecord.Codes {
		if c.Held() && c != runtimerecord.CodeUnavailable {
			held[CodeRuntime(c)] = true
		}
	}
	rows := map[Code]int{}
	for _, e := range Catalog {
		if e.Source != SourceRuntime {
			if held[e.Code] {
				t.Errorf("%s is a held runtime code listed with source %s", e.Code, e.Source)
			}
			continue
		}
		rows[e.Code]++
		if !held[e.Code] {
			t.Errorf("%s is a runtime row but no held runtime code", e.Code)
		}
		if e.Advice != runtimerecord.Advice(runtimerecord.Code(e.Code)) {
			t.Errorf("%s: advice differs from runtimerecord.Advice", e.Code)
		}
	}
	for c := range held {
		if rows[c] != 1 {
			t.Errorf("held runtime code %s has %d runtime rows, want 1", c, rows[c])
		}
	}
	if e, ok := Lookup(Unavailable); !ok || e.Source != SourceProvider {
		t.Errorf("UNAVAILABLE: %+v, want the provider's row", e)
	}
}

// The docs' failure-code guide is generated from the catalog: no hand-kept
// copy can drift from it.
func TestCatalog_GuideIsGenerated(t *testing.T) {
	b, err := os.ReadFile("../../templates/guides/failure-codes.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Markdown() {
		t.Fatal("templates/guides/failure-codes.md.tmpl differs from the catalog: run `make generate`")
	}
}

// summaryCode is a diagnostic summary's leading code ("UNAVAILABLE: …").
var summaryCode = regexp.MustCompile(`^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{6,}): `)

var upper = regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)

// Every code the provider's sources can emit is in the catalog: leading
// codes of summaries, Code fields and Code constants or conversions.
func TestCatalog_EveryEmittedCodeIsKnown(t *testing.T) {
	fset := token.NewFileSet()
	found := 0
	check := func(pos token.Pos, code string) {
		if !upper.MatchString(code) {
			return // not a failure code (a fake's JSON error code), not ours
		}
		found++
		if !Known(Code(code)) {
			t.Errorf("%s: code %s is emitted but not in the catalog (internal/executor/catalog.go)", fset.Position(pos), code)
		}
	}
	walk := func(root string) {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); name == "testenv" || name == "testdata" {
					return filepath.SkipDir // test backends, not the provider
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						if s, err := strconv.Unquote(n.Value); err == nil {
							if m := summaryCode.FindStringSubmatch(s); m != nil {
								check(n.Pos(), m[1])
							}
						}
					}
				case *ast.KeyValueExpr:
					if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" {
						if s, ok := stringLit(n.Value); ok {
							check(n.Pos(), s)
						}
					}
				case *ast.ValueSpec:
					if isCodeType(n.Type) {
						for _, v := range n.Values {
							if s, ok := stringLit(v); ok && s != string(runtimerecord.CodeReady) {
								check(v.Pos(), s)
							}
						}
					}
				case *ast.CallExpr:
					if isCodeType(n.Fun) && len(n.Args) == 1 {
						if s, ok := stringLit(n.Args[0]); ok {
							check(n.Pos(), s)
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk("..")
	if found < len(Catalog)/2 {
		t.Fatalf("found only %d emitted codes: the scan is broken", found)
	}
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

func isCodeType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Code"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Code"
	}
	return false
}
