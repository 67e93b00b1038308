package admission

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// CheckDocument applies the save-time rules to a Configuration document:
// the root keys OpenClaw accepts, the rosters OCC refuses (MR9), model
// reference syntax (MR1, MR2), runtime policy values and explicit
// conflicts (MR3), one primary per Agent entry (MR3), and provider
// consistency of fallbacks, catalogs and provider model arrays (MR8).
// Rules that need the Agent (harness resolution, dedicated main-Agent
// rules) run at deployment in Admit.
func CheckDocument(doc occconfig.Document) Errors {
	var errs Errors
	errs = append(errs, checkRootKeys(doc)...)
	errs = append(errs, checkRosters(doc)...)
	errs = append(errs, checkEntries(doc)...)
	errs = append(errs, checkCustomProviders(doc)...)
	errs = append(errs, checkMaxConcurrent(doc)...)
	errs = append(errs, literalKeys(doc)...)

	_, e := readModelSelection(doc, pathDefaultModel)
	errs = append(errs, e...)
	sel := agentSelection(doc)
	errs = append(errs, checkEntriesPrimary(doc, sel)...)

	// Every runtime policy value must be a supported harness (MR3), and the
	// document's own policies for the primary must agree.
	for _, p := range sortedKeys(occconfig.Object(doc, pathProviders)) {
		runtimePolicy(doc, pathProviders.Key(p), "", &errs)
	}
	for _, cat := range catalogPaths(doc) {
		for _, key := range sortedKeys(occconfig.Object(doc, cat)) {
			runtimePolicy(doc, cat.Key(key), "", &errs)
		}
	}
	if sel.Primary != nil {
		var scratch Errors // value errors were reported above
		if _, conflictErr := agreed(policiesFor(doc, *sel.Primary, "", &scratch), *sel.Primary); conflictErr != nil {
			errs = append(errs, conflictErr)
		}
		errs = append(errs, checkProviderConsistency(doc, sel)...)
	}
	return errs
}

// checkMaxConcurrent: agents.defaults.maxConcurrent, when set, is a
// positive whole number (HM7; upstream's schema says the same).
func checkMaxConcurrent(doc occconfig.Document) Errors {
	v, ok := occconfig.Lookup(doc, pathMaxConcurrent)
	if !ok {
		return nil
	}
	if n, isInt := v.(int64); isInt && n > 0 {
		return nil
	}
	return Errors{invalid("HM7", nil, pathMaxConcurrent, "maxConcurrent must be a positive whole number of concurrent top-level turns, not %s; or omit it for max(8, 4 × available parallelism)", jsonish(v))}
}

// DocumentWarnings lists advice for a document that does not refuse it.
func DocumentWarnings(doc occconfig.Document) []Warning {
	var ws []Warning
	if _, ok := occconfig.Lookup(doc, pathLegacyRuntime); ok {
		ws = append(ws, Warning{Rule: "MR3", DocPath: pathLegacyRuntime,
			Message: "agents.defaults.agentRuntime is legacy and ignored upstream, so admission removes it from the revision; set the agent's harness, or agentRuntime.id on models.providers.<provider> or on agents.defaults.models[\"provider/model\"]"})
	}
	if _, ok := occconfig.Lookup(doc, pathRedactSensitive); ok {
		ws = append(ws, Warning{Rule: "AD4", DocPath: pathRedactSensitive,
			Message: "logging.redactSensitive is retired: redaction is always on. Platform-owned logging removes the key from the admitted revision; with driver-owned logging it is kept as written"})
	}
	return append(ws, literalCredentialWarnings(doc)...)
}

// literalCredentials visits every string under a key that names a
// credential (apiKey, botToken, password, clientSecret, …) and holds a
// literal value rather than a ${VAR} reference (AU7): the document goes to
// Terraform state (the configuration's and every agent's), to the plan
// and to the revision's ConfigMap as it is written. visit gets its path
// and value, in key order.
func literalCredentials(v any, at occconfig.Path, visit func(p occconfig.Path, value string)) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			p := at.Key(k)
			if s, ok := x[k].(string); ok && credentialKey(k) && literalValue(s) {
				visit(p, s)
				continue
			}
			literalCredentials(x[k], p, visit)
		}
	case []any:
		for i, e := range x {
			literalCredentials(e, at.Index(i), visit)
		}
	}
}

