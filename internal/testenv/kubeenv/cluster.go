package kubeenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options tune Start. The zero value is a good cluster for tests.
type Options struct {
	// BinDir holds the binaries (default BinDir()).
	BinDir string
	// Dir is where the cluster's data directory is created (default
	// os.TempDir()). Stop removes the data directory.
	Dir string
	// Nodes is the number of kwok Nodes (default 1).
	Nodes int
	// StartTimeout bounds the whole start (default 2 minutes).
	StartTimeout time.Duration
	// APIServerArgs are added after the kube-apiserver flags this package
	// sets, so they win (feature gates, admission plugins, …).
	APIServerArgs []string
	// ControllerManagerQPS, when above zero, is the kube-controller-manager's
	// client rate (--kube-api-qps, burst twice it) instead of its default
	// of 20 per second (burst 30), which every controller's client has on
	// its own: at that rate the deployment and replicaset controllers
	// bound how fast many Deployments get their Pods (make bench-apply).
	ControllerManagerQPS int
	// KeepDir keeps the data directory (certificates, logs) after Stop,
	// for debugging.
	KeepDir bool
	// Logf, when set, receives one line per step of the start and stop.
	Logf func(format string, args ...any)
	// RealNode starts the real node with the cluster (see node.go);
	// otherwise a test starts it on first use (Cluster.RealNode).
	RealNode bool
	// Placement is where Pods of a namespace without placement annotations
	// run: PlacementKwok (the default) or PlacementReal.
	Placement string
}

// Cluster is a running control plane: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, on loopback. The admin
// credentials below are in group system:masters.
type Cluster struct {
	// Dir is the data directory: pki/, logs/ (one file per server),
	// admin.kubeconfig, kwok/, pod-logs/. Stop removes it.
	Dir string
	// KubeconfigPath is an admin kubeconfig (client certificate).
	KubeconfigPath string
	// Host is the API server URL, https://127.0.0.1:PORT.
	Host string
	// CAPEM is the cluster CA certificate (PEM); it signed the serving
	// certificate of the API server for 127.0.0.1.
	CAPEM []byte
	// ClientCertPEM and ClientKeyPEM are the admin client certificate.
	ClientCertPEM []byte
	ClientKeyPEM  []byte
	// Token is an admin bearer token (the API server's static token file).
	Token string
	// Config is the admin rest.Config (client certificate).
	Config *rest.Config
	// Clientset is an admin client.
	Clientset *kubernetes.Clientset
	// Dynamic is an admin dynamic client.
	Dynamic dynamic.Interface
	// Nodes are the names of the kwok Nodes.
	Nodes []string
	// ServerVersion is the API server's version, e.g. v1.37.2.
	ServerVersion string

	// Node is the real node, once started (Options.RealNode, RealNode).
	Node *RealNode

	ca      *certAuthority
	files   *files
	nodeMu  sync.Mutex
	nodeErr error
	procs   []*process // in start order
	// sandboxCRD is the agent-sandbox module's Sandbox CRD file.
	sandboxCRD string
	// apiserver is how the API server was started, for RestartAPIServer.
	apiserver struct {
		bin    string
		args   []string
		logDir string
	}
	// etcdURL is etcd's client URL, for CompactEtcd.
	etcdURL string
	// stopProvisioner ends the storage provisioner (provisioner.go).
	stopProvisioner context.CancelFunc
	opts            Options
	stopOnce        sync.Once
	logsMu          sync.Mutex
}

