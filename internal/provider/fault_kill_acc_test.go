package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/kube"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// The provider-kill fault test runs the real Terraform CLI against this
// test binary as its plugin: TestMain serves the provider when
// envChild is set (Terraform passes its environment on to plugins), and
// envKillAfter makes that process SIGKILL itself right after a chosen
// write reached the API server, as a crash or an OOM kill would.
const (
	envChild     = "OCC_TEST_PROVIDER_CHILD"
	envKillAfter = "OCC_TEST_KILL_AFTER" // configmap, deployment or service
	envKillMark  = "OCC_TEST_KILL_MARK"  // a file written just before the kill
)

// serveChild serves the provider as a plugin process.
func serveChild() int {
	if point := os.Getenv(envKillAfter); point == "ssh-activate" {
		h := killAtSSHActivation(os.Getenv(envKillMark))
		sshBeforeWrite.Store(&h)
	} else if point != "" {
		wrapKubeTransport = func(rt http.RoundTripper) http.RoundTripper {
			return killAfter{next: rt, point: point, mark: os.Getenv(envKillMark)}
		}
	}
	if err := providerserver.Serve(context.Background(), New("test", "fault"), providerserver.ServeOpts{Address: Address}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// killAfter kills the process once a write of its point succeeded: the
// first write of a ConfigMap, the first server-side apply of a
// Deployment, or the Service write that activates a revision.
type killAfter struct {
	next        http.RoundTripper
	point, mark string
}

func (k killAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.GetBody != nil {
		if r, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(r)
		}
	}
	resp, err := k.next.RoundTrip(req)
	if err != nil || resp.StatusCode >= 300 || !k.matches(req, body) {
		return resp, err
	}
	if k.mark != "" {
		_ = os.WriteFile(k.mark, []byte(req.Method+" "+req.URL.Path+"\n"), 0o600)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal ends the process
}

func (k killAfter) matches(req *http.Request, body []byte) bool {
	p := req.URL.Path
	switch k.point {
	case "configmap":
		// A revision's ConfigMap is created (its name is free) or, over
		// an earlier attempt's, applied.
		return req.Method == http.MethodPost && strings.HasSuffix(p, "/configmaps") ||
			req.Method == http.MethodPatch && strings.Contains(p, "/configmaps/")
	case "deployment":
		return req.Method == http.MethodPatch && strings.Contains(p, "/deployments/")
	case "service":
		// The activation: a create, guarded patch or update of the
		// Agent's Service that claims a revision.
		return strings.Contains(p, "/services") && req.Method != http.MethodGet &&
			bytes.Contains(body, []byte(strings.TrimPrefix(kube.AnnotationActivatedRevision, "occ-platform.io/")))
	}
	return false
}

// tfCLI runs the Terraform CLI in one working directory, with this test
// binary as the occ provider (dev_overrides).
type tfCLI struct {
	t         *testing.T
	bin, dir  string
	cliConfig string
}

func newTFCLI(t *testing.T) tfCLI {
	t.Helper()
	bin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if bin == "" {
		t.Fatal("the provider-kill fault test runs the Terraform CLI: set TF_ACC_TERRAFORM_PATH (make testacc does)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	plugins, dir := t.TempDir(), t.TempDir()
	if err := os.Symlink(self, filepath.Join(plugins, "terraform-provider-occ")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "terraformrc")
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    %q = %q\n  }\n  direct {}\n}\n", "occ-platform/occ", plugins)
	if err := os.WriteFile(cfg, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	return tfCLI{t: t, bin: bin, dir: dir, cliConfig: cfg}
}

func (c tfCLI) write(config string) {
	c.t.Helper()
	head := "terraform {\n  required_providers {\n    occ = { source = \"occ-platform/occ\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(c.dir, "main.tf"), []byte(head+config), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// run runs terraform with args; env is added to the environment. It
// returns the combined output and the exit code.
func (c tfCLI) run(env []string, args ...string) (string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), envChild+"=1", "TF_CLI_CONFIG_FILE="+c.cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_LOG=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	c.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	return "", -1
}

func (c tfCLI) apply(env ...string) (string, int) {
	return c.run(env, "apply", "-auto-approve", "-input=false", "-no-color")
}

// Fault 2: the provider process is killed (SIGKILL) right after the
// ConfigMap, the Deployment or the Service write of an update or a
// create; then apply runs again with the same and with a changed
// configuration. Pass: it converges on the first try; afterwards no
// object labelled with the agent carries another revision than the active
// one, and a second plan is empty. A create killed after its activation
// and retried with other content cannot be told from a second
// configuration's agent (fault 5): it is refused naming the import id,
// and the import converges. rules AC3, AC4
func TestAccFault_ProviderKilledMidApply(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: TF_ACC=1 (make testacc)")
	}
	docs := []string{
		`{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5", maxConcurrent = 3 } } }`,
		`{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5", maxConcurrent = 4 } } }`,
		`{ agents = { defaults = { model = "anthropic/claude-sonnet-4-5", maxConcurrent = 5 } } }`,
	}
	for _, tc := range []struct {
		create  bool
		point   string
		changed bool
	}{
		{false, "configmap", false}, {false, "configmap", true},
		{false, "deployment", false}, {false, "deployment", true},
		{false, "service", false}, {false, "service", true},
		{true, "configmap", true}, {true, "deployment", false}, {true, "service", false}, {true, "service", true},
	} {
		op := map[bool]string{true: "create", false: "update"}[tc.create]
		retry := map[bool]string{true: "changed", false: "same"}[tc.changed]
		t.Run(op+"/"+tc.point+"/"+retry, func(t *testing.T) {
			env := newKubeEnv(t)
			env.secret(t, "llm", "api-key", testSentinel)
			cli := newTFCLI(t)
			config := func(doc string) string { return faultAgentConfig(env, "", doc, "support") }
			t.Cleanup(func() {
				if out, code := cli.run(nil, "destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
					t.Errorf("destroy: exit %d\n%s", code, out)
				}
			})
			next := 0 // the document of the killed apply
			if !tc.create {
				cli.write(config(docs[0]))
				if out, code := cli.apply(); code != 0 {
					t.Fatalf("revision 1: exit %d\n%s", code, out)
				}
				next = 1
			}
			cli.write(config(docs[next]))
			mark := filepath.Join(t.TempDir(), "killed")
			out, code := cli.apply(envKillAfter+"="+tc.point, envKillMark+"="+mark)
			if _, err := os.Stat(mark); err != nil {
				t.Fatalf("the provider was never killed after the %s write (exit %d):\n%s", tc.point, code, out)
			}
			if code == 0 {
				t.Fatalf("the killed apply succeeded:\n%s", out)
			}
			retry := next
			if tc.changed {
				retry = 2
			}
			cli.write(config(docs[retry]))
			out, code = cli.apply()
			if tc.create && tc.point == "service" && tc.changed {
				// The killed create activated its revision; another
				// content's create is refused before any write, naming
				// the import id, and the agent keeps running.
				if code == 0 || !strings.Contains(out, "RESOURCE_CONFLICT") || !strings.Contains(out, "terraform import") {
					t.Fatalf("a create over the killed create's activated agent: exit %d, want RESOURCE_CONFLICT naming the import:\n%s", code, out)
				}
				if got := activeRevision(t, env); got != 1 {
					t.Fatalf("the refused create moved the agent to revision %d", got)
				}
				if out, code := cli.run(nil, "import", "-input=false", "-no-color", "occ_agent.a", env.ns+"/support"); code != 0 {
					t.Fatalf("import: exit %d\n%s", code, out)
				}
				out, code = cli.apply()
			}
			if code != 0 {
				t.Fatalf("the apply after the kill did not converge on the first try: exit %d\n%s", code, out)
			}
			if want := fmt.Sprintf(`"maxConcurrent":%d`, 3+retry); !strings.Contains(configMapOf(t, env), want) {
				t.Fatalf("the agent does not run the document applied last (%s): %s", want, configMapOf(t, env))
			}
			onlyActiveRevision(t, env)
			if out, code := cli.run(nil, "plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
				t.Fatalf("second plan: exit %d, want 0 (empty)\n%s", code, out)
			}
		})
	}
}

// activeRevision is the revision the agent "support"'s Service serves.
func activeRevision(t *testing.T, env kubeEnv) int64 {
	t.Helper()
	svc, err := env.cluster.Clientset.CoreV1().Services(env.ns).Get(context.Background(), "support", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseInt(svc.Annotations[kube.AnnotationActivatedRevision], 10, 64)
	return n
}

// configMapOf is the gateway configuration of the active revision.
func configMapOf(t *testing.T, env kubeEnv) string {
	t.Helper()
	name := render.ConfigMapName("support", activeRevision(t, env))
	cm, err := env.cluster.Clientset.CoreV1().ConfigMaps(env.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[render.ConfigFile]
}

// onlyActiveRevision fails unless every object labelled with the agent
// "support" and a revision carries the active one (Pods and ReplicaSets,
// which controllers remove, are given until a deadline).
func onlyActiveRevision(t *testing.T, env kubeEnv) {
	t.Helper()
	ctx := context.Background()
	cs := env.cluster.Clientset
	active := strconv.FormatInt(activeRevision(t, env), 10)
	sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=support," + render.LabelRevision + "!=" + active + "," + render.LabelRevision}
	others := func() []string {
		var left []string
		add := func(kind, name string, labels map[string]string) {
			left = append(left, fmt.Sprintf("%s %s@r%s", kind, name, labels[render.LabelRevision]))
		}
		for _, o := range must(cs.CoreV1().ConfigMaps(env.ns).List(ctx, sel)).Items {
			add("ConfigMap", o.Name, o.Labels)
		}
		for _, o := range must(cs.CoreV1().Secrets(env.ns).List(ctx, sel)).Items {
			add("Secret", o.Name, o.Labels)
		}
		for _, o := range must(cs.CoreV1().Services(env.ns).List(ctx, sel)).Items {
			add("Service", o.Name, o.Labels)
		}
		for _, o := range must(cs.AppsV1().Deployments(env.ns).List(ctx, sel)).Items {
			add("Deployment", o.Name, o.Labels)
		}
		for _, o := range must(cs.AppsV1().ReplicaSets(env.ns).List(ctx, sel)).Items {
			add("ReplicaSet", o.Name, o.Labels)
		}
		for _, o := range must(cs.CoreV1().Pods(env.ns).List(ctx, sel)).Items {
			add("Pod", o.Name, o.Labels)
		}
		return left
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := others()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects of other revisions than the active %s remain: %v", active, left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