// literalCredentialWarnings warns of each literal credential that is not
// shaped like a live key (those literalKeys refuses).
func literalCredentialWarnings(doc occconfig.Document) []Warning {
	var ws []Warning
	literalCredentials(map[string]any(doc), nil, func(p occconfig.Path, s string) {
		if keyShape(s) == "" {
			ws = append(ws, Warning{Rule: "AU7", DocPath: p, Message: literalCredentialMessage(p)})
		}
	})
	return ws
}

// literalKeys refuses a literal credential whose value has the shape of a
// real provider key (sk-ant-…, AIza…, xoxb-…, a Telegram bot token, …):
// unlike a placeholder, it is a live credential on its way to Terraform
// state, the plan and a plain ConfigMap (AU7). The refusal names the path
// and the kind of key, never the value.
func literalKeys(doc occconfig.Document) Errors {
	var errs Errors
	literalCredentials(map[string]any(doc), nil, func(p occconfig.Path, s string) {
		if kind := keyShape(s); kind != "" {
			errs = append(errs, invalid("AU7", nil, p, "%s", literalKeyMessage(p, kind)))
		}
	})
	return errs
}

// keyShapes are the published formats of live credentials, each with the
// name a diagnostic gives it. Short or placeholder values ("sk-test",
// "changeme") are not keys: they only warn (literalCredentialWarnings).
var keyShapes = []struct {
	name string
	re   *regexp.Regexp
}{
	{"an Anthropic API key (sk-ant-…)", regexp.MustCompile(`^sk-ant-[A-Za-z0-9_-]{20,}$`)},
	{"an OpenRouter API key (sk-or-…)", regexp.MustCompile(`^sk-or-[A-Za-z0-9_-]{20,}$`)},
	{"an OpenAI-style API key (sk-…)", regexp.MustCompile(`^sk-[A-Za-z0-9_-]{20,}$`)},
	{"a Google API key (AIza…)", regexp.MustCompile(`^AIza[0-9A-Za-z_-]{30,}$`)},
	{"a Slack token (xox…-)", regexp.MustCompile(`^(xox[abposr]|xapp)-[A-Za-z0-9-]{10,}$`)},
	{"a GitHub token", regexp.MustCompile(`^(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})$`)},
	{"a GitLab token (glpat-…)", regexp.MustCompile(`^glpat-[A-Za-z0-9_-]{20,}$`)},
	{"an AWS access key id (AKIA…)", regexp.MustCompile(`^(AKIA|ASIA)[0-9A-Z]{16}$`)},
	{"a Hugging Face token (hf_…)", regexp.MustCompile(`^hf_[A-Za-z0-9]{30,}$`)},
	{"a Groq API key (gsk_…)", regexp.MustCompile(`^gsk_[A-Za-z0-9]{30,}$`)},
	{"an xAI API key (xai-…)", regexp.MustCompile(`^xai-[A-Za-z0-9]{30,}$`)},
	{"a Perplexity API key (pplx-…)", regexp.MustCompile(`^pplx-[A-Za-z0-9]{30,}$`)},
	{"a Telegram bot token", regexp.MustCompile(`^[0-9]{6,12}:[A-Za-z0-9_-]{30,}$`)},
}

// keyShape names the kind of live credential s looks like ("" for none).
// A "Bearer " prefix (an Authorization header) is looked through.
func keyShape(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "Bearer "); ok {
		s = strings.TrimSpace(rest)
	}
	for _, k := range keyShapes {
		if k.re.MatchString(s) {
			return k.name
		}
	}
	return ""
}

func literalKeyMessage(p occconfig.Path, kind string) string {
	msg := p.String() + " holds what looks like " + kind + " as a literal value; it would go to Terraform state, to the plan and, in plain text, " +
		"to the revision's ConfigMap, so it is refused. "
	if len(p) > 1 && p[0].Key == "models" && p[1].Key == "providers" {
		return msg + "Remove it: the model credential comes from the Agent's credential source (harness_auth), which keeps it out of state"
	}
	return msg + referenceFix + "; if it is no live credential, write another value"
}

// referenceFix is how a document refers to a credential instead of
// holding it, on either kind of compute.
const referenceFix = "Write \"${NAME}\" here and give NAME to the runtime: on Kubernetes, keep the value in a Secret and bind it on the configuration " +
	"(secret_bindings = { NAME = { name = \"SECRET\", key = \"KEY\" } }); on an SSH host, add NAME=value to the environment_file of the agent's " +
	"runtime credential source, which the unit loads"

