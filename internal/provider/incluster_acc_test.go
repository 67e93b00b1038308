package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/kubeenv"
)

// envInCluster names, in the re-executed test binary, the directory the
// parent test left the Pod's files in (token, ca.crt, namespace, and the
// token of a second ServiceAccount that may do nothing).
const envInCluster = "OCC_TEST_INCLUSTER_DIR"

// serviceAccountDir is where a Pod's ServiceAccount is mounted, and where
// client-go's rest.InClusterConfig reads it from (fixed paths).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// TestAccProvider_InClusterConfiguration: run as in a Pod, the provider
// reaches the cluster through in-cluster configuration and nothing else.
//
// The test re-executes its own binary in a private mount namespace (root,
// CLONE_NEWNS), where a tmpfs holds a Pod's ServiceAccount files at the
// fixed path client-go reads: a TokenRequest token of a ServiceAccount
// whose only grant is the documented namespaced Role (kube.RequiredRules),
// the cluster CA and the namespace. The child has no kubeconfig (KUBECONFIG,
// KUBE_* and every KUBERNETES_* variable removed, HOME an empty directory)
// and a provider block without kubernetes settings; it has
// KUBERNETES_SERVICE_HOST=127.0.0.1 and KUBERNETES_SERVICE_PORT the API
// server's port. Then:
//
//  1. a compute on the existing namespace and an embedded Agent: the Agent
//     activates (revision 1, its Service selects it);
//  2. KUBE_TOKEN set to the token of a ServiceAccount without any Role:
//     the refresh is Forbidden for exactly that ServiceAccount (a token
//     setting replaces the Pod's);
//  3. KUBE_TOKEN unset, the mounted token replaced by that other one: the
//     same, so the provider's identity is the mounted token's;
//  4. the token removed: the plan fails naming in-cluster configuration and
//     the token's path;
//  5. the token back: an empty plan, then destroy removes the Agent.
//
// Under CI=true the test fails when it cannot create the mount namespace;
// elsewhere it is skipped with the reason.
func TestAccProvider_InClusterConfiguration(t *testing.T) {
	if dir := os.Getenv(envInCluster); dir != "" {
		inClusterChild(t, dir)
		return
	}
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: TF_ACC=1 (make testacc)")
	}
	testAccPreCheck(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := unshareProbe(self); err != nil {
		msg := fmt.Sprintf("cannot create a private mount namespace to mount a ServiceAccount at %s "+
			"(the test needs root, CAP_SYS_ADMIN): %v", serviceAccountDir, err)
		if kubeenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip("skipping: " + msg)
	}

	c := kubeenv.Shared(t)
	u, err := url.Parse(c.Host)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("the test cluster's API server %s is not on loopback", c.Host)
	}
	env := kubeEnv{cluster: c, ns: c.TestNamespace(t)}
	env.secret(t, "llm", "api-key", testSentinel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, err := c.NamespacedIdentity(ctx, env.ns, kube.RequiredRules)
	if err != nil {
		t.Fatalf("ServiceAccount with the documented Role: %v", err)
	}
	nobody, err := c.NamespacedIdentity(ctx, env.ns, []rbacv1.PolicyRule{})
	if err != nil {
		t.Fatalf("ServiceAccount without permissions: %v", err)
	}
	// The Role is the ServiceAccount's only grant: namespaced, nothing at
	// cluster scope, nothing in another namespace.
	for _, ra := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: env.ns, Verb: "create", Group: "apps", Resource: "deployments"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces", Name: env.ns}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: env.ns, Verb: "list", Resource: "secrets"}, false},
	} {
		sar, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: sa.Username, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + env.ns, "system:authenticated"},
				ResourceAttributes: &ra.attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != ra.want {
			t.Fatalf("%s may %s %s in %q: %v, want %v", sa.Username, ra.attrs.Verb, ra.attrs.Resource, ra.attrs.Namespace, sar.Status.Allowed, ra.want)
		}
	}

	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"token": []byte(sa.Token), "ca.crt": c.CAPEM, "namespace": []byte(env.ns),
		"serviceaccount": []byte(sa.Username), "nobody-token": []byte(nobody.Token), "nobody": []byte(nobody.Username),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mntns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	childEnv := []string{envInCluster + "=" + dir, "OCC_TEST_PARENT_MNTNS=" + mntns, "HOME=" + home,
		"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port()}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "HOME" || k == envInCluster || strings.HasPrefix(k, "KUBE_") || strings.HasPrefix(k, "KUBERNETES_") {
			continue
		}
		childEnv = append(childEnv, kv)
	}
	// -test.v always: the parent reads the child's verdict from its output.
	args := []string{"-test.run=^" + t.Name() + "$", "-test.count=1", "-test.timeout=10m", "-test.v"}
	runCtx, stop := context.WithTimeout(context.Background(), 11*time.Minute)
	defer stop()
	cmd := exec.CommandContext(runCtx, self, args...)
	cmd.Env = childEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("in-cluster run (mount namespace, %s as %s) took %s:\n%s", serviceAccountDir, sa.Username, time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("the in-cluster run failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the in-cluster run did not pass %s (was it skipped?)", t.Name())
	}
}

