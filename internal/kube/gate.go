package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// revisionSelector selects the Pods of one revision of an agent: by number
// and by content address, so that a Pod of a failed attempt under the same
// number (the next plan reuses it) never passes this attempt's gate.
func revisionSelector(agent string, n int64, id string) string {
	return labels.SelectorFromSet(labels.Set{render.LabelAgent: agent, render.LabelRevision: strconv.FormatInt(n, 10), render.LabelRevisionID: id}).String()
}

// gateFor is what a gate waits for: revision n (content id id) of agent in
// namespace ns, its state claim (nil: none to watch), and the Pods that
// do not count (a restart's, which existed before it).
type gateFor struct {
	agent, ns, id string
	n             int64
	claim         *corev1ac.PersistentVolumeClaimApplyConfiguration
	skip          map[types.UID]bool
}

// gateFor is what the deploy's gate waits for.
func (r *rollout) gateFor() gateFor {
	return gateFor{agent: r.agent(), ns: r.ns, n: r.n, id: r.rev.ID(), claim: r.objs.StateClaim}
}

// gate watches the revision's Pods until every component has a Ready Pod,
// reading the startup records of each started container as they come.
//
// It returns the startup phases read by the time it passed.
func (e *Executor) gate(ctx context.Context, g gateFor, components map[string]bool, workloads map[string]string, sandboxes []string) ([]executor.PhaseTiming, error) {
	agent, ns, n, id, claim := g.agent, g.ns, g.n, g.id, g.claim
	sel := revisionSelector(agent, n, id)
	pods := e.Client.CoreV1().Pods(ns)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &gateState{agent: agent, n: n, components: components, followed: map[string]bool{}, failures: make(chan *Failure, 8), phase: "scheduling", log: e.log}
	// The driver reports each Sandbox ready, and the Credential Gateway each
	// attachment, on the Sandbox's status; a failed attachment fails the
	// gate at once (AU3).
	sandboxesReady := make(chan struct{})
	if len(sandboxes) > 0 {
		st.phase = "sandbox provisioning"
	}
	go e.watchSandboxes(wctx, ns, sandboxes, st, sandboxesReady)
	go e.checkStalled(wctx, ns, workloads, st)
	// A state claim that has not bound yet: its Events tell one that never
	// will (no class, a class that does not exist) before the deadline.
	// Watched only once a Pod waits for it, so that a claim that binds at
	// once costs no request.
	var watchingClaim bool
	// One watch request: without a resourceVersion the API server first
	// sends the revision's existing Pods as ADDED events, then changes;
	// watchUntil resumes it through server restarts and 410s.
	condition := func(ev watch.Event) (bool, error) {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted || g.skip[pod.UID] {
			return false, nil
		}
		f := st.observe(pod)
		if claim != nil && !watchingClaim && st.waitsForClaim() {
			watchingClaim = true
			go e.watchClaim(wctx, claim, agent, st)
		}
		if f != nil {
			if f.Code == executor.CrashLoop {
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
		done <- watchUntil(wctx, pods.Watch, metav1.ListOptions{LabelSelector: sel}, condition)
	}()
	var err error
	select {
	case err = <-done:
	case f := <-st.failures:
		// A held startup code arrives on a log stream while the Pod merely
		// stays unready: fail at once, without waiting for a Pod event (PR8).
		cancel()
		<-done
		return nil, f
	}
	if err == nil {
		// Every Pod is ready; a sandboxed revision also needs its Sandbox
		// ready with every credential attached (AU3).
		select {
		case <-sandboxesReady:
			return st.timings(), nil
		case f := <-st.failures:
			return nil, f
		case <-ctx.Done():
			return nil, st.deadline()
		}
	}
	var f *Failure
	if errors.As(err, &f) {
		return nil, f
	}
	select {
	case f := <-st.failures:
		return nil, f
	default:
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil, st.deadline()
	}
	return nil, fmt.Errorf("watch revision %d: %w", n, err)
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
	// last is the last record read (only it is reported).
	last *runtimerecord.Record
	// phases are the startup phase records read, by container and phase
	// (the latest of each), in the order first seen.
	phases []executor.PhaseTiming
	// sandboxPhase is what the Sandbox still waits for ("" when nothing).
	sandboxPhase string
	// seen marks the components that have a Pod.
	seen map[string]bool
	// claimWait is the scheduler's last word on a Pod that waits for its
	// state claim ("" when none waits).
	claimWait string
	// log receives each startup phase as it is read, at level info, so
	// that a long apply shows where the runtime is (nil: none).
	log executor.Log
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
	s.claimWait = v.WaitsForClaim
	if v.Ready {
		s.readyBy[v.Component] = true
	}
	if v.Started != "" {
		s.phase, s.container = v.Phase, v.Started
	}
	return v.Failure
}

// waitsForClaim reports whether the last Pod judged waits for its claim.
func (s *gateState) waitsForClaim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimWait != ""
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
	if r.Event == runtimerecord.EventStartupPhase && r.Phase != "" {
		s.log.Print("startup phase "+string(r.Phase)+" "+string(r.Outcome), map[string]any{"level": "info", "work.operation": "gate", "revision": s.n,
			"component": r.Container, "phase": string(r.Phase), "outcome": string(r.Outcome), "duration_ms": r.DurationMS, "elapsed_ms": r.ElapsedMS})
	}
	s.mu.Lock()
	s.last = &r
	if r.Event == runtimerecord.EventStartupPhase && r.Phase != "" {
		t := executor.PhaseTiming{Component: r.Container, Phase: string(r.Phase), Outcome: string(r.Outcome), DurationMS: r.DurationMS}
		i := slices.IndexFunc(s.phases, func(p executor.PhaseTiming) bool { return p.Component == t.Component && p.Phase == t.Phase })
		if i < 0 {
			s.phases = append(s.phases, t)
		} else {
			s.phases[i] = t
		}
	}
	if r.Phase != "" {
		s.phase = string(r.Phase)
	}
	if r.Container != "" {
		s.container = r.Container
	}
	s.mu.Unlock()
}

// timings are the startup phases read so far.
func (s *gateState) timings() []executor.PhaseTiming {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.phases)
}

