package admission

import (
	"fmt"
	"sort"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Document paths the rules read (MR3, upstream OpenClaw layout).
var (
	pathAgents         = occconfig.Keys("agents")
	pathDefaultModel   = occconfig.Keys("agents", "defaults", "model")
	pathDefaultModels  = occconfig.Keys("agents", "defaults", "models")
	pathLegacyRuntime  = occconfig.Keys("agents", "defaults", "agentRuntime")
	pathMaxConcurrent  = occconfig.Keys("agents", "defaults", "maxConcurrent")
	pathEntries        = occconfig.Keys("agents", "entries")
	pathProviders      = occconfig.Keys("models", "providers")
	pathPluginEntries  = occconfig.Keys("plugins", "entries")
	pathCodexTransport = occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "transport")
	pathCodexPluginOn  = occconfig.Keys("plugins", "entries", "codex", "enabled")
)

// modelSelection is the primary model and its fallbacks as written.
type modelSelection struct {
	Primary     *ModelRef
	PrimaryPath occconfig.Path
	Fallbacks   []ModelRef
	// FallbackPaths are parallel to Fallbacks.
	FallbackPaths []occconfig.Path
	// Entry is the Agent entry the selection comes from (agentSelection);
	// "" for agents.defaults.model.
	Entry string
}

// agentSelection is the Agent's primary model and its fallbacks (MR3:
// "all Agent entries must resolve to one primary model"):
// agents.defaults.model, or, when that selects no primary, the primary the
// Agent entries select for themselves when they all select the same one
// (checkEntriesPrimary refuses entries that disagree or that would
// resolve to no model), with the fallbacks of the first entry that
// selects it. Entry is that entry's id ("" for the defaults).
func agentSelection(doc occconfig.Document) modelSelection {
	sel, _ := readModelSelection(doc, pathDefaultModel)
	if sel.Primary != nil {
		return sel
	}
	for _, id := range sortedKeys(occconfig.Object(doc, pathEntries)) {
		if e, _ := readModelSelection(doc, pathEntries.Key(id).Key("model")); e.Primary != nil {
			e.Entry = id
			return e
		}
	}
	return sel
}

// readModelSelection reads agents.defaults.model (a string, or an object
// {primary, fallbacks}) or an entry's model at base (MR1, MR3).
func readModelSelection(doc occconfig.Document, base occconfig.Path) (modelSelection, Errors) {
	var sel modelSelection
	var errs Errors
	raw, ok := occconfig.Lookup(doc, base)
	if !ok || raw == nil {
		return sel, nil
	}
	parse := func(v any, p occconfig.Path) *ModelRef {
		s, isStr := v.(string)
		if !isStr {
			errs = append(errs, invalid("MR1", nil, p, "a model reference must be a string \"provider/model\""))
			return nil
		}
		ref, err := ParseModelRef(s)
		if err != nil {
			errs = append(errs, invalid("MR1", nil, p, "%v", err))
			return nil
		}
		return &ref
	}
	switch t := raw.(type) {
	case string:
		sel.Primary, sel.PrimaryPath = parse(t, base), base
	case map[string]any:
		if p, ok := t["primary"]; ok {
			sel.Primary, sel.PrimaryPath = parse(p, base.Key("primary")), base.Key("primary")
		}
		if fb, ok := t["fallbacks"]; ok {
			arr, isArr := fb.([]any)
			if !isArr {
				errs = append(errs, invalid("MR1", nil, base.Key("fallbacks"), "fallbacks must be an array of \"provider/model\" strings"))
				break
			}
			for i, v := range arr {
				p := base.Key("fallbacks").Index(i)
				if ref := parse(v, p); ref != nil {
					sel.Fallbacks = append(sel.Fallbacks, *ref)
					sel.FallbackPaths = append(sel.FallbackPaths, p)
				}
			}
		}
		if sel.Primary == nil && len(sel.Fallbacks) > 0 {
			errs = append(errs, invalid("MR3", nil, base, "fallbacks without a primary model; set primary"))
		}
	default:
		errs = append(errs, invalid("MR1", nil, base, "model must be a \"provider/model\" string or an object { primary, fallbacks }"))
	}
	return sel, errs
}

// policy is one explicit runtime policy found for a model (MR3).
type policy struct {
	Harness string
	Path    occconfig.Path // nil for the Agent's own harness attribute
	Where   string
}

