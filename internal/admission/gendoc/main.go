// Command gendoc writes the rules reference template from the admission
// core's rule table: `go run ./internal/admission/gendoc templates/guides/rules.md.tmpl`
// (part of `make generate`; tfplugindocs then renders it into docs/).
package main

import (
	"fmt"
	"os"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendoc OUTPUT")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(admission.RulesMarkdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
