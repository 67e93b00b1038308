package provider

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccProvider_LogsOnlyWhenAsked: the built provider binary, run by the
// real CLI, writes no log lines when nobody asked for them (the plugin
// libraries would otherwise write every line at TRACE for Terraform to
// decode and drop: a quarter of a large plan's time), and with TF_LOG set
// its own lines reach Terraform's log as before. A wrapper in the plugin
// directory copies the provider's stderr, which is where the plugin
// libraries write their log lines, to a file.
func TestAccProvider_LogsOnlyWhenAsked(t *testing.T) {
	testAccPreCheck(t)
	cli := testCLI(t).path
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "terraform-provider-occ"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the provider binary is not built (%v): run `make build`", err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	plugins, stderrCopy := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "provider-stderr.log")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!%s\nexec %q \"$@\" 2> >(tee -a %q >&2)\n", bash, bin, stderrCopy)
	if err := os.WriteFile(filepath.Join(plugins, "terraform-provider-occ"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	rc := devOverridesConfig(t, plugins)
	dir := filepath.Join(tmp, "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfigFile(t, dir, "main.tf", `
terraform {
  required_providers {
    occ = { source = "occ-platform/occ" }
  }
}
resource "occ_compute" "k" {
  name       = "logs"
  kubernetes = { namespace = "logs" }
}
resource "occ_configuration" "c" {
  name     = "logs"
  document = jsonencode({ agents = { defaults = { model = "anthropic/claude-sonnet-4-5" } } })
}
resource "occ_credential_source" "s" {
  name       = "anthropic"
  compute    = occ_compute.k
  method     = "api_key"
  secret_ref = { name = "anthropic", key = "api-key" }
}
resource "occ_agent" "a" {
  name          = "support"
  compute       = occ_compute.k
  configuration = occ_configuration.c
  harness_auth  = { source = occ_credential_source.s }
}
`)
	plan := func(env ...string) {
		t.Helper()
		if err := os.Remove(stderrCopy); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		cmd := exec.Command(cli, "-chdir="+dir, "plan", "-refresh=false", "-lock=false", "-input=false", "-no-color")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TF_CLI_CONFIG_FILE=" + rc, "CHECKPOINT_DISABLE=1",
			"TF_IN_AUTOMATION=1", "OCC_PREFLIGHT=false"}
		cmd.Env = append(cmd.Env, env...)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Plan: 4 to add") {
			t.Fatalf("plan %q: %v\n%s", env, err, out)
		}
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return string(b)
	}

	plan()
	// go-plugin's own start-up lines carry no @module; the plugin
	// libraries' and the provider's all do.
	if got := read(stderrCopy); strings.Contains(got, `"@module"`) {
		t.Errorf("with no TF_LOG the provider wrote log lines:\n%.2000s", got)
	}

	tfLog := filepath.Join(tmp, "terraform.log")
	plan("TF_LOG=DEBUG", "TF_LOG_PATH="+tfLog)
	if got := read(stderrCopy); !strings.Contains(got, "agent admitted at plan") {
		t.Errorf("with TF_LOG=DEBUG the provider's stderr lacks its own admission line:\n%.2000s", got)
	}
	if got := read(tfLog); !strings.Contains(got, "agent admitted at plan") || !strings.Contains(got, "sdk.framework") {
		t.Errorf("with TF_LOG=DEBUG Terraform's log lacks the provider's and the framework's lines (%d bytes)", len(got))
	}
}