// credentialKey reports whether a document key names a credential.
func credentialKey(k string) bool {
	k = strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
	switch {
	case k == "password" || k == "passwd" || k == "secret" || k == "privatekey" || k == "credentials" || k == "authorization":
		return true
	case strings.HasSuffix(k, "apikey") || strings.HasSuffix(k, "token") || strings.HasSuffix(k, "secret") || strings.HasSuffix(k, "password"):
		return true
	}
	return false
}

// literalValue is a non-empty value that refers to no ${VAR}.
func literalValue(s string) bool {
	return strings.TrimSpace(s) != "" && len(envRefs(s)) == 0
}

func literalCredentialMessage(p occconfig.Path) string {
	if len(p) > 1 && p[0].Key == "models" && p[1].Key == "providers" {
		return p.String() + " holds a literal model credential: it goes to Terraform state (the configuration's and every agent's), to the plan and, " +
			"in plain text, to the revision's ConfigMap. Remove it: the model credential comes from the Agent's credential source (harness_auth), which keeps it out of state"
	}
	return p.String() + " holds a literal credential: it goes to Terraform state, to the plan and, in plain text, to the revision's ConfigMap. " + referenceFix
}

var entryIDRe = regexp.MustCompile(`^[a-z0-9_][a-z0-9_-]{0,63}$`)

// checkEntries applies the invariants OpenClaw enforces on the agents.entries
// roster and on the rosters that name its ids (MR9): valid ids, at most one
// default, several entries only with explicit ownership or one default, and
// bindings/broadcast naming only known entries.
func checkEntries(doc occconfig.Document) Errors {
	var errs Errors
	raw, present := occconfig.Lookup(doc, pathEntries)
	entries, _ := raw.(map[string]any)
	if present && !isObject(raw) {
		return Errors{invalid("MR9", nil, pathEntries, "agents.entries must be an object keyed by agent id")}
	}
	if present && len(entries) == 0 {
		errs = append(errs, invalid("MR9", nil, pathEntries, "agents.entries is empty; OpenClaw needs at least one entry (or omit agents.entries for the implicit main agent)"))
	}
	defaults := 0
	for _, id := range sortedKeys(entries) {
		if !entryIDRe.MatchString(id) {
			errs = append(errs, invalid("MR9", nil, pathEntries.Key(id), "agent id %q is invalid; use 1 to 64 of a-z, 0-9, _ and -, starting with a letter, digit or _", id))
		}
		if d, _ := occconfig.Lookup(entries, occconfig.Keys(id, "default")); d == true {
			defaults++
		}
	}
	ownership, _ := occconfig.String(doc, pathAgents.Key("ownership"))
	switch {
	case defaults > 1:
		errs = append(errs, invalid("MR9", nil, pathEntries, "%d entries set default = true; at most one may", defaults))
	case len(entries) > 1 && ownership != "explicit" && defaults != 1:
		errs = append(errs, invalid("MR9", nil, pathEntries, "several agent entries need agents.ownership = \"explicit\" or exactly one entry with default = true"))
	}
	// The references to agent ids OpenClaw 2026.9.6 itself checks against
	// the roster (agents.entries, or the implicit "main").
	roster := map[string]bool{}
	for e := range entries {
		roster[strings.ToLower(e)] = true
	}
	if len(roster) == 0 {
		roster["main"] = true
	}
	known := func(id string) bool { return roster[strings.ToLower(id)] }
	unknown := func(at occconfig.Path, what, id string) {
		errs = append(errs, invalid("MR9", nil, at, "%s names agent %q, which agents.entries does not define", what, id))
	}
	for _, ref := range []struct {
		at   occconfig.Path
		what string
	}{
		{pathAgents.Key("defaults").Key("heartbeat").Key("agentId"), "the heartbeat"},
		{pathAgents.Key("defaults").Key("systemAgent").Key("agentId"), "the system agent"},
		{occconfig.Keys("talk", "agentId"), "talk"},
	} {
		if id, ok := occconfig.String(doc, ref.at); ok && !known(id) {
			unknown(ref.at, ref.what, id)
		}
	}
	if arr, ok := occconfig.Lookup(doc, occconfig.Keys("bindings")); ok && len(entries) > 0 {
		list, _ := arr.([]any)
		for i, b := range list {
			if id, ok := occconfig.String(b, occconfig.Keys("agentId")); ok && id != "main" && !known(id) {
				unknown(occconfig.Keys("bindings").Index(i).Key("agentId"), "a binding", id)
			}
		}
	}
	broadcast := occconfig.Object(doc, occconfig.Keys("broadcast"))
	for _, key := range sortedKeys(broadcast) {
		if key == "strategy" || (len(entries) == 0 && !broadcastPeer.MatchString(key)) {
			continue
		}
		at := occconfig.Keys("broadcast", key)
		list, isList := broadcast[key].([]any)
		if !isList {
			obj, isObj := broadcast[key].(map[string]any)
			if !isObj {
				continue
			}
			list, _ = obj["agents"].([]any)
			at = at.Key("agents")
		}
		for i, v := range list {
			if id, ok := v.(string); ok && !known(id) {
				unknown(at.Index(i), "broadcast group "+strconv.Quote(key), id)
			}
		}
	}
	return errs
}

