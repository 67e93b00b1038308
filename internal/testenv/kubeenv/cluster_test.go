package kubeenv_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

func TestMain(m *testing.M) { os.Exit(kubeenv.Main(m)) }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestServerReportsItsRealVersion(t *testing.T) {
	c := kubeenv.Shared(t)
	if !strings.HasPrefix(c.ServerVersion, "v1.37.") {
		t.Fatalf("server version = %q, want v1.37.x (version ldflags missing from the build?)", c.ServerVersion)
	}
	v, err := c.Clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != "37" || v.GitTreeState != "clean" {
		t.Fatalf("server version info = %+v", v)
	}
}

func TestDeploymentRollsOutToReady(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	replicas := int32(3)
	labels := map[string]string{"app": "runtime"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "runtime"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "runtime", Image: "registry.example/occ/runtime:1",
				}}},
			},
		},
	}
	start := time.Now()
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *appsv1.Deployment
	poll(t, 30*time.Second, c, func() (bool, string) {
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "runtime", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = d
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == replicas &&
				s.ReadyReplicas == replicas && s.AvailableReplicas == replicas,
			fmt.Sprintf("status %+v", s)
	})
	t.Logf("deployment rolled out to %d ready replicas in %s", last.Status.ReadyReplicas, time.Since(start).Round(time.Millisecond))

	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=runtime"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != int(replicas) {
		t.Fatalf("%d pods, want %d", len(pods.Items), replicas)
	}
	for _, p := range pods.Items {
		if !kubeenv.PodReady(&p) || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != c.Nodes[0] || p.Status.PodIP == "" {
			t.Errorf("pod %s: phase %s ready %v node %q ip %q", p.Name, p.Status.Phase, kubeenv.PodReady(&p), p.Spec.NodeName, p.Status.PodIP)
		}
	}
}

func TestBehaviorReadyAfterDelay(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	const delay = 2 * time.Second
	created := time.Now()
	createPod(t, ctx, c, ns, "slow", kubeenv.Behavior(kubeenv.BehaviorReadyAfter, delay), "runtime")

	// First Running with the container started but not ready …
	p := waitPod(t, c, ns, "slow", 10*time.Second, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1
	})
	cs := p.Status.ContainerStatuses[0]
	if kubeenv.PodReady(p) || cs.Ready || cs.Started == nil || !*cs.Started {
		t.Fatalf("running pod: ready=%v container ready=%v started=%v, want not ready and started", kubeenv.PodReady(p), cs.Ready, cs.Started)
	}
	// … then Ready once the delay is over.
	waitPod(t, c, ns, "slow", 15*time.Second, kubeenv.PodReady)
	// The delay starts when the Pod is Running, after its creation.
	if elapsed := time.Since(created); elapsed < delay {
		t.Fatalf("ready %s after creation, want at least the delay %s", elapsed, delay)
	} else {
		t.Logf("ready %s after creation (delay %s)", elapsed.Round(time.Millisecond), delay)
	}
}

