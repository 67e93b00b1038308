package admission

import "testing"

// rules PR3, PR11: a compatible Codex endpoint's literal baseUrl travels in
// the probe settings, so the harness's probe calls the admitted endpoint;
// the default endpoint leaves it empty.
func TestPR3_ProbeCarriesCompatibleBaseURL(t *testing.T) {
	if rev := admitOK(t, dedicatedCodexInput()); rev.Probe.BaseURL != "" {
		t.Errorf("default endpoint: base_url = %q, want empty", rev.Probe.BaseURL)
	}
	custom := admitOK(t, withDoc(dedicatedCodexInput(), `{agents: {defaults: {model: "codex/vendor/org/model"}}, models: {providers: {codex: {baseUrl: "https://llm.example/v1", models: [{id: "vendor/org/model", name: "m"}]}}}}`))
	if custom.Probe.BaseURL != "https://llm.example/v1" || custom.Probe.Transport != "responses-https" {
		t.Errorf("compatible endpoint probe = %+v", custom.Probe)
	}
}