// unshareProbe runs the test binary, running no test, in a new mount
// namespace: the error says why one cannot be created here.
func unshareProbe(self string) error {
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), envInCluster+"=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if out, err := cmd.CombinedOutput(); err != nil {
		if out := strings.TrimSpace(string(out)); out != "" {
			return fmt.Errorf("%w: %s", err, out)
		}
		return err
	}
	return nil
}

// inClusterChild is the test inside the mount namespace.
func inClusterChild(t *testing.T, dir string) {
	if os.Getenv("TF_ACC") == "" {
		t.Fatal("the in-cluster run needs TF_ACC=1")
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ns, username, nobody := read("namespace"), read("serviceaccount"), read("nobody")
	token, nobodyToken, ca := read("token"), read("nobody-token"), read("ca.crt")

	// A private mount namespace, so that nothing below is seen outside.
	if self, err := os.Readlink("/proc/self/ns/mnt"); err != nil || self == os.Getenv("OCC_TEST_PARENT_MNTNS") {
		t.Fatalf("not in a mount namespace of its own (%s, %v)", self, err)
	}
	// No other way to the cluster than the Pod's: no kubeconfig anywhere.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "KUBECONFIG" || strings.HasPrefix(k, "KUBE_") {
			t.Fatalf("%s is set", k)
		}
	}
	if home, _ := os.UserHomeDir(); fileExistsT(filepath.Join(home, ".kube", "config")) {
		t.Fatalf("%s/.kube/config exists", home)
	}

	// A tmpfs at the ServiceAccount directory, or, when that does not
	// exist on this host, at its deepest existing parent (which it hides
	// in this mount namespace only), so that the host is left untouched.
	at := serviceAccountDir
	for !fileExistsT(at) {
		at = filepath.Dir(at)
	}
	at, err := filepath.EvalSymlinks(at)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", at, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=1m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", at, err)
	}
	t.Logf("tmpfs on %s (this mount namespace only); ServiceAccount %s mounted at %s", at, username, serviceAccountDir)
	if err := os.MkdirAll(serviceAccountDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSA := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(serviceAccountDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSA("ca.crt", ca)
	writeSA("namespace", ns)
	writeSA("token", token)

	// What the Pod's credentials are, seen by the API server.
	cfg, err := rest.InClusterConfig()
	if err != nil {
		t.Fatalf("in-cluster configuration: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ssr, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review with the mounted token: %v", err)
	}
	if got := ssr.Status.UserInfo.Username; got != username {
		t.Fatalf("the mounted token is %s, want %s", got, username)
	}

	env := kubeEnv{ns: ns, provider: "\nprovider \"occ\" {}\n"}
	config := kubeAgentConfig(env, "", anthropicDoc, "")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				},
				Check: func(*terraform.State) error {
					svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "support", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if svc.Spec.Selector[render.LabelRevision] != "1" {
						return fmt.Errorf("service selects revision %q, want 1", svc.Spec.Selector[render.LabelRevision])
					}
					return nil
				},
			},
			{
				// A token setting (here KUBE_TOKEN) replaces the mounted
				// token; the Pod's API server and CA stay.
				PreConfig: func() {
					os.Setenv("KUBE_TOKEN", nobodyToken)
					t.Cleanup(func() { os.Unsetenv("KUBE_TOKEN") })
				},
				Config:      config,
				ExpectError: mustRegexp(`UNAVAILABLE: cannot refresh[\s\S]*is forbidden: User "` + regexpQuote(nobody) + `" cannot get`),
			},
			{
				// The provider presents whatever token is mounted.
				PreConfig: func() {
					os.Unsetenv("KUBE_TOKEN")
					writeSA("token", nobodyToken)
				},
				Config:      config,
				ExpectError: mustRegexp(`UNAVAILABLE: cannot refresh[\s\S]*is forbidden: User "` + regexpQuote(nobody) + `" cannot get`),
			},
			{
				PreConfig: func() {
					if err := os.Remove(filepath.Join(serviceAccountDir, "token")); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ExpectError: mustRegexp(`in-cluster Kubernetes configuration \(KUBERNETES_SERVICE_HOST is set[\s\S]*` +
					regexpQuote(serviceAccountDir+"/token: no such file") + `[\s\S]*mount the Pod's ServiceAccount token`),
			},
			{
				PreConfig: func() { writeSA("token", token) },
				Config:    config,
				PlanOnly:  true,
			},
		},
		CheckDestroy: func(*terraform.State) error {
			deps, err := cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelAgent + "=support"})
			if err != nil {
				return err
			}
			if len(deps.Items) > 0 {
				return fmt.Errorf("%d deployments left after destroy", len(deps.Items))
			}
			return nil
		},
	})
}

func fileExistsT(p string) bool {
	_, err := os.Stat(p)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// regexpQuote quotes s for mustRegexp, which reads a space as any white
// space (Terraform wraps long diagnostics).
func regexpQuote(s string) string {
	var b strings.Builder
	for _, f := range strings.Fields(s) {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(regexp.QuoteMeta(f))
	}
	return b.String()
}
