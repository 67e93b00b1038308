package admission

import (
	"slices"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// Resolution is the outcome of harness resolution over a document: the
// one primary model, its fallbacks in order, and the one harness (MR3 to MR8).
type Resolution struct {
	Primary   *ModelRef
	Fallbacks []ModelRef
	Harness   string
	// Explicit is true when the harness came from a runtime policy rather
	// than from the resolver's built-in-provider default.
	Explicit bool
}

// customProvider reports whether the document configures provider p
// explicitly (MR5: "explicitly configured providers … require an explicit
// supported runtime policy"): a provider OpenClaw does not know, or a
// built-in one with an entry of its own under models.providers, whatever
// that entry sets, its credentials alone (apiKey, auth, headers) included.
// Not counted: the entry's own runtime policy (agentRuntime is the policy
// itself) and the key the sandbox driver's transform adds (AD2: the
// OpenShell placeholder is the platform's, not the user's configuration).
func customProvider(doc occconfig.Document, p string) bool {
	cfg, ok := occconfig.Object(doc, pathProviders)[p].(map[string]any)
	if !ok {
		return false
	}
	if !slices.Contains(BuiltinProviders, strings.ToLower(p)) {
		return true
	}
	for k, v := range cfg {
		switch {
		case k == "agentRuntime":
		case k == "apiKey" && v == PlaceholderCredential:
		default:
			return true
		}
	}
	return false
}

// pluginRouted reports whether an enabled plugin routes provider p: a
// plugin of the same id, or the Codex plugin for openai and codex (MR5).
func pluginRouted(doc occconfig.Document, p string) bool {
	enabled := func(id string) bool {
		entry := occconfig.Object(doc, pathPluginEntries.Key(id))
		if entry == nil {
			return false
		}
		on, set := entry["enabled"].(bool)
		return !set || on
	}
	if enabled(p) {
		return true
	}
	return (p == "openai" || p == "codex") && enabled("codex")
}

// CodexPluginWebsocket reports whether the Codex plugin is explicitly
// enabled with the websocket app-server transport (MR6).
func CodexPluginWebsocket(doc occconfig.Document) bool {
	on, _ := occconfig.Lookup(doc, pathCodexPluginOn)
	transport, _ := occconfig.String(doc, pathCodexTransport)
	return on == true && transport == "websocket"
}

// resolveHarness applies MR5 to one model: explicit policies must agree;
// without one, only an unambiguous built-in provider with no custom
// provider and no plugin routing resolves, to OpenClaw.
func resolveHarness(doc occconfig.Document, ref ModelRef, refPath occconfig.Path, agentHarness string, errs *Errors) (string, bool) {
	ps := policiesFor(doc, ref, agentHarness, errs)
	h, e := agreed(ps, ref)
	if e != nil {
		*errs = append(*errs, e)
		return "", false
	}
	if h != "" {
		return h, true
	}
	why := ""
	switch {
	case ref.Provider == "openai" || ref.Provider == "codex":
		why = "provider " + ref.Provider + " can run on either harness"
	case customProvider(doc, ref.Provider):
		why = "provider " + ref.Provider + " is explicitly configured under models.providers (an entry of its own, even credentials alone)"
	case pluginRouted(doc, ref.Provider):
		why = "provider " + ref.Provider + " is routed by a plugin"
	case !slices.Contains(BuiltinProviders, ref.Provider):
		why = "provider " + ref.Provider + " is not a built-in OpenClaw provider"
	default:
		return HarnessOpenClaw, false
	}
	*errs = append(*errs, invalid("MR5", nil, refPath,
		"%s needs an explicit runtime policy: %s. Set the agent's harness, or agentRuntime.id on models.providers[%q] or on agents.defaults.models[%q]",
		ref, why, ref.Provider, ref.String()))
	return "", false
}

// Resolve runs harness resolution for a document and an Agent-level
// harness policy ("" when omitted). Every Agent entry must resolve to the
// same primary model and harness (MR3); fallbacks must keep the provider
// and resolve to the same harness, and extra catalog models need an
// explicit matching runtime (MR8).
func Resolve(doc occconfig.Document, agentHarness string) (Resolution, Errors) {
	var errs Errors
	// Reference syntax, entries and provider consistency are CheckDocument's
	// (save time); resolution reads what it can and judges harnesses only.
	sel := agentSelection(doc)
	res := Resolution{Primary: sel.Primary, Fallbacks: sel.Fallbacks}

	if sel.Primary == nil {
		// MR5: no model candidate resolves to OpenClaw, unless a policy says otherwise.
		res.Harness = HarnessOpenClaw
		if agentHarness != "" {
			res.Harness, res.Explicit = agentHarness, true
		}
		return res, errs
	}
	res.Harness, res.Explicit = resolveHarness(doc, *sel.Primary, sel.PrimaryPath, agentHarness, &errs)
	if res.Harness == "" {
		return res, errs
	}

	var fallbacks []ModelRef
	var paths []occconfig.Path
	if sel.Entry == "" { // an entry's own fallbacks come with every entry's below
		fallbacks, paths = slices.Clone(sel.Fallbacks), slices.Clone(sel.FallbackPaths)
	}
	entryRefs, entryPaths := entryFallbacks(doc)
	fallbacks, paths = append(fallbacks, entryRefs...), append(paths, entryPaths...)
	for i, fb := range fallbacks {
		p := paths[i]
		if fb.Provider != sel.Primary.Provider {
			continue // refused by CheckDocument (MR8)
		}
		h, _ := resolveHarness(doc, fb, p, agentHarness, &errs)
		if h != "" && h != res.Harness {
			errs = append(errs, invalid("MR8", nil, p, "fallback %s resolves to harness %q but the primary model resolves to %q; fallbacks must resolve to the same harness", fb, h, res.Harness))
		}
	}
	errs = append(errs, checkCatalog(doc, res, agentHarness)...)
	return res, errs
}

// checkCatalog applies MR8's harness part to the selectable catalogs:
// models beyond primary and fallbacks need an explicit runtime policy naming
// the resolved harness (their provider is CheckDocument's).
func checkCatalog(doc occconfig.Document, res Resolution, agentHarness string) Errors {
	var errs Errors
	selected := map[string]bool{res.Primary.String(): true}
	for _, fb := range res.Fallbacks {
		selected[fb.String()] = true
	}
	for _, cat := range catalogPaths(doc) {
		for _, key := range sortedKeys(occconfig.Object(doc, cat)) {
			ref, ok := catalogRef(doc, key, res.Primary.Provider)
			if !ok || ref.Provider != res.Primary.Provider || selected[ref.String()] {
				continue
			}
			var scratch Errors
			ps := policiesFor(doc, ref, agentHarness, &scratch)
			h, _ := agreed(ps, ref)
			if h != res.Harness {
				errs = append(errs, invalid("MR8", nil, cat.Key(key), "catalog model %s is neither the primary nor a fallback, so it needs an explicit agentRuntime.id = %q (on the model or its provider)", ref, res.Harness))
			}
		}
	}
	return errs
}

// catalogRef reads a catalog key: a full provider/model reference when its
// first segment is a known provider, otherwise an id under the selected
// provider (MR2).
func catalogRef(doc occconfig.Document, key, selectedProvider string) (ModelRef, bool) {
	if ref, err := ParseModelRef(key); err == nil && (slices.Contains(BuiltinProviders, ref.Provider) || customProvider(doc, ref.Provider) || ref.Provider == selectedProvider) {
		return ref, true
	}
	ref, err := ParseModelRef(selectedProvider + "/" + key)
	return ref, err == nil
}

// catalogPaths lists the selectable model catalogs: the defaults' and each
// Agent entry's.
func catalogPaths(doc occconfig.Document) []occconfig.Path {
	catalogs := []occconfig.Path{pathDefaultModels}
	for _, id := range sortedKeys(occconfig.Object(doc, pathEntries)) {
		catalogs = append(catalogs, pathEntries.Key(id).Key("models"))
	}
	return catalogs
}
