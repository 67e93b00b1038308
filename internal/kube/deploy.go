package kube

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Annotations the activation writes on the Service (AC4).
const (
	AnnotationActivatedRevision = "occ-platform.io/activated-revision"
	AnnotationActivatedAt       = "occ-platform.io/activated-at"
)

// Failure codes of the executor itself, beside the runtime's held codes.
const (
	CodeCrashLoop       = "CRASH_LOOP"
	CodeImagePull       = "IMAGE_PULL_FAILED"
	CodeContainerConfig = "CONTAINER_CONFIG_FAILED"
	CodeUnschedulable   = "UNSCHEDULABLE"
	CodeDeadline        = "DEADLINE_EXCEEDED"
	CodeStale           = "STALE_REVISION"
	CodeBadRecord       = "INVALID_STARTUP_RECORD"
)

// Executor deploys revisions to one cluster.
type Executor struct {
	Client kubernetes.Interface
	// Dynamic writes and watches the sandbox driver's Sandbox objects;
	// nil when no compute of the run needs a sandbox.
	Dynamic dynamic.Interface
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Log receives phase messages (never secrets); nil discards them.
	Log func(msg string, fields map[string]any)
}

// NotWritten is a deployment that failed before its first write: nothing
// of the revision reached the cluster.
type NotWritten struct{ Err error }

func (e *NotWritten) Error() string { return e.Err.Error() }
func (e *NotWritten) Unwrap() error { return e.Err }

// Result is an activated revision.
type Result struct {
	ActivatedAt time.Time
	Endpoint    string
}

// Failure is a deployment that did not activate: what happened, where, the
// structured fields of the record that held it, and what to do next. It
// carries no secret and no raw provider output.
type Failure struct {
	Code      string
	Agent     string
	Revision  int64
	Container string
	Phase     string
	Record    *runtimerecord.Record
	Reason    string
	LogTail   []string
	Next      string
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: agent %q revision %d", f.Code, f.Agent, f.Revision)
	if f.Container != "" {
		fmt.Fprintf(&b, ", container %s", f.Container)
	}
	if f.Phase != "" {
		fmt.Fprintf(&b, ", phase %s", f.Phase)
	}
	if f.Reason != "" {
		fmt.Fprintf(&b, ": %s", f.Reason)
	}
	return b.String()
}

