package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
)

// testAccProtoV6ProviderFactories serves the provider in-process to the real
// Terraform (or OpenTofu) CLI.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"occ": providerserver.NewProtocol6WithError(New("test", "test")()),
}

// testAccPreCheck fails loudly when the CLI the acceptance tests need is
// missing: they never pass silently.
func testAccPreCheck(t *testing.T) {
	t.Helper()
	cli := testCLI(t)
	if !atLeast(cli.version, 1, 11) {
		t.Fatalf("acceptance tests need a CLI >= 1.11 for write-only attributes; %s reports %q", cli.path, cli.version)
	}
}

// acceptanceCLI is the CLI the acceptance tests run: its path, version and
// whether it is OpenTofu.
type acceptanceCLI struct {
	path, version string
	openTofu      bool
}

func testCLI(t *testing.T) acceptanceCLI {
	t.Helper()
	bin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("terraform"); err != nil {
			t.Fatalf("acceptance tests need Terraform >= 1.11 on PATH or TF_ACC_TERRAFORM_PATH (OpenTofu >= 1.11 works too): %v", err)
		}
	}
	out, err := exec.Command(bin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	var v struct {
		TerraformVersion string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version -json: %v", bin, err)
	}
	text, _ := exec.Command(bin, "version").Output()
	return acceptanceCLI{path: bin, version: v.TerraformVersion, openTofu: strings.HasPrefix(string(text), "OpenTofu")}
}

// newTerraformPreCheck is testAccPreCheck for a test of a Terraform
// feature newer than the CLI the main acceptance run uses (resource
// identity: 1.12, list resources and `terraform query`: 1.14; OpenTofu has
// neither). With another CLI the test is skipped, saying so, unless
// OCC_ACC_NEW_TERRAFORM=1 (`make testacc-new-terraform`, which .ci/run
// runs with the built Terraform): then it fails, so CI never passes
// without running it.
func newTerraformPreCheck(t *testing.T, major, minor int, feature string) {
	t.Helper()
	testAccPreCheck(t)
	cli := testCLI(t)
	if !cli.openTofu && atLeast(cli.version, major, minor) {
		return
	}
	msg := fmt.Sprintf("%s needs Terraform >= %d.%d; %s reports %q (OpenTofu: %v). `make testacc-new-terraform` runs this test with the built Terraform",
		feature, major, minor, cli.path, cli.version, cli.openTofu)
	if os.Getenv("OCC_ACC_NEW_TERRAFORM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
}

// TestAccEnvironment makes a CI run without TF_ACC fail instead of skipping
// every acceptance test.
func TestAccEnvironment(t *testing.T) {
	if os.Getenv("CI") != "" && os.Getenv("TF_ACC") == "" {
		t.Fatal("CI is set but TF_ACC is not: the acceptance tests would be skipped. Run them through `make test`.")
	}
}

// errCode matches a diagnostic whose summary starts with the code.
func errCode(code string, rest ...string) *regexp.Regexp {
	pattern := regexp.QuoteMeta(code + ":")
	for _, r := range rest {
		pattern += `[\s\S]*` + r
	}
	return regexp.MustCompile(pattern)
}

// sentinelAbsentFromState asserts a secret never reaches the state.
type sentinelAbsentFromState struct{ sentinel string }

func (c sentinelAbsentFromState) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	b, err := json.Marshal(req.State)
	if err != nil {
		resp.Error = err
		return
	}
	if strings.Contains(string(b), c.sentinel) {
		resp.Error = fmt.Errorf("the secret value appears in the state")
	}
}

// sentinelAbsentFromPlan asserts a secret never reaches the provider's part
// of the plan: resource changes, planned values and prior state. (The
// configuration's own variables are Terraform's business, not the provider's.)
type sentinelAbsentFromPlan struct{ sentinel string }

func (c sentinelAbsentFromPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	b, err := json.Marshal([]any{req.Plan.ResourceChanges, req.Plan.PlannedValues, req.Plan.PriorState, req.Plan.ResourceDrift})
	if err != nil {
		resp.Error = err
		return
	}
	if strings.Contains(string(b), c.sentinel) {
		resp.Error = fmt.Errorf("the secret value appears in the plan")
	}
}

// hcl configurations shared by the tests.
const testComputeK8s = `
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = "occ-acme" }
}
`

const testConfigAnthropic = `
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode({ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } })
}
`

const testSourceSecretRef = `
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "anthropic", key = "api-key" }
}
`
