package admission

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// RevisionChanges says, for people, what differs between two revisions of
// an Agent: why cur gets a new revision id where old had its own. Each
// entry names an input or setting in the words of the HCL interface and,
// where a value is short and never a document's content, its old and new
// value. It is empty when the two revisions are equal. Pure: values in,
// sentences out.
func RevisionChanges(old, cur *Revision) []string {
	a, b := revisionFields(old), revisionFields(cur)
	var out []string
	docChanged := false
	for _, key := range revisionKeyOrder(a, b) {
		if reflect.DeepEqual(a[key], b[key]) {
			continue
		}
		switch key {
		case "agent", "warnings":
		case "compute_settings":
			out = append(out, computeChanges(asMap(a[key]), asMap(b[key]))...)
		case "admitted_document":
			docChanged = true
			out = append(out, "the configuration document"+atPaths(asMap(a[key]), asMap(b[key])))
		case "gateway_document":
			if !docChanged {
				out = append(out, "the gateway's configuration"+atPaths(asMap(a[key]), asMap(b[key])))
			}
		default:
			out = append(out, describe(key, a[key], b[key]))
		}
	}
	return out
}

// revisionWords name a revision's fields as a user knows them; a field
// not listed is named by its JSON key.
var revisionWords = map[string]string{
	"harness":                  "the harness",
	"harness_version":          "the harness version",
	"execution_mode":           "the execution mode",
	"compute_id":               "the compute",
	"compute_kind":             "the compute kind",
	"configuration_id":         "the configuration",
	"configuration_generation": "the configuration's generation",
	"source":                   "the credential source (its method, generation or where its value lives)",
	"credential":               "how the model credential reaches the harness",
	"sandbox":                  "the sandbox binding",
	"primary_model":            "the primary model",
	"fallbacks":                "the fallback models",
	"max_concurrent":           "max_concurrent",
	"node_workers":             "the compute's node_workers",
	"logging_ownership":        "the compute's logging.ownership",
	"logging_level":            "the compute's logging.level",
	"probe":                    "the startup probe",
	"secret_bindings":          "the configuration's secret bindings",
}

// computeWords name the frozen compute settings by their attribute.
var computeWords = map[string]string{
	"cpu_millis":         "cpu_limit",
	"cpu_request_millis": "cpu_request",
	"state":              "state (size, storage_class, access_mode)",
}

// quoted fields show their old and new value.
var quoted = map[string]bool{
	"harness": true, "harness_version": true, "execution_mode": true, "configuration_generation": true,
	"primary_model": true, "max_concurrent": true, "node_workers": true, "logging_ownership": true, "logging_level": true,
}

func describe(key string, a, b any) string {
	name := revisionWords[key]
	if name == "" {
		name = strings.ReplaceAll(key, "_", " ")
	}
	if quoted[key] {
		return name + " " + fromTo(a, b)
	}
	return name
}

func computeChanges(a, b map[string]any) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		if reflect.DeepEqual(a[k], b[k]) {
			continue
		}
		name := computeWords[k]
		if name == "" {
			name = k
		}
		s := "the compute's " + name
		switch {
		case strings.HasSuffix(k, "_millis"):
			s += " " + fmt.Sprintf("%s → %s", millis(a[k]), millis(b[k]))
		case isScalar(a[k]) && isScalar(b[k]):
			s += " " + fromTo(a[k], b[k])
		}
		out = append(out, s)
	}
	return out
}

// DocumentChanges names where two documents differ, " at KEY, KEY.KEY"
// (two levels deep, at most five keys; never their values), or "" when
// they differ nowhere that can be named.
func DocumentChanges(a, b occconfig.Document) string {
	return atPaths(jsonObject(a), jsonObject(b))
}

// jsonObject is v as its JSON object, so that equal values compare equal
// whatever Go types hold them.
func jsonObject(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// atPaths is DocumentChanges over the documents' JSON objects.
func atPaths(a, b map[string]any) string {
	var paths []string
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		if reflect.DeepEqual(a[k], b[k]) {
			continue
		}
		am, aok := a[k].(map[string]any)
		bm, bok := b[k].(map[string]any)
		if !aok || !bok {
			paths = append(paths, k)
			continue
		}
		for _, k2 := range slices.Sorted(maps.Keys(union(am, bm))) {
			if !reflect.DeepEqual(am[k2], bm[k2]) {
				paths = append(paths, k+"."+k2)
			}
		}
	}
	if len(paths) == 0 {
		return ""
	}
	if len(paths) > 5 {
		paths = append(paths[:5], fmt.Sprintf("%d more", len(paths)-5))
	}
	return " at " + strings.Join(paths, ", ")
}

func fromTo(a, b any) string {
	return fmt.Sprintf("%s → %s", show(a), show(b))
}

func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "unset"
	case string:
		return fmt.Sprintf("%q", v)
	case map[string]any:
		if p, ok := v["provider"].(string); ok {
			if m, ok := v["model"].(string); ok {
				return fmt.Sprintf("%q", p+"/"+m)
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func isScalar(v any) bool {
	switch v.(type) {
	case nil, string, float64, bool:
		return true
	}
	return false
}

// revisionFields is a revision as its canonical JSON's top-level fields.
func revisionFields(r *Revision) map[string]any {
	if r == nil {
		return map[string]any{}
	}
	return jsonObject(r)
}

// revisionKeyOrder lists the fields of both in the order a user reads
// them: what runs, then where, then how.
func revisionKeyOrder(a, b map[string]any) []string {
	order := []string{"harness", "harness_version", "execution_mode", "compute_id", "compute_kind", "compute_settings",
		"configuration_id", "configuration_generation", "admitted_document", "gateway_document", "primary_model", "fallbacks",
		"source", "credential", "secret_bindings", "sandbox", "max_concurrent", "node_workers", "logging_ownership", "logging_level", "probe"}
	seen := map[string]bool{}
	var out []string
	for _, k := range order {
		seen[k] = true
		out = append(out, k)
	}
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func union(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func millis(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%gm", f)
	}
	return "unset"
}

// PinnedImageOf is the image of a pinned harness version as a revision
// records it ("openclaw@2026.9.6", "codex@0.169.0"); "" for a custom
// image's version or an unknown one. Setting a compute's runtime_image or
// codex_image to it holds that version across provider releases.
func PinnedImageOf(harnessVersion string) string {
	name, version, ok := strings.Cut(harnessVersion, "@")
	if !ok || version == "" || strings.HasPrefix(version, "image:") {
		return ""
	}
	switch name {
	case HarnessOpenClaw:
		return strings.TrimSuffix(PinnedRuntimeImage, PinnedOpenClawVersion) + version
	case HarnessCodex:
		return strings.TrimSuffix(PinnedCodexImage, PinnedCodexVersion) + version
	}
	return ""
}