func (e *Executor) log(msg string, fields map[string]any) {
	if e.Log != nil {
		e.Log(msg, fields)
	}
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

var applyOpts = metav1.ApplyOptions{FieldManager: render.FieldManager, Force: true}

// Deploy applies revision n of an admitted revision, blocks until every
// serving component's Pod is Ready, then activates it: the Service moves to
// revision n only if it does not already serve a newer one (AC3), earlier
// revisions' configuration is retired, and one audit Event is written (AC4).
// A held startup code, a crash loop, an image pull failure or an
// unschedulable Pod fails at once with a *Failure.
//
// serving is the revision the caller believes the Service serves (0 for a
// first deployment): with it, activation is one request in the common case.
func (e *Executor) Deploy(ctx context.Context, rev *admission.Revision, n, serving int64) (Result, error) {
	objs, err := render.Kubernetes(rev, n)
	if err != nil {
		return Result{}, err
	}
	ns := objs.Namespace
	if serving > 0 {
		// AC3: an older retry never overwrites a newer selected revision.
		// The workloads are per Agent, so this is judged before the first
		// write, not only at activation.
		if err := e.checkNotStale(ctx, objs, rev.Agent, n); err != nil {
			return Result{}, &NotWritten{Err: err}
		}
	}
	e.log("applying revision", map[string]any{"work.operation": "apply", "revision": n})
	// The agent's tokens, created once and kept across revisions: the
	// gateway's (every gateway listens beyond loopback only with one) and,
	// for dedicated Codex, the app server's.
	tokens := [][3]string{{render.GatewayTokenSecret(rev.Agent), render.GatewayTokenKey, render.ComponentGateway}}
	if rev.Harness == admission.HarnessCodex {
		tokens = append(tokens, [3]string{render.AppServerTokenSecret(rev.Agent), render.AppServerTokenKey, render.ComponentHarness})
	}
	for _, tk := range tokens {
		if err := e.ensureToken(ctx, ns, rev.Agent, tk[0], tk[1], tk[2]); err != nil {
			return Result{}, &NotWritten{Err: err}
		}
	}
	if err := e.ensureEnrollment(ctx, ns, rev, n, objs.Enrollment); err != nil {
		return Result{}, err
	}
	for i, sa := range objs.ServiceAccounts {
		if _, err := e.Client.CoreV1().ServiceAccounts(ns).Apply(ctx, sa, applyOpts); err != nil {
			err = fmt.Errorf("apply ServiceAccount %s: %w", *sa.Name, err)
			if i == 0 && rev.Harness != admission.HarnessCodex {
				return Result{}, &NotWritten{Err: err}
			}
			return Result{}, err
		}
	}
	for _, cm := range objs.ConfigMaps {
		if _, err := e.Client.CoreV1().ConfigMaps(ns).Apply(ctx, cm, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply ConfigMap %s: %w", *cm.Name, err)
		}
	}
	dedicated := rev.ExecutionMode == admission.ModeDedicated
	if dedicated && serving > 0 {
		// AC2: a dedicated replacement first stops every earlier revision,
		// even a healthy one; the Agent is unavailable until the new one is ready.
		e.log("stopping earlier revisions", map[string]any{"work.operation": "stop-earlier", "revision": n})
		if err := e.stopEarlierSandboxes(ctx, ns, rev.Agent, n, len(objs.Sandboxes) > 0); err != nil {
			return Result{}, err
		}
		if err := e.stopEarlier(ctx, ns, rev.Agent, n); err != nil {
			return Result{}, err
		}
	}
	if err := e.ensureInternalService(ctx, objs); err != nil {
		return Result{}, err
	}
	if s := objs.HarnessService; s != nil {
		// HM4: the gateway reaches its harness by this name; it selects
		// revision n's harness before either workload exists.
		if _, err := e.Client.CoreV1().Services(ns).Apply(ctx, s, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply Service %s: %w", *s.Name, err)
		}
	}
	components := map[string]bool{}
	workloads := map[string]string{} // component -> Deployment name
	var sandboxes []string
	if err := e.applySandboxes(ctx, ns, objs.Sandboxes); err != nil {
		return Result{}, err
	}
	for _, s := range objs.Sandboxes {
		components[s.Component] = true
		sandboxes = append(sandboxes, s.Name)
	}
	for _, d := range objs.Deployments {
		if _, err := e.Client.AppsV1().Deployments(ns).Apply(ctx, d, applyOpts); err != nil {
			return Result{}, fmt.Errorf("apply Deployment %s: %w", *d.Name, err)
		}
		components[d.Spec.Template.Labels[render.LabelComponent]] = true
		workloads[d.Spec.Template.Labels[render.LabelComponent]] = *d.Name
	}
	if dedicated && serving == 0 {
		// PR10: on a first dedicated deploy the Agent's Service selects the
		// gateway from the start and lists it only once it is ready.
		if _, err := e.Client.CoreV1().Services(ns).Create(ctx, serviceFrom(objs, n, time.Time{}), metav1.CreateOptions{FieldManager: render.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return Result{}, fmt.Errorf("create Service %s: %w", *objs.Service.Name, err)
		}
	}
	e.log("waiting for the revision's startup probe", map[string]any{"work.operation": "gate", "revision": n})
	if err := e.gate(ctx, rev.Agent, ns, n, components, workloads, sandboxes); err != nil {
		return Result{}, err
	}
	at, err := e.activate(ctx, rev, objs, n, serving)
	if err != nil {
		return Result{}, err
	}
	return Result{ActivatedAt: at, Endpoint: fmt.Sprintf("http://%s.%s.svc:%d", render.ServiceName(rev.Agent), ns, render.GatewayPort)}, nil
}

// checkNotStale refuses revision n when the Agent's Service already selects
// a newer one: someone else activated it since this plan was made.
func (e *Executor) checkNotStale(ctx context.Context, objs *render.Objects, agent string, n int64) error {
	svc, err := e.Client.CoreV1().Services(objs.Namespace).Get(ctx, *objs.Service.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone (drift): activation creates it again
	case err != nil:
		return fmt.Errorf("read Service %s: %w", *objs.Service.Name, err)
	}
	if live := servedRevision(svc); live > n {
		return staleFailure(agent, n, live, "admission", fmt.Sprintf("nothing of revision %d was written", n))
	}
	return nil
}

// servedRevision is the revision number the Agent's Service selects.
func servedRevision(svc *corev1.Service) int64 {
	n, _ := strconv.ParseInt(svc.Labels[render.LabelRevision], 10, 64)
	return n
}

// staleFailure refuses revision n because the Service serves newer revision
// live (AC3); outcome says what became of n.
func staleFailure(agent string, n, live int64, phase, outcome string) *Failure {
	return &Failure{Code: CodeStale, Agent: agent, Revision: n, Phase: phase,
		Reason: fmt.Sprintf("the Service already serves newer revision %d; %s", live, outcome),
		Next:   "Another apply activated a newer revision. Refresh (terraform plan) and apply again."}
}

// stopEarlier scales every earlier revision's workloads of the agent to zero
// and waits, with a watch, until their Pods are gone.
func (e *Executor) stopEarlier(ctx context.Context, ns, agent string, n int64) error {
	deps, err := e.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{render.LabelAgent: agent}).String()})
	if err != nil {
		return fmt.Errorf("list the agent's workloads: %w", err)
	}
	for _, d := range deps.Items {
		if d.Labels[render.LabelRevision] == strconv.FormatInt(n, 10) || (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			continue
		}
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := e.Client.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: render.FieldManager}); err != nil {
			return fmt.Errorf("stop %s: %w", d.Name, err)
		}
	}
	req, _ := labels.NewRequirement(render.LabelRevision, selection.NotEquals, []string{strconv.FormatInt(n, 10)})
	agentReq, _ := labels.NewRequirement(render.LabelAgent, selection.Equals, []string{agent})
	sel := labels.NewSelector().Add(*agentReq, *req).String()
	for {
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("list earlier Pods: %w", err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		w, err := e.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: pods.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watch earlier Pods: %w", err)
		}
		gone := len(pods.Items)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				gone--
			}
			if gone <= 0 {
				break
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for earlier revisions to stop: %w", ctx.Err())
		}
	}
}

