package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// kubeEnv is one test's namespace on the shared real control plane, and a
// provider block whose identity is the minimal namespaced Role of the docs
// (kube.RequiredRules), not cluster-admin.
type kubeEnv struct {
	cluster  *kubeenv.Cluster
	ns       string
	provider string
}

func newKubeEnv(t *testing.T) kubeEnv {
	t.Helper()
	c := kubeenv.Shared(t)
	return newKubeEnvIn(t, c, c.TestNamespace(t))
}

// newKubeEnvIn is newKubeEnv in the namespace ns of c.
func newKubeEnvIn(t *testing.T, c *kubeenv.Cluster, ns string) kubeEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.NamespacedIdentity(ctx, ns, kube.RequiredRules)
	if err != nil {
		t.Fatalf("namespaced identity: %v", err)
	}
	return kubeEnv{cluster: c, ns: ns, provider: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
`, id.KubeconfigPath)}
}

// newAdminEnv is the shared real control plane as cluster-admin, for the
// tests of what a namespaced identity cannot do (creating namespaces).
func newAdminEnv(t *testing.T) kubeEnv {
	t.Helper()
	c := kubeenv.Shared(t)
	return kubeEnv{cluster: c, provider: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
`, c.KubeconfigPath)}
}

// freshNamespace is a namespace name that does not exist yet (a compute
// creates it); it is deleted when the test ends if still there.
func (e kubeEnv) freshNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("occ-new-%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() {
		_ = e.cluster.Clientset.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func (e kubeEnv) compute(extra string) string {
	return fmt.Sprintf(`
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = %q %s }
}
`, e.ns, extra)
}

func (e kubeEnv) secret(t *testing.T, name, key, value string) {
	t.Helper()
	_, err := e.cluster.Clientset.CoreV1().Secrets(e.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{key: []byte(value)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAccCredentialSource_WriteOnlyValue: the value reaches only its
// Secret, never state or plan; bumping its version writes a new Secret (AU7).
func TestAccCredentialSource_WriteOnlyValue(t *testing.T) {
	env := newKubeEnv(t)
	config := func(version int) string {
		return env.provider + env.compute("") + `
variable "key" {
  type      = string
  sensitive = true
  default   = "` + testSentinel + `"
}
resource "occ_credential_source" "s" {
  name             = "openai"
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = var.key
  value_wo_version = ` + itoa(version) + `
}`
	}
	secretHolds := func(name string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			s, err := env.cluster.Clientset.CoreV1().Secrets(env.ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if string(s.Data[kube.SecretKey]) != testSentinel || s.Immutable == nil || !*s.Immutable {
				return fmt.Errorf("secret %s does not hold the value immutably", name)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:           config(1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}},
				ConfigStateChecks: []statecheck.StateCheck{
					sentinelAbsentFromState{testSentinel},
					statecheck.ExpectKnownValue("occ_credential_source.s", tfjsonpath.New("value_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue("occ_credential_source.s", tfjsonpath.New("secret_name"), knownvalue.StringExact("occ-cred-openai-v1")),
				},
				Check: secretHolds("occ-cred-openai-v1"),
			},
			{
				Config:           config(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}},
				ConfigStateChecks: []statecheck.StateCheck{
					sentinelAbsentFromState{testSentinel},
					statecheck.ExpectKnownValue("occ_credential_source.s", tfjsonpath.New("generation"), knownvalue.Int64Exact(2)),
				},
				Check: secretHolds("occ-cred-openai-v2"),
			},
			{
				// Drift: a deleted Secret plans writing it again.
				PreConfig: func() {
					_ = env.cluster.Clientset.CoreV1().Secrets(env.ns).Delete(context.Background(), "occ-cred-openai-v2", metav1.DeleteOptions{})
				},
				Config: config(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_credential_source.s", plancheck.ResourceActionUpdate)}},
				Check: secretHolds("occ-cred-openai-v2"),
			},
		},
	})
}

func kubeAgentConfig(env kubeEnv, computeExtra, document, agentExtra string) string {
	return env.provider + env.compute(computeExtra) + `
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(` + document + `)
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "llm", key = "api-key" }
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "90s", update = "90s", delete = "60s" }
` + agentExtra + `
}`
}

// TestAccAgent_KubernetesEmbedded: create, update (new revision, guarded
// activation), empty re-plan, import, drift, delete against a real control
// plane with simulated nodes.
func TestAccAgent_KubernetesEmbedded(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	cs := env.cluster.Clientset
	serviceSelects := func(rev string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			svc, err := cs.CoreV1().Services(env.ns).Get(context.Background(), "support", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if svc.Spec.Selector[render.LabelRevision] != rev || svc.Annotations[kube.AnnotationActivatedRevision] != rev {
				return fmt.Errorf("service selects revision %q (activated %q), want %s", svc.Spec.Selector[render.LabelRevision], svc.Annotations[kube.AnnotationActivatedRevision], rev)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: kubeAgentConfig(env, "", anthropicDoc, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					sentinelAbsentFromState{testSentinel},
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("endpoint"), knownvalue.StringExact(fmt.Sprintf("http://support.%s.svc:18789", env.ns))),
				},
				Check: resource.ComposeTestCheckFunc(serviceSelects("1"), func(*terraform.State) error {
					d, err := cs.AppsV1().Deployments(env.ns).Get(context.Background(), "support-gateway", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType { // rule AC1
						return fmt.Errorf("strategy %s", d.Spec.Strategy.Type)
					}
					evs, err := cs.CoreV1().Events(env.ns).List(context.Background(), metav1.ListOptions{})
					if err != nil {
						return err
					}
					audits := 0
					for _, e := range evs.Items {
						if e.Reason == "RevisionActivated" {
							audits++
						}
					}
					if audits != 1 { // rule AC4
						return fmt.Errorf("%d activation audit events, want 1", audits)
					}
					return nil
				}),
			},
			{
				// A semantic change: revision 2, activated behind the guard.
				Config: kubeAgentConfig(env, "", `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				Check: resource.ComposeTestCheckFunc(serviceSelects("2"), func(*terraform.State) error {
					cms, err := cs.CoreV1().ConfigMaps(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
					if err != nil {
						return err
					}
					for _, cm := range cms.Items {
						if cm.Labels[render.LabelRevision] != "2" {
							return fmt.Errorf("revision %s's ConfigMap %s was not retired", cm.Labels[render.LabelRevision], cm.Name)
						}
					}
					return nil
				}),
			},
			{
				ResourceName:  "occ_agent.a",
				ImportState:   true,
				ImportStateId: env.ns + "/support",
				ImportStateCheck: func(s []*terraform.InstanceState) error {
					return expectAttrs(s, map[string]string{"revision": "2", "status": "active", "name": "support"})
				},
			},
			{
				// Drift: a deleted workload plans a redeploy.
				PreConfig: func() {
					if err := cs.AppsV1().Deployments(env.ns).Delete(context.Background(), "support-gateway", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: kubeAgentConfig(env, "", `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(3)),
				}},
				Check: serviceSelects("3"),
			},
		},
		CheckDestroy: func(*terraform.State) error {
			deps, err := cs.AppsV1().Deployments(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err != nil {
				return err
			}
			pods, err := cs.CoreV1().Pods(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err != nil {
				return err
			}
			if len(deps.Items)+len(pods.Items) > 0 {
				return fmt.Errorf("%d deployments and %d pods left after destroy", len(deps.Items), len(pods.Items))
			}
			return nil
		},
	})
}

// feedLogs waits for the agent's Pod and gives its container the lines.
func feedLogs(t *testing.T, env kubeEnv, container string, lines []string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err == nil && len(pods.Items) > 0 {
				if err := env.cluster.SetPodLogs(ctx, env.ns, pods.Items[0].Name, container, lines); err != nil {
					t.Logf("set pod logs: %v", err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func recordLine(t *testing.T, r runtimerecord.Record) string {
	t.Helper()
	r.Time = time.Now().UTC()
	b, err := runtimerecord.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAccAgent_HeldCodeFailsApply: a held startup code fails the apply at
// once with its fields, and the Service is never moved (PR7, PR8, AC3).
func TestAccAgent_HeldCodeFailsApply(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	feedLogs(t, env, "gateway", []string{
		recordLine(t, runtimerecord.Record{Event: runtimerecord.EventStartupPhase, Container: "gateway", Phase: runtimerecord.PhaseWorkspaceSetup, Outcome: runtimerecord.OutcomeOK, DurationMS: 12, ElapsedMS: 12}),
		recordLine(t, runtimerecord.Record{Event: runtimerecord.EventOpenClawProbe, Container: "gateway", Code: runtimerecord.CodeAuthenticationFailed, Final: true,
			ProviderCode: 401, ResponseHeaderMarker: []string{"www-authenticate"}, BodyShape: "json-error-code", ProviderErrorCode: "invalid_api_key", ProviderErrorType: "other"}),
	})
	start := time.Now()
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: kubeAgentConfig(env, `, pod_annotations = { "testenv.occ.dev/behavior" = "never-ready" }`, anthropicDoc, ""),
			ExpectError: mustRegexp(`AUTHENTICATION_FAILED: agent "support" revision 1 did not activate[\s\S]*container gateway[\s\S]*providerCode 401` +
				`[\s\S]*Next: The model provider rejected the credential`),
		}},
	})
	if _, err := env.cluster.Clientset.CoreV1().Services(env.ns).Get(context.Background(), "support", metav1.GetOptions{}); err == nil {
		t.Error("the Service exists: an unready revision was activated")
	}
	t.Logf("held code surfaced in %s", time.Since(start).Round(time.Millisecond))
}

// TestAccAgent_CrashLoopFailsFast: a crash-looping runtime fails the apply
// with its reason and last log lines long before the deadline.
func TestAccAgent_CrashLoopFailsFast(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	start := time.Now()
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      kubeAgentConfig(env, `, pod_annotations = { "testenv.occ.dev/behavior" = "crash-loop" }`, anthropicDoc, ""),
			ExpectError: mustRegexp(`CRASH_LOOP: agent "support" revision 1 did not activate[\s\S]*restarts`),
		}},
	})
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("crash loop surfaced after %s; it must not wait for the 90s deadline", d)
	}
}