// Start launches a cluster and returns once the API server answers, the
// controller manager and scheduler are healthy, every kwok Node is Ready
// and schedulable, and the default namespace has its ServiceAccount. When a
// server does not come up, Start stops what it started and returns an
// error with that server's log tail. A missing binary is an error wrapping
// ErrBinariesMissing.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Placement == "" {
		opts.Placement = PlacementKwok
	}
	bins, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	dir, err := os.MkdirTemp(opts.Dir, "occ-kube-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, opts: opts}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	started := time.Now()
	for _, sub := range []string{"pki", "logs", "etcd", "kwok", "pod-logs", "identities"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}

	var ports portAllocator
	port := func() int {
		p, perr := ports.next()
		if perr != nil && err == nil {
			err = perr
		}
		return p
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kwokPort, sandboxPort := port(), port(), port(), port(), port(), port(), port()
	if err != nil {
		return nil, err
	}
	c.Host = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	f, err := c.writeFiles()
	if err != nil {
		return nil, fmt.Errorf("testenv/kubeenv: write certificates and configuration: %w", err)
	}
	c.files = f
	admission, err := admissionConfig(filepath.Join(dir, "pki"), opts.Placement)
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(dir, "logs")
	loopback := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

	// etcd
	etcd, err := c.start(BinEtcd, bins[BinEtcd], []string{
		"--name=occ",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://" + loopback(etcdClient),
		"--advertise-client-urls=http://" + loopback(etcdClient),
		"--listen-peer-urls=http://" + loopback(etcdPeer),
		"--initial-advertise-peer-urls=http://" + loopback(etcdPeer),
		"--initial-cluster=occ=http://" + loopback(etcdPeer),
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, nil, logDir)
	if err != nil {
		return nil, err
	}
	c.etcdURL = "http://" + loopback(etcdClient)
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, etcd, func(ctx context.Context) error {
		return httpOK(ctx, plain, "http://"+loopback(etcdClient)+"/health")
	}); err != nil {
		return nil, err
	}
	opts.Logf("testenv/kubeenv: etcd ready on %s (%s)", loopback(etcdClient), since(started))

	// kube-apiserver
	apiArgs := []string{
		"--etcd-servers=http://" + loopback(etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// A loopback advertise address is refused by the endpoint reconciler;
		// nothing in this cluster talks to the kubernetes Service.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--tls-cert-file=" + f.apiserverCert,
		"--tls-private-key-file=" + f.apiserverKey,
		"--client-ca-file=" + f.caCert,
		"--authorization-mode=RBAC",
		"--token-auth-file=" + f.tokens,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f.saPublic,
		"--service-account-signing-key-file=" + f.saPrivate,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kubeletClientKey,
		"--kubelet-certificate-authority=" + f.caCert,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--profiling=false",
		// Pods run on kwok or on the real node by their namespace (node.go).
		"--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
		"--admission-control-config-file=" + admission,
	}
	apiArgs = append(apiArgs, opts.APIServerArgs...)
	c.apiserver.bin, c.apiserver.args, c.apiserver.logDir = bins[BinAPIServer], apiArgs, logDir
	apiserver, err := c.start(BinAPIServer, bins[BinAPIServer], apiArgs, nil, logDir)
	if err != nil {
		return nil, err
	}
	tlsClient := httpsClient(c.CAPEM, c.ClientCertPEM, c.ClientKeyPEM)
	if err := waitFor(ctx, apiserver, func(ctx context.Context) error {
		return httpOK(ctx, tlsClient, c.Host+"/readyz")
	}); err != nil {
		return nil, err
	}
	if err := c.connect(); err != nil {
		return nil, apiserver.startFailed(err)
	}
	if v, verr := c.Clientset.Discovery().ServerVersion(); verr == nil {
		c.ServerVersion = v.GitVersion
	}
	opts.Logf("testenv/kubeenv: kube-apiserver %s ready at %s (%s)", c.ServerVersion, c.Host, since(started))
	if err := c.installKwokCRDs(ctx); err != nil {
		return nil, apiserver.startFailed(err)
	}
	// The agent-sandbox API (the CRD of the agent-sandbox module the
	// controller below is built from) is installed before the controller
	// manager, so that its garbage collector handles Sandboxes from the
	// start. (A sandbox driver is "installed" for a compute only where its
	// gateway Service exists; see StartSandboxDriver.)
	c.sandboxCRD = bins[FileSandboxCRD]
	if err := c.createSandboxCRD(ctx); err != nil {
		return nil, apiserver.startFailed(err)
	}

	// kube-controller-manager and kube-scheduler
	var kcmRate []string
	if opts.ControllerManagerQPS > 0 {
		kcmRate = []string{"--kube-api-qps=" + strconv.Itoa(opts.ControllerManagerQPS), "--kube-api-burst=" + strconv.Itoa(2*opts.ControllerManagerQPS)}
	}
	kcm, err := c.start(BinControllerManager, bins[BinControllerManager], append([]string{
		"--kubeconfig=" + f.kcmKubeconfig,
		"--authentication-kubeconfig=" + f.kcmKubeconfig,
		"--authorization-kubeconfig=" + f.kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--tls-cert-file=" + f.kcmServingCert,
		"--tls-private-key-file=" + f.kcmServingKey,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + f.saPrivate,
		"--root-ca-file=" + f.caCert,
		"--cluster-signing-cert-file=" + f.caCert,
		"--cluster-signing-key-file=" + f.caKey,
		"--profiling=false",
	}, kcmRate...), nil, logDir)
	if err != nil {
		return nil, err
	}
	scheduler, err := c.start(BinScheduler, bins[BinScheduler], []string{
		"--kubeconfig=" + f.schedulerKubeconfig,
		"--authentication-kubeconfig=" + f.schedulerKubeconfig,
		"--authorization-kubeconfig=" + f.schedulerKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(schedPort),
		"--tls-cert-file=" + f.schedulerServingCert,
		"--tls-private-key-file=" + f.schedulerServingKey,
		"--leader-elect=false",
		"--profiling=false",
	}, nil, logDir)
	if err != nil {
		return nil, err
	}
	caOnly := httpsClient(c.CAPEM, nil, nil)
	if err := waitFor(ctx, kcm, func(ctx context.Context) error {
		return httpOK(ctx, caOnly, "https://"+loopback(kcmPort)+"/healthz")
	}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, scheduler, func(ctx context.Context) error {
		return httpOK(ctx, caOnly, "https://"+loopback(schedPort)+"/healthz")
	}); err != nil {
		return nil, err
	}
	opts.Logf("testenv/kubeenv: kube-controller-manager and kube-scheduler healthy (%s)", since(started))

	// The agent-sandbox controller, as its deployment runs it but outside
	// the cluster: it creates each Sandbox's Pod and headless Service and
	// reports the Sandbox's conditions. Metrics off; its health endpoint
	// on loopback says when it runs.
	sandboxCtl, err := c.start(BinAgentSandbox, bins[BinAgentSandbox], []string{
		"--kubeconfig=" + f.sandboxKubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=" + loopback(sandboxPort),
	}, nil, logDir)
	if err != nil {
		return nil, err
	}
	if err = waitFor(ctx, sandboxCtl, func(ctx context.Context) error {
		return httpOK(ctx, plain, "http://"+loopback(sandboxPort)+"/readyz")
	}); err != nil {
		return nil, err
	}
	opts.Logf("testenv/kubeenv: agent-sandbox-controller ready (%s)", since(started))
	// The default StorageClass and its provisioner, for as long as the
	// cluster runs.
	pctx, stopProvisioner := context.WithCancel(context.Background())
	c.stopProvisioner = stopProvisioner
	if err := c.startProvisioner(pctx); err != nil {
		return nil, kcm.startFailed(err)
	}

	// kwok
	kwok, err := c.start(BinKwok, bins[BinKwok], []string{
		"--kubeconfig=" + f.kwokKubeconfig,
		"--config=" + f.stages,
		// kwok plays only its own Nodes; the real node has a kubelet.
		"--manage-nodes-with-label-selector=" + NodeLabel + "=" + PlacementKwok,
		"--server-address=" + loopback(kwokPort),
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(kwokPort),
		"--tls-cert-file=" + f.kwokServingCert,
		"--tls-private-key-file=" + f.kwokServingKey,
		"--enable-crds=Logs,ClusterLogs",
		"--cidr=10.244.0.0/16",
	}, []string{"HOME=" + filepath.Join(dir, "kwok")}, logDir) // no ~/.kwok/kwok.yaml
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, kwok, func(ctx context.Context) error {
		return httpOK(ctx, caOnly, "https://"+loopback(kwokPort)+"/healthz")
	}); err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		if err := c.createNode(ctx, name); err != nil {
			return nil, kwok.startFailed(err)
		}
		c.Nodes = append(c.Nodes, name)
	}
	if err := waitFor(ctx, kwok, c.nodesSchedulable); err != nil {
		return nil, err
	}
	opts.Logf("testenv/kubeenv: %d kwok node(s) Ready (%s)", opts.Nodes, since(started))

	// The controller manager creates each namespace's default ServiceAccount;
	// Pods are refused until it exists.
	if err := waitFor(ctx, kcm, func(ctx context.Context) error {
		_, err := c.Clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if opts.RealNode {
		if c.Node, err = c.startRealNode(ctx, f); err != nil {
			return nil, err
		}
	}
	opts.Logf("testenv/kubeenv: cluster ready in %s (data in %s)", since(started), dir)
	return c, nil
}

// StartRealNode starts the cluster's real node unless it runs already (it
// takes about a minute: containerd imports the runtime images), and
// returns it. A failed start is remembered: the next call returns the same
// error.
func (c *Cluster) StartRealNode(ctx context.Context) (*RealNode, error) {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	if c.Node != nil || c.nodeErr != nil {
		return c.Node, c.nodeErr
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c.Node, c.nodeErr = c.startRealNode(ctx, c.files)
	return c.Node, c.nodeErr
}

// Stop stops kwok, the scheduler, the controller manager, the API server and
// etcd, in that order, each by PID (SIGTERM, then SIGKILL after a grace
// period), waits for each to exit, and removes the data directory. It is
// safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		start := time.Now()
		if c.Node != nil {
			c.Node.stop()
		}
		if c.stopProvisioner != nil {
			c.stopProvisioner()
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			p := c.procs[i]
			grace := 5 * time.Second
			p.stop(grace)
		}
		if c.opts.Logf != nil {
			c.opts.Logf("testenv/kubeenv: stopped %d servers in %s", len(c.procs), since(start))
		}
		if !c.opts.KeepDir && c.Dir != "" {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

// RestartAPIServer stops the API server (SIGTERM, as a rolling upgrade
// does), keeps it down for down, starts it again on the same port with the
// same flags and data, and returns once it is ready. Every client sees
// refused connections meanwhile and its watches end: a fault a long apply
// must survive.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.name == BinAPIServer })
	if i < 0 {
		return errors.New("testenv/kubeenv: no API server to restart")
	}
	c.procs[i].stop(10 * time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	p, err := startProcess(BinAPIServer, c.apiserver.bin, c.apiserver.args, nil, c.apiserver.logDir)
	if err != nil {
		return &startError{Process: BinAPIServer, Err: err}
	}
	c.procs[i] = p
	tlsClient := httpsClient(c.CAPEM, c.ClientCertPEM, c.ClientKeyPEM)
	return waitFor(ctx, p, func(ctx context.Context) error { return httpOK(ctx, tlsClient, c.Host+"/readyz") })
}

// CompactEtcd compacts etcd's history up to its current revision, as the
// API server's own compaction does every five minutes, so that a watch
// resumed from an earlier resourceVersion gets 410 Gone. It returns the
// revision compacted to. It speaks etcd's JSON gateway on loopback.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	post := func(path string, body any, out any) error {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, raw)
		}
		return json.Unmarshal(raw, out)
	}
	var status struct {
		Header struct {
			Revision json.Number `json:"revision"`
		} `json:"header"`
	}
	if err := post("/v3/maintenance/status", map[string]any{}, &status); err != nil {
		return 0, fmt.Errorf("testenv/kubeenv: etcd status: %w", err)
	}
	rev, err := status.Header.Revision.Int64()
	if err != nil {
		return 0, fmt.Errorf("testenv/kubeenv: etcd revision %q: %w", status.Header.Revision, err)
	}
	var ignored map[string]any
	if err := post("/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, &ignored); err != nil {
		return 0, fmt.Errorf("testenv/kubeenv: etcd compaction: %w", err)
	}
	return rev, nil
}

// PIDs returns the process id of each server by name.
func (c *Cluster) PIDs() map[string]int {
	pids := map[string]int{}
	for _, p := range c.procs {
		pids[p.name] = p.PID()
	}
	return pids
}

// LogTail returns the last n lines of a server's log (name as in
// BinAPIServer, …), for failure messages.
func (c *Cluster) LogTail(name string, n int) string {
	return tailFile(filepath.Join(c.Dir, "logs", name+".log"), n)
}

// Kubeconfig returns the admin kubeconfig file's content.
func (c *Cluster) Kubeconfig() ([]byte, error) {
	return os.ReadFile(c.KubeconfigPath)
}

func (c *Cluster) start(name, bin string, args, env []string, logDir string) (*process, error) {
	p, err := startProcess(name, bin, args, env, logDir)
	if err != nil {
		return nil, &startError{Process: name, Err: err}
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// files are the paths of what writeFiles wrote.
type files struct {
	caCert, caKey                             string
	apiserverCert, apiserverKey               string
	kubeletClientCert, kubeletClientKey       string
	kcmServingCert, kcmServingKey             string
	schedulerServingCert, schedulerServingKey string
	kwokServingCert, kwokServingKey           string
	saPrivate, saPublic                       string
	tokens                                    string
	kcmKubeconfig, schedulerKubeconfig        string
	kwokKubeconfig, sandboxKubeconfig         string
	stages                                    string
}

// writeFiles creates a new CA and every certificate, key, kubeconfig and
// configuration file of this start.
func (c *Cluster) writeFiles() (*files, error) {
	pki := filepath.Join(c.Dir, "pki")
	f := &files{}
	ca, err := newCA("occ-testenv-ca")
	if err != nil {
		return nil, err
	}
	c.ca = ca
	c.CAPEM = ca.CertPEM
	if f.caCert, f.caKey, err = ca.write(pki, "ca"); err != nil {
		return nil, err
	}
	loopbackIPs := []net.IP{net.ParseIP("127.0.0.1")}
	serving := func(name, cn string, ips []net.IP, dns []string) (string, string, error) {
		kp, err := ca.issue(certRequest{CommonName: cn, IPs: ips, DNSNames: dns, Server: true})
		if err != nil {
			return "", "", err
		}
		return kp.write(pki, name)
	}
	client := func(cn string, groups ...string) (*keyPair, error) {
		return ca.issue(certRequest{CommonName: cn, Organization: groups, Client: true})
	}

	if f.apiserverCert, f.apiserverKey, err = serving("apiserver", "kube-apiserver",
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}); err != nil {
		return nil, err
	}
	if f.kcmServingCert, f.kcmServingKey, err = serving("kube-controller-manager-serving", "kube-controller-manager", loopbackIPs, []string{"localhost"}); err != nil {
		return nil, err
	}
	if f.schedulerServingCert, f.schedulerServingKey, err = serving("kube-scheduler-serving", "kube-scheduler", loopbackIPs, []string{"localhost"}); err != nil {
		return nil, err
	}
	// kwok serves the kubelet API (logs) with this certificate; the API
	// server verifies it (--kubelet-certificate-authority).
	if f.kwokServingCert, f.kwokServingKey, err = serving("kwok-serving", "kwok", loopbackIPs, []string{"localhost"}); err != nil {
		return nil, err
	}
	kubeletClient, err := client("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return nil, err
	}
	if f.kubeletClientCert, f.kubeletClientKey, err = kubeletClient.write(pki, "apiserver-kubelet-client"); err != nil {
		return nil, err
	}
	if f.saPrivate, f.saPublic, err = newServiceAccountKeys(pki); err != nil {
		return nil, err
	}

	admin, err := client("occ-testenv-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	c.ClientCertPEM, c.ClientKeyPEM = admin.CertPEM, admin.KeyPEM
	c.Token = randomToken()
	f.tokens = filepath.Join(pki, "tokens.csv")
	if err := os.WriteFile(f.tokens, []byte(c.Token+`,occ-testenv-admin-token,occ-testenv-admin-token,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}

	c.KubeconfigPath = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.Host, c.CAPEM, admin, "", metav1.NamespaceDefault); err != nil {
		return nil, err
	}
	for _, k := range []struct {
		path   *string
		name   string
		cn     string
		groups []string
	}{
		// With --use-service-account-credentials=false every controller runs
		// as the controller manager itself, so it needs every permission.
		{&f.kcmKubeconfig, "kube-controller-manager", "system:kube-controller-manager", []string{"system:masters"}},
		{&f.schedulerKubeconfig, "kube-scheduler", "system:kube-scheduler", nil},
		// kwok patches Nodes and Pods, reads its CRDs and manages Leases.
		{&f.kwokKubeconfig, "kwok", "kwok-controller", []string{"system:masters"}},
		// The agent-sandbox controller manages Pods, Services and PVCs
		// of Sandboxes in every namespace (its ClusterRole, in short).
		{&f.sandboxKubeconfig, "agent-sandbox-controller", "agent-sandbox-controller", []string{"system:masters"}},
	} {
		kp, err := client(k.cn, k.groups...)
		if err != nil {
			return nil, err
		}
		*k.path = filepath.Join(pki, k.name+".kubeconfig")
		if err := writeKubeconfig(*k.path, c.Host, c.CAPEM, kp, "", ""); err != nil {
			return nil, err
		}
	}

	stages, err := kwokFiles.ReadFile(stagesFile)
	if err != nil {
		return nil, err
	}
	f.stages = filepath.Join(c.Dir, "kwok", "stages.yaml")
	if err := os.WriteFile(f.stages, stages, 0o644); err != nil {
		return nil, err
	}
	return f, nil
}

// writeKubeconfig writes a kubeconfig for host with a client certificate
// (kp) or a bearer token, with namespace as the default namespace.
func writeKubeconfig(path, host string, caPEM []byte, kp *keyPair, token, namespace string) error {
	auth := &clientcmdapi.AuthInfo{Token: token}
	if kp != nil {
		auth.ClientCertificateData = kp.CertPEM
		auth.ClientKeyData = kp.KeyPEM
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["occ-testenv"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["occ-testenv"] = auth
	cfg.Contexts["occ-testenv"] = &clientcmdapi.Context{Cluster: "occ-testenv", AuthInfo: "occ-testenv", Namespace: namespace}
	cfg.CurrentContext = "occ-testenv"
	return clientcmd.WriteToFile(*cfg, path)
}

func (c *Cluster) connect() error {
	c.Config = &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.CAPEM,
			CertData: c.ClientCertPEM,
			KeyData:  c.ClientKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	var err error
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	c.Dynamic, err = dynamic.NewForConfig(c.Config)
	return err
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installKwokCRDs creates the Logs and ClusterLogs CRDs and waits until the
// API server serves them (kwok lists them at start).
func (c *Cluster) installKwokCRDs(ctx context.Context) error {
	for _, name := range kwokCRDFiles {
		data, err := kwokFiles.ReadFile(name)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&obj.Object); err != nil {
			return fmt.Errorf("decode %s: %w", name, err)
		}
		if _, err := c.Dynamic.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
	}
	for {
		resources, err := c.Clientset.Discovery().ServerResourcesForGroupVersion(logsGVR.GroupVersion().String())
		if err == nil && hasResources(resources, "logs", "clusterlogs") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kwok CRDs not served: %v (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func hasResources(list *metav1.APIResourceList, names ...string) bool {
	have := map[string]bool{}
	for _, r := range list.APIResources {
		have[r.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

func (c *Cluster) createNode(ctx context.Context, name string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				NodeLabel:                PlacementKwok,
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
	}
	_, err := c.Clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	return err
}

// nodesSchedulable: every Node is Ready and no longer carries the not-ready
// taint that the API server adds at creation (the controller manager
// removes it once the Node is Ready).
func (c *Cluster) nodesSchedulable(ctx context.Context) error {
	for _, name := range c.Nodes {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready", name)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
				return fmt.Errorf("node %s still has taint %s", name, taint.ToString())
			}
		}
	}
	return nil
}

// waitFor polls check until it succeeds; it fails early, with the log tail
// of p, when p exits or ctx ends.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	var last error
	for {
		if p.exited() {
			return p.startFailed(errors.New("exited during start"))
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.startFailed(fmt.Errorf("not ready: %v (last check: %v)", ctx.Err(), last))
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func httpsClient(caPEM, certPEM, keyPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		if cert, err := tls.X509KeyPair(certPEM, keyPEM); err == nil {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

var deleteNow = metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
