package kubeenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables that locate the binaries built by `make testenv`.
const (
	// EnvBinDir names a directory holding kube-apiserver, etcd, … directly.
	EnvBinDir = "OCC_TESTENV_BIN"
	// EnvCache is the cache root of testenv/build.sh; binaries are looked up
	// in its current/ directory.
	EnvCache = "OCC_TESTENV_CACHE"
)

// Binary names, as in the cache's current/ directory.
const (
	BinEtcd              = "etcd"
	BinAPIServer         = "kube-apiserver"
	BinControllerManager = "kube-controller-manager"
	BinScheduler         = "kube-scheduler"
	BinKwok              = "kwok"
	// BinAgentSandbox is the agent-sandbox controller
	// (kubernetes-sigs/agent-sandbox): the real Sandbox controller.
	BinAgentSandbox = "agent-sandbox-controller"
	// FileSandboxCRD is the Sandbox CRD of the same agent-sandbox module,
	// copied from it by the build (data, not a binary).
	FileSandboxCRD = "agent-sandbox-crd"
	BinTofu        = "tofu"
)

var clusterBinaries = []string{BinEtcd, BinAPIServer, BinControllerManager, BinScheduler, BinKwok, BinAgentSandbox}

// ErrBinariesMissing is wrapped by the error of Start (and of FindBinaries)
// when a binary is not there: `make testenv` builds them.
var ErrBinariesMissing = errors.New("test-environment binaries are missing")

// BinDir is where the binaries are looked up: $OCC_TESTENV_BIN, else
// $OCC_TESTENV_CACHE/current, else $HOME/.cache/occ-testenv/current (the
// defaults of testenv/build.sh).
func BinDir() string {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir
	}
	cache := os.Getenv(EnvCache)
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "occ-testenv")
	}
	return filepath.Join(cache, "current")
}

// Binaries maps a binary name to its path.
type Binaries map[string]string

// FindBinaries looks the cluster binaries up in dir (BinDir() when empty).
// The error wraps ErrBinariesMissing and names `make testenv`.
func FindBinaries(dir string) (Binaries, error) {
	if dir == "" {
		dir = BinDir()
	}
	bins := Binaries{}
	var missing []string
	for _, name := range clusterBinaries {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, name)
			continue
		}
		bins[name] = path
	}
	if path := filepath.Join(dir, FileSandboxCRD); fileExists(path) {
		bins[FileSandboxCRD] = path
	} else {
		missing = append(missing, FileSandboxCRD)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s not found in %s (run `make testenv` to build them, "+
			"about 10 minutes the first time; or set %s)", ErrBinariesMissing, strings.Join(missing, ", "), dir, EnvBinDir)
	}
	return bins, nil
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}

// TofuPath is the OpenTofu binary built by `make testenv`, or "" when absent.
func TofuPath() string {
	path := filepath.Join(BinDir(), BinTofu)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}