// TestAccAgent_DedicatedCodexGatewayHoldsNoCredential: dedicated Codex with
// codex_pat; the gateway Pod spec holds no model credential (AU2, AU6, HM4).
func TestAccAgent_DedicatedCodexGatewayHoldsNoCredential(t *testing.T) {
	for _, tc := range []struct{ method, harnessEnv, loginMode string }{
		{"codex_pat", "CODEX_ACCESS_TOKEN", "codex_pat"},
		{"api_key", "OPENAI_API_KEY", "api_key_stdin"},
	} {
		t.Run(tc.method, func(t *testing.T) { testDedicatedCodex(t, tc.method, tc.harnessEnv, tc.loginMode) })
	}
}

func testDedicatedCodex(t *testing.T, method, harnessEnv, loginMode string) {
	env := newKubeEnv(t)
	env.secret(t, "pat", "token", testSentinel)
	configWith := func(maxConcurrent int) string {
		return env.provider + env.compute("") + dedicatedAgent("support", "codex", fmt.Sprintf(`{ agents = { defaults = { model = "codex/gpt-5-codex", maxConcurrent = %d } } }`, maxConcurrent),
			`name = "pat"
  compute = occ_compute.k
  method = "`+method+`"
  secret_ref = { name = "pat", key = "token" }`)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: configWith(4),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
			Check: func(*terraform.State) error {
				cs := env.cluster.Clientset
				gw, err := cs.AppsV1().Deployments(env.ns).Get(context.Background(), "support-gateway", metav1.GetOptions{})
				if err != nil {
					return err
				}
				h, err := cs.AppsV1().Deployments(env.ns).Get(context.Background(), "support-harness", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if gw.Spec.Template.Spec.ServiceAccountName == h.Spec.Template.Spec.ServiceAccountName {
					return fmt.Errorf("gateway and harness share service account %s", gw.Spec.Template.Spec.ServiceAccountName)
				}
				spec, _ := json.Marshal(gw.Spec.Template.Spec)
				for _, leak := range []string{`"pat"`, "CODEX_ACCESS_TOKEN", "OPENAI_API_KEY"} {
					if strings.Contains(string(spec), leak) {
						return fmt.Errorf("gateway pod spec mentions %s", leak)
					}
				}
				hspec, _ := json.Marshal(h.Spec.Template.Spec)
				if !strings.Contains(string(hspec), harnessEnv) || !strings.Contains(string(hspec), `"`+loginMode+`"`) {
					return fmt.Errorf("harness lacks %s / CODEX_LOGIN_MODE=%s", harnessEnv, loginMode)
				}
				return nil
			},
		}, {
			// A replacement under the documented Role: the earlier revision
			// is stopped first (AC2), then revision 2 activates.
			Config: configWith(6),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
			},
		}},
	})
}

