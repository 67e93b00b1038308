// Command coredns is the cluster DNS of the test environment's real node:
// CoreDNS (github.com/coredns/coredns, the pinned version in go.mod) built
// with only the plugins the node's Corefile uses, as CoreDNS documents for
// compile-time plugin selection. It answers cluster.local names from the
// API server and nothing else: there is no forward plugin, so no query ever
// leaves the node's network namespace.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The directives in the order CoreDNS's plugin.cfg gives them.
var directives = []string{"errors", "log", "health", "ready", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