func TestBehaviorNeverReady(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	createPod(t, ctx, c, ns, "stuck", kubeenv.Behavior(kubeenv.BehaviorNeverReady, 0), "runtime")
	waitPod(t, c, ns, "stuck", 10*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	time.Sleep(3 * time.Second)
	p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "stuck", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kubeenv.PodReady(p) || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("after 3 s: phase %s ready %v statuses %+v", p.Status.Phase, kubeenv.PodReady(p), p.Status.ContainerStatuses)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.Ready || cs.Started == nil || !*cs.Started || cs.State.Running == nil || cs.RestartCount != 0 {
		t.Fatalf("container status %+v, want running, started, not ready", cs)
	}

	// Removing the annotation lets the Pod become Ready.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, kubeenv.AnnotationBehavior)
	if _, err := c.Clientset.CoreV1().Pods(ns).Patch(ctx, "stuck", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "stuck", 10*time.Second, kubeenv.PodReady)
}

func TestBehaviorCrashLoop(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	createPod(t, ctx, c, ns, "crashy", kubeenv.Behavior(kubeenv.BehaviorCrashLoop, 500*time.Millisecond), "runtime")
	var counts []int32
	p := waitPod(t, c, ns, "crashy", 30*time.Second, func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		n := p.Status.ContainerStatuses[0].RestartCount
		if len(counts) == 0 || counts[len(counts)-1] != n {
			counts = append(counts, n)
		}
		return n >= 4
	})
	for i := 1; i < len(counts); i++ {
		if counts[i] <= counts[i-1] {
			t.Fatalf("restartCount went %v, want it to grow", counts)
		}
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
		t.Fatalf("state %+v, want waiting CrashLoopBackOff", cs.State)
	}
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Fatalf("lastState %+v, want terminated with exit code 1", cs.LastTerminationState)
	}
	if cs.Ready || kubeenv.PodReady(p) || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("phase %s ready %v container ready %v, want Running and not ready", p.Status.Phase, kubeenv.PodReady(p), cs.Ready)
	}
	t.Logf("restartCount seen: %v", counts)
}

