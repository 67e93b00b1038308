package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// TestAccAgent_RealNodeEphemeralStorageIsBounded: issue 27. On the real
// node, a gateway that fills its /tmp past the compute's
// ephemeral_storage_limit is evicted by the kubelet (the emptyDir's size
// limit), instead of filling the disk its neighbours share; the
// Deployment replaces it and the agent serves again.
func TestAccAgent_RealNodeEphemeralStorageIsBounded(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: realStateConfig(env, srv.URL, `, ephemeral_storage_limit = "64Mi"`),
			Check: func(*terraform.State) error {
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				pod, err := env.readyGateway(ctx, "")
				if err != nil {
					return err
				}
				// 96 MiB into the 64 MiB emptyDir at /tmp.
				if _, err := env.execIn(ctx, pod, "gateway", "node", "-e",
					"require('fs').writeFileSync('/tmp/occ-fill', Buffer.alloc(96*1024*1024))"); err != nil {
					return err
				}
				start := time.Now()
				for {
					p, err := env.cluster.Clientset.CoreV1().Pods(env.ns).Get(ctx, pod, metav1.GetOptions{})
					if err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" {
						if !strings.Contains(p.Status.Message, "tmp") {
							return fmt.Errorf("the gateway was evicted for %q, not its /tmp", p.Status.Message)
						}
						t.Logf("figures: evicted %s after filling /tmp: %s", time.Since(start).Round(time.Second), p.Status.Message)
						break
					}
					if ctx.Err() != nil {
						phase := ""
						if p != nil {
							phase = string(p.Status.Phase) + " " + p.Status.Reason
						}
						return fmt.Errorf("the gateway %s filled its /tmp past the 64Mi limit and was not evicted (%s, %v)", pod, phase, err)
					}
					time.Sleep(time.Second)
				}
				if _, err := env.readyGateway(ctx, pod); err != nil {
					return fmt.Errorf("no gateway replaced the evicted one: %w", err)
				}
				pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
				if err != nil {
					return err
				}
				for _, p := range pods.Items {
					for _, c := range p.Spec.Containers {
						if l := c.Resources.Limits[corev1.ResourceEphemeralStorage]; l.String() != "64Mi" {
							return fmt.Errorf("container %s of %s: ephemeral-storage limit %q, want 64Mi", c.Name, p.Name, l.String())
						}
					}
				}
				return nil
			},
		}},
	})
}
