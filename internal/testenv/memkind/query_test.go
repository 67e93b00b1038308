package memkind

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// newTerraformPreCheck skips a test that needs Terraform 1.14 (resource
// identity, `terraform query`) under an older CLI, and fails it instead
// under OCC_ACC_NEW_TERRAFORM=1, as `make testacc-new-terraform` (and so
// CI) runs it.
func newTerraformPreCheck(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1, or run it through make testacc-new-terraform")
	}
	path := os.Getenv("TF_ACC_TERRAFORM_PATH")
	var v struct {
		Version string `json:"terraform_version"`
	}
	out, err := exec.Command(path, "version", "-json").Output()
	if err == nil {
		err = json.Unmarshal(out, &v)
	}
	major, minor := 0, 0
	if parts := strings.SplitN(v.Version, ".", 3); len(parts) >= 2 {
		major, _ = strconv.Atoi(parts[0])
		minor, _ = strconv.Atoi(parts[1])
	}
	if err == nil && (major > 1 || major == 1 && minor >= 14) {
		return
	}
	msg := fmt.Sprintf("terraform query needs Terraform >= 1.14; %q reports %q (%v). `make testacc-new-terraform TEST=./internal/testenv/memkind/` runs this test with the built Terraform", path, v.Version, err)
	if os.Getenv("OCC_ACC_NEW_TERRAFORM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestAccQuery_MemoryKind: the in-memory kind's target attribute, which
// it registers from this package alone, joins the occ_agent list block
// and the agent's resource identity: `terraform query` lists the agent in
// its target with the identity that adopts it, a list block that names
// the memory target and a namespace is refused at the attribute, and an
// import block with that identity adopts the agent in place (issue 29).
//
//	make testacc-new-terraform TEST=./internal/testenv/memkind/
func TestAccQuery_MemoryKind(t *testing.T) {
	newTerraformPreCheck(t)
	identity := map[string]knownvalue.Check{"name": knownvalue.StringExact("support"), "target": knownvalue.StringExact("t1"),
		"namespace": knownvalue.Null(), "host": knownvalue.Null(), "port": knownvalue.Null()}
	config := memoryConfig("/memkind/ready/v1", "api_key")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             destroyedAll,
		Steps: []resource.TestStep{
			{
				Config: config,
			},
			{
				Query: true,
				Config: `
list "occ_agent" "mem" {
  provider = occ
  config {
    target = "t1"
  }
}
`,
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("occ_agent.mem", 1),
					querycheck.ExpectIdentity("occ_agent.mem", identity),
					querycheck.ExpectResourceDisplayName("occ_agent.mem", queryfilter.ByResourceIdentity(identity),
						knownvalue.StringExact("support (revision 1, active)")),
				},
			},
			{
				Query: true,
				Config: `
list "occ_agent" "both" {
  provider = occ
  config {
    namespace = "occ-acme"
    target    = "t1"
  }
}
`,
				ExpectError: regexp.MustCompile(`INVALID_REQUEST: namespace and target are both set`),
			},
			{
				Config: config, ResourceName: "occ_agent.a", ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity,
				// The import adopts what runs; the references come from
				// configuration, in place, and nothing is deployed.
				ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("id"), knownvalue.StringExact("memory://t1/support")),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				}},
			},
		},
	})
}