func TestBehaviorImagePullBackOff(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	createPod(t, ctx, c, ns, "nopull", kubeenv.Behavior(kubeenv.BehaviorImagePullBackOff, 0), "runtime")
	waitPod(t, c, ns, "nopull", 10*time.Second, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	time.Sleep(2 * time.Second)
	p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "nopull", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := p.Status.ContainerStatuses[0]
	if p.Status.Phase != corev1.PodPending || kubeenv.PodReady(p) {
		t.Fatalf("phase %s ready %v, want Pending and not ready", p.Status.Phase, kubeenv.PodReady(p))
	}
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "ImagePullBackOff" || !strings.Contains(cs.State.Waiting.Message, "registry.example/occ/runtime:1") {
		t.Fatalf("container state %+v, want waiting ImagePullBackOff naming the image", cs.State)
	}
}

func TestBehaviorContainerConfigError(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	createPod(t, ctx, c, ns, "nosecret", kubeenv.Behavior(kubeenv.BehaviorContainerConfigError, 0), "runtime")
	p := waitPod(t, c, ns, "nosecret", 10*time.Second, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	cs := p.Status.ContainerStatuses[0]
	if p.Status.Phase != corev1.PodPending || kubeenv.PodReady(p) {
		t.Fatalf("phase %s ready %v, want Pending and not ready", p.Status.Phase, kubeenv.PodReady(p))
	}
	if cs.State.Waiting.Reason != "CreateContainerConfigError" || cs.State.Waiting.Message != `secret "missing-secret" not found` {
		t.Fatalf("container state %+v, want waiting CreateContainerConfigError naming the Secret", cs.State)
	}
}

func TestLogsThroughAPIServer(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	probe := func(i int) string {
		b, _ := json.Marshal(map[string]any{"event": "codex.model_probe", "seq": i, "ok": true, "model": "openai/gpt-5"})
		return string(b)
	}
	lines := []string{probe(1), probe(2), `{"event":"codex.ready"}`}

	// Logs can be set before the Pod exists …
	if err := c.SetPodLogs(ctx, ns, "agent", "runtime", lines); err != nil {
		t.Fatal(err)
	}
	createPod(t, ctx, c, ns, "agent", nil, "runtime", "sidecar")
	waitPod(t, c, ns, "agent", 10*time.Second, kubeenv.PodReady)
	if err := c.SetPodLogs(ctx, ns, "agent", "sidecar", []string{"sidecar says hello"}); err != nil {
		t.Fatal(err)
	}

	get := func(opts *corev1.PodLogOptions) string {
		t.Helper()
		var out string
		poll(t, 10*time.Second, c, func() (bool, string) {
			var err error
			out, err = c.ReadPodLogs(ctx, ns, "agent", opts)
			if err != nil {
				return false, err.Error()
			}
			return true, ""
		})
		return out
	}
	if got, want := get(&corev1.PodLogOptions{Container: "runtime"}), strings.Join(lines, "\n")+"\n"; got != want {
		t.Fatalf("GetLogs(runtime) = %q, want %q", got, want)
	}
	if got := get(&corev1.PodLogOptions{Container: "sidecar"}); got != "sidecar says hello\n" {
		t.Fatalf("GetLogs(sidecar) = %q", got)
	}
	tail := int64(1)
	if got := get(&corev1.PodLogOptions{Container: "runtime", TailLines: &tail}); got != lines[2]+"\n" {
		t.Fatalf("GetLogs(tail 1) = %q", got)
	}
	if got := get(&corev1.PodLogOptions{Container: "runtime", Timestamps: true}); !strings.Contains(got, "Z "+lines[0]) {
		t.Fatalf("GetLogs(timestamps) = %q, want RFC 3339 timestamps", got)
	}

	// Replacing the lines replaces what GetLogs returns.
	if err := c.SetPodLogs(ctx, ns, "agent", "runtime", []string{probe(3)}); err != nil {
		t.Fatal(err)
	}
	if got := get(&corev1.PodLogOptions{Container: "runtime"}); got != probe(3)+"\n" {
		t.Fatalf("GetLogs after SetPodLogs = %q", got)
	}

	// Previous logs, as for a restarted container.
	if err := c.SetPreviousPodLogs(ctx, ns, "agent", "runtime", []string{"panic: boom"}); err != nil {
		t.Fatal(err)
	}
	if got := get(&corev1.PodLogOptions{Container: "runtime", Previous: true}); got != "panic: boom\n" {
		t.Fatalf("GetLogs(previous) = %q", got)
	}

	// Following: an appended line arrives on an open stream.
	stream, err := c.Clientset.CoreV1().Pods(ns).GetLogs("agent", &corev1.PodLogOptions{Container: "runtime", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	received := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			received <- sc.Text()
		}
		close(received)
	}()
	if first := <-received; first != probe(3) {
		t.Fatalf("first followed line = %q", first)
	}
	if err := c.AppendPodLogs(ctx, ns, "agent", "runtime", []string{probe(4)}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-received:
		if got != probe(4) {
			t.Fatalf("followed line = %q, want %q", got, probe(4))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("appended line did not arrive on the followed stream")
	}
}

func TestNamespacedIdentityIsRefusedOutsideItsNamespace(t *testing.T) {
	t.Parallel()
	c := kubeenv.Shared(t)
	ns := c.TestNamespace(t)
	other := c.TestNamespace(t)
	ctx := ctxFor(t, time.Minute)

	id, err := c.NamespacedIdentity(ctx, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
	}

	// Inside its namespace: allowed.
	if _, err := id.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, cm("inside"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in own namespace: %v", err)
	}
	if _, err := id.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods in own namespace: %v", err)
	}

	// Outside: Forbidden.
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
	_, err = id.Clientset.CoreV1().ConfigMaps(other).Create(ctx, cm("outside"), metav1.CreateOptions{})
	forbidden("create in another namespace", err)
	_, err = id.Clientset.CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
	forbidden("list pods in another namespace", err)
	_, err = id.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	forbidden("list namespaces", err)
	_, err = id.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	forbidden("list nodes", err)

	// The rules are the Role's: a read-only identity cannot write.
	ro, err := c.NamespacedIdentity(ctx, ns, []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "inside", metav1.GetOptions{}); err != nil {
		t.Fatalf("read-only get: %v", err)
	}
	_, err = ro.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, cm("nope"), metav1.CreateOptions{})
	forbidden("read-only create", err)

	// The kubeconfig file works the same way.
	data, err := os.ReadFile(id.KubeconfigPath)
	if err != nil || !strings.Contains(string(data), id.Token) || !strings.Contains(string(data), "namespace: "+ns) {
		t.Fatalf("kubeconfig %s: err %v, missing token or namespace", id.KubeconfigPath, err)
	}
}

func TestFindBinariesNamesMakeTestenv(t *testing.T) {
	_, err := kubeenv.FindBinaries(t.TempDir())
	if !errors.Is(err, kubeenv.ErrBinariesMissing) || !strings.Contains(err.Error(), "make testenv") {
		t.Fatalf("err = %v, want ErrBinariesMissing naming `make testenv`", err)
	}
}

// A server that fails to start: Start returns its log tail, and stops and
// removes everything it had started.
func TestFailedStartStopsWhatStartedAndReportsTheLogTail(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	_, err := kubeenv.Start(ctxFor(t, time.Minute), kubeenv.Options{Dir: parent, APIServerArgs: []string{"--no-such-flag"}})
	if errors.Is(err, kubeenv.ErrBinariesMissing) {
		kubeenv.SkipOrFail(t, err)
	}
	if err == nil {
		t.Fatal("Start succeeded with an unknown kube-apiserver flag")
	}
	msg := err.Error()
	if !strings.Contains(msg, "kube-apiserver did not start") || !strings.Contains(msg, "no-such-flag") {
		t.Fatalf("error does not name kube-apiserver and its log tail:\n%s", msg)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("data directory left behind: %v", entries)
	}
	if pids := processesMentioning(parent); len(pids) != 0 {
		t.Fatalf("processes left running: %v", pids)
	}
}

func TestStopKillsEveryServerAndRemovesItsData(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	c, err := kubeenv.Start(ctxFor(t, 2*time.Minute), kubeenv.Options{Dir: parent})
	if err != nil {
		kubeenv.SkipOrFail(t, err)
	}
	pids := c.PIDs()
	if len(pids) != 6 { // etcd, the API server, kcm, the scheduler, kwok, agent-sandbox-controller
		t.Fatalf("PIDs = %v, want 6 servers", pids)
	}
	start := time.Now()
	c.Stop()
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists: %v", name, pid, err)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("data directory %s still there: %v", c.Dir, err)
	}
	c.Stop() // twice is fine
}

