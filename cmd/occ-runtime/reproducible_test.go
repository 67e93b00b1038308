package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// imagesSh runs testenv/images.sh with its cache in cache and the extra
// environment, and returns its standard output.
func imagesSh(t *testing.T, cache string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{imagesShPath}, args...)...)
	cmd.Env = append(append(os.Environ(), "OCC_TESTENV_CACHE="+cache), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testenv/images.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// needImageTools skips (fails under CI) where the image recipe cannot run:
// it needs root and umoci, skopeo and go.
func needImageTools(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range []string{"umoci", "skopeo", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "the image recipe needs " + strings.Join(missing, ", ") + " (make images installs the tools)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestImages_BuildReproducibly (issue 25): the recipe builds the same image
// twice from the same inputs, in fresh caches and work directories a
// second apart: the same manifest digest. The small pause image goes
// through the recipe's own steps (umoci layers and config, the archive);
// the time it records is SOURCE_DATE_EPOCH and nothing else, so another
// epoch gives another digest.
func TestImages_BuildReproducibly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image three times")
	}
	needImageTools(t)
	build := func(env ...string) (digest string, created time.Time) {
		cache := t.TempDir()
		imagesSh(t, cache, env, "build", "pause")
		digest = imagesSh(t, cache, env, "digest", "pause")
		archive := imagesSh(t, cache, env, "path", "pause")
		out, err := exec.Command("skopeo", "inspect", "--config", "oci-archive:"+archive).Output()
		if err != nil {
			t.Fatalf("skopeo inspect --config: %v", err)
		}
		var cfg struct {
			Created time.Time `json:"created"`
			History []struct {
				Created time.Time `json:"created"`
			} `json:"history"`
		}
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatalf("the image config: %v", err)
		}
		for _, h := range cfg.History {
			if !h.Created.Equal(cfg.Created) {
				t.Errorf("a history entry was created %s, the image %s: a build-time timestamp", h.Created, cfg.Created)
			}
		}
		return digest, cfg.Created
	}
	first, created := build()
	time.Sleep(1100 * time.Millisecond) // file and build times a second apart
	second, _ := build()
	if first != second {
		t.Errorf("two builds of the same recipe: %s and %s; want one digest", first, second)
	}
	if want := time.Unix(1788220800, 0); !created.Equal(want) {
		t.Errorf("the image was created %s; want the recipe's SOURCE_DATE_EPOCH %s", created.UTC(), want.UTC())
	}
	other, otherCreated := build("SOURCE_DATE_EPOCH=1800000000")
	if other == first || !otherCreated.Equal(time.Unix(1800000000, 0)) {
		t.Errorf("SOURCE_DATE_EPOCH=1800000000 built %s created %s; want another digest, created at that epoch", other, otherCreated.UTC())
	}
	t.Logf("figures: pause image %s, twice; with another epoch %s", first, other)
}
