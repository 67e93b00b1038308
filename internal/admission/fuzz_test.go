package admission

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// fuzzFixtures are the inputs a fuzzed document is admitted with: every
// compute kind, harness and mode the rules tests use.
var fuzzFixtures = []func() Input{k8sEmbeddedInput, dedicatedCodexInput, dedicatedOpenClawInput, sshInput, credentialGatewayCodexInput}

var revisionIDRe = regexp.MustCompile(`^[0-9a-f]{16}$`)

// FuzzAdmit feeds configuration documents and model references through the
// path the provider takes: occconfig.Parse of the document text, the
// save-time CheckDocument and DocumentWarnings (occ_configuration), then
// Parse of the canonical form and Admit with an Agent's inputs
// (occ_agent, at plan and again at apply). Properties: no panic; every
// refusal has a class, a rule and a message; Admit is deterministic (the
// same inputs twice give the same revision ID and the same refusals), a
// revision exactly when there is no refusal, and never touches the stored
// document (AD2), and never admits dedicated OpenClaw (ND6), whatever
// the document; an admitted revision's documents re-parse from their
// canonical form (they are stored, and written to the runtime); its ID is
// 16 hex digits. ParseModelRef refuses with a message, or splits at the
// first slash into a provider and a model that write back to the same
// reference.
func FuzzAdmit(f *testing.F) {
	for i, doc := range []string{
		`{}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`,
		`{agents: {defaults: {model: "codex/gpt-5-codex", maxConcurrent: 2}}}`,
		`{agents: {defaults: {model: "codex/gpt-5-codex", models: {"codex/gpt-5-codex": {agentRuntime: {id: "codex"}}}}}}`,
		`{models: {providers: {codex: {agentRuntime: {id: "codex"}}}}, agents: {defaults: {model: "codex/gpt-5-codex", models: {"gpt-5-codex": {agentRuntime: {id: "openclaw"}}}}}}`,
		`{agents: {defaults: {model: 5}}}`,
		`{agents: {defaults: {model: {primary: "anthropic/a//b"}}}}`,
		`{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: [1]}}}}`,
		`{agents: {defaults: {model: {primary: "anthropic/claude-sonnet-4-5", fallbacks: ["anthropic/claude-opus-4-1", "openai/gpt-5"]}}}}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, entries: {a: {default: true}, b: {default: true}}}}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}, ownership: "explicit", entries: {ops: {}, sales: {}}}, broadcast: {strategy: "parallel", "telegram:123": ["ops", "sales"]}}`,
		`{plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "stdio"}}}}}, agents: {defaults: {model: "openai/gpt-5"}}}`,
		`{agents: {defaults: {model: "openai/gpt-5"}}, models: {providers: {openai: {baseUrl: "${LLM_URL}", api: "openai-responses", models: [{id: "gpt-5", name: "m"}]}}}}`,
		`{logging: {level: "trace", redactSensitive: "off"}, loggin: {}, agents: {defaults: {model: "anthropic/claude-sonnet-4-5", agentRuntime: {id: "codex"}}}}`,
		`{agents: {defaults: {model: "codex/vendor/org/model", models: {"vendor/org/model": {agentRuntime: {id: "codex"}}}}}}`,
		`{agents: {list: [], defaults: {model: "anthropic/claude-sonnet-4-5"}}}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", maxConcurrent: -1}}, gateway: {port: 99999}}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5", maxConcurrent: 1e400}}}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, plugins: {entries: {codex: {config: {appServer: {url: "ws://x"}}}}}}`,
		`{agents: {defaults: {model: {primary: null, fallbacks: null}, models: null}}, models: null}`,
		`{agents: {defaults: {model: "` + strings.Repeat("a/", 40) + `b"}}}`,
		`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, ` + strings.Repeat(`a: {`, 60) + strings.Repeat(`}`, 60) + `}`,
		`[1]`, `{`, `{a: NaN}`,
	} {
		f.Add(doc, "anthropic/claude-sonnet-4-5", uint8(i))
	}
	for i, ref := range []string{
		"", "openai", "openai/", "/gpt-5", "openai/gpt-5", "codex/gpt-5-codex", "a//b", "a/b/", "a/b/c", " a/b", "a/b\n",
		"a/\u00a0b", "a\u2028/b", "ü/ß", "\xff/\xfe", `"/"`, "a/b\"}, x: {", "codex/vendor/org/model",
	} {
		f.Add(`{}`, ref, uint8(15+i*7))
		f.Add(`{}`, ref, uint8(30+i*7))
	}
	f.Fuzz(func(t *testing.T, text, ref string, sel uint8) {
		checkModelRef(t, ref)
		in := fuzzFixtures[int(sel)%len(fuzzFixtures)]()
		if h := []string{"", HarnessOpenClaw, HarnessCodex}[int(sel)/len(fuzzFixtures)%3]; h != "" {
			in.Agent.Harness = h
		}
		switch int(sel) / (len(fuzzFixtures) * 3) % 3 {
		case 1: // the reference as the primary model
			text = `{agents: {defaults: {model: ` + jsonString(ref) + `}}}`
		case 2: // ... as primary, fallback and catalog key, with a runtime policy
			text = `{agents: {defaults: {model: {primary: ` + jsonString(ref) + `, fallbacks: [` + jsonString(ref) + `]}, models: {` +
				jsonString(ref) + `: {agentRuntime: {id: "codex"}}}}}}`
		}

		// occ_configuration: parse and the save-time rules.
		doc, err := occconfig.Parse(text)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Parse error without a message")
			}
			return
		}
		saved := CheckDocument(doc)
		checkErrors(t, saved)
		if again := CheckDocument(doc); again.Error() != saved.Error() {
			t.Fatalf("CheckDocument is not deterministic:\n%v\n%v", saved, again)
		}
		for _, w := range DocumentWarnings(doc) {
			if w.Message == "" || w.Rule == "" {
				t.Fatalf("warning %+v", w)
			}
		}

		// occ_agent: the canonical document is what the agent reads.
		canon := occconfig.Canonical(doc)
		stored, err := occconfig.Parse(string(canon))
		if err != nil {
			t.Fatalf("canonical form %s does not re-parse: %v", canon, err)
		}
		in.Configuration.Document = stored
		rev1, errs1 := Admit(in)
		rev2, errs2 := Admit(in)
		if got := occconfig.Canonical(stored); string(got) != string(canon) {
			t.Fatalf("Admit changed the stored document:\n%s\n%s", canon, got)
		}
		if (rev1 == nil) != (len(errs1) > 0) || (rev2 == nil) != (len(errs2) > 0) {
			t.Fatalf("revision %v with refusals %v", rev1 != nil, errs1)
		}
		checkErrors(t, errs1)
		if errs1.Error() != errs2.Error() {
			t.Fatalf("Admit is not deterministic:\n%v\n%v", errs1, errs2)
		}
		if rev1 == nil {
			return
		}
		if rev1.Harness == HarnessOpenClaw && rev1.ExecutionMode == ModeDedicated {
			t.Fatalf("Admit admitted dedicated OpenClaw (rule ND6)")
		}
		if len(saved) > 0 {
			t.Fatalf("Admit admitted a document CheckDocument refuses: %v", saved)
		}
		id := rev1.ID()
		if id != rev2.ID() || !revisionIDRe.MatchString(id) {
			t.Fatalf("revision IDs %q, %q", id, rev2.ID())
		}
		for name, d := range map[string]occconfig.Document{"admitted": rev1.AdmittedDocument, "gateway": rev1.GatewayDocument} {
			if _, err := occconfig.Parse(string(occconfig.Canonical(d))); err != nil {
				t.Fatalf("the %s document does not re-parse: %v", name, err)
			}
		}
		if rev1.PrimaryModel != nil {
			checkModelRef(t, rev1.PrimaryModel.String())
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// checkErrors checks that every refusal can be reported.
func checkErrors(t *testing.T, errs Errors) {
	t.Helper()
	for _, e := range errs {
		if e == nil || e.Message == "" || e.Rule == "" || !slices.Contains([]Class{InvalidRequest, ResourceConflict}, e.Class) ||
			strings.TrimSpace(e.Detail()) == "" {
			t.Fatalf("refusal %+v", e)
		}
	}
}

// checkModelRef: ParseModelRef refuses with a message, or splits at the
// first slash and writes back the same reference.
func checkModelRef(t *testing.T, s string) {
	t.Helper()
	r, err := ParseModelRef(s)
	if err != nil {
		if err.Error() == "" {
			t.Fatalf("ParseModelRef(%q): error without a message", s)
		}
		return
	}
	if r.Provider == "" || strings.Contains(r.Provider, "/") || r.Model == "" || r.String() != s ||
		strings.HasPrefix(r.Model, "/") || strings.HasSuffix(r.Model, "/") || strings.Contains(r.Model, "//") {
		t.Fatalf("ParseModelRef(%q) = %+v", s, r)
	}
	if again, err := ParseModelRef(r.String()); err != nil || again != r {
		t.Fatalf("ParseModelRef(%q) again = %+v, %v", r.String(), again, err)
	}
}