// broadcastPeer is a broadcast key OpenClaw checks when no entries are set
// ("channel:peer").
var broadcastPeer = regexp.MustCompile(`(?i)^[a-z][a-z0-9_-]*:.+$`)

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// checkCustomProviders applies upstream's rule that a provider OpenClaw does
// not know must declare its baseUrl and models.
func checkCustomProviders(doc occconfig.Document) Errors {
	var errs Errors
	providers := occconfig.Object(doc, pathProviders)
	for _, p := range sortedKeys(providers) {
		if slices.Contains(BuiltinProviders, strings.ToLower(p)) {
			continue
		}
		cfg, _ := providers[p].(map[string]any)
		_, hasURL := cfg["baseUrl"]
		_, hasModels := cfg["models"]
		if !hasURL || !hasModels {
			errs = append(errs, invalid("MR5", nil, pathProviders.Key(p), "provider %q is not built into OpenClaw, so it must declare baseUrl and models", p))
		}
	}
	return errs
}

// checkRootKeys refuses root keys OpenClaw does not accept: the gateway
// exits with code 78 on an unknown root key.
func checkRootKeys(doc occconfig.Document) Errors {
	var errs Errors
	for _, k := range sortedKeys(doc) {
		if !slices.Contains(RootKeys, k) {
			errs = append(errs, invalid("MR9", nil, occconfig.Keys(k), "%q is not a root key OpenClaw accepts (the gateway would exit with code 78); accepted root keys: %s", k, strings.Join(RootKeys, ", ")))
		}
	}
	return errs
}

