package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// fleetConfig is ten agents on one compute, configuration and credential
// source (its Secret secret), behind the provider's rollout gate.
func fleetConfig(env kubeEnv, names []string, secret string) string {
	var b strings.Builder
	b.WriteString(strings.Replace(env.provider, "provider \"occ\" {", "provider \"occ\" {\n  rollout = { canary = 1, max_parallel = 5 }", 1))
	b.WriteString(env.compute(neverUp))
	fmt.Fprintf(&b, `
resource "occ_configuration" "c" {
  name     = "support"
  document = jsonencode(%s)
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = %q, key = "api-key" }
}
`, fixedDoc, secret)
	return b.String() + agentBlocks(names)
}

// keyRuntime stands in, on kwok, for what the real runtime does with the
// key its Pod is given (the real node's test of the same record is
// realnode_held_acc_test.go): every Pod starts never-ready (the compute's
// annotation); a Pod given the good Secret is made Ready, a Pod given the
// wrong one writes the startup probe's AUTHENTICATION_FAILED record and
// stays unready, as the runtime's probe holds it.
func keyRuntime(t *testing.T, env kubeEnv, wrong string, good ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	authFailed := []string{
		recordLine(t, runtimerecord.Record{Event: runtimerecord.EventOpenClawProbe, Container: "gateway", Code: runtimerecord.CodeAuthenticationFailed, Final: true,
			ProviderCode: 401, ResponseHeaderMarker: []string{"www-authenticate"}, BodyShape: "json-error-code", ProviderErrorCode: "invalid_api_key", ProviderErrorType: "other"}),
	}
	ready := []byte(`[{"op":"remove","path":"/metadata/annotations/testenv.occ.dev~1behavior"}]`)
	go func() {
		defer wg.Done()
		fed := map[k8stypes.UID]bool{}
		for ctx.Err() == nil {
			pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent})
			for i := 0; err == nil && i < len(pods.Items); i++ {
				p := &pods.Items[i]
				if _, held := p.Annotations["testenv.occ.dev/behavior"]; !held || p.DeletionTimestamp != nil {
					continue
				}
				switch s := secretOf(p); {
				case slices.Contains(good, s):
					if _, err := env.cluster.Clientset.CoreV1().Pods(env.ns).Patch(ctx, p.Name, k8stypes.JSONPatchType, ready, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
						t.Logf("make %s ready: %v", p.Name, err)
					}
				case s == wrong:
					if !fed[p.UID] && env.cluster.SetPodLogs(ctx, env.ns, p.Name, "gateway", authFailed) == nil {
						fed[p.UID] = true
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// secretOf is the Secret a Pod's containers take their keys from, other
// than the agent's own gateway token.
func secretOf(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !strings.HasSuffix(r.SecretKeyRef.Name, "-gateway-token") {
				return r.SecretKeyRef.Name
			}
		}
	}
	return ""
}

// fleetView is, per agent, its gateway Pods' UIDs and the revision its
// Service has activated.
func fleetView(ctx context.Context, env kubeEnv, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		svc, err := env.cluster.Clientset.CoreV1().Services(env.ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", n, err)
		}
		pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + n})
		if err != nil {
			return nil, err
		}
		var uids []string
		for _, p := range pods.Items {
			uids = append(uids, string(p.UID)+"@r"+p.Labels[render.LabelRevision])
		}
		sort.Strings(uids)
		out[n] = "activated r" + svc.Annotations[kube.AnnotationActivatedRevision] + " pods " + strings.Join(uids, ",")
	}
	return out, nil
}

const (
	canaryFailed = `AUTHENTICATION_FAILED: agent "fleet-\d" revision 2 did not activate`
	halted       = `ROLLOUT_HALTED: agent "fleet-\d" was not deployed: agent "fleet-\d" failed the same change.*?` +
		`failed\s+with\s+AUTHENTICATION_FAILED\s+deploying\s+credential\s+source\s+anthropic\s+generation\s+2.*?Nothing\s+of\s+agent`
)

// rule issue 31: ten agents on one credential source, behind
// rollout = { canary = 1 }: rotating the source to a wrong key loses one
// agent's gateway (the canary's, AUTHENTICATION_FAILED); the other nine
// fail at once with ROLLOUT_HALTED naming it, write nothing and keep their
// Pods and revision; fixing the key then rolls all ten.
func TestAccRollout_WrongKeyStopsAtTheCanary(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	env.secret(t, "llm-wrong", "api-key", "a-key-the-model-refuses")
	env.secret(t, "llm-fixed", "api-key", testSentinel)
	keyRuntime(t, env, "llm-wrong", "llm", "llm-fixed")
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%d", i)
	}
	var before map[string]string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: fleetConfig(env, names, "llm"),
				Check: func(*terraform.State) (err error) {
					before, err = fleetView(context.Background(), env, names)
					return err
				},
			},
			{
				Config: fleetConfig(env, names, "llm-wrong"),
				// The canary's own failure, and the others' refusals naming it,
				// its code and the change, in either order.
				ExpectError: regexp.MustCompile(`(?s)(` + canaryFailed + `.*` + halted + `|` + halted + `.*` + canaryFailed + `)`),
			},
			{
				PreConfig: func() {
					after, err := fleetView(context.Background(), env, names)
					if err != nil {
						t.Fatal(err)
					}
					var changed []string
					for _, n := range names {
						if after[n] != before[n] {
							changed = append(changed, n)
							t.Logf("%s: %s -> %s", n, before[n], after[n])
						}
					}
					if len(changed) != 1 {
						t.Fatalf("%d agents' gateways changed (%v), want only the canary's", len(changed), changed)
					}
				},
				Config: fleetConfig(env, names, "llm-fixed"),
				Check: func(*terraform.State) error {
					after, err := fleetView(context.Background(), env, names)
					if err != nil {
						return err
					}
					for _, n := range names {
						if !strings.HasPrefix(after[n], "activated r2 ") {
							return fmt.Errorf("agent %s after the fix: %s, want revision 2 activated", n, after[n])
						}
					}
					return nil
				},
			},
		},
	})
}
