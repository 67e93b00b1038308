package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// The milestones of an embedded agent's start, in the order they happen,
// from the apply's first write to the first answered token (make
// bench-realnode, issue 28). Each is seen by one witness: the test's own
// watch of the Pod (the API server's view, as the kubelet reports it),
// the container log as containerd stamps it (the wrapper's records and the
// runtime's own lines), or the test's clock around Deploy and the turn.
const (
	msPodCreated      = "Pod created (Deployment -> ReplicaSet -> Pod)"
	msPodScheduled    = "Pod scheduled"
	msSandboxReady    = "Pod sandbox ready (network, volumes)"
	msContainerStart  = "container running (seen in the Pod's status)"
	msWrapperStarted  = "wrapper started (tini -> occ-runtime)"
	msRuntimeSpawned  = "wrapper done: runtime exec'd (login, model probe, workspace)"
	msRuntimeFirstOut = "runtime: first log line (node and its modules loaded)"
	msRuntimeConfig   = "runtime: loading configuration"
	msRuntimeListen   = "runtime: HTTP server listening (/healthz answers)"
	msRuntimeReady    = "runtime: gateway ready (/readyz answers)"
	msPodReady        = "Pod Ready (the kubelet's readiness probe)"
	msActivated       = "Deploy returned: revision activated"
	msFirstToken      = "first answered token (a turn sent at activation)"
)

var milestoneOrder = []string{msPodCreated, msPodScheduled, msSandboxReady, msContainerStart, msWrapperStarted,
	msRuntimeSpawned, msRuntimeFirstOut, msRuntimeConfig, msRuntimeListen, msRuntimeReady, msPodReady, msActivated, msFirstToken}

// openclawLines are the messages of OpenClaw's gateway (2026.9.6, JSON
// console logging) that mark its own boot; a line whose message starts
// with one is that milestone. Another version may word them otherwise:
// then the breakdown says it did not see them.
var openclawLines = map[string]string{
	"loading configuration": msRuntimeConfig,
	"http server listening": msRuntimeListen,
	"gateway ready":         msRuntimeReady,
}

// milestones are the times an agent's start reached each milestone (the
// first time only).
type milestones map[string]time.Time

func (m milestones) see(name string, at time.Time) {
	if _, ok := m[name]; !ok && !at.IsZero() {
		m[name] = at
	}
}

// startupLogMilestones reads a runtime container's log, each line prefixed
// with containerd's RFC 3339 timestamp (PodLogOptions.Timestamps): the
// wrapper's start (its first record's time less its elapsed time), the
// runtime's exec (the process_spawn record), both read by the records'
// one reader (runtimerecord.Parse), and the runtime's own JSON lines.
// Lines it cannot read are passed over: the log is the container's, not
// ours.
func startupLogMilestones(log string) milestones {
	m := milestones{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		stamp, line, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			continue
		}
		rec, isRecord, err := runtimerecord.Parse([]byte(line))
		switch {
		case isRecord && err != nil:
			// a record that breaks the closed sets: not trusted
		case rec.Event == runtimerecord.EventStartupPhase:
			if !rec.Time.IsZero() && rec.ElapsedMS >= 0 {
				m.see(msWrapperStarted, rec.Time.Add(-time.Duration(rec.ElapsedMS)*time.Millisecond))
			}
			if rec.Phase == runtimerecord.PhaseProcessSpawn && rec.Outcome == runtimerecord.OutcomeOK {
				m.see(msRuntimeSpawned, at)
			}
		case isRecord:
			// another wrapper record (a probe, the monitor's)
		default:
			// the runtime's own line
			var out struct {
				Message string `json:"message"`
			}
			if json.Unmarshal([]byte(line), &out) != nil {
				continue
			}
			if _, spawned := m[msRuntimeSpawned]; spawned {
				m.see(msRuntimeFirstOut, at)
			}
			for prefix, name := range openclawLines {
				if strings.HasPrefix(strings.ToLower(out.Message), prefix) {
					m.see(name, at)
				}
			}
		}
	}
	return m
}

// podMilestones watches the Pods of the agents' gateways from now on and
// records, per agent, when the API server first showed each Pod milestone.
type podMilestones struct {
	mu  sync.Mutex
	per map[string]milestones
}

