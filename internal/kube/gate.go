package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// revisionSelector selects the Pods of one revision of an agent.
func revisionSelector(agent string, n int64) string {
	return labels.SelectorFromSet(labels.Set{render.LabelAgent: agent, render.LabelRevision: strconv.FormatInt(n, 10)}).String()
}

// gate watches the revision's Pods until every component has a Ready Pod,
// reading the startup records of each started container as they come.
func (e *Executor) gate(ctx context.Context, agent, ns string, n int64, components map[string]bool, workloads map[string]string, sandboxes []string) error {
	sel := revisionSelector(agent, n)
	pods := e.Client.CoreV1().Pods(ns)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &gateState{agent: agent, n: n, components: components, followed: map[string]bool{}, failures: make(chan *Failure, 8), phase: "scheduling"}
	// The driver reports each Sandbox ready, and the Credential Gateway each
	// attachment, on the Sandbox's status; a failed attachment fails the
	// gate at once (AU3).
	sandboxesReady := make(chan struct{})
	if len(sandboxes) > 0 {
		st.phase = "sandbox provisioning"
	}
	go e.watchSandboxes(wctx, ns, sandboxes, st, sandboxesReady)
	go e.checkStalled(wctx, ns, workloads, st)
	// One watch request: without a resourceVersion the API server first
	// sends the revision's existing Pods as ADDED events, then changes. A
	// watch the server closes is resumed from the last version seen.
	condition := func(ev watch.Event) (bool, error) {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		if f := st.observe(pod); f != nil {
			if f.Code == CodeCrashLoop {
				f.Lines = e.previousLogs(wctx, ns, pod.Name, f.Component)
			}
			return false, f
		}
		for _, c := range pod.Status.ContainerStatuses {
			key := pod.Name + "/" + c.Name
			if c.State.Running != nil && !st.followed[key] {
				st.followed[key] = true
				go e.follow(wctx, ns, pod.Name, c.Name, st)
			}
		}
		return st.ready(), nil
	}
	done := make(chan error, 1)
	go func() {
		rv := ""
		for {
			w, err := pods.Watch(wctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				done <- err
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					w.Stop()
					done <- apierrors.FromObject(ev.Object)
					return
				}
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				ok, err := condition(ev)
				if err != nil || ok {
					w.Stop()
					done <- err
					return
				}
			}
			w.Stop()
			if wctx.Err() != nil {
				done <- wctx.Err()
				return
			}
		}
	}()
	var err error
	select {
	case err = <-done:
	case f := <-st.failures:
		// A held startup code arrives on a log stream while the Pod merely
		// stays unready: fail at once, without waiting for a Pod event (PR8).
		cancel()
		<-done
		return f
	}
	if err == nil {
		// Every Pod is ready; a sandboxed revision also needs its Sandbox
		// ready with every credential attached (AU3).
		select {
		case <-sandboxesReady:
			return nil
		case f := <-st.failures:
			return f
		case <-ctx.Done():
			return st.deadline()
		}
	}
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	select {
	case f := <-st.failures:
		return f
	default:
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return st.deadline()
	}
	return fmt.Errorf("watch revision %d: %w", n, err)
}

// gateState is what the gate has seen of one revision: books only (which
// components have a Pod and are ready, the records read, the phase);
// judging a Pod is judgePod's (verdict.go).
type gateState struct {
	mu         sync.Mutex
	agent      string
	n          int64
	components map[string]bool
	readyBy    map[string]bool
	followed   map[string]bool
	failures   chan *Failure
	phase      string
	container  string
	records    []runtimerecord.Record
	// sandboxPhase is what the Sandbox still waits for ("" when nothing).
	sandboxPhase string
	// seen marks the components that have a Pod.
	seen map[string]bool
}

// unseen lists the components of workloads that have no Pod yet.
func (s *gateState) unseen(workloads map[string]string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return withoutPod(s.seen, workloads)
}

