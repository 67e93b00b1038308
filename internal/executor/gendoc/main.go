// Command gendoc writes the failure-code guide template from the executor
// catalog: `go run ./internal/executor/gendoc templates/guides/failure-codes.md.tmpl`
// (part of `make generate`; tfplugindocs then renders it into docs/).
package main

import (
	"fmt"
	"os"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendoc OUTPUT")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(executor.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
