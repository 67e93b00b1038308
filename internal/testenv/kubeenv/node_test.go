package kubeenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

const runtimeImage = "ghcr.io/occ-platform/runtime/openclaw:2026.9.6"

// nodePod is a Pod on the runtime image running a Node.js one-liner as
// uid 1000 with a read-only root file system, as the provider's Pods run.
func nodePod(name, script string, labels map[string]string) *corev1.Pod {
	no, yes, uid := false, true, int64(1000)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           runtimeImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"node", "-e", script},
				Env:             []corev1.EnvVar{{Name: "TMPDIR", Value: "/tmp"}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes,
					AllowPrivilegeEscalation: &no,
				},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// waitPod waits until pod satisfies cond (or the deadline, generous for a
// loaded 2-core machine).
func waitPod(t *testing.T, c *Cluster, ns, name string, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s never %s: %v\nstatus: %+v\n--- kubelet ---\n%s", ns, name, what, err, pod.Status, c.Node.LogTail("kubelet", 30))
	}
	return pod
}

// TestRealNode_PodsServiceDNSAndLogs runs real containers on the real node:
// a server Pod on the runtime image, reached from the node through its
// Service's ClusterIP (kube-proxy); a client Pod that finds the Service by
// its DNS name (CoreDNS) and fetches from it; its output read through the
// API server from the kubelet; and a name outside the cluster that does not
// resolve (nothing leaves the node's namespace).
func TestRealNode_PodsServiceDNSAndLogs(t *testing.T) {
	c := Shared(t)
	node := c.RealNode(t)
	ns := c.RealNamespace(t)
	ctx := context.Background()

	server := nodePod("server", `require("http").createServer((q, s) => s.end("hello from " + require("os").hostname())).listen(8080)`,
		map[string]string{"app": "server"})
	server.Spec.RestartPolicy = corev1.RestartPolicyAlways
	server.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	if _, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "server"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := waitPod(t, c, ns, "server", "Ready", PodReady)
	if pod.Spec.NodeName != node.Name {
		t.Fatalf("server Pod ran on %q, want the real node %q", pod.Spec.NodeName, node.Name)
	}

	// From the node, through kube-proxy.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return node.DialInNode(ctx, network, addr)
		},
	}}
	var body string
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Get("http://" + svc.Spec.ClusterIP + ":80/")
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return true, nil
	})
	if err != nil || body != "hello from server" {
		t.Fatalf("GET ClusterIP %s: %q, %v (last error %v)\n--- kube-proxy ---\n%s", svc.Spec.ClusterIP, body, err, last, node.LogTail("kube-proxy", 20))
	}

	// From a Pod, by DNS name.
	script := fmt.Sprintf(`
const dns = require("dns"), http = require("http");
dns.lookup("web.%s.svc.cluster.local", (err, addr) => {
  console.log("lookup web: " + (err ? err.code : addr));
  dns.lookup("registry.npmjs.org", (err2) => {
    console.log("lookup outside: " + (err2 ? err2.code : "resolved"));
    http.get("http://web/", (res) => { let b = ""; res.on("data", (d) => b += d); res.on("end", () => console.log("body: " + b)); })
      .on("error", (e) => console.log("get error: " + e.message));
  });
});`, ns)
	if _, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, nodePod("client", script, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "client", "Succeeded", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	stream, err := c.Clientset.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		t.Fatalf("logs through the API server: %v", err)
	}
	defer stream.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(stream)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			got[k] = v
		}
	}
	if got["lookup web"] != svc.Spec.ClusterIP {
		t.Errorf("the Service name resolved to %q, want its ClusterIP %s (client output %v)\n--- coredns ---\n%s", got["lookup web"], svc.Spec.ClusterIP, got, node.LogTail("coredns", 20))
	}
	if got["lookup outside"] == "resolved" || got["lookup outside"] == "" {
		t.Errorf("a name outside the cluster: %q, want a lookup failure (CoreDNS forwards nothing)", got["lookup outside"])
	}
	if got["body"] != "hello from server" {
		t.Errorf("GET http://web/ from a Pod: %q (client output %v)", got["body"], got)
	}
}

// TestRealNode_PlacementByNamespace: a namespace of TestNamespace runs on
// kwok, one of RealNamespace on the real node.
func TestRealNode_PlacementByNamespace(t *testing.T) {
	c := Shared(t)
	node := c.RealNode(t)
	ctx := context.Background()
	for _, tc := range []struct {
		ns       string
		wantReal bool
	}{{c.TestNamespace(t), false}, {c.RealNamespace(t), true}} {
		p := nodePod("p", "setTimeout(() => {}, 1e9)", nil)
		if _, err := c.Clientset.CoreV1().Pods(tc.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := waitPod(t, c, tc.ns, "p", "scheduled", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		if got := pod.Spec.NodeName == node.Name; got != tc.wantReal {
			t.Errorf("namespace %s: Pod on %q, real node %v, want %v", tc.ns, pod.Spec.NodeName, got, tc.wantReal)
		}
	}
}

// TestRealNode_ReclaimsWhatAKilledRunLeft: a node namespace, veth and
// cgroup whose owner died (a test binary killed with SIGKILL) are removed
// and the number reused; one whose owner lives is never touched.
func TestRealNode_ReclaimsWhatAKilledRunLeft(t *testing.T) {
	if _, err := FindNodeBinaries(""); err != nil {
		SkipOrFail(t, err)
	}
	const id = maxNodes // far from the numbers running clusters take first
	name := fmt.Sprintf("occ-node-%d", id)
	owner := "/run/" + name + ".owner"
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	// What a killed run leaves: the namespace, the host end of its veth, an
	// owner file naming a process that is gone, a cgroup.
	for _, s := range [][]string{
		{"ip", "netns", "add", name},
		{"ip", "link", "add", fmt.Sprintf("occn%d", id), "type", "veth", "peer", "name", "eth0", "netns", name},
	} {
		if err := run(s[0], s[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	// and a kubelet volume still mounted under its data directory.
	dir := filepath.Join(t.TempDir(), "node")
	volume := filepath.Join(dir, "kubelet", "pods", "p", "volumes", "v")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run("mount", "-t", "tmpfs", "tmpfs", volume); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupStaleNode(id, dir) })
	if err := os.WriteFile(owner, []byte(strconv.Itoa(dead.Process.Pid)+"\n"+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/sys/fs/cgroup/pids/"+name, 0o755); err != nil {
		t.Fatal(err)
	}

	n := &RealNode{}
	if err := n.claimID(id, id); err != nil {
		t.Fatalf("a namespace whose owner died was not reclaimed: %v", err)
	}
	if n.ID != id {
		t.Fatalf("claimed %d, want %d", n.ID, id)
	}
	if err := run("ip", "link", "show", fmt.Sprintf("occn%d", id)); err == nil {
		t.Error("the stale veth is still there")
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), volume) {
		t.Error("the stale kubelet volume is still mounted")
	}
	if _, err := os.Stat("/sys/fs/cgroup/pids/" + name); err == nil {
		t.Error("the stale cgroup is still there")
	}
	if data, _ := os.ReadFile(owner); strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("owner file = %q, want this process", data)
	}

	// Now it is ours, and alive: another claim must not take it.
	other := &RealNode{}
	if err := other.claimID(id, id); err == nil {
		t.Fatalf("a live node's namespace was claimed twice")
	}
}