// ensureToken creates an agent's token Secret once: 32 random bytes, hex,
// under key, labelled with the agent and component only (no revision: it
// outlives them; destroy removes it with the agent's Secrets). An existing
// Secret is kept, so a token never changes under a running Pod.
func (e *Executor) ensureToken(ctx context.Context, ns, agent, name, key, component string) error {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{render.LabelAgent: agent, render.LabelComponent: component, render.LabelManagedBy: render.ManagedBy}},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{key: hex.EncodeToString(buf)},
	}
	_, err := e.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: render.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the token Secret %s: %w", name, err)
	}
	return nil
}

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
				f.LogTail = e.previousLogs(wctx, ns, pod.Name, f.Container)
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

// gateState is what the gate has seen of one revision.
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

// observe judges one Pod: a held failure, or progress.
func (s *gateState) observe(pod *corev1.Pod) *Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readyBy == nil {
		s.readyBy = map[string]bool{}
	}
	component := pod.Labels[render.LabelComponent]
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[component] = true
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &Failure{Code: CodeUnschedulable, Agent: s.agent, Revision: s.n, Container: component, Phase: "scheduling", Reason: c.Message,
				Next: "The cluster cannot place the Pod: lower the compute's cpu_limit or memory_limit, or add capacity, then apply again."}
		}
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			s.readyBy[component] = true
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "CrashLoopBackOff":
				return &Failure{Code: CodeCrashLoop, Agent: s.agent, Revision: s.n, Container: c.Name, Phase: s.phase,
					Reason: fmt.Sprintf("the container keeps exiting (%d restarts)%s", c.RestartCount, lastExit(c)),
					Next:   "Read the log lines below; fix the image or the configuration and apply again."}
			case "CreateContainerConfigError":
				// The kubelet would retry; a Secret or key that is not there
				// now rarely appears by itself, so say so at once.
				return &Failure{Code: CodeContainerConfig, Agent: s.agent, Revision: s.n, Container: c.Name, Phase: "container configuration",
					Reason: fmt.Sprintf("%s: %s", w.Reason, w.Message),
					Next:   "A Secret or key the container needs is missing: check the credential source's Secret (secret_ref) and the configuration's secret_bindings in this namespace, create what is missing, then apply again."}
			case "ImagePullBackOff", "ErrImagePull", "InvalidImageName":
				return &Failure{Code: CodeImagePull, Agent: s.agent, Revision: s.n, Container: c.Name, Phase: "image pull",
					Reason: fmt.Sprintf("%s: %s", w.Reason, w.Message),
					Next:   "Check the compute's runtime_image/codex_image and the namespace's image pull access, then apply again."}
			}
		}
		if c.State.Running != nil && s.phase == "scheduling" {
			s.phase, s.container = "startup", c.Name
		}
	}
	return nil
}