// TestAccAgent_SentinelNeverLogged: a credential value given as value_wo
// appears in no state, no plan, and no TF_LOG=trace output of the provider
// or the framework, through a whole deploy (AU7).
func TestAccAgent_SentinelNeverLogged(t *testing.T) {
	env := newKubeEnv(t)
	dir := t.TempDir()
	t.Setenv("TF_LOG", "TRACE")
	t.Setenv("TF_LOG_PATH_MASK", dir+"/%s.log")
	// The value comes from the environment, as in a CI pipeline, so that the
	// test's own configuration (which the framework logs) does not hold it.
	t.Setenv("TF_VAR_key", testSentinel)
	config := env.provider + env.compute("") + `
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(` + anthropicDoc + `)
}
` + writeOnlyKeySource("anthropic") + `resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "90s" }
}`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:            config,
			ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{sentinelAbsentFromPlan{testSentinel}}},
			ConfigStateChecks: []statecheck.StateCheck{sentinelAbsentFromState{testSentinel}, statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active"))},
		}},
	})
	logs, err := os.ReadDir(dir)
	if err != nil || len(logs) == 0 {
		t.Fatalf("no trace log was written (%v): the check would prove nothing", err)
	}
	total := 0
	for _, l := range logs {
		b, err := os.ReadFile(filepath.Join(dir, l.Name()))
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		if i := strings.Index(string(b), testSentinel); i >= 0 {
			lo, hi := max(0, i-600), min(len(b), i+200)
			t.Errorf("the credential value appears in the trace log %s: …%s…", l.Name(), strings.ReplaceAll(string(b[lo:hi]), testSentinel, "<SENTINEL>"))
		}
	}
	if total < 10000 {
		t.Errorf("the trace log holds only %d bytes: trace logging did not run", total)
	}
	// rule LG5: the provider's own log lines describe the reconciliation:
	// a fresh work.id (not the Agent's name), the target, the outcome.
	activated := regexp.MustCompile(`revision activated.*`)
	workID := regexp.MustCompile(`work\.id["=:\s]+"?([0-9a-f]{16})\b`)
	found := false
	for _, l := range logs {
		b, _ := os.ReadFile(filepath.Join(dir, l.Name()))
		for _, line := range activated.FindAllString(string(b), -1) {
			found = true
			if !workID.MatchString(line) || !strings.Contains(line, "agent support") || !strings.Contains(line, "activated") || !strings.Contains(line, "work.attempt") {
				t.Errorf("activation log line lacks the work fields: %s", line)
			}
		}
	}
	if !found {
		t.Error("no \"revision activated\" line in the trace log")
	}
}

