package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
)

// rule PR3: the dedicated Codex harness's turns go to the endpoint its
// startup probe passed. The probe defines the compatible endpoint on its
// own command line; the app server reads only the host-owned config.toml.
// Found on the real node: that file named no provider, so the app server
// asked OpenAI. The real codex, logged in and given only the rendered
// config.toml (no -c overrides), sends its model call to the probed
// endpoint with the agent's key.
func TestPR3_CodexRunsOnTheProbedEndpoint(t *testing.T) {
	bin := needRuntime(t, "npm/codex/node_modules/.bin/codex")
	codexSlots <- struct{}{}
	defer func() { <-codexSlots }()
	srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
	defer srv.Close()

	doc, err := occconfig.Parse(`{agents: {defaults: {model: "codex/gpt-5-codex"}},
  models: {providers: {codex: {baseUrl: "` + srv.URL + `/v1", models: [{id: "gpt-5-codex", name: "m"}]}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rev, errs := admission.Admit(admission.Input{
		Agent:         admission.Agent{Name: "coder", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated},
		Configuration: admission.Configuration{ID: "c", Name: "c", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "occ-acme", CPUMillis: 1000, MemoryLimit: "2Gi", LoggingOwnership: admission.LoggingPlatform}},
		Source:        admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "prod", SecretRef: &admission.SecretRef{Name: "llm", Key: "k"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs, err := render.Kubernetes(rev, 1, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	config := ""
	for _, cm := range objs.ConfigMaps {
		if *cm.Name == render.HarnessConfigMapName("coder", 1) {
			config = cm.Data["config.toml"]
		}
	}
	if !strings.Contains(config, srv.URL) {
		t.Fatalf("the harness's config.toml names no provider at the probed endpoint:\n%s", config)
	}

	dir := t.TempDir()
	home := filepath.Join(dir, "codex-home")
	writeFile(t, home, "config.toml", config)
	env := []string{"PATH=" + filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "CODEX_HOME=" + home,
		"TMPDIR=" + t.TempDir(), "RUST_LOG=error"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	login := exec.CommandContext(ctx, bin, "login", "--with-api-key")
	login.Env, login.Stdin = env, strings.NewReader(sentinel)
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("codex login: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, bin, "exec", "--json", "--ephemeral", "--skip-git-repo-check", "--sandbox", "read-only", "--cd", dir, "say ok")
	run.Env, run.Stdin = env, strings.NewReader("")
	out, err := run.CombinedOutput()
	reqs := srv.ProbeRequests()
	if len(reqs) == 0 {
		t.Fatalf("codex sent no model call to the probed endpoint (exit %v):\n%s", err, strings.ReplaceAll(string(out), sentinel, "<KEY>"))
	}
	for _, r := range reqs {
		if r.Path != "/v1/responses" || r.Credential != sentinel {
			t.Errorf("model call %s with the agent's key %v; want POST /v1/responses with it", r.Path, r.Credential == sentinel)
		}
	}
	if _, statErr := os.Stat(filepath.Join(home, "auth.json")); statErr != nil {
		t.Errorf("no login state: %v", statErr)
	}
}
