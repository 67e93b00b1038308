package render

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// rules LG3, AD4, AD5: the Codex app server's logging (LOG_FORMAT=json,
// RUST_LOG=<level>,codex_otel=off, and the host-owned config.toml's [otel]
// table) is rendered only where the platform owns logging. With
// logging.ownership = "driver" the compute's driver owns runtime logging:
// none of it is rendered, and the rest of the host-owned configuration (a
// compatible endpoint's provider, PR3) still is.
func TestLG3_CodexLoggingFollowsOwnership(t *testing.T) {
	const customDoc = `{agents: {defaults: {model: "codex/gpt-5-codex"}}, models: {providers: {codex: {baseUrl: "https://llm.example/v1", models: [{id: "gpt-5-codex", name: "m"}]}}}}`
	for _, tc := range []struct {
		name      string
		ownership string
		document  string
		platform  bool
	}{
		{"platform", admission.LoggingPlatform, "", true},
		{"default ownership", "", "", true},
		{"driver", admission.LoggingDriver, "", false},
		{"driver, compatible endpoint", admission.LoggingDriver, customDoc, false},
		{"sandboxed, driver", admission.LoggingDriver, "sandboxed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := codexInput(t, admission.MethodAPIKey)
			if tc.document == "sandboxed" {
				in = sandboxedCodexInput(t)
			} else if tc.document != "" {
				in.Configuration.Document = doc(t, tc.document)
			}
			in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.LoggingOwnership = tc.ownership })
			if tc.ownership == admission.LoggingDriver {
				in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) { k.LoggingLevel = "" })
			}
			rev := admit(t, in)
			objs, err := Kubernetes(rev, 1, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			var harness []string
			for _, c := range containersOf(objs) {
				if *c.Name == "harness" {
					for name := range envOf(&c) {
						harness = append(harness, name)
					}
				}
			}
			if len(harness) == 0 {
				t.Fatal("no harness container")
			}
			env := strings.Join(harness, " ")
			for _, v := range []string{"LOG_FORMAT", "RUST_LOG"} {
				if has := strings.Contains(" "+env+" ", " "+v+" "); has != tc.platform {
					t.Errorf("harness has %s: %v, want %v (env %s)", v, has, tc.platform, env)
				}
			}
			var toml string
			for _, cm := range objs.ConfigMaps {
				if s, ok := cm.Data["config.toml"]; ok {
					toml = s
				}
			}
			if toml == "" {
				t.Fatal("no config.toml")
			}
			for _, w := range []string{"[otel]", `exporter = "none"`, "log_user_prompt = false"} {
				if has := strings.Contains(toml, w); has != tc.platform {
					t.Errorf("config.toml has %q: %v, want %v:\n%s", w, has, tc.platform, toml)
				}
			}
			if tc.document == customDoc && !strings.Contains(toml, "[model_providers.openai-compatible]") {
				t.Errorf("driver-owned logging dropped the compatible endpoint's provider:\n%s", toml)
			}
		})
	}
}
