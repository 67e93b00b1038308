package release

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The release workflow cannot run here (it pushes to ghcr.io and signs with
// GitHub's identity); what can be checked offline is (issue 25): it parses,
// every step's script is valid bash, and its jobs keep the order that
// publishes the images and the provider together or not at all.

type workflow struct {
	Jobs map[string]struct {
		Needs     any               `json:"needs"`
		Container string            `json:"container"`
		Perms     map[string]string `json:"permissions"`
		Outputs   map[string]string `json:"outputs"`
		Steps     []struct {
			Name string            `json:"name"`
			ID   string            `json:"id"`
			Uses string            `json:"uses"`
			Run  string            `json:"run"`
			With map[string]any    `json:"with"`
			Env  map[string]string `json:"env"`
		} `json:"steps"`
	} `json:"jobs"`
}

func readWorkflow(t *testing.T) workflow {
	t.Helper()
	b, err := os.ReadFile("../../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	return w
}

func needs(v any) []string {
	switch n := v.(type) {
	case string:
		return []string{n}
	case []any:
		var out []string
		for _, s := range n {
			out = append(out, s.(string))
		}
		return out
	}
	return nil
}

var expr = regexp.MustCompile(`\$\{\{[^}]*\}\}`)

func TestReleaseWorkflow_StepsParse(t *testing.T) {
	w := readWorkflow(t)
	if len(w.Jobs) == 0 {
		t.Fatal("release.yml has no jobs")
	}
	for name, j := range w.Jobs {
		for i, s := range j.Steps {
			if s.Run == "" {
				continue
			}
			script := expr.ReplaceAllString(s.Run, "EXPR")
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("job %s step %d (%s): bash -n: %v\n%s", name, i, s.Name, err, out)
			}
		}
	}
}

// The images are built for both platforms from the recipe, pushed as
// indexes, checked against the recipe's digests, signed and attested; the
// provider is stamped with those digests; the release is published only
// after both.
func TestReleaseWorkflow_PublishesImagesAndProviderTogether(t *testing.T) {
	w := readWorkflow(t)
	images, provider, publish := w.Jobs["images"], w.Jobs["provider"], w.Jobs["publish"]
	if images.Steps == nil || provider.Steps == nil || publish.Steps == nil {
		t.Fatalf("release.yml jobs %v; want images, provider and publish", slices.Sorted(maps.Keys(w.Jobs)))
	}
	if got := needs(provider.Needs); !slices.Equal(got, []string{"images"}) {
		t.Errorf("provider needs %v; want images", got)
	}
	if got := needs(publish.Needs); !slices.Contains(got, "images") || !slices.Contains(got, "provider") {
		t.Errorf("publish needs %v; want images and provider", got)
	}
	all := func(j string) string {
		var b strings.Builder
		for _, s := range w.Jobs[j].Steps {
			b.WriteString(s.Uses + "\n" + s.Run + "\n")
		}
		return b.String()
	}
	for _, want := range []string{
		"testenv/images.sh build --arch amd64 --arch arm64 openclaw codex",
		"testenv/images.sh index",
		"skopeo copy --all --preserve-digests",
		"cosign sign --yes",
		"cosign attest --yes --type spdxjson",
		"actions/attest-build-provenance",
		`if [ "$pushed" != "$digest" ]`,
	} {
		if !strings.Contains(all("images"), want) {
			t.Errorf("the images job does not run %q", want)
		}
	}
	if images.Perms["id-token"] != "write" || images.Perms["packages"] != "write" || images.Perms["attestations"] != "write" {
		t.Errorf("images job permissions %v; keyless signing and pushing need id-token, packages and attestations: write", images.Perms)
	}
	for out, name := range map[string]string{"openclaw": "OCC_OPENCLAW_IMAGE_DIGEST", "codex": "OCC_CODEX_IMAGE_DIGEST"} {
		if images.Outputs[out] == "" {
			t.Errorf("the images job has no output %s", out)
		}
		found := false
		for _, s := range provider.Steps {
			if strings.Contains(s.Env[name], "needs.images.outputs."+out) && strings.Contains(s.Run, "goreleaser\" release") {
				found = true
			}
		}
		if !found {
			t.Errorf("goreleaser is not stamped with %s from the images job", name)
		}
	}
	if !strings.Contains(all("publish"), "gh release edit") || !strings.Contains(all("publish"), "--draft=false") {
		t.Error("the publish job does not publish the draft release")
	}
	g, err := os.ReadFile("../../.goreleaser.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^  draft: true$`).Match(g) {
		t.Error(".goreleaser.yml does not make a draft release; the publish job would not be the last step")
	}
}

// The module and the release tool's module name one Go version: the
// workflows' setup-go reads go.mod, and goreleaser is built with the same
// Go the provider is.
func TestGoVersions_OneForTheModuleAndTheReleaseTool(t *testing.T) {
	goLine := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "go ") {
				return strings.TrimSpace(strings.TrimPrefix(l, "go "))
			}
		}
		t.Fatalf("%s has no go line", path)
		return ""
	}
	if m, tool := goLine("../../go.mod"), goLine("../../tools/goreleaser/go.mod"); m != tool {
		t.Errorf("go.mod says go %s, tools/goreleaser/go.mod go %s; want one version", m, tool)
	}
}

// Every action a workflow uses is pinned by commit, with its version in a
// comment (what Dependabot keeps in step): a moved tag cannot change what
// a release runs.
func TestWorkflows_ActionsPinnedByCommit(t *testing.T) {
	files, err := filepath.Glob("../../.github/workflows/*.yml")
	if err != nil || len(files) < 2 {
		t.Fatalf("workflows %v: %v; want release.yml and test.yml", files, err)
	}
	pinned := regexp.MustCompile(`^\s*(- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "uses:") && !pinned.MatchString(line) {
				t.Errorf("%s:%d: %q is not pinned by commit with its version in a comment", filepath.Base(f), i+1, strings.TrimSpace(line))
			}
		}
	}
}

// A pull request runs the tests that need no backend and the release
// snapshot; Dependabot proposes updates of both modules and the actions.
func TestWorkflows_PullRequestsAndUpdates(t *testing.T) {
	b, err := os.ReadFile("../../.github/workflows/test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			runs = append(runs, s.Run)
		}
	}
	for _, want := range []string{"make unit", "make release-check"} {
		if !slices.Contains(runs, want) {
			t.Errorf("test.yml does not run %q (runs %q)", want, runs)
		}
	}
	if !strings.Contains(string(b), "pull_request:") {
		t.Error("test.yml does not run on pull requests")
	}
	d, err := os.ReadFile("../../.github/dependabot.yml")
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Updates []struct {
			Ecosystem string `json:"package-ecosystem"`
			Directory string `json:"directory"`
		} `json:"updates"`
	}
	if err := yaml.Unmarshal(d, &dep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range dep.Updates {
		got = append(got, u.Ecosystem+" "+u.Directory)
	}
	for _, want := range []string{"gomod /", "gomod /tools/goreleaser", "github-actions /"} {
		if !slices.Contains(got, want) {
			t.Errorf("dependabot.yml updates %v; want %s", got, want)
		}
	}
}