// --- helpers ---

func createPod(t *testing.T, ctx context.Context, c *kubeenv.Cluster, ns, name string, annotations map[string]string, containers ...string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	for _, ctr := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: ctr, Image: "registry.example/occ/runtime:1"})
	}
	if _, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPod polls the Pod until cond holds, failing with its status and kwok's
// log after timeout.
func waitPod(t *testing.T, c *kubeenv.Cluster, ns, name string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	poll(t, timeout, c, func() (bool, string) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		status, _ := json.MarshalIndent(p.Status, "", "  ")
		return cond(p), "pod status:\n" + string(status)
	})
	return pod
}

func poll(t *testing.T, timeout time.Duration, c *kubeenv.Cluster, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after %s; %s\n--- kwok log ---\n%s", timeout, state, c.LogTail(kubeenv.BinKwok, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesMentioning lists the PIDs whose command line contains s.
func processesMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ControllerManagerQPS reaches the kube-controller-manager as its client
// rate, and the controller manager runs with it (make bench-apply's
// CLUSTER_KCM_QPS).
func TestControllerManagerQPS(t *testing.T) {
	t.Parallel()
	c, err := kubeenv.Start(ctxFor(t, 2*time.Minute), kubeenv.Options{Dir: t.TempDir(), ControllerManagerQPS: 40})
	if errors.Is(err, kubeenv.ErrBinariesMissing) {
		kubeenv.SkipOrFail(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	var found bool
	for _, pid := range processesMentioning(c.Dir) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), "kube-controller-manager") || strings.Contains(string(cmdline), "kube-apiserver") {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if !slices.Contains(args, "--kube-api-qps=40") || !slices.Contains(args, "--kube-api-burst=80") {
			t.Fatalf("kube-controller-manager runs with %q; want --kube-api-qps=40 --kube-api-burst=80", args)
		}
		found = true
	}
	if !found {
		t.Fatal("no kube-controller-manager process of the cluster")
	}
}
