//go:build tools

// Package tools pins the development tools of terraform-provider-occ in a
// module of their own, so that the provider's go.mod carries none of their
// dependencies.
//
// The go.mod beside this file declares them with `tool` directives (Go 1.24+),
// which is how the GNUmakefile runs them:
//
//	go -C tools tool tfplugindocs generate ...
//
// The blank imports below mirror those directives for tooling that predates
// them; `go mod tidy` keeps the two in agreement.
package tools

import (
	// Documentation generator: renders docs/ from the provider schema,
	// templates/ and examples/.
	_ "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs"
)