// checkRosters refuses a non-empty agents.list and the other rosters
// OpenClaw rejects (MR9).
func checkRosters(doc occconfig.Document) Errors {
	var errs Errors
	for _, r := range RefusedRosters {
		v, ok := occconfig.Lookup(doc, r.Path)
		if !ok || isEmpty(v) {
			continue
		}
		errs = append(errs, invalid("MR9", nil, r.Path, "%s; remove it (one OCC Agent is one OpenClaw agent)", r.Why))
	}
	return errs
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// checkProviderConsistency applies MR8's provider part: fallbacks and
// catalog models keep the primary's provider, and a provider's models array
// holds only the primary and fallbacks (ids full or without prefix, MR2).
func checkProviderConsistency(doc occconfig.Document, sel modelSelection) Errors {
	var errs Errors
	primary := *sel.Primary
	for i, fb := range sel.Fallbacks {
		if sel.Entry != "" {
			break // an entry's fallbacks are checkEntriesPrimary's
		}
		if fb.Provider != primary.Provider {
			errs = append(errs, invalid("MR8", nil, sel.FallbackPaths[i], "fallback %s leaves the selected provider %s; fallbacks must keep the primary model's provider", fb, primary.Provider))
		}
	}
	for _, cat := range catalogPaths(doc) {
		for _, key := range sortedKeys(occconfig.Object(doc, cat)) {
			ref, ok := catalogRef(doc, key, primary.Provider)
			if !ok {
				errs = append(errs, invalid("MR1", nil, cat.Key(key), "catalog key %q is not a model reference; write provider/model, or the id under the selected provider", key))
				continue
			}
			if ref.Provider != primary.Provider {
				errs = append(errs, invalid("MR8", nil, cat.Key(key), "catalog model %s leaves the selected provider %s; selectable catalogs must keep the primary model's provider", ref, primary.Provider))
			}
		}
	}
	// The resolved primary and every fallback: the defaults' and those
	// Agent entries select for themselves (MR8: "fallbacks (defaults or
	// entries)"); a fallback of another provider is refused above.
	entryRefs, _ := entryFallbacks(doc)
	fallbacks := append(slices.Clone(sel.Fallbacks), entryRefs...)
	allowed := map[string]bool{primary.String(): true}
	for _, fb := range fallbacks {
		allowed[fb.String()] = true
	}
	for _, p := range sortedKeys(occconfig.Object(doc, pathProviders)) {
		arrPath := pathProviders.Key(p).Key("models")
		raw, ok := occconfig.Lookup(doc, arrPath)
		if !ok {
			continue
		}
		arr, isArr := raw.([]any)
		if !isArr {
			errs = append(errs, invalid("MR8", nil, arrPath, "models must be an array of { id = \"…\" } entries"))
			continue
		}
		for i, entry := range arr {
			idPath := arrPath.Index(i).Key("id")
			id, _ := occconfig.String(entry, occconfig.Keys("id"))
			if id == "" {
				errs = append(errs, invalid("MR8", nil, idPath, "each model entry needs an id (the full reference or the id after the provider)"))
				continue
			}
			ref := ModelRef{Provider: p, Model: NormalizeCatalogID(p, id)}
			if !allowed[ref.String()] {
				errs = append(errs, invalid("MR8", nil, idPath, "%s is neither the primary model nor a fallback; a provider's models array may list only %s", ref, allowedList(primary, fallbacks)))
			}
		}
	}
	return errs
}

func allowedList(primary ModelRef, fallbacks []ModelRef) string {
	parts := []string{primary.String()}
	for _, f := range fallbacks {
		if !slices.Contains(parts, f.String()) {
			parts = append(parts, f.String())
		}
	}
	return fmt.Sprintf("[%s]", strings.Join(parts, ", "))
}

// checkEntriesPrimary makes every Agent entry resolve to the Agent's one
// primary model (MR3): an entry with its own model selects the Agent's
// primary (agentSelection: the defaults', or without one the entries'
// own); without agents.defaults.model, an entry that selects none would
// resolve to no model, so every entry must then select the same one.
func checkEntriesPrimary(doc occconfig.Document, agent modelSelection) Errors {
	var errs Errors
	primary := agent.Primary
	for _, id := range sortedKeys(occconfig.Object(doc, pathEntries)) {
		base := pathEntries.Key(id).Key("model")
		sel, e := readModelSelection(doc, base)
		errs = append(errs, e...)
		// MR8: an entry's fallbacks keep the selected provider like the
		// defaults' do (their harness is judged in Resolve).
		for i, fb := range sel.Fallbacks {
			if primary != nil && fb.Provider != primary.Provider {
				errs = append(errs, invalid("MR8", nil, sel.FallbackPaths[i], "agent entry %q: fallback %s leaves the selected provider %s; fallbacks must keep the primary model's provider", id, fb, primary.Provider))
			}
		}
		if sel.Primary == nil {
			if agent.Entry != "" && len(e) == 0 {
				errs = append(errs, invalid("MR3", nil, pathEntries.Key(id), "agent entry %q selects no model and agents.defaults.model is unset, so it resolves to no primary model, while entry %q selects %s; every entry must resolve to one primary model: set agents.defaults.model = %q (or the same model on every entry)", id, agent.Entry, primary, primary.String()))
			}
			continue
		}
		if *sel.Primary != *primary {
			what := "the agent's primary model is"
			if agent.Entry != "" {
				what = fmt.Sprintf("agent entry %q selects", agent.Entry)
			}
			errs = append(errs, invalid("MR3", nil, sel.PrimaryPath, "agent entry %q selects %s but %s %s; every entry must resolve to one primary model", id, sel.Primary, what, primary))
		}
	}
	return errs
}

// entryFallbacks are the fallbacks Agent entries select for themselves
// (agents.entries.<id>.model.fallbacks), with their paths, by entry id.
func entryFallbacks(doc occconfig.Document) ([]ModelRef, []occconfig.Path) {
	var refs []ModelRef
	var paths []occconfig.Path
	for _, id := range sortedKeys(occconfig.Object(doc, pathEntries)) {
		sel, _ := readModelSelection(doc, pathEntries.Key(id).Key("model"))
		refs = append(refs, sel.Fallbacks...)
		paths = append(paths, sel.FallbackPaths...)
	}
	return refs, paths
}
