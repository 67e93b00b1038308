package admission

import (
	"fmt"
	"slices"
	"strings"
)

// Rule is one rule of the platform (RULES.md), as code, tests and
// diagnostics cite it: its id and what it says in one line.
type Rule struct {
	ID      string
	Summary string
}

// RuleGroup is a family of rules sharing an id prefix.
type RuleGroup struct {
	Prefix, Title string
}

// RuleGroups are the families, in the order the reference lists them.
var RuleGroups = []RuleGroup{
	{"HM", "Harness and execution mode"},
	{"MR", "Model references and harness resolution"},
	{"AD", "Admission and the frozen revision"},
	{"AU", "Model authentication"},
	{"PR", "Startup probe, failure codes, activation gate"},
	{"LG", "Logging and identity"},
	{"ND", "Dedicated native OpenClaw, refused at plan by ND6"},
	{"AC", "Replacement and activation"},
	{"OS", "OpenShell sandbox and Credential Gateway"},
	{"SS", "SSH computes"},
}

// Rules is every rule id the provider cites, with its one-line summary,
// in RULES.md's order. A test holds it to the sources: every id cited in
// the code is here, and every entry is cited in the code or the guides.
// `make generate` renders it as the rules reference (RulesMarkdown).
var Rules = []Rule{
	{"HM1", "Supported harness and mode combinations: `openclaw` + `embedded` (Kubernetes and SSH) and `codex` + `dedicated` (Kubernetes only); `openclaw` + `dedicated` (Kubernetes only) is refused by ND6; anything else is `INVALID_REQUEST`."},
	{"HM2", "The execution mode defaults to `embedded` on create; an update that omits it keeps the previous mode (no diff, no redeploy)."},
	{"HM3", "The harness is an attribute of the Agent (`harness`), never a resource or driver of its own; what is available depends on the compute and its sandbox driver."},
	{"HM4", "Kubernetes, dedicated: the gateway and the harness are separate Pods with their own ServiceAccount and storage; embedded OpenClaw is one workload, untrusted as a whole."},
	{"HM5", "A dedicated revision owns exactly one harness shared by all its sessions; the sandbox contains the whole revision."},
	{"HM6", "A native OpenClaw node host admits a configurable number of session-owned workers (Kubernetes default 8); further sessions are refused while all are taken. No admitted Agent runs one (ND6)."},
	{"HM7", "Dedicated Codex: concurrent top-level turns are `agents.defaults.maxConcurrent`, or, when the configuration does not set it, max(8, 4 × the CPU limit in whole cores, rounded down and at least 1), frozen into the admitted document. Other topologies keep the document's value."},
	{"MR1", "A model reference is `provider/model`, split at the first `/`; the model id may hold further slashes; empty parts are invalid."},
	{"MR2", "Catalog ids are accepted with or without the provider prefix."},
	{"MR3", "`agentRuntime.id` is `openclaw` or `codex`; model, Agent-entry and provider runtime policies are checked together and explicit conflicts are refused."},
	{"MR4", "With a custom Codex endpoint, the private gateway configuration names the `openai-compatible` provider; the stored configuration and the probe model are unchanged."},
	{"MR5", "Without `harness`, the harness is resolved: OpenClaw for no model or an unambiguous built-in provider without policy; `openai`, `codex`, custom and plugin-routed providers need an explicit policy."},
	{"MR6", "Dedicated Codex accepts only the `codex` provider, or `openai` with the Codex plugin enabled on the websocket app-server transport; it refuses what Codex cannot honour of that provider's entry: an `openai` `baseUrl` of its own (OpenClaw never routes it to Codex) and request transport overrides (`headers`, `request`, `params`, `authHeader`, `timeoutSeconds`, `localService`)."},
	{"MR7", "The gateway's main workspace is `/home/node/workspace`; Codex works in a separate harness workspace."},
	{"MR8", "Catalog models and fallbacks keep the selected provider and resolve to the same harness; a provider's `models` may hold only the primary and fallback models."},
	{"MR9", "Saving a configuration and deploying it refuse a non-empty `agents.list` and the other rosters OpenClaw rejects."},
	{"MR10", "The frozen revision keeps the fallback order; admission neither executes fallback nor changes topology for it."},
	{"AD1", "A deployment authorizes the exact Agent, the configuration at its generation, and the credential source, which must belong to the Agent's compute."},
	{"AD2", "A sandbox driver may transform the configuration before admission; the stored configuration is not changed."},
	{"AD3", "The revision freezes the admitted document, the configuration's identity and generation, the harness and its version, the mode, the compute and the credential binding."},
	{"AD4", "Platform-owned logging (the default): admission stamps `logging.level`, a matching `consoleLevel`, JSON console style and disabled OTLP log export."},
	{"AD5", "With `logging.ownership = \"driver\"` the configuration's logging is kept as written."},
	{"AD6", "Apply admits the combination again before its first write; unsupported combinations, revoked authority or a missing driver fail closed."},
	{"AU1", "`api_key` from a Secret on Kubernetes reaches only the process that calls the model, as `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`."},
	{"AU2", "`codex_pat` (a Codex access token in a Secret, `secret_ref` or `value_wo`) is for dedicated Codex only, which gets `CODEX_ACCESS_TOKEN` and `CODEX_LOGIN_MODE=codex_pat`. A source from a managed ServiceAccount is refused: its Kubernetes token is not a Codex access token and could never log in."},
	{"AU3", "`credential_source` needs a Credential Gateway, the OpenShell sandbox, a dedicated harness and a compatible source type; the egress proxy inserts the key."},
	{"AU4", "While a Credential Gateway is selected, Secret-backed and account methods are `RESOURCE_CONFLICT`."},
	{"AU5", "SSH embedded OpenClaw accepts only `runtime` (a host environment file); Kubernetes refuses `runtime` with `RESOURCE_CONFLICT`."},
	{"AU6", "Dedicated gateways never receive the inference credential; `secret_bindings` supply channel and gateway feature credentials only."},
	{"AU7", "Credential values are never logged, never in diagnostics, and kept out of state; a literal credential in a document is warned of, or refused when shaped like a live key."},
	{"PR1", "Kubernetes OpenClaw runs one native model probe per new deployment: 20 s plus 45 CPU-seconds at the CPU limit, 256 output tokens, tools and fallback off."},
	{"PR2", "Codex passes a native model probe before serving, read-only, ignoring user configuration; a tool event never counts as success."},
	{"PR3", "Probe transport: dedicated Codex uses Responses over WebSocket, embedded OpenClaw HTTP streaming, compatible endpoints HTTPS Responses streaming."},
	{"PR4", "Codex retries once, after 1 to 1.5 s, on a timeout or transient failure; each attempt is capped at 30 s inside one 61 s budget."},
	{"PR5", "An exhausted or non-retryable failure holds the process unready until restart; readiness polling never starts another model call."},
	{"PR6", "Each probe attempt is a startup record with a final code (`READY`, `MODEL_PROBE_TIMEOUT`, `MODEL_PROBE_FAILED`, `AUTHENTICATION_FAILED`, `UNAVAILABLE`), never credentials."},
	{"PR7", "`AUTHENTICATION_FAILED` is a rejected credential (401/403) with structured fields; a CPU-starved probe is `MODEL_PROBE_CPU_STARVED`."},
	{"PR8", "A deployment fails at once on a held code; there is no automatic rollback."},
	{"PR9", "Startup wrappers log `runtime.startup_phase` records (login, probe, spawn, …) without provider, model, credential or path values."},
	{"PR10", "A first dedicated Codex deployment creates the gateway with its harness; a redeploy keeps the Service on the serving revision until activation."},
	{"PR11", "Probe transport settings are literal metadata; a model key may refer only to the selected provider's `OPENAI_API_KEY`/`ANTHROPIC_API_KEY` alias."},
	{"PR12", "Startup probes may cost model charges, and do not verify other configured models or later revocation."},
	{"LG1", "Kubernetes mounts the admitted configuration read-only under `/etc/openclaw`, with `OPENCLAW_CONFIG_PATH` pointing at it."},
	{"LG2", "Gateway containers log native JSON to the console at the admitted level, with their own OTLP log export disabled."},
	{"LG3", "Codex app servers log JSON to stderr (`LOG_FORMAT=json`, `RUST_LOG=<level>,codex_otel=off`) with OpenTelemetry export off."},
	{"LG4", "Runtime identity is carried by protected labels on every object the provider creates, never trusted from log payloads."},
	{"LG5", "The provider's own logs describe reconciliation with `work.id`, `work.operation`, `work.attempt` and `work.outcome`."},
	{"ND1", "What dedicated OpenClaw needs: each Agent owns its gateway, and the sandboxed native harness enrolls as a paired node that runs inference and the file and process tools itself (no OpenClaw release runs the inference: ND6)."},
	{"ND2", "The node connects ephemerally with a one-use enrollment target; the gateway can read neither the model credential nor the node's state."},
	{"ND3", "A provider failure or a missing node fails the turn; the gateway never falls back to its own inference."},
	{"ND4", "A sandbox driver needs a Kubernetes compute; native OpenClaw would need it with all three facets, enforced worker placement and node-local inference, which no OpenClaw release offers (ND6)."},
	{"ND5", "The installation lists the OpenClaw modes an Agent can use (`embedded`: ND6) and driver outages, never native workers; a dedicated deploy whose declared driver is not installed is `RESOURCE_CONFLICT` naming it."},
	{"ND6", "Dedicated OpenClaw is `INVALID_REQUEST` at plan whatever the image, `native_worker_support` or driver: OpenClaw " + PinnedOpenClawVersion + " runs a native worker's inference on the gateway with the gateway's credential and places sessions on a node only per dispatch; no release up to " + NativeInferenceCheckedVersion + " runs it on the node."},
	{"ND7", "There is no command-level exec facet and no per-tool sandbox admission."},
	{"AC1", "Embedded: the replacement is prepared while its predecessor serves; activation (Recreate) can interrupt service."},
	{"AC2", "Dedicated: a replacement first stops every earlier revision; the Agent is unavailable until it is ready."},
	{"AC3", "Guarded activation: an older apply never overwrites a newer selected revision, and traffic goes to exactly one revision."},
	{"AC4", "One activation audit record is written on durable completion; recovery after a crash repeats only safe effects."},
	{"AC5", "No single-process guarantee during node partitions or manual replacement; restarts do not guarantee session recovery."},
	{"OS1", "The OpenShell driver contains dedicated Codex with its admitted configuration; its Credential Gateway supplies the model key."},
	{"SS1", "SSH runs embedded OpenClaw only, under systemd, with auth method `runtime` (AU5)."},
	{"SS2", "On SSH the provider checks the gateway's readiness after activation, not model authentication."},
}

