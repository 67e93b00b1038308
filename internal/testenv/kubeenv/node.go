package kubeenv

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real node: containerd, runc, the CNI bridge, a real kubelet,
// kube-proxy and CoreDNS, all inside a network namespace of the test
// environment's own (as kind puts each node in a container). The API server
// stays on the host's loopback; the node reaches it through a forwarder
// that listens on the node's own loopback, and the API server reaches the
// kubelet (logs, port-forward) over a veth pair. The node namespace has no
// default route and CoreDNS forwards nothing, so nothing a Pod does can
// reach an address outside the namespaces the test environment made.
//
// Placement: kwok Nodes carry the label NodeLabel=kwok, the real node
// NodeLabel=real and the taint NodeLabel=real:NoSchedule. The API server's
// PodNodeSelector and PodTolerationRestriction admission plugins place a
// Pod by its namespace: a namespace made by RealNamespace runs on the real
// node, any other on kwok (or the other way round with Options.Placement).
const (
	NodeLabel     = "occ-platform.io/node"
	PlacementKwok = "kwok"
	PlacementReal = "real"

	annotationNodeSelector       = "scheduler.alpha.kubernetes.io/node-selector"
	annotationDefaultTolerations = "scheduler.alpha.kubernetes.io/defaultTolerations"
)

// Binaries of the real node (built by testenv/build.sh) and the Debian
// packages it runs (installed by testenv/node.sh).
const (
	BinKubelet   = "kubelet"
	BinKubeProxy = "kube-proxy"
	BinCoreDNS   = "coredns"
)

var nodeBinaries = []string{BinKubelet, BinKubeProxy, BinCoreDNS}

// nodeTools are the Debian-packaged programs the node runs or calls.
var nodeTools = []string{"containerd", "ctr", "runc", "ip", "nsenter", "iptables", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback", "/usr/lib/cni/portmap"}

// Image names the node has imported (testenv/images.sh builds them).
const (
	PauseImage = "localhost/occ-testenv/pause:1"
)

// Addresses inside the test environment's own namespaces: the veth pair
// 10.250.ID.0/24 (host .1, node .2) and the node's Pod network
// 10.245.ID.0/24 (bridge cni0 .1). The service range is the API server's.
const (
	serviceCIDR = "10.96.0.0/16"
	nodeAPIPort = 6443
)

// RealNode is the running real node of a cluster.
type RealNode struct {
	// Name is the Node's name.
	Name string
	// ID numbers the node's namespace and addresses (1 to 50).
	ID int
	// NetNS is the node's network namespace (ip netns).
	NetNS string
	// HostIP and NodeIP are the two ends of the veth pair; NodeIP is the
	// kubelet's address and where processes of the test environment serve
	// Pods (ListenInNode).
	HostIP, NodeIP string
	// PodCIDR is the node's Pod network; GatewayIP its bridge address,
	// where CoreDNS answers.
	PodCIDR, GatewayIP string
	// Dir holds the node's data (containerd, kubelet, logs).
	Dir string

	runDir   string
	hostVeth string
	// ctr and socket reach the node's containerd (KillContainer).
	ctr, socket string
	cluster     *Cluster
	procs       []*process
	forward     net.Listener
	wg          sync.WaitGroup
	stopOnce    sync.Once
}

// FindNodeBinaries looks the real node's binaries and tools up; the error
// wraps ErrBinariesMissing and names `make testenv`.
func FindNodeBinaries(dir string) (Binaries, error) {
	if dir == "" {
		dir = BinDir()
	}
	bins := Binaries{}
	var missing []string
	for _, name := range nodeBinaries {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, name)
			continue
		}
		bins[name] = path
	}
	for _, tool := range nodeTools {
		path, err := exec.LookPath(tool)
		if err != nil {
			missing = append(missing, tool)
			continue
		}
		bins[filepath.Base(tool)] = path
	}
	for _, img := range nodeImages() {
		if _, err := os.Stat(img.archive); err != nil {
			missing = append(missing, "image "+img.name+" ("+img.archive+")")
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: the real node needs %s (run `make testenv` as root: it installs containerd, runc, "+
			"the CNI plugins and iptables, builds kubelet, kube-proxy and CoreDNS, and builds the images)",
			ErrBinariesMissing, strings.Join(missing, ", "))
	}
	return bins, nil
}