// withoutPod lists, sorted, the components (keys) that seen has no Pod for.
func withoutPod[V any](seen map[string]bool, components map[string]V) []string {
	var out []string
	for c := range components {
		if !seen[c] {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func (s *gateState) setSandboxPhase(p string) {
	s.mu.Lock()
	s.sandboxPhase = p
	s.mu.Unlock()
}

func (s *gateState) fail(f *Failure) {
	f.Agent, f.Revision = s.agent, s.n
	select {
	case s.failures <- f:
	default:
	}
}

// observe books what one Pod says (its component has a Pod, is ready, the
// startup phase began) and returns the failure it holds, if any; judging
// it is judgePod's.
func (s *gateState) observe(pod *corev1.Pod) *Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := judgePod(pod, s.agent, s.n, s.phase)
	if s.readyBy == nil {
		s.readyBy = map[string]bool{}
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[v.Component] = true
	if v.Ready {
		s.readyBy[v.Component] = true
	}
	if v.Started != "" {
		s.phase, s.container = v.Phase, v.Started
	}
	return v.Failure
}

func (s *gateState) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.components {
		if !s.readyBy[c] {
			return false
		}
	}
	return true
}

func (s *gateState) record(r runtimerecord.Record) {
	s.mu.Lock()
	s.records = append(s.records, r)
	if r.Phase != "" {
		s.phase = string(r.Phase)
	}
	if r.Container != "" {
		s.container = r.Container
	}
	s.mu.Unlock()
}

// deadline describes what was last seen when the deadline passed.
func (s *gateState) deadline() *Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &Failure{Code: CodeDeadline, Agent: s.agent, Revision: s.n, Component: s.container, Phase: s.phase,
		Reason: "the revision did not become ready before the deadline",
		Next:   "The last phase is named above. Raise timeouts.create/update if the runtime is only slow, or fix what holds it, then apply again."}
	var ready []string
	for c := range s.readyBy {
		ready = append(ready, c)
	}
	sort.Strings(ready)
	if len(ready) > 0 {
		f.Reason += fmt.Sprintf(" (ready: %s)", strings.Join(ready, ", "))
	}
	if missing := withoutPod(s.seen, s.components); len(missing) > 0 {
		f.Reason += fmt.Sprintf("; no Pod was created for: %s", strings.Join(missing, ", "))
	}
	if s.sandboxPhase != "" {
		f.Phase = "sandbox"
		f.Reason += "; " + s.sandboxPhase + " (during a sandbox driver outage provisioning waits for the driver)"
	}
	if len(s.records) > 0 {
		last := s.records[len(s.records)-1]
		f.Record = &last
	}
	return f
}

// follow streams one container's log and reads its startup records; a
// held code fails the gate at once (PR8). A stream that cannot open yet
// (the runtime has not written anything) or that ends while the gate still
// waits is opened again, with a short backoff.
func (e *Executor) follow(ctx context.Context, ns, pod, container string, st *gateState) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		stream, err := e.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
		if err == nil {
			held := readRecords(stream, container, st)
			stream.Close()
			if held {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// readRecords reads records until the stream ends; it reports whether a
// held code (or a record outside the contract) failed the gate.
func readRecords(r io.Reader, container string, st *gateState) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		rec, ok, err := runtimerecord.Parse(sc.Bytes())
		if !ok {
			continue
		}
		if err != nil {
			st.fail(&Failure{Code: CodeBadRecord, Component: container, Reason: err.Error(),
				Next: "The runtime image writes records outside the contract; use the pinned runtime image or fix the custom image."})
			return true
		}
		if rec.Container == "" {
			rec.Container = container
		}
		st.record(rec)
		if rec.Code.Held() && (rec.Final || rec.Event == runtimerecord.EventOpenClawProbe || rec.Event == runtimerecord.EventStartupPhase) {
			st.fail(&Failure{Code: executor.CodeRuntime(rec.Code), Component: rec.Container, Phase: "model_probe", Record: &rec,
				Reason: "the startup probe held the runtime unready", Next: runtimerecord.Advice(rec.Code)})
			return true
		}
	}
	return false
}

// previousLogs reads the last lines of a crashed container's previous run.
func (e *Executor) previousLogs(ctx context.Context, ns, pod, container string) []string {
	tail := int64(20)
	b, err := e.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: true, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}