func lastExit(c corev1.ContainerStatus) string {
	if t := c.LastTerminationState.Terminated; t != nil {
		return fmt.Sprintf("; last exit code %d (%s)", t.ExitCode, t.Reason)
	}
	return ""
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
	f := &Failure{Code: CodeDeadline, Agent: s.agent, Revision: s.n, Container: s.container, Phase: s.phase,
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
			st.fail(&Failure{Code: CodeBadRecord, Container: container, Reason: err.Error(),
				Next: "The runtime image writes records outside the contract; use the pinned runtime image or fix the custom image."})
			return true
		}
		if rec.Container == "" {
			rec.Container = container
		}
		st.record(rec)
		if rec.Code.Held() && (rec.Final || rec.Event == runtimerecord.EventOpenClawProbe || rec.Event == runtimerecord.EventStartupPhase) {
			st.fail(&Failure{Code: string(rec.Code), Container: rec.Container, Phase: "model_probe", Record: &rec,
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

// activate moves the Service to revision n unless it serves a newer one,
// with the Service's resourceVersion as the claim the API server
// arbitrates (AC3); then retires earlier revisions' ConfigMaps and records
// one audit Event (AC4).
func (e *Executor) activate(ctx context.Context, rev *admission.Revision, objs *render.Objects, n, serving int64) (time.Time, error) {
	ns, name := objs.Namespace, *objs.Service.Name
	at := e.now().UTC().Truncate(time.Second)
	svcs := e.Client.CoreV1().Services(ns)
	desired := serviceFrom(objs, n, at)
	// Fast path: one request. A first deployment creates the Service; a
	// later one patches it under a JSON Patch "test" that it still serves
	// the revision this apply replaces. Anything else falls through to the
	// read-judge-update loop below.
	var err error
	switch {
	case serving == 0:
		_, err = svcs.Create(ctx, desired, metav1.CreateOptions{FieldManager: render.FieldManager})
	case serving < n:
		_, err = svcs.Patch(ctx, name, types.JSONPatchType, guardedPatch(desired, serving), metav1.PatchOptions{FieldManager: render.FieldManager})
	default:
		err = fmt.Errorf("serving revision %d is not older than %d", serving, n)
	}
	if err == nil {
		e.retire(ctx, rev, objs, n)
		e.audit(ctx, ns, rev, n, at)
		return at, nil
	}
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = svcs.Create(ctx, desired, metav1.CreateOptions{FieldManager: render.FieldManager})
		case err != nil:
			return at, fmt.Errorf("read Service %s: %w", name, err)
		default:
			live := servedRevision(cur)
			if live > n {
				return at, staleFailure(rev.Agent, n, live, "activation", fmt.Sprintf("revision %d is not activated", n))
			}
			if live == n && cur.Annotations[render.AnnotationRevisionID] == rev.ID() {
				// AC4: this very revision was activated by an apply that did
				// not get to record it (a crash, a lost connection). Recovery
				// repeats only the safe effects: retiring, and the audit
				// record if it is missing; the activation keeps its time.
				if t, err := time.Parse(time.RFC3339, cur.Annotations[AnnotationActivatedAt]); err == nil {
					at = t
				}
				e.retire(ctx, rev, objs, n)
				e.audit(ctx, ns, rev, n, at) // a no-op when it was written
				return at, nil
			}
			upd := cur.DeepCopy()
			upd.Labels, upd.Annotations = desired.Labels, mergeMaps(cur.Annotations, desired.Annotations)
			upd.Spec.Selector, upd.Spec.Ports = desired.Spec.Selector, desired.Spec.Ports
			_, err = svcs.Update(ctx, upd, metav1.UpdateOptions{FieldManager: render.FieldManager})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // someone else moved it: read again and judge again
		}
		if err != nil {
			return at, fmt.Errorf("activate revision %d: %w", n, err)
		}
		e.retire(ctx, rev, objs, n)
		e.audit(ctx, ns, rev, n, at)
		return at, nil
	}
	return at, fmt.Errorf("activate revision %d: the Service kept changing under the claim", n)
}

// guardedPatch moves the Service to desired only if it still carries the
// activated revision expected: the API server applies all or nothing.
func guardedPatch(desired *corev1.Service, expected int64) []byte {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/annotations/" + jsonPointerEscape(AnnotationActivatedRevision), "value": strconv.FormatInt(expected, 10)},
		{"op": "replace", "path": "/metadata/labels", "value": desired.Labels},
		{"op": "replace", "path": "/spec/selector", "value": desired.Spec.Selector},
	}
	for k, v := range desired.Annotations {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(k), "value": v})
	}
	b, _ := json.Marshal(ops)
	return b
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func serviceFrom(objs *render.Objects, n int64, at time.Time) *corev1.Service {
	ac := objs.Service
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: *ac.Name, Namespace: objs.Namespace, Labels: ac.Labels,
		Annotations: mergeMaps(ac.Annotations, map[string]string{AnnotationActivatedRevision: strconv.FormatInt(n, 10), AnnotationActivatedAt: at.Format(time.RFC3339)})}}
	svc.Spec.Selector = ac.Spec.Selector
	for _, p := range ac.Spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: *p.Name, Port: *p.Port, TargetPort: *p.TargetPort, Protocol: corev1.ProtocolTCP})
	}
	return svc
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// retire removes what earlier revisions left: their configuration, and the
// workloads (Deployments, Sandboxes) of components this revision no longer
// runs. It is a safe effect: a crash before it leaves only what the next
// activation removes (AC4).
//
// A revision with a native node (objs.Enrollment) also removes earlier
// revisions' one-use enrollment targets and verifiers (they can never be
// used again: their nodes are gone, AC2); one without an unsandboxed
// harness removes the harness Service an earlier dedicated Codex revision
// left.
func (e *Executor) retire(ctx context.Context, rev *admission.Revision, objs *render.Objects, n int64) {
	if n <= 1 {
		return // no earlier revision can have left anything behind
	}
	ns, agent, enrollment := objs.Namespace, rev.Agent, objs.Enrollment != nil
	req, _ := labels.NewRequirement(render.LabelRevision, selection.NotEquals, []string{strconv.FormatInt(n, 10)})
	agentReq, _ := labels.NewRequirement(render.LabelAgent, selection.Equals, []string{agent})
	sel := labels.NewSelector().Add(*agentReq, *req).String()
	if err := e.Client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		e.log("retiring earlier revisions failed; the next activation retries", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
	}
	// Every workload of this revision was applied with its number, so a
	// Deployment or Sandbox still labelled with another one is a component
	// this revision no longer runs (a dedicated harness after a switch to
	// embedded): it goes, with the credential it holds (AU6).
	bg := metav1.DeletePropagationBackground
	if err := e.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		e.log("retiring earlier workloads failed; the next activation retries", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
	}
	if objs.HarnessService == nil {
		if err := e.deleteHarnessService(ctx, ns, agent); err != nil {
			e.log("retiring the earlier harness Service failed; the next activation retries", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
		}
	}
	if rev.Sandbox != nil {
		if err := e.stopEarlierSandboxes(ctx, ns, agent, n, false); err != nil {
			e.log("retiring earlier Sandboxes failed; the next activation retries", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
		}
	}
	if !enrollment {
		return
	}
	// Only revision-labelled Secrets: the credential sources' Secrets and
	// the app-server token carry no revision.
	hasRev, _ := labels.NewRequirement(render.LabelRevision, selection.Exists, nil)
	secretSel := labels.NewSelector().Add(*agentReq, *req, *hasRev).String()
	if err := e.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: secretSel}); err != nil {
		e.log("retiring earlier enrollment targets failed; the next activation retries", map[string]any{"work.operation": "retire", "work.outcome": "failed"})
	}
}

