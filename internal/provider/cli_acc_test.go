package provider

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// builtProviderCLI runs the real CLI against the built provider binary
// (bin/, through dev_overrides), as a user runs it: run(dir, args...)
// returns the combined output and the exit code.
func builtProviderCLI(t *testing.T) func(dir string, args ...string) (string, int) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "terraform-provider-occ")); err != nil {
		t.Fatalf("the provider binary is not built (%v): run `make build`, or `make testacc-new-terraform`, which builds it", err)
	}
	cli := testCLI(t).path
	rc := devOverridesConfig(t, bin)
	return func(dir string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"-chdir=" + dir}, args...)...)
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_ACC=", "TF_REATTACH_PROVIDERS=")
		out, err := cmd.CombinedOutput()
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %v: %v", cli, args, err)
		}
		return string(out), code
	}
}

// devOverridesConfig writes a CLI configuration that takes the occ
// provider from pluginDir (dev_overrides) and returns its path.
func devOverridesConfig(t *testing.T, pluginDir string) string {
	t.Helper()
	rc := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  dev_overrides {\n    \"occ-platform/occ\" = %q\n  }\n  direct {}\n}\n", pluginDir), 0o600); err != nil {
		t.Fatal(err)
	}
	return rc
}

// writeFile writes a file of a test's configuration directory.
func writeConfigFile(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
