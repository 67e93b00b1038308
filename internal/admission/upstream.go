package admission

import "github.com/occ-platform/terraform-provider-occ/internal/occconfig"

// Facts about upstream OpenClaw 2026.9.6 (the pinned runtime), read from its
// shipped configuration schema. They are data, kept in one place.

// RootKeys are the root keys OpenClaw's strict root schema accepts; any
// other makes the gateway exit with code 78.
var RootKeys = []string{
	"$schema", "accessGroups", "acp", "agents", "approvals", "attachments", "auth", "bindings",
	"broadcast", "browser", "channels", "cloudWorkers", "commands", "cron", "desktop", "diagnostics",
	"discovery", "env", "gateway", "hooks", "logging", "mcp", "memory", "messages", "meta", "models",
	"nodeHost", "plugins", "proxy", "secrets", "security", "session", "skills", "surfaces", "talk",
	"telemetry", "tools", "transcripts", "tts", "ui", "update", "wizard", "worktreeAcceleration",
	"worktreeRoot",
}

// BuiltinProviders are the model providers OpenClaw knows without a
// models.providers entry of baseUrl and models.
var BuiltinProviders = []string{
	"amazon-bedrock", "amazon-bedrock-mantle", "anthropic", "anthropic-vertex", "arcee",
	"azure-openai-responses", "byteplus", "byteplus-plan", "cerebras", "chutes", "claude-cli",
	"clawrouter", "cloudflare-ai-gateway", "codex", "comfy", "copilot-proxy", "dashscope",
	"deepinfra", "deepseek", "fal", "fireworks", "github-copilot", "gmi", "gmi-cloud", "gmicloud",
	"google", "google-antigravity", "google-gemini-cli", "google-vertex", "groq", "huggingface",
	"kilocode", "kimi", "kimi-coding", "litellm", "lmstudio", "meta", "microsoft-foundry", "minimax",
	"minimax-portal", "mistral", "modelstudio", "moonshot", "moonshot-ai", "moonshotai", "nvidia",
	"novita", "novita-ai", "novitaai", "ollama", "ollama-cloud", "openai", "opencode", "opencode-go",
	"openrouter", "qianfan", "qwen", "qwen-token-plan", "qwencloud", "sglang", "stepfun",
	"stepfun-plan", "synthetic", "tencent-tokenhub", "tencent-tokenplan", "together", "venice",
	"vercel-ai-gateway", "vllm", "volcengine", "volcengine-plan", "vydra", "x-ai", "xai", "xiaomi",
	"xiaomi-token-plan", "z.ai", "z-ai", "zai",
}

// runtimeIDs are the agentRuntime.id values OCC accepts, the platform's
// two (MR3: "Supported agentRuntime.id values are openclaw and codex"),
// and the harness each selects.
var runtimeIDs = map[string]string{
	"openclaw": HarnessOpenClaw,
	"codex":    HarnessCodex,
}

// upstreamRuntimeAliases are the other ids upstream OpenClaw 2026.9.6
// accepts, refused by OCC (MR3), each with what to write instead: "pi"
// and "codex-app-server" are upstream's names of the two harnesses;
// "auto" and "default" ask for upstream's own selection, which is no
// policy at all.
var upstreamRuntimeAliases = map[string]string{
	"pi":               `upstream's alias of "openclaw"; write "openclaw"`,
	"codex-app-server": `upstream's alias of "codex"; write "codex"`,
	"auto":             `upstream's request for its default selection, which is no policy: remove agentRuntime and let the resolver choose (rule MR5), or write "openclaw" or "codex"`,
	"default":          `upstream's request for its default selection, which is no policy: remove agentRuntime and let the resolver choose (rule MR5), or write "openclaw" or "codex"`,
}

// Roster is a document location OCC refuses when it is not empty (MR9).
type Roster struct {
	Path occconfig.Path
	Why  string
}

// RefusedRosters are the rosters Configuration save and Kubernetes
// deployment refuse (MR9). agents.list is the legacy roster OpenClaw
// migrates into agents.entries; OCC owns the roster and refuses it.
var RefusedRosters = []Roster{
	{Path: occconfig.Keys("agents", "list"), Why: "agents.list is the legacy agent roster; OCC refuses a non-empty agents.list (use agents.entries, keyed by agent id)"},
}

// Platform logging stamp (AD4): the keys OpenClaw's logging and
// diagnostics.otel schemas define.
var (
	pathLoggingLevel        = occconfig.Keys("logging", "level")
	pathLoggingConsoleLevel = occconfig.Keys("logging", "consoleLevel")
	pathLoggingConsoleStyle = occconfig.Keys("logging", "consoleStyle")
	pathRedactSensitive     = occconfig.Keys("logging", "redactSensitive")
	pathOTelLogs            = occconfig.Keys("diagnostics", "otel", "logs")
)

// GatewayPort is OpenClaw's default gateway port, where /readyz and /healthz answer.
const GatewayPort = 18789
