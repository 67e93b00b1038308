package provider

import (
	"os"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestMain stops the shared test cluster after the tests (started on first
// use by the acceptance tests that deploy). Run by Terraform as a plugin
// (envChild set, fault_kill_acc_test.go), the test binary serves the
// provider instead.
func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(serveChild())
	}
	os.Exit(kubeenv.Main(m))
}
