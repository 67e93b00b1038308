package provider

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// TestAccAgent_RealNodeGatewayRecords: a dedicated Codex gateway on the
// real node writes the runtime contract's records where the events happen
// (rule PR9, INTERFACE.md): its sandboxed harness goes away (its Pod
// deleted; the agent-sandbox controller makes it again) and comes back,
// and the gateway logs peer-status-changed "lost" then "ready" and answers
// a turn again (within three tries); its own container is killed, the kubelet restarts it, and
// the restarted gateway logs gateway-respawn (start 2) once it serves.
func TestAccAgent_RealNodeGatewayRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("the real node")
	}
	env, _, srv, config := realNodeSandboxedCodex(t)
	clock := &applyClock{}
	defer podLogsOnFailure(t, env, "coder")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{turnStep(config, clock, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
			defer cancel()
			cs := env.cluster.Clientset.CoreV1().Pods(env.ns)

			// The harness goes away and comes back.
			harness := render.HarnessSandboxName("coder", 1)
			old, err := cs.Get(ctx, harness, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("the harness Pod: %w", err)
			}
			if err := cs.Delete(ctx, harness, metav1.DeleteOptions{}); err != nil {
				return err
			}
			if _, err := waitPod(ctx, env, harness, func(p *corev1.Pod) bool { return p.UID != old.UID && kubeenv.PodReady(p) }); err != nil {
				return fmt.Errorf("the harness did not come back: %w", err)
			}
			gw, err := gatewayPod(ctx, env, "coder")
			if err != nil {
				return err
			}
			peer, err := waitRecords(ctx, env, gw.Name, false, func(rs []runtimerecord.Record) bool {
				return len(filterRecords(rs, runtimerecord.EventPeerStatusChanged)) >= 2
			})
			if err != nil {
				return err
			}
			peer = filterRecords(peer, runtimerecord.EventPeerStatusChanged)
			if peer[0].PeerStatus != "lost" || peer[1].PeerStatus != "ready" || peer[0].Peer != "harness" || peer[0].Container != "gateway" {
				return fmt.Errorf("peer records %+v, want harness lost then ready", peer)
			}
			// The harness's "ready" is the monitor's; the gateway's Codex
			// plugin reconnects on its own. Its first turn after the new
			// harness Pod has been seen to fail with "upstream provider
			// timeout" (2 of 6 runs, in the full suite and alone) and the
			// next to succeed: a known defect, not yet explained (see the
			// issue 28 note). Up to three turns, each failure logged.
			var turnErr error
			for attempt := 1; attempt <= 3; attempt++ {
				if _, _, _, turnErr = dedicatedTurn(ctx, env, srv, "coder"); turnErr == nil {
					break
				}
				t.Logf("turn %d after the harness came back: %v", attempt, turnErr)
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
			if turnErr != nil {
				return fmt.Errorf("no turn after the harness came back (3 tries): %w", turnErr)
			}

			// The gateway's container is killed and restarted.
			var id string
			for _, s := range gw.Status.ContainerStatuses {
				if s.Name == render.ComponentGateway {
					id = s.ContainerID
				}
			}
			if err := env.node.KillContainer(ctx, id); err != nil {
				return err
			}
			if _, err := waitPod(ctx, env, gw.Name, func(p *corev1.Pod) bool {
				for _, s := range p.Status.ContainerStatuses {
					if s.Name == render.ComponentGateway && s.RestartCount >= 1 && s.Ready {
						return true
					}
				}
				return false
			}); err != nil {
				return fmt.Errorf("the gateway did not serve again after its restart: %w", err)
			}
			respawn, err := waitRecords(ctx, env, gw.Name, false, func(rs []runtimerecord.Record) bool {
				return len(filterRecords(rs, runtimerecord.EventGatewayRespawn)) > 0
			})
			if err != nil {
				return err
			}
			if r := filterRecords(respawn, runtimerecord.EventGatewayRespawn); len(r) != 1 || r[0].Attempt != 2 || r[0].Container != "gateway" {
				return fmt.Errorf("respawn records %+v, want one of start 2", r)
			}
			prev, err := waitRecords(ctx, env, gw.Name, true, func([]runtimerecord.Record) bool { return true })
			if err != nil {
				return err
			}
			if r := filterRecords(prev, runtimerecord.EventGatewayRespawn); len(r) != 0 {
				return fmt.Errorf("the first start logged a respawn: %+v", r)
			}
			return nil
		})},
	})
}

// gatewayPod is the agent's gateway Pod.
func gatewayPod(ctx context.Context, env realEnv, agent string) (*corev1.Pod, error) {
	pods, err := env.cluster.Clientset.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{
		LabelSelector: render.LabelAgent + "=" + agent + "," + render.LabelComponent + "=" + render.ComponentGateway})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%d gateway Pods of %s, want 1", len(pods.Items), agent)
	}
	return &pods.Items[0], nil
}

// waitPod waits until the Pod named name satisfies ok.
func waitPod(ctx context.Context, env realEnv, name string, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	for {
		p, err := env.cluster.Clientset.CoreV1().Pods(env.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(p) {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pod %s: %w (last error %v)", name, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitRecords reads the gateway container's records (of its previous
// instance when previous) until done accepts them.
func waitRecords(ctx context.Context, env realEnv, pod string, previous bool, done func([]runtimerecord.Record) bool) ([]runtimerecord.Record, error) {
	var recs []runtimerecord.Record
	for {
		rc, err := env.cluster.Clientset.CoreV1().Pods(env.ns).GetLogs(pod, &corev1.PodLogOptions{Container: render.ComponentGateway, Previous: previous}).Stream(ctx)
		if err == nil {
			recs = recs[:0]
			sc := bufio.NewScanner(io.LimitReader(rc, 8<<20))
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if r, ok, perr := runtimerecord.Parse(sc.Bytes()); perr == nil && ok {
					recs = append(recs, r)
				}
			}
			rc.Close()
			if done(recs) {
				return recs, nil
			}
		}
		select {
		case <-ctx.Done():
			var evs []string
			for _, r := range recs {
				evs = append(evs, string(r.Event)+":"+string(r.Phase)+r.PeerStatus)
			}
			return nil, fmt.Errorf("gateway records of %s (previous %v): %w (last error %v; records %s)", pod, previous, ctx.Err(), err, strings.Join(evs, " "))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func filterRecords(rs []runtimerecord.Record, ev runtimerecord.Event) []runtimerecord.Record {
	var out []runtimerecord.Record
	for _, r := range rs {
		if r.Event == ev {
			out = append(out, r)
		}
	}
	return out
}
