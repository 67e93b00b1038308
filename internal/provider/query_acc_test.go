package provider

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// queryPreCheck: list resources and `terraform query` are Terraform 1.14's.
func queryPreCheck(t *testing.T) { newTerraformPreCheck(t, 1, 14, "terraform query") }

// TestAccQuery_Kubernetes: `terraform query` lists exactly the agents of
// the namespace, each with the identity an import block takes and what the
// listing read (revision, status, endpoint), on the kwok control plane; a
// list block naming both a namespace and a host is refused at that
// attribute.
func TestAccQuery_Kubernetes(t *testing.T) {
	queryPreCheck(t) // before the environment starts
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	config := kubeAgentConfig(env, "", anthropicDoc, "") + `
resource "occ_agent" "b" {
  name          = "billing"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "90s", update = "90s", delete = "60s" }
}
`
	listed := func(name string) map[string]knownvalue.Check {
		return map[string]knownvalue.Check{"name": knownvalue.StringExact(name), "namespace": knownvalue.StringExact(env.ns),
			"host": knownvalue.Null(), "port": knownvalue.Null()}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { queryPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{
				// The step's configuration (with its provider block) stays
				// beside the query file.
				Query: true,
				Config: fmt.Sprintf(`
list "occ_agent" "here" {
  provider         = occ
  include_resource = true
  config {
    namespace = %q
  }
}
`, env.ns),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("occ_agent.here", 2),
					querycheck.ExpectIdentity("occ_agent.here", listed("support")),
					querycheck.ExpectIdentity("occ_agent.here", listed("billing")),
					querycheck.ExpectResourceDisplayName("occ_agent.here", queryfilter.ByResourceIdentity(listed("support")),
						knownvalue.StringExact("support (revision 1, active)")),
					querycheck.ExpectResourceKnownValues("occ_agent.here", queryfilter.ByResourceIdentity(listed("billing")), []querycheck.KnownValueCheck{
						{Path: tfjsonpath.New("id"), KnownValue: knownvalue.StringExact(env.ns + "/billing")},
						{Path: tfjsonpath.New("revision"), KnownValue: knownvalue.Int64Exact(1)},
						{Path: tfjsonpath.New("status"), KnownValue: knownvalue.StringExact("active")},
						{Path: tfjsonpath.New("endpoint"), KnownValue: knownvalue.StringExact(fmt.Sprintf("http://billing.%s.svc:18789", env.ns))},
						// The references the apply recorded: what
						// -generate-config-out writes.
						{Path: tfjsonpath.New("compute").AtMapKey("name"), KnownValue: knownvalue.StringExact("prod")},
						{Path: tfjsonpath.New("configuration").AtMapKey("name"), KnownValue: knownvalue.StringExact("support")},
						{Path: tfjsonpath.New("execution_mode"), KnownValue: knownvalue.StringExact("embedded")},
					}),
				},
			},
			{
				// The step's configuration (with its provider block) stays
				// beside the query file.
				Query: true,
				Config: fmt.Sprintf(`
list "occ_agent" "both" {
  provider = occ
  config {
    namespace = %q
    host      = "10.0.0.5"
  }
}
`, env.ns),
				ExpectError: regexp.MustCompile(`INVALID_REQUEST: namespace and host are both set`),
			},
		},
	})
}

// TestAccQuery_SSH: `terraform query` lists the agent on the real systemd
// host, reached on its own port with the provider's SSH settings, with the
// identity that adopts it.
func TestAccQuery_SSH(t *testing.T) {
	queryPreCheck(t) // before the host boots
	env := newSSHEnv(t)
	doc := env.doc("anthropic/claude-sonnet-4-5", "")
	host, portText, _ := net.SplitHostPort(env.sshAddr)
	port, _ := strconv.ParseInt(portText, 10, 64)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { queryPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: env.config("", doc)},
			{
				Query: true,
				Config: fmt.Sprintf(`
list "occ_agent" "edge" {
  provider         = occ
  include_resource = true
  config {
    host = %q
    port = %d
  }
}
`, host, port),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("occ_agent.edge", 1),
					querycheck.ExpectIdentity("occ_agent.edge", map[string]knownvalue.Check{
						"name": knownvalue.StringExact("support"), "namespace": knownvalue.Null(),
						"host": knownvalue.StringExact(host), "port": knownvalue.Int64Exact(port),
					}),
					querycheck.ExpectResourceKnownValues("occ_agent.edge", queryfilter.ByResourceIdentity(map[string]knownvalue.Check{
						"name": knownvalue.StringExact("support"), "namespace": knownvalue.Null(),
						"host": knownvalue.StringExact(host), "port": knownvalue.Int64Exact(port),
					}), []querycheck.KnownValueCheck{
						{Path: tfjsonpath.New("revision"), KnownValue: knownvalue.Int64Exact(1)},
						{Path: tfjsonpath.New("status"), KnownValue: knownvalue.StringExact("active")},
						{Path: tfjsonpath.New("endpoint"), KnownValue: knownvalue.StringExact(fmt.Sprintf("http://127.0.0.1:%d", env.gatewayPort))},
					}),
				},
			},
		},
		CheckDestroy: env.destroyed,
	})
}

