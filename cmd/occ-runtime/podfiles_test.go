package main

import (
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

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Helpers that run a rendered Pod's containers on this host, with the
// real runtimes (codexplugin_test.go).

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
