package render

import (
	"slices"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// credentialVars are the contract's credential variables (admission's
// contract.go): the only ones that carry or select a model credential.
var credentialVars = []string{admission.EnvOpenAIAPIKey, admission.EnvAnthropicAPIKey, admission.EnvCodexAccessToken,
	admission.EnvCodexLoginMode}

// credentialEnvOf is every container's credential variables, by container name.
func credentialEnvOf(objs *Objects) map[string][]string {
	out := map[string][]string{}
	for _, c := range containersOf(objs) {
		for _, e := range c.Env {
			if slices.Contains(credentialVars, *e.Name) {
				out[*c.Name] = append(out[*c.Name], *e.Name)
			}
		}
	}
	return out
}

// rules AU1, AU2, AU3: render sets the credential variables admission
// decided (rev.Credential) in the one container that consumes them, and
// nothing it derives itself: a doctored delivery is rendered as doctored.
func TestAU1_RenderReadsTheAdmittedDelivery(t *testing.T) {
	pat := codexInput(t, admission.MethodCodexPAT)
	openaiEmbedded := embeddedInput(t, "openai/gpt-5")
	openaiEmbedded.Agent.Harness = admission.HarnessOpenClaw
	for _, tc := range []struct {
		name      string
		in        admission.Input
		container string
		want      []string
	}{
		{"embedded anthropic", embeddedInput(t, "anthropic/claude-sonnet-4-5"), "gateway", []string{admission.EnvAnthropicAPIKey}},
		{"embedded openai", openaiEmbedded, "gateway", []string{admission.EnvOpenAIAPIKey}},
		{"codex api_key", codexInput(t, admission.MethodAPIKey), "harness", []string{admission.EnvCodexLoginMode, admission.EnvOpenAIAPIKey}},
		{"codex_pat secret", pat, "harness", []string{admission.EnvCodexLoginMode, admission.EnvCodexAccessToken}},
		{"codex credential gateway", sandboxedCodexInput(t), "harness", []string{admission.EnvOpenAIAPIKey, admission.EnvCodexLoginMode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := admit(t, tc.in)
			objs, err := Kubernetes(rev, 1, admission.Compute{})
			if err != nil {
				t.Fatal(err)
			}
			got := credentialEnvOf(objs)
			want := map[string][]string{}
			if tc.container != "" {
				want[tc.container] = tc.want
			}
			if len(got) != len(want) || !slices.Equal(got[tc.container], tc.want) {
				t.Fatalf("credential variables = %v, want %v", got, want)
			}
			c := rev.Credential
			// A managed ServiceAccount's token comes as the _FILE variable.
			if c.EnvVar != "" && rev.Source.ServiceAccount == "" && !slices.Contains(tc.want, c.EnvVar) {
				t.Errorf("delivery %+v: its variable is not rendered", c)
			}
			for _, e := range containersOf(objs) {
				for _, v := range e.Env {
					if *v.Name == admission.EnvCodexLoginMode && *v.Value != c.LoginMode {
						t.Errorf("%s = %s, want the admitted %q", admission.EnvCodexLoginMode, *v.Value, c.LoginMode)
					}
				}
			}
		})
	}

	// Render follows the delivery, whatever it says.
	rev := admit(t, codexInput(t, admission.MethodAPIKey))
	rev.Credential.EnvVar, rev.Credential.LoginMode = "OCC_TEST_KEY", "test_mode"
	objs, err := Kubernetes(rev, 1, admission.Compute{})
	if err != nil {
		t.Fatal(err)
	}
	harness, _ := harnessOf(t, objs)
	env := envOf(&harness.Containers[0])
	if v, ok := env["OCC_TEST_KEY"]; !ok || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
		t.Errorf("doctored variable not rendered from the Secret: %v", env)
	}
	if v := env[admission.EnvCodexLoginMode]; v.Value == nil || *v.Value != "test_mode" {
		t.Errorf("doctored login mode not rendered: %v", v)
	}
	if _, ok := env[admission.EnvOpenAIAPIKey]; ok {
		t.Errorf("render derived %s itself", admission.EnvOpenAIAPIKey)
	}
}
