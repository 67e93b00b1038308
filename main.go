// Command terraform-provider-occ serves the OCC provider over the Terraform
// plugin protocol 6.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/occ-platform/terraform-provider-occ/internal/provider"
	"github.com/occ-platform/terraform-provider-occ/internal/release"
)

// Set by the release build (goreleaser ldflags).
var (
	version = "dev"
	commit  = "none"
)

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "start the provider with support for debuggers like delve")
	flag.Parse()
	if err := release.Check(); err != nil {
		log.Fatal(err.Error())
	}
	if !debug {
		for _, name := range provider.QuietLogs(os.Environ()) {
			_ = os.Setenv(name, "OFF")
		}
	}

	err := providerserver.Serve(context.Background(), provider.New(version, commit), providerserver.ServeOpts{
		Address:         provider.Address,
		Debug:           debug,
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}
