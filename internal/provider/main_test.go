package provider

import (
	"os"
	"testing"

	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

// TestMain stops the shared test cluster after the tests (started on first
// use by the acceptance tests that deploy).
func TestMain(m *testing.M) { os.Exit(testkube.Main(m)) }
