package provider

import (
	"context"
	"encoding/json"
	"fmt"
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
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/sandboxapi"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// sandboxEnv is a test namespace watched by the test sandbox driver, and a
// provider identity holding exactly the documented Roles: kube.RequiredRules
// and kube.SandboxRules in the tenant namespace, kube.DriverGatewayRules in
// the driver's gateway namespace.
type sandboxEnv struct {
	kubeEnv
	driver         *kubeenv.SandboxDriver
	serviceAccount string
}

func newSandboxEnv(t *testing.T) sandboxEnv {
	t.Helper()
	c := kubeenv.Shared(t)
	return newSandboxEnvIn(t, c, c.TestNamespace(t))
}

// newSandboxEnvIn is newSandboxEnv in the namespace ns of c.
func newSandboxEnvIn(t *testing.T, c *kubeenv.Cluster, ns string) sandboxEnv {
	t.Helper()
	return newSandboxEnvWith(t, c, kubeenv.SandboxDriverOptions{Namespaces: []string{ns}})
}

// newSandboxEnvWith is newSandboxEnv with a driver of these options, in
// their first namespace.
func newSandboxEnvWith(t *testing.T, c *kubeenv.Cluster, opts kubeenv.SandboxDriverOptions) sandboxEnv {
	t.Helper()
	ns := opts.Namespaces[0]
	driver := c.StartSandboxDriver(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.NamespacedIdentity(ctx, ns, slices.Concat(kube.RequiredRules, kube.SandboxRules))
	if err != nil {
		t.Fatalf("namespaced identity: %v", err)
	}
	env := sandboxEnv{kubeEnv: kubeEnv{cluster: c, ns: ns, provider: fmt.Sprintf(`
provider "occ" {
  kubernetes = { config_path = %q }
}
`, id.KubeconfigPath)}, driver: driver}
	env.serviceAccount = id.ServiceAccount
	grant(t, c, driver.GatewayNamespace(), ns, kube.DriverGatewayRules)
	return env
}

// grant gives the test identity's ServiceAccount (in tenant) rules in ns.
func grant(t *testing.T, c *kubeenv.Cluster, ns, tenant string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sas, err := c.Clientset.CoreV1().ServiceAccounts(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rbac := c.Clientset.RbacV1()
	for _, sa := range sas.Items {
		if !strings.HasPrefix(sa.Name, "occ-test-") {
			continue
		}
		name := sa.Name + "-extra-" + fmt.Sprint(time.Now().UnixNano()%100000)
		if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: tenant}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitForRules(ctx, "system:serviceaccount:"+tenant+":"+sa.Name, ns, rules); err != nil {
			t.Fatal(err)
		}
	}
}

// sandboxCompute is a compute whose OpenShell driver is the test driver.
func (e sandboxEnv) sandboxCompute(name, extra string) string {
	return fmt.Sprintf(`
resource "occ_compute" %q {
  name = %q
  kubernetes = {
    namespace      = %q
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "gpu-a", gateway_namespace = %q }
    %s
  }
}
`, name, name, e.ns, e.driver.GatewayNamespace(), extra)
}

func (e sandboxEnv) sandbox(t *testing.T, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return e.cluster.Dynamic.Resource(sandboxapi.GVR).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

// podsByComponent is the test namespace's Pods that match selector, by
// their component label.
func (e sandboxEnv) podsByComponent(selector string) (map[string]*corev1.Pod, error) {
	pods, err := e.cluster.Clientset.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		out[pods.Items[i].Labels[render.LabelComponent]] = &pods.Items[i]
	}
	return out, nil
}

func modesCheck(ms ...string) knownvalue.Check {
	checks := make([]knownvalue.Check, len(ms))
	for i, m := range ms {
		checks[i] = knownvalue.StringExact(m)
	}
	return knownvalue.ListExact(checks)
}

// TestAccInstallation_DriverStates: every capability state shows in the
// installation, read live (rules ND5, ND6): no driver, driver ready, custom
// image with and without the deprecated support declaration, a driver that
// is not installed, and a driver outage (which changes no Agent's plan).
// No state offers dedicated OpenClaw or native workers (ND6).
func TestAccInstallation_DriverStates(t *testing.T) {
	env := newSandboxEnv(t)
	// "missing" points its driver at the tenant namespace, where no driver
	// gateway exists; the identity may read there as the documented Role allows.
	grant(t, env.cluster, env.ns, env.ns, kube.DriverGatewayRules)
	config := env.provider + env.compute("") + env.sandboxCompute("ready", "") +
		env.sandboxCompute("custom", `runtime_image = "registry.example/openclaw:custom"`) +
		env.sandboxCompute("declared", `runtime_image = "registry.example/openclaw:custom"
    native_worker_support = true`) + `
resource "occ_compute" "missing" {
  name = "missing"
  kubernetes = {
    namespace      = "` + env.ns + `"
    sandbox_driver = { name = "openshell", facets = ["networking", "filesystem", "process"], required_profile = "gpu-a", gateway_namespace = "` + env.ns + `" }
  }
}
data "occ_installation" "plain" { compute = occ_compute.k }
data "occ_installation" "ready" { compute = occ_compute.ready }
data "occ_installation" "custom" { compute = occ_compute.custom }
data "occ_installation" "declared" { compute = occ_compute.declared }
data "occ_installation" "missing" { compute = occ_compute.missing }
`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.occ_installation.plain", tfjsonpath.New("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("data.occ_installation.plain", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.occ_installation.ready", tfjsonpath.New("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("data.occ_installation.ready", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.occ_installation.ready", tfjsonpath.New("sandbox_driver_unavailable"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue("data.occ_installation.custom", tfjsonpath.New("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("data.occ_installation.custom", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.occ_installation.declared", tfjsonpath.New("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("data.occ_installation.declared", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.occ_installation.missing", tfjsonpath.New("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("data.occ_installation.missing", tfjsonpath.New("native_workers_support"), knownvalue.Null()),
					statecheck.ExpectKnownValue("occ_compute.ready", tfjsonpath.New("installation").AtMapKey("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("occ_compute.ready", tfjsonpath.New("installation").AtMapKey("native_workers_support"), knownvalue.Null()),
					statecheck.ExpectKnownValue("occ_compute.declared", tfjsonpath.New("installation").AtMapKey("native_workers_support"), knownvalue.Null()),
				},
			},
			{
				// Driver outage: the gateway's endpoint turns unready.
				PreConfig: func() {
					if err := env.driver.SetOutage(context.Background(), true); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.occ_installation.ready", tfjsonpath.New("sandbox_driver_unavailable"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("data.occ_installation.ready", tfjsonpath.New("execution_modes"), modesCheck("embedded")),
					statecheck.ExpectKnownValue("occ_compute.ready", tfjsonpath.New("installation").AtMapKey("sandbox_driver_unavailable"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("data.occ_installation.plain", tfjsonpath.New("sandbox_driver_unavailable"), knownvalue.Bool(false)),
				},
			},
			{
				PreConfig: func() {
					if err := env.driver.SetOutage(context.Background(), false); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.occ_installation.ready", tfjsonpath.New("sandbox_driver_unavailable"), knownvalue.Bool(false)),
				},
			},
		},
	})
}

// dedicatedAgent is a test's configuration "c", credential source "s"
// (its attributes given) and dedicated agent "a" on compute "k".
func dedicatedAgent(agent, harness, document, source string) string {
	return fmt.Sprintf(`
resource "occ_configuration" "c" {
  name     = %[1]q
  document = jsonencode(%[3]s)
}
resource "occ_credential_source" "s" {
  %[4]s
}
resource "occ_agent" "a" {
  name           = %[1]q
  compute        = occ_compute.k
  configuration  = occ_configuration.c
  harness        = %[2]q
  execution_mode = "dedicated"
  harness_auth   = { source = occ_credential_source.s }
  timeouts       = { create = "90s", update = "90s" }
}
`, agent, harness, document, source)
}

// sandboxCodex is dedicated Codex with a Credential Gateway key.
func sandboxCodex(maxConcurrent int) string {
	return dedicatedAgent("coder", "codex", fmt.Sprintf(`{ agents = { defaults = { model = "codex/gpt-5-codex", maxConcurrent = %d } } }`, maxConcurrent),
		`name = "openai"
  method = "credential_source"
  source_type = "openai_api_key"`)
}

// TestAccAgent_SandboxedCodex: dedicated Codex in the OpenShell sandbox with
// a Credential Gateway key (rules OS1, HM5, AU3, AU6, AC2): one Sandbox per
// revision, only a placeholder in the harness, no model Secret anywhere,
// activation after the attachment is ready; an update stops the earlier
// revision's Sandbox first; destroy removes every Sandbox.
func TestAccAgent_SandboxedCodex(t *testing.T) {
	env := newSandboxEnv(t)
	compute := env.sandboxCompute("k", `credential_gateway = { name = "cg-main" }`)
	config := func(maxc int) string {
		return env.provider + compute + sandboxCodex(maxc)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			list, err := env.cluster.Dynamic.Resource(sandboxapi.GVR).Namespace(env.ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) != 0 {
				return fmt.Errorf("%d Sandboxes left after destroy", len(list.Items))
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config(4),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				},
				Check: func(*terraform.State) error {
					sb, err := env.sandbox(t, "coder-harness-r1")
					if err != nil {
						return fmt.Errorf("the revision's Sandbox: %v", err)
					}
					att, _ := sandboxapi.DecodeAttachments(sb.GetAnnotations()[sandboxapi.AnnotationAttachments])
					if len(att) != 1 || att[0].Gateway != "cg-main" || att[0].SourceType != "openai_api_key" {
						return fmt.Errorf("attachments = %+v", att)
					}
					// No model Secret exists or is projected (AU3): only the
					// agent's own tokens (the gateway's listener, the app server's).
					secrets, err := env.cluster.Clientset.CoreV1().Secrets(env.ns).List(context.Background(), metav1.ListOptions{})
					if err != nil {
						return err
					}
					for _, s := range secrets.Items {
						if s.Name != render.AppServerTokenSecret("coder") && s.Name != render.GatewayTokenSecret("coder") {
							return fmt.Errorf("unexpected Secret %s in a Credential Gateway namespace", s.Name)
						}
					}
					pods, err := env.podsByComponent(render.LabelAgent + "=coder")
					if err != nil {
						return err
					}
					harness, gateway := pods[render.ComponentHarness], pods[render.ComponentGateway]
					if harness == nil || gateway == nil {
						return fmt.Errorf("pods: harness %v gateway %v", harness != nil, gateway != nil)
					}
					if owner := metav1.GetControllerOf(harness); owner == nil || owner.Kind != "Sandbox" || owner.Name != "coder-harness-r1" {
						return fmt.Errorf("the harness Pod is not the Sandbox's: %+v", owner)
					}
					for _, e := range harness.Spec.Containers[0].Env {
						if e.Name == "OPENAI_API_KEY" && (e.Value != admission.PlaceholderCredential || e.ValueFrom != nil) {
							return fmt.Errorf("harness OPENAI_API_KEY is not the placeholder")
						}
					}
					gw, _ := json.Marshal(gateway.Spec)
					if strings.Contains(string(gw), "OPENAI_API_KEY") { // AU6
						return fmt.Errorf("the gateway Pod holds the inference credential variable")
					}
					return nil
				},
			},
			{
				// A new revision: the earlier revision's Sandbox is stopped first (AC2).
				Config: config(6),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("occ_agent.a", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
				},
				Check: func(*terraform.State) error {
					if _, err := env.sandbox(t, "coder-harness-r2"); err != nil {
						return err
					}
					if _, err := env.sandbox(t, "coder-harness-r1"); !apierrors.IsNotFound(err) {
						return fmt.Errorf("revision 1's Sandbox after the replacement: %v", err)
					}
					return nil
				},
			},
			{
				// Drift: a deleted Sandbox plans a redeploy.
				PreConfig: func() {
					_ = env.cluster.Dynamic.Resource(sandboxapi.GVR).Namespace(env.ns).Delete(context.Background(), "coder-harness-r2", metav1.DeleteOptions{})
				},
				Config:             config(6),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// TestAccAgent_AttachmentFailureFailsApply: an attachment the Credential
// Gateway reports failed fails the apply with its reason (AU3).
func TestAccAgent_AttachmentFailureFailsApply(t *testing.T) {
	env := newSandboxEnv(t)
	env.driver.FailAttachment("openai", "KeyNotFound", "no openai_api_key credential named openai in gateway cg-main")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      env.provider + env.sandboxCompute("k", `credential_gateway = { name = "cg-main" }`) + sandboxCodex(4),
			ExpectError: mustRegexp(`CREDENTIAL_ATTACHMENT_FAILED: agent "coder" revision 1 did not activate[\s\S]*KeyNotFound[\s\S]*no openai_api_key credential named openai`),
		}},
	})
}

// rule OS1: a driver that lacks a facet the compute asks for, or the
// required placement profile, refuses the Sandbox through the extension;
// the apply fails at once with its reason, and the harness's Pod, which
// the real controller made, was never scheduled.
func TestAccAgent_SandboxExtensionRefusalsFailApply(t *testing.T) {
	c := kubeenv.Shared(t)
	for name, tc := range map[string]struct {
		opts kubeenv.SandboxDriverOptions
		want string
	}{
		"facet":   {kubeenv.SandboxDriverOptions{Facets: []string{"networking", "filesystem"}}, `FacetUnsupported: the driver provides the facets networking, filesystem, not process`},
		"profile": {kubeenv.SandboxDriverOptions{Profiles: map[string]map[string]string{"standard": nil}}, `ProfileUnavailable: the driver has no placement profile "gpu-a"`},
	} {
		t.Run(name, func(t *testing.T) {
			tc.opts.Namespaces = []string{c.TestNamespace(t)}
			env := newSandboxEnvWith(t, c, tc.opts)
			env.secret(t, "openai", "api-key", testSentinel)
			refused := mustRegexp(`SANDBOX_PROVISIONING_FAILED[\s\S]*will not place Sandbox[\s\S]*` + regexp.QuoteMeta(tc.want))
			var started time.Time
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{
					{
						PreConfig:   func() { started = time.Now() },
						Config:      env.provider + env.sandboxCompute("k", "") + sandboxCodexKey,
						ExpectError: refused,
					},
					{
						// After the refusal: it came at once, not at the
						// deadline, and the harness's Pod, which the real
						// controller made, was never scheduled.
						PreConfig: func() {
							if d := time.Since(started); d > 2*time.Minute {
								t.Errorf("the refusal took %s; it should fail at once, not at the deadline", d)
							}
							pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(context.Background(), metav1.ListOptions{})
							if err != nil {
								t.Fatal(err)
							}
							harness := 0
							for _, p := range pods.Items {
								if p.Labels[render.LabelComponent] != render.ComponentHarness {
									continue
								}
								harness++
								if p.Spec.NodeName != "" || len(p.Spec.SchedulingGates) != 1 {
									t.Errorf("the refused harness Pod %s: node %q, gates %v; want it gated", p.Name, p.Spec.NodeName, p.Spec.SchedulingGates)
								}
							}
							if harness != 1 {
								t.Errorf("%d harness Pods, want the controller's one", harness)
							}
						},
						Config:      env.provider + env.sandboxCompute("k", "") + sandboxCodexKey,
						ExpectError: refused,
					},
				},
			})
		})
	}
}

// rule OS1: a harness Pod the API server refuses (here an admission
// policy of the cluster's) is reported by the real agent-sandbox
// controller as ReconcilerError with the refusal, which it retries
// forever; the apply fails at once with SANDBOX_PROVISIONING_FAILED and
// the refusal, instead of waiting for its deadline.
func TestAccAgent_SandboxPodRefusedFailsApply(t *testing.T) {
	env := newSandboxEnv(t)
	env.secret(t, "openai", "api-key", testSentinel)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := env.cluster.Clientset.AdmissionregistrationV1()
	name := "no-harness-" + env.ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionv1.Validation{{
				Expression: `!has(object.metadata.labels) || !('` + render.LabelComponent + `' in object.metadata.labels) || object.metadata.labels['` + render.LabelComponent + `'] != 'harness'`,
				Message:    "harness Pods are not allowed in this namespace",
			}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": env.ns}}}},
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// In force once a dry-run create of a harness Pod is refused.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{render.LabelComponent: "harness"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}}}
	for {
		_, err := env.cluster.Clientset.CoreV1().Pods(env.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "not allowed in this namespace") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the admission policy is not in force: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var started time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			PreConfig:   func() { started = time.Now() },
			Config:      env.provider + env.sandboxCompute("k", "") + sandboxCodexKey,
			ExpectError: mustRegexp(`SANDBOX_PROVISIONING_FAILED[\s\S]*ReconcilerError[\s\S]*is\s+forbidden[\s\S]*harness\s+Pods\s+are\s+not\s+allowed`),
		}},
	})
	if d := time.Since(started); d > 2*time.Minute {
		t.Errorf("the refusal took %s; it should fail at once, not at the deadline", d)
	}
}