// deleteHarnessService removes the agent's harness Service (HM4), and
// only it: another agent's Service that happens to bear the name (an Agent
// named "<agent>-harness") lacks this agent's harness labels and is left
// alone. One request when there is none (the common case).
func (e *Executor) deleteHarnessService(ctx context.Context, ns, agent string) error {
	name := render.HarnessServiceName(agent)
	svcs := e.Client.CoreV1().Services(ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read Service %s: %w", name, err)
	}
	l := svc.Labels
	if l[render.LabelAgent] != agent || l[render.LabelComponent] != render.ComponentHarness || l[render.LabelManagedBy] != render.ManagedBy {
		return nil
	}
	// The UID precondition deletes exactly the Service judged above.
	err = svcs.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(svc.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete Service %s: %w", name, err)
	}
	return nil
}

// audit writes the one activation audit record (AC4): a Kubernetes Event
// on the Service; the Service's annotations carry revision, time and digest.
func (e *Executor) audit(ctx context.Context, ns string, rev *admission.Revision, n int64, at time.Time) {
	ev := &corev1.Event{
		// One name per activation of a revision: a repeated write (recovery)
		// is AlreadyExists, so the record is written once (AC4).
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s-activated-r%d-%s", rev.Agent, n, rev.ID()[:8]), Namespace: ns, Labels: map[string]string{render.LabelAgent: rev.Agent, render.LabelRevision: strconv.FormatInt(n, 10)}},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: ns, Name: render.ServiceName(rev.Agent), APIVersion: "v1"},
		Reason:         "RevisionActivated",
		Message:        fmt.Sprintf("revision %d (%s, %s) activated at %s", n, rev.ID(), rev.HarnessVersion, at.Format(time.RFC3339)),
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: render.ManagedBy},
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
	}
	if _, err := e.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.log("activation audit event not written", map[string]any{"work.operation": "audit", "work.outcome": "failed"})
	}
}