// nodeImage is an image archive the node imports into containerd.
type nodeImage struct{ name, archive string }

// ImagesDir is where testenv/images.sh keeps the image archives.
func ImagesDir() string { return filepath.Join(filepath.Dir(BinDir()), "images") }

// nodeImages: the pause image and the runtime images, as archives named
// after the image (testenv/images.sh path NAME).
func nodeImages() []nodeImage {
	dir := ImagesDir()
	return []nodeImage{
		{PauseImage, filepath.Join(dir, "pause.tar")},
		{"ghcr.io/occ-platform/runtime/openclaw:2026.9.6", filepath.Join(dir, "openclaw.tar")},
		{"ghcr.io/occ-platform/runtime/codex:0.169.0", filepath.Join(dir, "codex.tar")},
	}
}

// startRealNode starts the node of c: namespace, veth, containerd (images
// imported), kubelet, kube-proxy and CoreDNS, and returns once the Node is
// Ready and schedulable.
func (c *Cluster) startRealNode(ctx context.Context, f *files) (_ *RealNode, err error) {
	bins, err := FindNodeBinaries(c.opts.BinDir)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	n := &RealNode{cluster: c, Dir: filepath.Join(c.Dir, "node")}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	if err := n.claimID(1, maxNodes); err != nil {
		return nil, err
	}
	n.Name = fmt.Sprintf("occ-real-node-%d", n.ID)
	n.HostIP, n.NodeIP = fmt.Sprintf("10.250.%d.1", n.ID), fmt.Sprintf("10.250.%d.2", n.ID)
	n.PodCIDR, n.GatewayIP = fmt.Sprintf("10.245.%d.0/24", n.ID), fmt.Sprintf("10.245.%d.1", n.ID)
	n.hostVeth = fmt.Sprintf("occn%d", n.ID)
	n.runDir = fmt.Sprintf("/run/occ-node-%d", n.ID)
	for _, d := range []string{n.Dir, n.runDir, filepath.Join(n.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.network(); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: real node network: %w", err)
	}
	if err := n.cgroups(); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: real node cgroups: %w", err)
	}
	if n.forward, err = n.ListenInNode("tcp", fmt.Sprintf("127.0.0.1:%d", nodeAPIPort)); err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: API server forwarder in the node: %w", err)
	}
	apiAddr := strings.TrimPrefix(c.Host, "https://")
	n.wg.Add(1)
	go n.forwardTo(apiAddr)

	cfg, err := n.writeConfig(f)
	if err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: real node configuration: %w", err)
	}
	logDir := filepath.Join(n.Dir, "logs")

	ctrd, err := n.start("containerd", bins["containerd"], []string{"--config", cfg.containerd}, nil, logDir)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, ctrd, func(ctx context.Context) error {
		return exec.CommandContext(ctx, bins["ctr"], "--address", cfg.socket, "version").Run()
	}); err != nil {
		return nil, err
	}
	if err := n.importImages(ctx, bins["ctr"], cfg.socket); err != nil {
		return nil, ctrd.startFailed(err)
	}
	n.ctr, n.socket = bins["ctr"], cfg.socket
	c.opts.Logf("testenv/kubeenv: real node %s: containerd up, images imported (%s)", n.Name, since(started))

	kubelet, err := n.start("kubelet", bins[BinKubelet], []string{
		"--config=" + cfg.kubelet,
		"--kubeconfig=" + cfg.kubeletKubeconfig,
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.NodeIP,
		"--root-dir=" + filepath.Join(n.Dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet-pki"),
		"--node-labels=" + NodeLabel + "=" + PlacementReal,
		"--v=1",
	}, nil, logDir)
	if err != nil {
		return nil, err
	}
	proxy, err := n.start("kube-proxy", bins[BinKubeProxy], []string{"--config=" + cfg.kubeProxy, "--v=1"}, nil, logDir)
	if err != nil {
		return nil, err
	}
	dns, err := n.start("coredns", bins[BinCoreDNS], []string{"-conf", cfg.corefile}, nil, logDir)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, kubelet, n.ready); err != nil {
		return nil, err
	}
	for _, p := range []*process{proxy, dns} {
		if p.exited() {
			return nil, p.startFailed(errors.New("exited during start"))
		}
	}
	c.opts.Logf("testenv/kubeenv: real node %s Ready at %s (%s)", n.Name, n.NodeIP, since(started))
	return n, nil
}

