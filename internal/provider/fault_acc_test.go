package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// faultAgentConfig is one embedded agent named name whose update deadline
// is short (a never-ready revision fails in 25 s, not 90).
func faultAgentConfig(env kubeEnv, annotations, document, name string) string {
	return env.provider + env.compute(annotations) + supportSources(document) + fmt.Sprintf(`
resource "occ_agent" "a" {
  name          = %q
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "90s", update = "25s", delete = "60s" }
}`, name)
}

// supportSources is the configuration and the credential source the
// fault tests' agents use.
func supportSources(document string) string {
	return fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(%s)
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "llm", key = "api-key" }
}
`, document)
}

const (
	fixedDoc  = `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5", maxConcurrent = 3 } } }`
	brokenDoc = `{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5", maxConcurrent = 2 } } }`
	neverUp   = `, pod_annotations = { "testenv.occ.dev/behavior" = "never-ready" }`
)

// Fault 3: an update that fails (never ready, its deadline passes), then a
// fix. Pass: the fix applies on the first try and runs the fixed document,
// although its revision number is the failed attempt's (state keeps the
// revision that serves): the failed attempt's immutable ConfigMap is
// replaced, and its Pods never pass the fix's gate (the gate is keyed by
// revision id). Embedded activation is Recreate (AC1), so the failed
// update interrupts revision 1 by design.
func TestAccFault_FailedUpdateThenFix(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	runs := func(rev, doc string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			ctx := context.Background()
			svc, err := cs.CoreV1().Services(env.ns).Get(ctx, "support", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := svc.Spec.Selector[render.LabelRevision]; got != rev {
				return fmt.Errorf("the Service selects revision %s, want %s", got, rev)
			}
			cm, err := cs.CoreV1().ConfigMaps(env.ns).Get(ctx, "support-r"+rev, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !strings.Contains(cm.Data[render.ConfigFile], doc) {
				return fmt.Errorf("revision %s runs %s, want %s in it", rev, cm.Data[render.ConfigFile], doc)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: faultAgentConfig(env, "", anthropicDoc, "support"), Check: runs("1", `"model":"anthropic/claude-sonnet-4-5"`)},
			{
				Config:      faultAgentConfig(env, neverUp, brokenDoc, "support"),
				ExpectError: mustRegexp(`DEADLINE_EXCEEDED: agent "support" revision 2 did not activate`),
			},
			{
				Config: faultAgentConfig(env, "", fixedDoc, "support"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeTestCheckFunc(runs("2", `"maxConcurrent":3`),
					resource.TestCheckResourceAttr("occ_agent.a", "revision", "2"),
					resource.TestCheckResourceAttr("occ_agent.a", "status", "active")),
			},
			{Config: faultAgentConfig(env, "", fixedDoc, "support"), PlanOnly: true},
		},
	})
}

// Fault 5: two configurations with the same agent name in one namespace.
// Pass: the second refuses before writing anything, naming the import id;
// the first keeps running, untouched; the second's destroy (nothing in its
// state) touches nothing of the first.
func TestAccFault_SecondConfigurationSameAgentName(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	var before map[string]string // object -> resourceVersion
	snapshot := func() (map[string]string, error) {
		ctx := context.Background()
		out := map[string]string{}
		sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"}
		svcs, err := cs.CoreV1().Services(env.ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		for _, s := range svcs.Items {
			out["service/"+s.Name] = s.ResourceVersion
		}
		deps, err := cs.AppsV1().Deployments(env.ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		for _, d := range deps.Items {
			out["deployment/"+d.Name] = d.ResourceVersion
		}
		cms, err := cs.CoreV1().ConfigMaps(env.ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		for _, c := range cms.Items {
			out["configmap/"+c.Name] = c.ResourceVersion
		}
		return out, nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: faultAgentConfig(env, "", anthropicDoc, "support"),
				Check: func(*terraform.State) (err error) {
					before, err = snapshot()
					return err
				},
			},
			{
				// The second configuration, run to its end (apply, then
				// destroy) while the first's agent runs.
				PreConfig: func() {
					resource.Test(t, resource.TestCase{
						ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
						Steps: []resource.TestStep{{
							Config: faultAgentConfig(env, "", fixedDoc, "support"),
							ExpectError: mustRegexp(`RESOURCE_CONFLICT: agent "support" already runs in namespace ` + env.ns +
								`[\s\S]*terraform import <address> ` + env.ns + `/support[\s\S]*` + nothingWritten),
						}},
					})
				},
				Config:           faultAgentConfig(env, "", anthropicDoc, "support"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: func(*terraform.State) error {
					after, err := snapshot()
					if err != nil {
						return err
					}
					if len(after) != len(before) {
						return fmt.Errorf("objects of the first agent changed from %v to %v", before, after)
					}
					for k, v := range before {
						if after[k] != v {
							return fmt.Errorf("%s was changed by the second configuration (resourceVersion %s, then %s)", k, v, after[k])
						}
					}
					return nil
				},
			},
		},
	})
}

// manyAgentsConfig is one embedded agent per name, all in one namespace
// (one block each: the testing framework's state reader takes no
// for_each).
func manyAgentsConfig(env kubeEnv, names []string) string {
	return env.provider + env.compute("") + supportSources(anthropicDoc) + agentBlocks(names)
}

// agentBlocks is one occ_agent per name on occ_compute.k,
// occ_configuration.c and occ_credential_source.s.
func agentBlocks(names []string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, `
resource "occ_agent" %q {
  name          = %q
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "120s", update = "120s", delete = "90s" }
}
`, n, n)
	}
	return b.String()
}

// Fault 4: ten agents in one namespace applied at once (Terraform's
// default -parallelism is 10; `make test` runs this package under -race),
// with names that end like the names the provider derives (web-gateway is
// also agent web's gateway Deployment's name, web-harness a harness's).
// Destroying web touches none of the others: objects go by their labels,
// never by a derived name; the next plan is empty.
func TestAccFault_TenAgentsOneNamespace(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	all := []string{"web", "web-gateway", "web-harness", "web-gateway-gateway", "api", "api-r1", "api-node", "bot", "bot-gateway-token", "ops"}
	rest := all[1:]
	serving := func(names []string, gone ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			ctx := context.Background()
			for _, n := range names {
				svc, err := cs.CoreV1().Services(env.ns).Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("agent %s: %v", n, err)
				}
				if svc.Labels[render.LabelAgent] != n || svc.Spec.Selector[render.LabelAgent] != n {
					return fmt.Errorf("Service %s is labelled for %q and selects %q", n, svc.Labels[render.LabelAgent], svc.Spec.Selector[render.LabelAgent])
				}
				d, err := cs.AppsV1().Deployments(env.ns).Get(ctx, render.GatewayName(n), metav1.GetOptions{})
				if err != nil || d.Labels[render.LabelAgent] != n {
					return fmt.Errorf("agent %s's gateway Deployment: %v", n, err)
				}
			}
			for _, n := range gone {
				sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + n}
				if l, err := cs.CoreV1().Services(env.ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
					return fmt.Errorf("agent %s's Services are left: %v", n, err)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: manyAgentsConfig(env, all), Check: serving(all)},
			{Config: manyAgentsConfig(env, rest), Check: serving(rest, "web")},
			{Config: manyAgentsConfig(env, rest), PlanOnly: true},
		},
	})
}