// LookupRule finds a rule by id.
func LookupRule(id string) (Rule, bool) {
	i := slices.IndexFunc(Rules, func(r Rule) bool { return r.ID == id })
	if i < 0 {
		return Rule{}, false
	}
	return Rules[i], true
}

// RulesMarkdown renders Rules as the docs' rules reference (a tfplugindocs
// template); `make generate` writes it.
func RulesMarkdown() string {
	var b strings.Builder
	b.WriteString(`---
page_title: "Rules"
subcategory: ""
description: |-
  Every rule of the OCC platform the provider's diagnostics and guides cite (HM, MR, AD, AU, PR, LG, ND, AC, OS, SS), each in one line.
---

<!-- Generated from internal/admission/rules.go by ` + "`make generate`" + `; do not edit. -->

# Rules

A refused plan or apply points at the attribute at fault, and its detail ends with the rule
that decides, such as ` + "`Rule HM1, answered as INVALID_REQUEST (400).`" + ` The
combination rules are checked in the provider's admission core at plan, on the values known
then, and again at apply before the first write (AD6); the others are kept at apply by what the
provider renders and how it deploys and activates (HM4, LG, AC, SS), or by the startup wrapper of
the runtime images (PR). Each rule in one line:
`)
	for _, g := range RuleGroups {
		fmt.Fprintf(&b, "\n## %s (%s)\n\n| Rule | What it says |\n|---|---|\n", g.Title, g.Prefix)
		for _, r := range Rules {
			if RulePrefix(r.ID) == g.Prefix {
				fmt.Fprintf(&b, "| %s | %s |\n", r.ID, strings.ReplaceAll(r.Summary, "|", `\|`))
			}
		}
	}
	fmt.Fprintf(&b, `
## Secret binding variables (AU6)

A binding of `+"`occ_configuration.secret_bindings`"+` reaches the gateway container, and only it, as
the variable named after the binding in upper case with `+"`-`"+` as `+"`_`"+`. It may not set a variable the
platform sets, one a model SDK reads as a credential or endpoint, a proxy or TLS trust setting, or
a loader setting: %s. Other `+"`*_API_KEY`"+` names (a tool's or channel's own key, such as
`+"`BRAVE_API_KEY`"+`) stay bindable. A binding may not point at a model credential Secret (the
credential source's `+"`secret_ref`"+` Secret, any key, or `+"`%s*`"+`) nor at a token Secret the
provider writes for any Agent (`+"`*%s`"+`, `+"`*%s`"+`). A model provider's `+"`apiKey`"+` and `+"`headers`"+` may
refer only to the primary provider's `+"`${OPENAI_API_KEY}`"+` or `+"`${ANTHROPIC_API_KEY}`"+` alias (PR11).
`, "`"+strings.Join(ReservedBindingVariables(), "`, `")+"`", CredentialSecretPrefix, GatewayTokenSecretSuffix, AppServerTokenSecretSuffix)
	return b.String()
}

// RulePrefix is a rule id's family: "HM" for "HM1".
func RulePrefix(id string) string {
	return strings.TrimRight(id, "0123456789")
}
