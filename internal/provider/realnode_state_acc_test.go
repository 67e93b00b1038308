package provider

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// execIn runs a command in a container of a Pod on the real node (through
// the API server and the node's kubelet) and returns its output.
func (e realEnv) execIn(ctx context.Context, pod, container string, cmd ...string) (string, error) {
	req := e.cluster.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(e.cluster.Config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		return out.String(), fmt.Errorf("exec %v in %s: %w (%s)", cmd, pod, err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// readyGateway waits for the one Ready gateway Pod of the agent that is
// not named not, and returns its name.
func (e realEnv) readyGateway(ctx context.Context, not string) (string, error) {
	for {
		pods, err := e.cluster.Clientset.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=support," + render.LabelComponent + "=" + render.ComponentGateway})
		if err == nil {
			for _, p := range pods.Items {
				if p.Name == not || p.DeletionTimestamp != nil {
					continue
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						return p.Name, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no Ready gateway Pod (other than %q): %w", not, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// realStateConfig is realAgentConfig with the compute's extra settings
// (a pod annotation changes the revision without changing the model).
func realStateConfig(e realEnv, baseURL, computeExtra string) string {
	cfg := realAgentConfig(e, baseURL, "6m")
	return strings.Replace(cfg, e.compute(""), e.compute(computeExtra), 1)
}

// TestAccAgent_RealNodeStateSurvivesRevisionsAndRestarts: on the real
// node, a file written into the gateway's state directory by the running
// gateway's own container is there again in the next revision's Pod and
// after that Pod is deleted and replaced; the real OpenClaw gateway starts
// on the claim each time; destroy removes the claim and its volume.
// rules AC1, MR7
func TestAccAgent_RealNodeStateSurvivesRevisionsAndRestarts(t *testing.T) {
	env := newRealEnv(t)
	srv := env.model(t, fakemodel.Step{Kind: fakemodel.OK})
	t.Setenv("TF_VAR_key", testSentinel)
	const marker = "/home/node/.openclaw/occ-state-marker"
	var volume, first string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: realStateConfig(env, srv.URL, ""),
				Check: func(*terraform.State) error {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					pod, err := env.readyGateway(ctx, "")
					if err != nil {
						return err
					}
					first = pod
					if _, err := env.execIn(ctx, pod, "gateway", "sh", "-c", "printf 'written by revision 1' > "+marker); err != nil {
						return err
					}
					c, err := claimOf(env.kubeEnv)
					if err != nil {
						return err
					}
					volume = c.Spec.VolumeName
					// The file is on the volume, not in the container.
					if b, err := os.ReadFile(env.cluster.VolumeDir(volume) + "/.openclaw/occ-state-marker"); err != nil || string(b) != "written by revision 1" {
						return fmt.Errorf("the marker is not on the claim's volume %s: %q %v", volume, b, err)
					}
					return nil
				},
			},
			{
				// A new revision (a new Pod template): the file is there.
				Config: realStateConfig(env, srv.URL, `, pod_annotations = { "example.com/rollout" = "2" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				}},
				Check: func(*terraform.State) error {
					ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
					defer cancel()
					pod, err := env.readyGateway(ctx, first)
					if err != nil {
						return err
					}
					if out, err := env.execIn(ctx, pod, "gateway", "cat", marker); err != nil || out != "written by revision 1" {
						return fmt.Errorf("revision 2's gateway %s does not find the state revision 1 wrote: %q %v", pod, out, err)
					}
					// A restart: the Pod is deleted, its replacement mounts
					// the same claim.
					if err := env.cluster.Clientset.CoreV1().Pods(env.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
						return err
					}
					next, err := env.readyGateway(ctx, pod)
					if err != nil {
						return err
					}
					if out, err := env.execIn(ctx, next, "gateway", "cat", marker); err != nil || out != "written by revision 1" {
						return fmt.Errorf("after a restart the gateway %s does not find its state: %q %v", next, out, err)
					}
					return nil
				},
			},
		},
		CheckDestroy: func(*terraform.State) error {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			for {
				_, err := claimOf(env.kubeEnv)
				_, statErr := os.Stat(env.cluster.VolumeDir(volume))
				if apierrors.IsNotFound(err) && os.IsNotExist(statErr) {
					return nil
				}
				if ctx.Err() != nil {
					return fmt.Errorf("after destroy the claim (%v) or its volume %s (%v) is left", err, volume, statErr)
				}
				time.Sleep(500 * time.Millisecond)
			}
		},
	})
}
