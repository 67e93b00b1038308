package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// rule issue 31: the plan meets the cluster. An agent no node could hold
// is refused by `terraform plan` itself, with the code and next step its
// apply would give (UNSCHEDULABLE), before anything is written; with the
// provider's preflight = false the same plan is admitted (offline), and
// OCC_PREFLIGHT=false does the same where the block does not say.
func TestAccAgent_PreflightRefusesAtPlan(t *testing.T) {
	admin := newAdminEnv(t)
	env := newKubeEnvIn(t, admin.cluster, admin.cluster.TestNamespace(t))
	env.provider = admin.provider
	env.secret(t, "llm", "api-key", testSentinel)
	huge := kubeAgentConfig(env, `, cpu_limit = "4000"`, anthropicDoc, "")
	offline := strings.Replace(huge, `provider "occ" {`, `provider "occ" {
  preflight = false`, 1)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:   huge,
				PlanOnly: true,
				ExpectError: mustRegexp(`UNSCHEDULABLE: agent "support" revision 1 would not activate[\s\S]*requests\s+cpu\s+4k[\s\S]*no\s+schedulable\s+node\s+has\s+that\s+much` +
					`[\s\S]*Next: Lower the compute's cpu_request/memory_request[\s\S]*` + foundByPreflight),
			},
			{Config: offline, PlanOnly: true, ExpectNonEmptyPlan: true},
			{
				PreConfig:          func() { t.Setenv(preflightEnv, "false") },
				Config:             huge,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
	ds, err := env.cluster.Clientset.AppsV1().Deployments(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
	if err != nil || len(ds.Items) > 0 {
		t.Fatalf("after the refused plans the namespace holds %d Deployments of the agent (%v)", len(ds.Items), err)
	}
}

// nothingWritten is how a refusal before any write ends: the apply's
// "Nothing was written", or the plan preflight's, which found it first.
const nothingWritten = `(Nothing\s+was\s+written|Found\s+by\s+the\s+plan's\s+preflight,\s+which\s+reads\s+the\s+target\s+and\s+writes\s+nothing)`

// foundByPreflight is how a preflight's refusal says so.
const foundByPreflight = `Found\s+by\s+the\s+plan's\s+preflight`