func watchPodMilestones(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) *podMilestones {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: render.LabelComponent + "=" + render.ComponentGateway})
	if err != nil {
		t.Fatal(err)
	}
	pm := &podMilestones{per: map[string]milestones{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			pm.mu.Lock()
			m := pm.per[p.Labels[render.LabelAgent]]
			if m == nil {
				m = milestones{}
				pm.per[p.Labels[render.LabelAgent]] = m
			}
			m.see(msPodCreated, now)
			if p.Spec.NodeName != "" {
				m.see(msPodScheduled, now)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == "PodReadyToStartContainers" && c.Status == corev1.ConditionTrue {
					m.see(msSandboxReady, now)
				}
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.Name == render.ComponentGateway && c.State.Running != nil {
					m.see(msContainerStart, now)
				}
			}
			if kubeenv.PodReady(p) {
				m.see(msPodReady, now)
			}
			pm.mu.Unlock()
		}
	}()
	return pm
}

// of returns a copy of an agent's Pod milestones.
func (pm *podMilestones) of(agent string) milestones {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	m := milestones{}
	for k, v := range pm.per[agent] {
		m[k] = v
	}
	return m
}

// gatewayLogMilestones reads the milestones of an agent's gateway
// container log.
func gatewayLogMilestones(ctx context.Context, cs kubernetes.Interface, ns, agent string) (milestones, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=" + agent + "," + render.LabelComponent + "=" + render.ComponentGateway})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("agent %s has %d gateway Pods, want 1", agent, len(pods.Items))
	}
	b, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: render.ComponentGateway, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return startupLogMilestones(string(b)), nil
}

// firstTurn sends one turn to an agent's gateway through its Service (from
// inside the real node) and returns the time from the first try to the
// first token of the answer. A connection the Service does not route yet
// (kube-proxy has not caught up with the new endpoint) is tried again
// every 200 ms for a minute, and counts in the time: a user's first turn
// waits for it too.
func firstTurn(ctx context.Context, cs kubernetes.Interface, node *kubeenv.RealNode, ns, agent string) (time.Duration, error) {
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, render.GatewayTokenSecret(agent), metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, agent, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	c := &http.Client{Transport: &http.Transport{DialContext: node.DialInNode}}
	req := turn.Request{BaseURL: "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(render.GatewayPort)),
		Token: string(sec.Data[render.GatewayTokenKey]), Message: "Say ok."}
	start := time.Now()
	deadline := start.Add(time.Minute)
	for {
		sent := time.Now()
		tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		a, err := turn.Send(tctx, c, req)
		cancel()
		var te *turn.Error
		switch {
		case err == nil && a.Text != "ok":
			return 0, fmt.Errorf("the agent answered %q, want the model's %q", a.Text, "ok")
		case err == nil:
			return sent.Sub(start) + a.FirstToken, nil
		case errors.As(err, &te) || time.Now().After(deadline):
			return 0, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logBreakdown prints each milestone's time from start (the apply's first
// write) and the step from the milestone before it, each the median over
// the agents that reached it (with min-max when there are more agents).
func logBreakdown(t *testing.T, start time.Time, per []milestones) {
	t.Helper()
	t.Logf("  startup breakdown from the apply's first write, and each step (%d agent(s); medians, min-max when more than one):", len(per))
	for i, name := range milestoneOrder {
		var at, step []time.Duration
		for _, m := range per {
			a, ok := m[name]
			if !ok {
				continue
			}
			at = append(at, a.Sub(start))
			for j := i - 1; j >= 0; j-- {
				if b, ok := m[milestoneOrder[j]]; ok {
					step = append(step, a.Sub(b))
					break
				}
			}
		}
		if len(at) == 0 {
			t.Logf("    %-62s not seen", name)
			continue
		}
		if len(step) == 0 {
			step = at
		}
		t.Logf("    %-62s %s  step %s", name, spread(at, len(per) > 1), spread(step, len(per) > 1))
	}
}

// spread is the median of ds, and its min and max when asked.
func spread(ds []time.Duration, minMax bool) string {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	if !minMax {
		return fmt.Sprintf("%8s", r(ds[len(ds)/2]))
	}
	return fmt.Sprintf("%8s (%s-%s)", r(ds[len(ds)/2]), r(ds[0]), r(ds[len(ds)-1]))
}

// merge adds the milestones of b to a.
func (m milestones) merge(b milestones) {
	for k, at := range b {
		m.see(k, at)
	}
}