// deadline describes what was last seen when the deadline passed.
func (s *gateState) deadline() *Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &Failure{Code: executor.Deadline, Agent: s.agent, Revision: s.n, Component: s.container, Phase: s.phase,
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
	if s.claimWait != "" {
		f.Phase = "scheduling"
		f.Reason += "; the Pod still waits for its volume claim to bind (" + s.claimWait + "): check the state claim's Events (kubectl describe pvc)"
	}
	if s.sandboxPhase != "" {
		f.Phase = "sandbox"
		f.Reason += "; " + s.sandboxPhase + " (during a sandbox driver outage provisioning waits for the driver)"
	}
	if s.last != nil {
		last := *s.last
		f.Record = &last
	}
	return f
}

// follow streams one container's log and reads its startup records; a
// held code fails the gate at once (PR8). A stream that cannot open yet
// (the runtime has not written anything) or that ends while the gate still
// waits is opened again, with a short backoff, from where the last one
// stopped: the kubelet's timestamps say where, so nothing is read twice.
func (e *Executor) follow(ctx context.Context, ns, pod, container string, st *gateState) {
	backoff := 100 * time.Millisecond
	var pos logPosition // where the last stream stopped
	for ctx.Err() == nil {
		opts := &corev1.PodLogOptions{Container: container, Follow: true, Timestamps: true}
		if !pos.at.IsZero() {
			since := metav1.NewTime(pos.at) // whole seconds: readRecords skips what it read already
			opts.SinceTime = &since
		}
		stream, err := e.Client.CoreV1().Pods(ns).GetLogs(pod, opts).Stream(ctx)
		if err == nil {
			var held bool
			held, pos = readRecords(stream, container, st, pos)
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

// maxRecordLine bounds a log line read for records; a longer line (no
// record is) is skipped, not a reason to read the log again.
const maxRecordLine = 1 << 20

// logPosition is where a log stream stopped: the kubelet's timestamp of
// the last line read, and how many lines bore exactly that timestamp (the
// runtime can write several within one tick of the clock).
type logPosition struct {
	at time.Time
	n  int
}

// readRecords reads records until the stream ends; it reports whether a
// held code (or a record outside the contract) failed the gate, and where
// the stream stopped. A stream reopened from pos (SinceTime: whole seconds,
// so it repeats what was read) has its repeated lines skipped: those
// stamped before pos, and the first pos.n stamped at it. Lines without a
// kubelet timestamp are read as they are.
func readRecords(r io.Reader, container string, st *gateState, pos logPosition) (bool, logPosition) {
	br := bufio.NewReaderSize(r, 64*1024)
	replay, seen := !pos.at.IsZero(), 0 // seen: lines at pos.at in this stream
	for {
		line, err := readLine(br, maxRecordLine)
		if ts, rest, ok := cutTimestamp(line); ok {
			if replay {
				if ts.Equal(pos.at) {
					seen++
				}
				if ts.Before(pos.at) || ts.Equal(pos.at) && seen <= pos.n {
					line = nil // read already
				} else {
					replay = false
				}
			}
			if line != nil {
				if ts.Equal(pos.at) {
					pos.n++
				} else {
					pos = logPosition{at: ts, n: 1}
				}
				line = rest
			}
		}
		if len(line) > 0 && readRecord(line, container, st) {
			return true, pos
		}
		if err != nil {
			return false, pos
		}
	}
}

// readLine reads one line without its newline; a line longer than max is
// read to its end and returned empty.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	long := false
	for {
		frag, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(frag) > max {
				long, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if long {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// cutTimestamp splits the kubelet's RFC 3339 timestamp off a log line.
func cutTimestamp(line []byte) (time.Time, []byte, bool) {
	i := bytes.IndexByte(line, ' ')
	if i < 20 || i > 40 {
		return time.Time{}, line, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return time.Time{}, line, false
	}
	return ts, line[i+1:], true
}

// readRecord reads one line; it reports whether it failed the gate.
func readRecord(line []byte, container string, st *gateState) bool {
	rec, ok, err := runtimerecord.Parse(line)
	if !ok {
		return false
	}
	if err != nil {
		st.fail(&Failure{Code: executor.BadRecord, Component: container, Reason: err.Error(),
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
	return false
}

// previousLogs reads the last lines of a crashed container's previous run:
// raw runtime output, which Apply redacts before it reaches a diagnostic.
func (e *Executor) previousLogs(ctx context.Context, ns, pod, container string) []string {
	// Bounded in lines and bytes; the caller redacts them (AU7).
	tail, limit := int64(executor.MaxQuotedLines), int64(64<<10)
	b, err := e.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: true, TailLines: &tail, LimitBytes: &limit}).DoRaw(ctx)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// secretValues reads the values of every Secret key the revision's Pods
// receive (render.Objects.SecretRefs: their environment and Secret
// volumes, in Deployments and Sandboxes), so that quoted log lines can
// withhold them. They stay in memory for that only; a Secret that cannot
// be read is skipped (the pattern redaction still applies). The apply's
// deadline may have passed: the reads get a short one of their own.
func (e *Executor) secretValues(ctx context.Context, objs *render.Objects) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	keys := objs.SecretRefs()
	var values []string
	for name, ks := range keys {
		s, err := e.Client.CoreV1().Secrets(objs.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for k, v := range s.Data {
			if ks[k] || ks[""] {
				values = append(values, string(v))
			}
		}
	}
	return values
}
