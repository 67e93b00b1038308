// Command profprovider is the occ provider with a CPU and a heap profile:
// scripts/bench-plan.sh runs it in place of the provider when
// BENCH_PROFILE names a directory, which gets one cpu-PID.pprof and
// heap-PID.pprof per provider process Terraform starts. Read them with
// `go tool pprof -top bin/terraform-provider-occ DIR/cpu-PID.pprof`.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/occ-platform/terraform-provider-occ/internal/provider"
)

func main() {
	dir := os.Getenv("BENCH_PROFILE")
	if dir == "" {
		log.Fatal("BENCH_PROFILE must name the directory for the profiles")
	}
	for _, name := range provider.QuietLogs(os.Environ()) { // as main.go does
		_ = os.Setenv(name, "OFF")
	}
	cpu, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		log.Fatal(err)
	}
	// Terraform stops a plugin through go-plugin's graceful shutdown, after
	// which Serve returns.
	serveErr := providerserver.Serve(context.Background(), provider.New("dev", "profile"), providerserver.ServeOpts{
		Address: provider.Address, ProtocolVersion: 6,
	})
	pprof.StopCPUProfile()
	_ = cpu.Close()
	if heap, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", os.Getpid()))); err == nil {
		runtime.GC()
		_ = pprof.Lookup("allocs").WriteTo(heap, 0)
		_ = heap.Close()
	}
	if serveErr != nil {
		log.Fatal(serveErr)
	}
}