// start runs a node process inside the node's network namespace (nsenter
// enters the network namespace only: containerd and the kubelet must share
// the host's mount namespace, where the kubelet mounts Pod volumes).
func (n *RealNode) start(name, bin string, args, env []string, logDir string) (*process, error) {
	nsArgs := append([]string{"--net=/run/netns/" + n.NetNS, "--", bin}, args...)
	p, err := startProcess(name, "nsenter", nsArgs, env, logDir)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

// maxNodes bounds the node numbers (10.250.N.0/24, 10.245.N.0/24).
const maxNodes = 50

// claimID takes the first free node number in [first, last]: `ip netns
// add` fails when the namespace exists, so two clusters never take the
// same one. A namespace left by a killed run (its owner file names a dead
// process, and the node's data directory) is removed and reused.
func (n *RealNode) claimID(first, last int) error {
	for id := first; id <= last; id++ {
		name := fmt.Sprintf("occ-node-%d", id)
		owner := filepath.Join("/run", name+".owner")
		if data, err := os.ReadFile(owner); err == nil {
			fields := strings.Fields(string(data))
			if pid, _ := strconv.Atoi(firstOr(fields, 0)); pid > 0 && syscall.Kill(pid, 0) == nil {
				continue
			}
			cleanupStaleNode(id, firstOr(fields, 1))
		}
		if err := run("ip", "netns", "add", name); err != nil {
			continue
		}
		n.ID, n.NetNS = id, name
		return os.WriteFile(owner, []byte(strconv.Itoa(os.Getpid())+"\n"+n.Dir+"\n"), 0o644)
	}
	return fmt.Errorf("testenv/kubeenv: no free real-node number (occ-node-%d … occ-node-%d all in use)", first, last)
}

func firstOr(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}

// cleanupStaleNode removes what a killed run left of node id: its
// processes, mounts (also the kubelet's volumes under its data directory
// dir, when known), veth, namespace and cgroups.
func cleanupStaleNode(id int, dir string) {
	if !filepath.IsAbs(dir) || filepath.Base(dir) != "node" {
		dir = ""
	}
	teardown(id, dir)
}

// teardown removes node id from the machine once its servers are gone:
// the containers (SIGKILL to the node's cgroups), the shims of its
// containerd, the mounts under its run directory and dir (when set), the
// veth (and with it the host's route to its Pods), the namespace, the
// cgroups and the owner file.
func teardown(id int, dir string) {
	name := fmt.Sprintf("occ-node-%d", id)
	runDir := "/run/" + name
	killCgroup(name)
	killShims(runDir + "/")
	unmountUnder(runDir)
	if dir != "" {
		unmountUnder(dir)
	}
	_ = run("ip", "link", "del", fmt.Sprintf("occn%d", id))
	_ = run("ip", "netns", "del", name)
	_ = os.RemoveAll(runDir)
	removeCgroups(name)
	_ = os.Remove(filepath.Join("/run", name+".owner"))
}

// network makes the veth pair, addresses and routes: the host reaches the
// node and its Pods; the node has routes for its Pods and the service range
// only, no default route.
func (n *RealNode) network() error {
	ns := n.NetNS
	steps := [][]string{
		{"ip", "link", "add", n.hostVeth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "addr", "add", n.HostIP + "/24", "dev", n.hostVeth},
		{"ip", "link", "set", n.hostVeth, "up"},
		{"ip", "route", "add", n.PodCIDR, "via", n.NodeIP},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", n.NodeIP + "/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		// Connections from the node itself to a ClusterIP need a route to
		// exist before kube-proxy's DNAT rewrites them.
		{"ip", "-n", ns, "route", "add", serviceCIDR, "dev", "eth0"},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// cgroups makes the node's cgroup root (the kubelet's cgroupRoot) in every
// cgroup v1 hierarchy, so that this node's Pods are apart from any other
// node's on the machine.
func (n *RealNode) cgroups() error {
	name := fmt.Sprintf("occ-node-%d", n.ID)
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup", e.Name(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if e.Name() == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ListenInNode listens inside the node's network namespace (address as for
// net.Listen, e.g. ":0" or NodeIP+":0"): what it serves, Pods reach at
// NodeIP, and nothing outside the test environment's namespaces can.
func (n *RealNode) ListenInNode(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.inNode(func() (err error) {
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// DialInNode connects from inside the node's network namespace, e.g. to a
// Service's ClusterIP (through kube-proxy) or a Pod.
func (n *RealNode) DialInNode(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := n.inNode(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// RedirectInNode sends the node's Pods' TCP connections to from (an
// address in the node, host:port) to to instead, until the test ends: a
// DNAT rule at the top of the nat table's PREROUTING chain of the node's
// network namespace, so that a Pod's every process is redirected whatever
// its environment, and the connection keeps the Pod's source address. What
// the node itself dials (DialInNode) is not redirected.
func (n *RealNode) RedirectInNode(t testing.TB, from, to string) {
	t.Helper()
	host, port, err := net.SplitHostPort(from)
	if err != nil {
		t.Fatalf("testenv/kubeenv: RedirectInNode(%q): %v", from, err)
	}
	rule := []string{"PREROUTING", "-p", "tcp", "-d", host, "--dport", port,
		"-m", "comment", "--comment", "occ-testenv redirect " + t.Name(), "-j", "DNAT", "--to-destination", to}
	if err := run("ip", append([]string{"netns", "exec", n.NetNS, "iptables", "-w", "-t", "nat", "-I"}, rule...)...); err != nil {
		t.Fatalf("testenv/kubeenv: redirect %s to %s in the node: %v", from, to, err)
	}
	t.Cleanup(func() {
		if err := run("ip", append([]string{"netns", "exec", n.NetNS, "iptables", "-w", "-t", "nat", "-D"}, rule...)...); err != nil {
			t.Errorf("testenv/kubeenv: remove the redirect of %s: %v", from, err)
		}
	})
}

// inNode runs f on an OS thread that has entered the node's network
// namespace (sockets f makes live there), then moves the thread back. The
// thread must come back rather than end: the node's processes have
// Pdeathsig set, and Linux sends it when the thread that forked them
// ends, which may be any thread of this process. A thread that cannot
// return stays locked and is parked for good, never ended.
func (n *RealNode) inNode(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open("/run/netns/"+n.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", n.NetNS, err)
			return
		}
		errc <- f()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			select {} // never let this thread run other goroutines, nor end
		}
		runtime.UnlockOSThread()
	}()
	return <-errc
}

// forwardTo copies connections to the node's 127.0.0.1:6443 to the API
// server on the host's loopback.
func (n *RealNode) forwardTo(apiAddr string) {
	defer n.wg.Done()
	for {
		conn, err := n.forward.Accept()
		if err != nil {
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer conn.Close()
			up, err := net.DialTimeout("tcp", apiAddr, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
			go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
			<-done
		}()
	}
}

// nodeConfig is the paths of the node's written configuration.
type nodeConfig struct {
	socket, containerd, kubelet, kubeletKubeconfig, kubeProxy, corefile string
}

func (n *RealNode) writeConfig(f *files) (*nodeConfig, error) {
	c := n.cluster
	dir := n.Dir
	cfg := &nodeConfig{socket: filepath.Join(n.runDir, "containerd.sock")}
	pki := filepath.Join(dir, "pki")
	for _, d := range []string{pki, filepath.Join(dir, "cni", "net.d"), filepath.Join(dir, "kubelet"), filepath.Join(dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	nodeAPI := fmt.Sprintf("https://127.0.0.1:%d", nodeAPIPort)
	kubeconfig := func(name, cn string, groups ...string) (string, error) {
		kp, err := c.ca.issue(certRequest{CommonName: cn, Organization: groups, Client: true})
		if err != nil {
			return "", err
		}
		path := filepath.Join(pki, name+".kubeconfig")
		return path, writeKubeconfig(path, nodeAPI, c.CAPEM, kp, "", "")
	}
	var err error
	// The API server here authorizes with RBAC alone (no Node authorizer),
	// so the kubelet and CoreDNS act as administrators; kube-proxy has the
	// bootstrap role of its well-known user.
	if cfg.kubeletKubeconfig, err = kubeconfig("kubelet", "system:node:"+n.Name, "system:nodes", "system:masters"); err != nil {
		return nil, err
	}
	proxyKubeconfig, err := kubeconfig("kube-proxy", "system:kube-proxy")
	if err != nil {
		return nil, err
	}
	dnsKubeconfig, err := kubeconfig("coredns", "occ-testenv-coredns", "system:masters")
	if err != nil {
		return nil, err
	}
	serving, err := c.ca.issue(certRequest{CommonName: n.Name, IPs: []net.IP{net.ParseIP(n.NodeIP)}, DNSNames: []string{n.Name}, Server: true})
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := serving.write(pki, "kubelet-serving")
	if err != nil {
		return nil, err
	}

	cfg.containerd = filepath.Join(dir, "containerd.toml")
	containerd := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  # This machine withholds CAP_SYS_RESOURCE: no process here may lower its
  # oom_score_adj, so the kubelet's -998 for sandboxes is raised to ours.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(dir, "containerd", "root"), filepath.Join(n.runDir, "state"), cfg.socket, filepath.Join(n.runDir, "ttrpc.sock"),
		filepath.Join(dir, "containerd", "opt"), PauseImage, filepath.Join(dir, "cni", "net.d"))
	if err := os.WriteFile(cfg.containerd, []byte(containerd), 0o644); err != nil {
		return nil, err
	}

	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "occ-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.PodCIDR, n.GatewayIP, filepath.Join(dir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(dir, "cni", "net.d", "10-occ-node.conflist"), []byte(cni), 0o644); err != nil {
		return nil, err
	}

	cfg.kubelet = filepath.Join(dir, "kubelet.yaml")
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines run cgroup v1 (hybrid); the kubelet refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /occ-node-%d
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
clusterDNS: [%s]
# Pods get only the cluster's DNS, never the machine's resolvers.
resolvConf: ""
podCIDR: %s
podLogsDirectory: %s
failSwapOn: false
maxPods: 40
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
registerWithTaints:
- {key: %s, value: %s, effect: NoSchedule}
`, n.ID, cfg.socket, n.NodeIP, servingCert, servingKey, f.caCert, n.GatewayIP, n.PodCIDR, filepath.Join(dir, "pod-logs"),
		NodeLabel, PlacementReal)
	if err := os.WriteFile(cfg.kubelet, []byte(kubelet), 0o644); err != nil {
		return nil, err
	}

	cfg.kubeProxy = filepath.Join(dir, "kube-proxy.yaml")
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# A Pod reaching a Service whose endpoint sits on the same bridge: the
# reply must come back through the node, so every Service packet is
# masqueraded (no bridge netfilter needed).
iptables: {masqueradeAll: true}
conntrack: {maxPerCore: 0}
`, proxyKubeconfig, n.Name, n.PodCIDR)
	if err := os.WriteFile(cfg.kubeProxy, []byte(proxy), 0o644); err != nil {
		return nil, err
	}

	cfg.corefile = filepath.Join(dir, "Corefile")
	corefile := fmt.Sprintf(`.:53 {
    errors
    health 127.0.0.1:18181
    ready 127.0.0.1:18182
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s occ-testenv
        pods insecure
    }
    cache 5
}
`, dnsKubeconfig)
	if err := os.WriteFile(cfg.corefile, []byte(corefile), 0o644); err != nil {
		return nil, err
	}
	return cfg, nil
}

// KillContainer kills a container's processes on the node with SIGKILL
// (what an OOM kill or a crash looks like to the kubelet, which then
// restarts the container). containerID is a Pod's containerStatuses[].
// containerID ("containerd://…").
func (n *RealNode) KillContainer(ctx context.Context, containerID string) error {
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok || id == "" {
		return fmt.Errorf("testenv/kubeenv: %q is not a containerd container ID", containerID)
	}
	out, err := exec.CommandContext(ctx, n.ctr, "--address", n.socket, "-n", "k8s.io", "tasks", "kill", "--all", "--signal", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv/kubeenv: kill container %s: %v: %s", id, err, tailString(string(out), 5))
	}
	return nil
}

// importImages imports the image archives into containerd's k8s.io
// namespace, where the kubelet finds them (Pods use IfNotPresent).
func (n *RealNode) importImages(ctx context.Context, ctr, socket string) error {
	for _, img := range nodeImages() {
		cmd := exec.CommandContext(ctx, ctr, "--address", socket, "-n", "k8s.io", "images", "import", "--no-unpack=false", img.archive)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("import %s: %v: %s", img.archive, err, tailString(string(out), 10))
		}
		out, err := exec.CommandContext(ctx, ctr, "--address", socket, "-n", "k8s.io", "images", "ls", "-q", "name=="+img.name).Output()
		if err != nil || !strings.Contains(string(out), img.name) {
			return fmt.Errorf("image %s not in containerd after importing %s (%v)", img.name, img.archive, err)
		}
		// Also under repository@digest, as containerd's CRI records an
		// image it pulls from a registry: a Pod that names the image by
		// digest (a release's default, internal/release) finds it.
		if img.name == PauseImage {
			continue // never named by digest
		}
		digest, err := ImageDigest(strings.TrimSuffix(filepath.Base(img.archive), ".tar"))
		if err != nil {
			return err
		}
		repo := img.name[:strings.LastIndex(img.name, ":")]
		if out, err := exec.CommandContext(ctx, ctr, "--address", socket, "-n", "k8s.io", "images", "tag", "--force", img.name, repo+"@"+digest).CombinedOutput(); err != nil {
			return fmt.Errorf("name %s by its digest: %v: %s", img.name, err, tailString(string(out), 5))
		}
	}
	return nil
}

// ready: the Node is Ready and only the real-node taint is left.
func (n *RealNode) ready(ctx context.Context) error {
	node, err := n.cluster.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s not Ready: %s", n.Name, cond.Message)
			}
			ready = true
		}
	}
	if !ready {
		return fmt.Errorf("node %s has no Ready condition yet", n.Name)
	}
	for _, t := range node.Spec.Taints {
		if t.Key != NodeLabel {
			return fmt.Errorf("node %s still has taint %s", n.Name, t.ToString())
		}
	}
	return nil
}

// LogTail is the end of a node process's log (containerd, kubelet,
// kube-proxy, coredns).
func (n *RealNode) LogTail(name string, lines int) string {
	return tailFile(filepath.Join(n.Dir, "logs", name+".log"), lines)
}

// stop ends the node: the Pods' processes first (SIGKILL to the node's
// cgroups), then CoreDNS, kube-proxy, the kubelet and containerd, the shims
// containerd started, the mounts under the node's directories, the veth and
// the namespace.
func (n *RealNode) stop() {
	n.stopOnce.Do(func() {
		if n.forward != nil {
			_ = n.forward.Close()
		}
		for i := len(n.procs) - 1; i >= 0; i-- {
			if n.procs[i].name == "containerd" {
				killCgroup(fmt.Sprintf("occ-node-%d", n.ID))
			}
			n.procs[i].stop(5 * time.Second)
		}
		if n.ID != 0 {
			teardown(n.ID, n.Dir)
		}
	})
}

// killCgroup SIGKILLs every process in cgroup /NAME (and below) of the pids
// hierarchy: the node's containers.
func killCgroup(name string) {
	root := filepath.Join("/sys/fs/cgroup/pids", name)
	for range 3 {
		found := false
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, _ := strconv.Atoi(f); pid > 0 {
					found = true
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
		if !found {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeCgroups removes the node's cgroup directories, deepest first.
func removeCgroups(name string) {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		root := filepath.Join("/sys/fs/cgroup", e.Name(), name)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// killShims ends the containerd shims whose command line names a socket
// under dir (the node's containerd): they outlive containerd otherwise.
func killShims(dir string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		if strings.Contains(string(cmdline), dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder detaches every mount at or below dir, deepest first (the
// kubelet's volumes, containerd's overlays, the Pods' network namespaces).
func unmountUnder(dir string) {
	if dir == "" {
		return
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// run runs a command and returns its output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// RealNode returns the cluster's real node, starting it on first use.
// When it cannot start, the test fails, except outside CI when its
// binaries, tools or images are missing: then it is skipped with a message
// naming `make testenv`.
func (c *Cluster) RealNode(t testing.TB) *RealNode {
	t.Helper()
	n, err := c.StartRealNode(context.Background())
	if err != nil {
		SkipOrFail(t, err)
	}
	return n
}

// RealNamespace creates a namespace whose Pods run on the real node (see
// NodeLabel) and deletes it when t ends. It fails the test when the
// cluster has no real node.
func (c *Cluster) RealNamespace(t testing.TB) string {
	t.Helper()
	if c.Node == nil {
		t.Fatalf("testenv/kubeenv: the real node is not running (call RealNode first)")
	}
	return c.testNamespace(t, PlacementReal)
}

// placementTolerations is the JSON list of tolerations Pods placed on
// placement get: the real node's taint, or none.
func placementTolerations(placement string) string {
	if placement != PlacementReal {
		return "[]"
	}
	return fmt.Sprintf(`[{"key":%q,"operator":"Equal","value":%q,"effect":"NoSchedule"}]`, NodeLabel, PlacementReal)
}

// PlacementAnnotations are the namespace annotations that place its Pods on
// the real node or on kwok.
func PlacementAnnotations(placement string) map[string]string {
	return map[string]string{
		annotationNodeSelector:       NodeLabel + "=" + placement,
		annotationDefaultTolerations: placementTolerations(placement),
	}
}

// admissionConfig places Pods of namespaces without placement annotations:
// on kwok by default, on the real node for Options.Placement = real.
func admissionConfig(dir, placement string) (string, error) {
	tolFile := filepath.Join(dir, "pod-toleration-restriction.yaml")
	if err := os.WriteFile(tolFile, []byte(fmt.Sprintf(`apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1
kind: Configuration
default: %s
`, placementTolerations(placement))), 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "admission.yaml")
	return path, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodNodeSelector
  configuration:
    podNodeSelectorPluginConfig:
      clusterDefaultNodeSelector: %s=%s
- name: PodTolerationRestriction
  path: %s
`, NodeLabel, placement, tolFile)), 0o644)
}

// ImageDigest is the manifest digest of the image archive the node imports
// for name ("openclaw", "codex" or "pause"): the digest a release pins the
// image by (testenv/images.sh digest NAME), read from the OCI archive's
// index.json.
func ImageDigest(name string) (string, error) {
	f, err := os.Open(filepath.Join(ImagesDir(), name+".tar"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no index.json in the image archive (%v)", f.Name(), err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Digest string `json:"digest"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil || len(index.Manifests) != 1 {
			return "", fmt.Errorf("%s: index.json: %v, %d manifests; want one", f.Name(), err, len(index.Manifests))
		}
		return index.Manifests[0].Digest, nil
	}
}
