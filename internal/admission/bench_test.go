package admission

import "testing"

// realisticDocument is a Configuration of the size an operator writes: a
// primary with fallbacks, a catalog, a custom Codex endpoint, plugins,
// logging and tool settings.
const realisticDocument = `{
	// support agent
	models: {providers: {codex: {
		baseUrl: "https://llm.internal.example/v1",
		agentRuntime: {id: "codex"},
		models: [{id: "vendor/org/large", contextWindow: 400000}, {id: "vendor/org/medium"}, {id: "vendor/org/small"}],
	}}},
	agents: {
		defaults: {
			model: {primary: "codex/vendor/org/large", fallbacks: ["codex/vendor/org/medium", "codex/vendor/org/small"]},
			models: {
				"codex/vendor/org/large": {alias: "large", params: {temperature: 0.2}},
				"vendor/org/medium": {alias: "medium"},
				"codex/vendor/org/review": {alias: "review", agentRuntime: {id: "codex"}},
			},
			workspace: "/home/node/workspace",
			timeoutSeconds: 600,
		},
		entries: {main: {default: true, model: {primary: "codex/vendor/org/large"}}},
	},
	logging: {level: "debug", redactSensitive: "tools", file: "/var/log/openclaw.log"},
	diagnostics: {otel: {enabled: true, endpoint: "http://otel:4318", logs: true}},
	tools: {profile: "coding", deny: ["browser"]},
	session: {scope: "per-sender", idleMinutes: 120},
	channels: {slack: {enabled: true, mode: "socket"}},
	bindings: [{agentId: "main", match: {channel: "slack"}}],
}`

// BenchmarkAdmit admits one realistic dedicated Codex agent behind the
// OpenShell sandbox and its Credential Gateway.
func BenchmarkAdmit(b *testing.B) {
	in := credentialGatewayCodexInput()
	in.Configuration.Document = parseDoc(b, realisticDocument)
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.CPUMillis = 4000 })
	in.Compute = in.Compute.WithKubernetes(func(k *KubernetesCompute) { k.LoggingLevel = "info" })
	if rev, errs := Admit(in); len(errs) > 0 || rev == nil {
		b.Fatalf("fixture refused: %v", errs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rev, errs := Admit(in)
		if len(errs) > 0 || rev == nil {
			b.Fatalf("refused: %v", errs)
		}
	}
}
