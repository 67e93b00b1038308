package admission

import (
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// CompatibleProvider is the provider OpenClaw selects for a custom Codex endpoint (MR4).
const CompatibleProvider = "openai-compatible"

var pathCodexBaseURL = occconfig.Keys("models", "providers", "codex", "baseUrl")

// CustomCodexEndpoint reports whether the document points the codex
// provider at a custom endpoint (a baseUrl of its own).
func CustomCodexEndpoint(doc occconfig.Document) bool {
	u, _ := occconfig.String(doc, pathCodexBaseURL)
	return strings.TrimSpace(u) != ""
}

// rewriteCodexRef turns codex/vendor/org/model into
// codex/openai-compatible/vendor/org/model (MR4); other references are kept.
func rewriteCodexRef(s string) string {
	rest, ok := strings.CutPrefix(s, "codex/")
	if !ok || strings.HasPrefix(rest, CompatibleProvider+"/") {
		return s
	}
	return "codex/" + CompatibleProvider + "/" + rest
}

// GatewayDocument compiles the private gateway configuration from an
// admitted document (MR4): with a custom Codex endpoint, every codex model
// reference (primary, fallbacks in order, catalog keys with their metadata
// and policies, the provider's models array) names the openai-compatible
// provider. The admitted document, the stored Configuration and the probe
// model are not changed; without a custom endpoint the copy is identical.
func GatewayDocument(admitted occconfig.Document) occconfig.Document {
	out := occconfig.Clone(admitted)
	if !CustomCodexEndpoint(out) {
		return out
	}
	rewriteSelection := func(base occconfig.Path) {
		raw, ok := occconfig.Lookup(out, base)
		if !ok {
			return
		}
		switch t := raw.(type) {
		case string:
			occconfig.Set(out, base, rewriteCodexRef(t))
		case map[string]any:
			if p, ok := t["primary"].(string); ok {
				t["primary"] = rewriteCodexRef(p)
			}
			if fbs, ok := t["fallbacks"].([]any); ok {
				for i, f := range fbs {
					if s, ok := f.(string); ok {
						fbs[i] = rewriteCodexRef(s)
					}
				}
			}
		}
	}
	selected := ""
	if sel := agentSelection(out); sel.Primary != nil {
		selected = sel.Primary.Provider
	}
	rewriteSelection(pathDefaultModel)
	for _, id := range sortedKeys(occconfig.Object(out, pathEntries)) {
		rewriteSelection(pathEntries.Key(id).Key("model"))
	}
	for _, cat := range catalogPaths(out) {
		m := occconfig.Object(out, cat)
		for _, key := range sortedKeys(m) {
			ref, ok := catalogRef(out, key, selected)
			if !ok || ref.Provider != "codex" {
				continue
			}
			if nk := rewriteCodexRef(ref.String()); nk != key {
				m[nk] = m[key]
				delete(m, key)
			}
		}
	}
	if arr, ok := occconfig.Lookup(out, pathProviders.Key("codex").Key("models")); ok {
		if entries, ok := arr.([]any); ok {
			for _, e := range entries {
				if obj, ok := e.(map[string]any); ok {
					if id, ok := obj["id"].(string); ok {
						model := NormalizeCatalogID("codex", id)
						if !strings.HasPrefix(model, CompatibleProvider+"/") {
							obj["id"] = CompatibleProvider + "/" + model
						}
					}
				}
			}
		}
	}
	return out
}