// nativeConfig is dedicated native OpenClaw with an api_key Secret.
var nativeConfig = dedicatedAgent("native", "openclaw", `{ agents = { defaults = { model = "openai/gpt-5" } } }`,
	`name = "openai"
  compute = occ_compute.k
  method = "api_key"
  secret_ref = { name = "openai", key = "api-key" }`)

// nativeRefusal is ND6's refusal as the Terraform CLI prints it: the
// class and why in the summary, pointing at the agent's execution_mode in
// the configuration, the attribute and the pinned runtime's inference
// proxy in the detail, and the rule.
var nativeRefusal = mustRegexp(`INVALID_REQUEST: dedicated OpenClaw cannot serve a turn\s+with occ_agent\.a,[\s\S]*execution_mode\s+=\s+"dedicated"\s+` +
	`Attribute execution_mode:[\s\S]*OpenClaw\s+` + regexp.QuoteMeta(admission.PinnedOpenClawVersion) + `[\s\S]*inference\s+proxy[\s\S]*` +
	`Rule ND6, answered as INVALID_REQUEST \(400\)`)

// namespaceObjects names every object of the kinds the provider writes
// for a compute and an agent in the test namespace (the namespace's own
// annotations, which a compute sets, included), sorted.
func namespaceObjects(env sandboxEnv) ([]string, error) {
	ctx := context.Background()
	cs := env.cluster.Clientset
	opts := metav1.ListOptions{}
	var out []string
	add := func(kind string, metas ...metav1.Object) {
		for _, m := range metas {
			out = append(out, kind+"/"+m.GetName())
		}
	}
	deployments, err := cs.AppsV1().Deployments(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range deployments.Items {
		add("deployment", &deployments.Items[i])
	}
	pods, err := cs.CoreV1().Pods(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		add("pod", &pods.Items[i])
	}
	services, err := cs.CoreV1().Services(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range services.Items {
		add("service", &services.Items[i])
	}
	secrets, err := cs.CoreV1().Secrets(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range secrets.Items {
		add("secret", &secrets.Items[i])
	}
	configMaps, err := cs.CoreV1().ConfigMaps(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range configMaps.Items {
		add("configmap", &configMaps.Items[i])
	}
	accounts, err := cs.CoreV1().ServiceAccounts(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range accounts.Items {
		add("serviceaccount", &accounts.Items[i])
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range claims.Items {
		add("persistentvolumeclaim", &claims.Items[i])
	}
	policies, err := cs.NetworkingV1().NetworkPolicies(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range policies.Items {
		add("networkpolicy", &policies.Items[i])
	}
	sandboxes, err := env.cluster.Dynamic.Resource(sandboxapi.GVR).Namespace(env.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range sandboxes.Items {
		add("sandbox", &sandboxes.Items[i])
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, env.ns, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for k, v := range ns.Annotations {
		out = append(out, "namespace-annotation/"+k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// TestAccAgent_NativeOpenClawIsRefused: dedicated OpenClaw is refused at
// plan with INVALID_REQUEST at execution_mode (rule ND6), on a compute
// whose sandbox driver qualifies, with the pinned runtime image and with a
// custom image that declares native worker support or does not; terraform
// plan and terraform apply write nothing to the namespace (not even the
// compute, which shares the refused plan).
func TestAccAgent_NativeOpenClawIsRefused(t *testing.T) {
	env := newSandboxEnv(t)
	env.secret(t, "openai", "api-key", testSentinel)
	const image = "registry.example/openclaw:custom"
	before, err := namespaceObjects(env)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func() {
		t.Helper()
		after, err := namespaceObjects(env)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(after, before) {
			t.Fatalf("the refused agent wrote to namespace %s:\nbefore %v\nafter  %v", env.ns, before, after)
		}
	}
	config := func(extra string) string {
		return env.provider + env.sandboxCompute("k", extra) + nativeConfig
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// The pinned runtime image, refused by terraform plan.
				Config:      config(""),
				PlanOnly:    true,
				ExpectError: nativeRefusal,
			},
			{
				// A custom image that declares native worker support
				// (deprecated: it admits nothing), refused by terraform apply's plan.
				PreConfig:   unchanged,
				Config:      config(fmt.Sprintf("runtime_image = %q\n    native_worker_support = true", image)),
				ExpectError: nativeRefusal,
			},
			{
				// A custom image without the declaration.
				PreConfig:   unchanged,
				Config:      config(fmt.Sprintf("runtime_image = %q", image)),
				ExpectError: nativeRefusal,
			},
		},
	})
	unchanged()
}

// sandboxCodexKey is dedicated Codex in the sandbox with an api_key Secret.
var sandboxCodexKey = dedicatedAgent("coder", "codex", `{ agents = { defaults = { model = "codex/gpt-5-codex" } } }`,
	`name = "openai"
  compute = occ_compute.k
  method = "api_key"
  secret_ref = { name = "openai", key = "api-key" }`)

// TestAccAgent_SandboxDriverGatesDeploy: a declared driver the cluster does
// not have is refused with RESOURCE_CONFLICT naming it, before any write;
// during an outage provisioning waits for the driver and then activates
// dedicated Codex (rule ND5, AD6).
func TestAccAgent_SandboxDriverGatesDeploy(t *testing.T) {
	env := newSandboxEnv(t)
	env.secret(t, "openai", "api-key", testSentinel)
	// The tenant namespace stands in for a gateway namespace without the
	// driver; the identity may read it as the documented Role allows.
	grant(t, env.cluster, env.ns, env.ns, kube.DriverGatewayRules)
	missing := strings.Replace(env.sandboxCompute("k", ""), `gateway_namespace = "`+env.driver.GatewayNamespace()+`"`, `gateway_namespace = "`+env.ns+`"`, 1)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      env.provider + missing + sandboxCodexKey,
				ExpectError: mustRegexp(`RESOURCE_CONFLICT: the dedicated harness needs the sandbox driver "openshell", which is not installed`),
			},
			{
				PreConfig: func() {
					if sbs, _ := env.cluster.Dynamic.Resource(sandboxapi.GVR).Namespace(env.ns).List(context.Background(), metav1.ListOptions{}); sbs != nil && len(sbs.Items) > 0 {
						t.Errorf("a refused deploy wrote %d Sandboxes", len(sbs.Items))
					}
					if err := env.driver.SetOutage(context.Background(), true); err != nil {
						t.Fatal(err)
					}
					go func() {
						time.Sleep(4 * time.Second)
						_ = env.driver.SetOutage(context.Background(), false)
					}()
				},
				Config: env.provider + env.sandboxCompute("k", "") + sandboxCodexKey,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
				},
			},
		},
	})
}
