package main

import (
	"io"
	"slices"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/startup"
)

// rule PR9: the containers render writes start the wrapper with a command
// line it accepts: the container, the harness, the probe settings where a
// probe runs, and the runtime after --.
func TestPR9_RenderedCommandLines(t *testing.T) {
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	compute := admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "occ-acme", CPUMillis: 1500, MemoryLimit: "4Gi", LoggingOwnership: admission.LoggingPlatform, LoggingLevel: "info"}}
	in := admission.Input{
		Agent:         admission.Agent{Name: "support"},
		Configuration: admission.Configuration{ID: "support", Name: "support", Generation: 1, Document: doc},
		Compute:       compute,
		Source:        admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "prod", SecretRef: &admission.SecretRef{Name: "llm", Key: "api-key"}},
	}
	codexDoc, _ := occconfig.Parse(`{agents: {defaults: {model: "codex/gpt-5-codex"}}}`)
	codex := in
	codex.Agent = admission.Agent{Name: "coder", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated}
	codex.Configuration.Document = codexDoc

	type want struct {
		harness string
		probe   bool
		runtime string
	}
	for name, tc := range map[string]struct {
		in   admission.Input
		want map[string]want // by container
	}{
		"embedded openclaw": {in, map[string]want{"gateway": {"openclaw", true, "openclaw"}}},
		"dedicated codex":   {codex, map[string]want{"gateway": {"openclaw", false, "openclaw"}, "harness": {"codex", true, "codex"}}},
	} {
		rev, errs := admission.Admit(tc.in)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", name, errs)
		}
		objs, err := render.Kubernetes(rev, 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, d := range objs.Deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				w, ok := tc.want[*c.Name]
				if !ok {
					t.Errorf("%s: unexpected container %s", name, *c.Name)
					continue
				}
				seen++
				// tini is PID 1 and runs the wrapper with the arguments.
				if !slices.Equal(c.Command, []string{render.Init, "-s", "--", render.Wrapper}) {
					t.Errorf("%s/%s: command %v, want tini running the wrapper", name, *c.Name, c.Command)
				}
				o, err := parseArgs(c.Args, io.Discard)
				if err != nil {
					t.Fatalf("%s/%s: the wrapper refuses %v: %v", name, *c.Name, c.Args, err)
				}
				if o.Container != *c.Name || o.Harness != w.harness || (o.ProbeFile != "") != w.probe || len(o.Command) == 0 || o.Command[0] != w.runtime {
					t.Errorf("%s/%s: parsed %+v from %v", name, *c.Name, o, c.Args)
				}
				if o.HealthPort == 0 || o.HealthPort != int(*c.Ports[0].ContainerPort) {
					t.Errorf("%s/%s: health port %d, want the container port (PR5: the held wrapper answers the kubelet there)", name, *c.Name, o.HealthPort)
				}
				if o.Harness != startup.HarnessOpenClaw && o.Harness != startup.HarnessCodex {
					t.Errorf("%s/%s: harness %q", name, *c.Name, o.Harness)
				}
			}
		}
		if seen != len(tc.want) {
			t.Errorf("%s: %d containers, want %d", name, seen, len(tc.want))
		}
	}
}