// TestAccQuery_GenerateConfigPlans: the flow the list resource exists for,
// run with the real CLI and the built provider binary (bin/, through
// dev_overrides, as a user runs it): an agent applied by one configuration
// is found by `terraform query -generate-config-out` from another, and the
// generated import and resource blocks plan as written: an import that
// updates in place, keeping the agent's revision (nothing deployed).
func TestAccQuery_GenerateConfigPlans(t *testing.T) {
	queryPreCheck(t) // before the environment starts
	run := builtProviderCLI(t)
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	source := `
terraform {
  required_providers {
    occ = { source = "occ-platform/occ" }
  }
}
`
	applied, adopter := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(applied, "main.tf", source+kubeAgentConfig(env, "", anthropicDoc, ""))
	if out, code := run(applied, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply (exit %d):\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := run(applied, "destroy", "-auto-approve", "-no-color"); code != 0 {
			t.Errorf("destroy (exit %d):\n%s", code, out)
		}
	})

	write(adopter, "main.tf", source+env.provider)
	write(adopter, "agents.tfquery.hcl", fmt.Sprintf(`
list "occ_agent" "found" {
  provider         = occ
  include_resource = true
  config {
    namespace = %q
  }
}
`, env.ns))
	if out, code := run(adopter, "query", "-generate-config-out=generated.tf", "-no-color"); code != 0 {
		t.Fatalf("query (exit %d):\n%s", code, out)
	}
	generated, err := os.ReadFile(filepath.Join(adopter, "generated.tf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"import {", `resource "occ_agent"`, "compute", "harness_auth"} {
		if !strings.Contains(string(generated), want) {
			t.Fatalf("generated configuration lacks %q:\n%s", want, generated)
		}
	}
	if strings.Contains(string(generated), testSentinel) {
		t.Fatal("the generated configuration holds the credential's value")
	}
	out, code := run(adopter, "plan", "-no-color", "-detailed-exitcode", "-out=adopt.tfplan")
	if code != 2 { // 2: the plan succeeded and has changes (the import)
		t.Fatalf("plan of the generated configuration (exit %d, want 2):\n%s\n--- generated.tf:\n%s", code, out, generated)
	}
	shown, code := run(adopter, "show", "-json", "adopt.tfplan")
	if code != 0 {
		t.Fatalf("show (exit %d): %s", code, shown)
	}
	var plan struct {
		ResourceChanges []struct {
			Type   string `json:"type"`
			Change struct {
				Actions   []string         `json:"actions"`
				Importing *json.RawMessage `json:"importing"`
				Before    map[string]any   `json:"before"`
				After     map[string]any   `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(shown), &plan); err != nil {
		t.Fatalf("plan JSON: %v", err)
	}
	if len(plan.ResourceChanges) != 1 {
		t.Fatalf("%d resource changes, want the one adopted agent:\n%s", len(plan.ResourceChanges), out)
	}
	rc0 := plan.ResourceChanges[0].Change
	if plan.ResourceChanges[0].Type != "occ_agent" || rc0.Importing == nil || !slices.Equal(rc0.Actions, []string{"update"}) {
		t.Fatalf("change %+v, want an import that updates in place:\n%s", plan.ResourceChanges[0], out)
	}
	if rc0.Before["revision"] != float64(1) || rc0.After["revision"] != float64(1) || rc0.Before["revision_id"] != rc0.After["revision_id"] {
		t.Fatalf("the adoption plans revision %v (%v) from %v (%v), want the running revision kept", rc0.After["revision"], rc0.After["revision_id"], rc0.Before["revision"], rc0.Before["revision_id"])
	}
}
