package provider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// silentAPIServer is an API server on loopback that completes TLS, takes
// every request and never answers it (until the test ends): a cluster
// whose API server hangs. It returns a kubeconfig that names it and the
// number of requests it took.
func silentAPIServer(t *testing.T) (kubeconfig string, requests *atomic.Int64) {
	t.Helper()
	done := make(chan struct{})
	requests = new(atomic.Int64)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-r.Context().Done():
		case <-done:
		}
		// Never an answer, not even the empty 200 a handler that returns
		// sends: the connection is dropped (a CI run once got that 200).
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: silent, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: silent, user: {token: silent}}]
contexts: [{name: silent, context: {cluster: silent, user: silent}}]
current-context: silent
`, srv.URL)
	kubeconfig = filepath.Join(t.TempDir(), "silent-kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, requests
}

// Issue 27 (reliability): a refresh has a deadline. An agent whose
// cluster's API server takes the request and never answers fails its
// refresh with UNAVAILABLE once timeouts.read (here 3s) has passed,
// instead of holding the plan for as long as the server does; the state
// is kept, and the agent refreshes again from the cluster that answers.
func TestAccAgent_RefreshHasADeadline(t *testing.T) {
	env := newKubeEnv(t)
	env.secret(t, "llm", "api-key", testSentinel)
	silent, requests := silentAPIServer(t)
	// The agent alone goes through a second provider, occsilent, the same
	// provider served separately: its compute and credential source keep
	// refreshing from the real cluster. (Not an alias of occ: the
	// in-process test server is one per provider name, so aliases would
	// share one configured provider.)
	config := func(agentProvider string) string {
		c := faultAgentConfig(env, "", fixedDoc, "support")
		c = strings.Replace(c, `delete = "60s" }`, `delete = "60s", read = "3s" }`, 1)
		c = strings.Replace(c, `resource "occ_agent" "a" {`, `resource "occ_agent" "a" {
  provider      = `+agentProvider, 1)
		return c + fmt.Sprintf(`
provider "occsilent" {
  kubernetes = { config_path = %q }
}
`, silent)
	}
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"occ":       providerserver.NewProtocol6WithError(New("test", "test")()),
		"occsilent": providerserver.NewProtocol6WithError(New("test", "test")()),
	}
	var started time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config("occ"), Check: resource.TestCheckResourceAttr("occ_agent.a", "status", "active")},
			{
				PreConfig:   func() { started = time.Now() },
				Config:      config("occsilent"),
				ExpectError: regexp.MustCompile(`UNAVAILABLE: cannot refresh the agent[\s\S]*(deadline|context)`),
			},
			{
				PreConfig: func() {
					took := time.Since(started)
					t.Logf("the refresh against the silent API server failed after %s (%d requests)", took.Round(100*time.Millisecond), requests.Load())
					if took > 60*time.Second {
						t.Errorf("the refresh waited %s; timeouts.read is 3s", took.Round(time.Second))
					}
					if requests.Load() == 0 {
						t.Error("the silent API server was never asked: the test proves nothing")
					}
				},
				Config:   config("occ"),
				PlanOnly: true,
			},
		},
	})
}

// Issue 30: occ_compute and occ_credential_source take a timeouts block.
// Against an API server that takes every request and never answers (the
// provider occsilent), a compute whose timeouts.create is 3s fails its
// create within it (the default would wait 5m), and so does a credential
// source that writes its value there, on a compute the real cluster
// created; nothing of either enters state.
func TestAccTimeouts_ComputeAndCredentialSource(t *testing.T) {
	env := newKubeEnv(t)
	silent, requests := silentAPIServer(t)
	silentProvider := fmt.Sprintf("provider \"occsilent\" {\n  kubernetes = { config_path = %q }\n  preflight  = false\n}\n", silent)
	silentCompute := fmt.Sprintf(`
resource "occ_compute" "silent" {
  provider   = occsilent
  name       = "silent"
  kubernetes = { namespace = %q }
  timeouts   = { create = "3s" }
}
`, env.ns)
	source := `
resource "occ_credential_source" "s" {
  provider         = occsilent
  name             = "silent"
  compute          = occ_compute.k
  method           = "api_key"
  value_wo         = "never-sent"
  value_wo_version = 1
  timeouts         = { create = "3s" }
}
`
	base := env.provider + env.compute("") + silentProvider
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"occ":       providerserver.NewProtocol6WithError(New("test", "test")()),
		"occsilent": providerserver.NewProtocol6WithError(New("test", "test")()),
	}
	var started time.Time
	took := func(what string) {
		d := time.Since(started)
		t.Logf("the %s against the silent API server failed after %s", what, d.Round(100*time.Millisecond))
		if d > 60*time.Second {
			t.Errorf("the %s waited %s; timeouts.create is 3s", what, d.Round(time.Second))
		}
	}
	failed := regexp.MustCompile(`(UNAVAILABLE|DEADLINE_EXCEEDED)[\s\S]*(deadline|context)`)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: base},
			{
				PreConfig:   func() { started = time.Now() },
				Config:      base + silentCompute,
				ExpectError: failed,
			},
			{
				PreConfig: func() {
					took("compute's create")
					started = time.Now()
				},
				Config:      base + source,
				ExpectError: failed,
			},
			{
				PreConfig: func() {
					took("credential source's create")
					if requests.Load() == 0 {
						t.Error("the silent API server was never asked: the test proves nothing")
					}
				},
				Config:   base,
				PlanOnly: true,
			},
		},
	})
}