// CodeReplicaFailure is a workload whose Pods cannot be created (a
// ResourceQuota or LimitRange refusal, a missing ServiceAccount, an
// admission webhook).
const CodeReplicaFailure = "REPLICA_FAILURE"

// checkStalled looks, only while a workload still has no Pod, at its
// Deployment's ReplicaFailure condition, so that a Pod the API server
// refuses to create fails the apply with the reason instead of at the
// deadline. The Pod watch sees every Pod that exists; a Pod that is never
// created leaves no event there, hence these few reads, spaced out (3 s,
// then doubling to 30 s) and never made in the common case.
func (e *Executor) checkStalled(ctx context.Context, ns string, workloads map[string]string, st *gateState) {
	wait := 3 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		unseen := st.unseen(workloads)
		if len(unseen) == 0 {
			return
		}
		for _, c := range unseen {
			d, err := e.Client.AppsV1().Deployments(ns).Get(ctx, workloads[c], metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, cond := range d.Status.Conditions {
				if cond.Type == appsv1.DeploymentReplicaFailure && cond.Status == corev1.ConditionTrue {
					st.fail(&Failure{Code: CodeReplicaFailure, Container: c, Phase: "pod creation",
						Reason: fmt.Sprintf("Deployment %s cannot create its Pod: %s: %s", d.Name, cond.Reason, cond.Message),
						Next:   "Fix what refuses the Pod (the namespace's ResourceQuota or LimitRange, an admission policy) or lower the compute's cpu_limit/memory_limit, then apply again."})
					return
				}
			}
		}
		wait = min(2*wait, 30*time.Second)
	}
}