func (p policy) describe() string {
	if p.Path == nil {
		return p.Where
	}
	return p.Path.String()
}

// catalogKey finds the key of a model catalog map that names ref: the full
// reference, or the id without its provider prefix (MR2).
func catalogKey(catalog map[string]any, ref ModelRef) (string, bool) {
	if _, ok := catalog[ref.String()]; ok {
		return ref.String(), true
	}
	if _, ok := catalog[ref.Model]; ok {
		return ref.Model, true
	}
	return "", false
}

// runtimePolicy reads an agentRuntime.id under base, validating its value (MR3).
func runtimePolicy(doc occconfig.Document, base occconfig.Path, where string, errs *Errors) *policy {
	p := base.Key("agentRuntime").Key("id")
	raw, ok := occconfig.Lookup(doc, p)
	if !ok {
		if v, has := occconfig.Lookup(doc, base.Key("agentRuntime")); has {
			if _, isObj := v.(map[string]any); !isObj {
				*errs = append(*errs, invalid("MR3", nil, base.Key("agentRuntime"), "agentRuntime must be an object { id = \"openclaw\" | \"codex\" }"))
			}
		}
		return nil
	}
	id, _ := raw.(string)
	harness, known := runtimeIDs[id]
	if !known {
		if instead, alias := upstreamRuntimeAliases[id]; alias {
			*errs = append(*errs, invalid("MR3", nil, p, "agentRuntime.id %q is not supported by OCC, which accepts only the platform's \"openclaw\" and \"codex\": %q is %s", id, id, instead))
			return nil
		}
		*errs = append(*errs, invalid("MR3", nil, p, "agentRuntime.id %s is not supported by OCC; use \"openclaw\" or \"codex\"", jsonish(raw)))
		return nil
	}
	return &policy{Harness: harness, Path: p, Where: where}
}

// policiesFor gathers every explicit runtime policy that applies to ref:
// its provider's, the defaults catalog entry's, each Agent entry's catalog
// entry's, and the Agent's own harness attribute (MR3, MR5).
func policiesFor(doc occconfig.Document, ref ModelRef, agentHarness string, errs *Errors) []policy {
	var out []policy
	if p := runtimePolicy(doc, pathProviders.Key(ref.Provider), "provider "+ref.Provider, errs); p != nil {
		out = append(out, *p)
	}
	if arr, ok := occconfig.Lookup(doc, pathProviders.Key(ref.Provider).Key("models")); ok {
		entries, _ := arr.([]any)
		for i, e := range entries {
			if id, _ := occconfig.String(e, occconfig.Keys("id")); id != "" && NormalizeCatalogID(ref.Provider, id) == ref.Model {
				if p := runtimePolicy(doc, pathProviders.Key(ref.Provider).Key("models").Index(i), "provider model "+ref.String(), errs); p != nil {
					out = append(out, *p)
				}
			}
		}
	}
	if key, ok := catalogKey(occconfig.Object(doc, pathDefaultModels), ref); ok {
		if p := runtimePolicy(doc, pathDefaultModels.Key(key), "model "+ref.String(), errs); p != nil {
			out = append(out, *p)
		}
	}
	for _, id := range sortedKeys(occconfig.Object(doc, pathEntries)) {
		models := pathEntries.Key(id).Key("models")
		if key, ok := catalogKey(occconfig.Object(doc, models), ref); ok {
			if p := runtimePolicy(doc, models.Key(key), "agent entry "+id, errs); p != nil {
				out = append(out, *p)
			}
		}
	}
	if agentHarness != "" {
		out = append(out, policy{Harness: agentHarness, Where: fmt.Sprintf("the agent's harness = %q", agentHarness)})
	}
	return out
}

// agreed returns the single harness all policies name, or a conflict error (MR3).
func agreed(ps []policy, ref ModelRef) (string, *Error) {
	if len(ps) == 0 {
		return "", nil
	}
	for _, p := range ps[1:] {
		if p.Harness != ps[0].Harness {
			e := invalid("MR3", nil, p.Path, "runtime policies for %s conflict: %s selects %q but %s selects %q; make them agree",
				ref, ps[0].describe(), ps[0].Harness, p.describe(), p.Harness)
			if p.Path == nil {
				e.DocPath = ps[0].Path
				e.Attribute = []string{"harness"}
			}
			return "", e
		}
	}
	return ps[0].Harness, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonish(v any) string {
	return string(occconfig.Canonical(v))
}