// TestAccAgent_SecretBindingsAndModeSwitch (rule AU6): a configuration's
// secret binding reaches the gateway and never the dedicated harness; an
// in-place switch from dedicated Codex to embedded OpenClaw leaves no
// harness (and its credential) running once the embedded revision is active.
func TestAccAgent_SecretBindingsAndModeSwitch(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	env.secret(t, "tg-bot", "token", "tg-value")
	config := func(harness, mode, model string) string {
		return env.provider + env.compute("") + fmt.Sprintf(`
resource "occ_configuration" "c" {
  name            = "support"
  document        = jsonencode({ agents = { defaults = { model = %q } }, channels = { telegram = { botToken = "$${TELEGRAM}" } } })
  secret_bindings = { telegram = { secret = "tg-bot", key = "token" } }
}
resource "occ_credential_source" "s" {
  name       = "llm"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "llm", key = "api-key" }
}
resource "occ_agent" "a" {
  name           = "support"
  compute        = occ_compute.k
  configuration  = occ_configuration.c
  harness        = %q
  execution_mode = %q
  harness_auth   = { source = occ_credential_source.s }
  timeouts       = { create = "90s", update = "90s" }
}`, model, harness, mode)
	}
	cs := env.cluster.Clientset
	deployments := func(want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			list, err := cs.AppsV1().Deployments(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err != nil {
				return err
			}
			var got []string
			for _, d := range list.Items {
				got = append(got, d.Name)
				for _, c := range d.Spec.Template.Spec.Containers {
					var binding *corev1.EnvVar
					for i, e := range c.Env {
						if e.Name == "TELEGRAM" {
							binding = &c.Env[i]
						}
					}
					switch {
					case c.Name == "gateway" && (binding == nil || binding.ValueFrom == nil || binding.ValueFrom.SecretKeyRef.Name != "tg-bot"):
						return fmt.Errorf("%s/gateway: TELEGRAM = %+v, want Secret tg-bot", d.Name, binding)
					case c.Name != "gateway" && binding != nil:
						return fmt.Errorf("%s/%s receives the gateway's binding", d.Name, c.Name)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("Deployments %v, want %v", got, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("codex", "dedicated", "codex/gpt-5-codex"),
				Check:  deployments("support-gateway", "support-harness"),
			},
			{
				Config: config("openclaw", "embedded", "anthropic/claude-sonnet-4-5"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
				},
				Check: deployments("support-gateway"),
			},
		},
	})
}

// TestAccProvider_KubernetesFromEnvironment: a provider block without
// kubernetes settings reaches the cluster through KUBE_CONFIG_PATH and
// KUBE_CTX alone, as the hashicorp/kubernetes provider does; KUBECONFIG
// pointing elsewhere does not win over them.
func TestAccProvider_KubernetesFromEnvironment(t *testing.T) {
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.NamespacedIdentity(ctx, ns, kube.RequiredRules)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(id.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfgContext string
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "current-context:"); ok {
			cfgContext = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	if cfgContext == "" {
		t.Fatal("the identity's kubeconfig names no current context")
	}
	t.Setenv("KUBE_CONFIG_PATH", id.KubeconfigPath)
	t.Setenv("KUBE_CTX", cfgContext)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	_, err = c.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm"}, Data: map[string][]byte{"api-key": []byte(testSentinel)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// The credential source checks its Secret in the cluster: it
			// applies only if the provider reached it.
			Config: fmt.Sprintf(`
provider "occ" {}
resource "occ_compute" "k" {
  name       = "prod"
  kubernetes = { namespace = %q }
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "llm", key = "api-key" }
}`, ns),
		}},
	})
}

// gatewayUntouched returns a check that agent's gateway Deployment still
// runs revision 1 at the generation the first call saw: a change applied
// outside the revision (network policy, Service exposure) must not
// restart the agent.
func gatewayUntouched(cs kubernetes.Interface, ns, agent, what string) resource.TestCheckFunc {
	var generation int64
	return func(*terraform.State) error {
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), render.GatewayName(agent), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if generation == 0 {
			generation = d.Generation
		}
		if d.Generation != generation || d.Spec.Template.Labels[render.LabelRevision] != "1" {
			return fmt.Errorf("the gateway Deployment changed (generation %d, was %d; revision %s): %s must not restart the agent",
				d.Generation, generation, d.Spec.Template.Labels[render.LabelRevision], what)
		}
		return nil
	}
}
