package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// claimOf reads the agent's state claim ("support-state").
func claimOf(env kubeEnv) (*corev1.PersistentVolumeClaim, error) {
	return env.cluster.Clientset.CoreV1().PersistentVolumeClaims(env.ns).Get(context.Background(), render.StateClaimName("support"), metav1.GetOptions{})
}

// claimIs checks the agent's claim: bound, of the test environment's
// default class, requesting size, the same claim (uid) across steps, and
// mounted by the serving gateway.
func claimIs(env kubeEnv, size string, uid *string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		c, err := claimOf(env)
		if err != nil {
			return err
		}
		if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != size {
			return fmt.Errorf("the claim requests %s, want %s", q.String(), size)
		}
		if c.Status.Phase != corev1.ClaimBound || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != kubeenv.StorageClass {
			return fmt.Errorf("the claim is %s in class %v, want Bound in the default class %s", c.Status.Phase, c.Spec.StorageClassName, kubeenv.StorageClass)
		}
		if *uid == "" {
			*uid = string(c.UID)
		} else if string(c.UID) != *uid {
			return fmt.Errorf("the claim is a new one (uid %s, was %s): the state did not survive", c.UID, *uid)
		}
		d, err := env.cluster.Clientset.AppsV1().Deployments(env.ns).Get(context.Background(), render.GatewayName("support"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == c.Name {
				return nil
			}
		}
		return fmt.Errorf("the gateway does not mount %s", c.Name)
	}
}

// claimGone checks, within a minute, that destroy removed the claim.
func claimGone(env kubeEnv) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for {
			_, err := claimOf(env)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("the state claim is left after destroy (%v)", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestAccAgent_StateClaimAcrossRevisions: the agent's state claim is
// created with the first revision and is the same claim in every later
// one; a larger size is a new revision that grows it in place; a smaller
// one is refused before anything is written; a claim deleted outside
// Terraform is drift; destroy removes it. rule AC1
func TestAccAgent_StateClaimAcrossRevisions(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	var uid string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: kubeAgentConfig(env, "", anthropicDoc, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("kubernetes").AtMapKey("state").AtMapKey("size"), knownvalue.StringExact("10Gi")),
					statecheck.ExpectKnownValue("occ_compute.k", tfjsonpath.New("kubernetes").AtMapKey("state").AtMapKey("enabled"), knownvalue.Bool(true)),
				},
				Check: claimIs(env, "10Gi", &uid),
			},
			{
				// A new revision mounts the same claim.
				Config: kubeAgentConfig(env, "", `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				Check: claimIs(env, "10Gi", &uid),
			},
			{
				// Growing is a new revision whose apply resizes the claim.
				Config: kubeAgentConfig(env, `, state = { size = "20Gi" }`, `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(3)),
				}},
				Check: claimIs(env, "20Gi", &uid),
			},
			{
				// Shrinking is refused before any write: revision 3 still serves.
				Config:      kubeAgentConfig(env, `, state = { size = "5Gi" }`, `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				ExpectError: errCode(`STATE_CLAIM_FAILED`, `support-state`, `20Gi`, `cannot`, `shrink`, `state.size`),
			},
			{
				Config: kubeAgentConfig(env, `, state = { size = "20Gi" }`, `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				Check:  claimIs(env, "20Gi", &uid),
			},
			{
				// Deleted outside Terraform while the gateway uses it: the
				// claim waits for the Pod (Terminating); refresh finds the
				// drift and the plan's preflight refuses the new revision
				// with the apply's STATE_CLAIM_FAILED and its way out.
				PreConfig: func() {
					if err := env.cluster.Clientset.CoreV1().PersistentVolumeClaims(env.ns).Delete(context.Background(), render.StateClaimName("support"), metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:      kubeAgentConfig(env, `, state = { size = "20Gi" }`, `{ agents = { defaults = { model = "anthropic/claude-opus-4-1" } } }`, ""),
				PlanOnly:    true,
				ExpectError: errCode(`STATE_CLAIM_FAILED`, `support-state`, `being deleted`, `-replace`, foundByPreflight),
			},
		},
		CheckDestroy: claimGone(env),
	})
}

// TestAccAgent_StateClaimRetainedOnDestroy: with retain_on_destroy the
// agent's destroy keeps its claim, marked retained; a later agent of the
// same name mounts the same claim only with adopt_retained; without
// retain_on_destroy, destroy removes it.
func TestAccAgent_StateClaimRetainedOnDestroy(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	var uid string
	retain := `, state = { retain_on_destroy = true }`
	noAgent := env.provider + env.compute(retain) + supportSources(anthropicDoc)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: kubeAgentConfig(env, retain, anthropicDoc, ""), Check: claimIs(env, "10Gi", &uid)},
			{
				// The agent is destroyed; its claim stays.
				Config: noAgent,
				Check: func(*terraform.State) error {
					c, err := claimOf(env)
					if err != nil {
						return fmt.Errorf("the retained claim is gone: %w", err)
					}
					if string(c.UID) != uid || c.DeletionTimestamp != nil {
						return errors.New("the retained claim was replaced or is being deleted")
					}
					if c.Annotations[render.AnnotationRetained] == "" {
						return errors.New("the retained claim is not marked retained")
					}
					return nil
				},
			},
			// Issue 27: a new agent of the same name (it may be another
			// configuration's) does not mount the kept state unasked: its
			// create fails before any write, naming the claim and the ways
			// out, and the claim stays as it was.
			{
				Config:      kubeAgentConfig(env, retain, anthropicDoc, ""),
				ExpectError: regexp.MustCompile(`RESOURCE_CONFLICT[\s\S]*support-state[\s\S]*retain_on_destroy[\s\S]*state\.adopt_retained\s+=\s+true[\s\S]*kubectl\s+delete\s+pvc\s+support-state`),
			},
			{
				Config: noAgent,
				Check: func(*terraform.State) error {
					c, err := claimOf(env)
					if err != nil || string(c.UID) != uid || c.Annotations[render.AnnotationRetained] == "" {
						return fmt.Errorf("after the refused create the claim is %v (%v), want the kept one, still marked retained", c, err)
					}
					d, err := env.cluster.Clientset.AppsV1().Deployments(env.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
					if err != nil || len(d.Items) != 0 {
						return fmt.Errorf("the refused create wrote %d Deployments (%v)", len(d.Items), err)
					}
					return nil
				},
			},
			// With the compute's consent it mounts the kept claim, which is
			// no longer marked.
			{
				Config: kubeAgentConfig(env, `, state = { retain_on_destroy = true, adopt_retained = true }`, anthropicDoc, ""),
				Check: resource.ComposeAggregateTestCheckFunc(claimIs(env, "10Gi", &uid), func(*terraform.State) error {
					if c, err := claimOf(env); err != nil || c.Annotations[render.AnnotationRetained] != "" {
						return fmt.Errorf("the adopted claim is still marked retained (%v)", err)
					}
					return nil
				}),
			},
			// Not retained any more (no new revision): destroy removes it.
			{Config: kubeAgentConfig(env, "", anthropicDoc, ""), Check: claimIs(env, "10Gi", &uid)},
		},
		CheckDestroy: claimGone(env),
	})
}

// TestAccAgent_StateClaimThatCannotBindFailsFast: a claim in a class that
// does not exist fails the apply with STATE_CLAIM_FAILED, naming the claim,
// the class and the fix, long before the deadline.
func TestAccAgent_StateClaimThatCannotBindFailsFast(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	var elapsed time.Duration
	start := time.Now()
	config := env.provider + env.compute(`, state = { storage_class = "no-such-class" }`) + supportSources(anthropicDoc) + `
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
  timeouts      = { create = "8m" }
}`
	want := regexp.MustCompile(`STATE_CLAIM_FAILED[\s\S]*support-state[\s\S]*StorageClass "no-such-class"[\s\S]*not found[\s\S]*state.storage_class`)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		ErrorCheck: func(err error) error {
			elapsed = time.Since(start)
			if !want.MatchString(err.Error()) {
				return fmt.Errorf("unexpected failure: %w", err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: config,
			Check:  func(*terraform.State) error { return errors.New("the apply succeeded; it must fail") },
		}},
	})
	if elapsed == 0 {
		t.Fatal("the apply did not fail")
	}
	if elapsed > 3*time.Minute {
		t.Errorf("the failure surfaced after %s; it must not wait for the 8 minute deadline", elapsed)
	}
}
