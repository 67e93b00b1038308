package occconfig

import (
	"testing"
)

func TestPath_String(t *testing.T) {
	tests := []struct {
		path Path
		want string
	}{
		{nil, ""},
		{Keys("agents"), "agents"},
		{Keys("agents", "defaults", "model"), "agents.defaults.model"},
		{Keys("agents", "defaults", "models", "openai/gpt-5", "agentRuntime"), `agents.defaults.models["openai/gpt-5"].agentRuntime`},
		{Keys("agents", "defaults", "models", "openai/gpt-5", "agentRuntime", "id"), `agents.defaults.models["openai/gpt-5"].agentRuntime.id`},
		{Keys("models", "providers", "openai-compatible", "baseUrl"), `models.providers["openai-compatible"].baseUrl`},
		{Keys("agents", "defaults", "model", "fallbacks").Index(2), "agents.defaults.model.fallbacks[2]"},
		{Keys("models", "providers", "codex", "models").Index(0).Key("id"), "models.providers.codex.models[0].id"},
		{Keys("$schema"), "$schema"},
		{Keys("_private", "x1"), "_private.x1"},
		{Keys("1abc"), `["1abc"]`},
		{Keys("a", ""), `a[""]`},
		{Keys("a", `q"uote`), `a["q\"uote"]`},
		{Keys("z.ai"), `["z.ai"]`},
		{Path{}.Index(0).Index(1), "[0][1]"},
	}
	for _, tc := range tests {
		if got := tc.path.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}

func TestPath_KeyAndIndexDoNotAlias(t *testing.T) {
	base := make(Path, 0, 8).Key("a")
	x := base.Key("x")
	y := base.Key("y")
	if x.String() != "a.x" || y.String() != "a.y" {
		t.Errorf("paths alias each other: %s, %s", x, y)
	}
	if base.String() != "a" {
		t.Errorf("base changed: %s", base)
	}
}

func TestLookup(t *testing.T) {
	d := mustParse(t, `{agents: {defaults: {model: {primary: "openai/gpt-5", fallbacks: ["openai/a", "openai/b"]},
		models: {"openai/gpt-5": {agentRuntime: {id: "codex"}}}}}, n: null}`)
	tests := []struct {
		path Path
		want any
		ok   bool
	}{
		{Keys("agents", "defaults", "model", "primary"), "openai/gpt-5", true},
		{Keys("agents", "defaults", "model", "fallbacks").Index(1), "openai/b", true},
		{Keys("agents", "defaults", "model", "fallbacks").Index(2), nil, false},
		{Keys("agents", "defaults", "models", "openai/gpt-5", "agentRuntime", "id"), "codex", true},
		{Keys("agents", "missing"), nil, false},
		{Keys("agents", "defaults", "model", "primary", "deeper"), nil, false},
		{Keys("agents").Index(0), nil, false},
		{Keys("n"), nil, true},
	}
	for _, tc := range tests {
		got, ok := Lookup(d, tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Lookup(%s) = %#v, %v; want %#v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := Lookup(d, nil); !ok || Digest(got) != Digest(d) {
		t.Errorf("Lookup(root) = %v, %v", got, ok)
	}
	if s, ok := String(d, Keys("agents", "defaults", "model", "primary")); !ok || s != "openai/gpt-5" {
		t.Errorf("String = %q, %v", s, ok)
	}
	if _, ok := String(d, Keys("agents")); ok {
		t.Errorf("String on an object reported a string")
	}
	if o := Object(d, Keys("agents", "defaults")); o == nil || o["model"] == nil {
		t.Errorf("Object(agents.defaults) = %v", o)
	}
	if o := Object(d, Keys("agents", "defaults", "model", "primary")); o != nil {
		t.Errorf("Object on a string = %v, want nil", o)
	}
	if o := Object(d, nil); o == nil {
		t.Errorf("Object(root) = nil")
	}
}

func TestSet(t *testing.T) {
	d := mustParse(t, `{logging: {level: "debug"}, s: "str", arr: [1]}`)
	tests := []struct {
		name string
		path Path
		ok   bool
	}{
		{"replace existing", Keys("logging", "level"), true},
		{"create intermediates", Keys("diagnostics", "otel", "logs"), true},
		{"through a string refused", Keys("s", "x"), false},
		{"through an array refused", Keys("arr", "x"), false},
		{"index as last step refused", Keys("arr").Index(0), false},
		{"index on the way refused", Keys("arr").Index(0).Key("x"), false},
		{"empty path refused", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := string(Canonical(d))
			if got := Set(d, tc.path, "v"); got != tc.ok {
				t.Fatalf("Set(%s) = %v, want %v", tc.path, got, tc.ok)
			}
			v, found := Lookup(d, tc.path)
			if tc.ok && (!found || v != "v") {
				t.Errorf("after Set, Lookup(%s) = %v, %v", tc.path, v, found)
			}
			if !tc.ok && string(Canonical(d)) != before {
				t.Errorf("refused Set changed the document: %s", Canonical(d))
			}
		})
	}
	if got := string(Canonical(d)); got != `{"arr":[1],"diagnostics":{"otel":{"logs":"v"}},"logging":{"level":"v"},"s":"str"}` {
		t.Errorf("final document = %s", got)
	}
}

func TestDelete(t *testing.T) {
	d := mustParse(t, `{logging: {level: "info", redactSensitive: "tools"}, k: 1}`)
	Delete(d, Keys("logging", "redactSensitive"))
	Delete(d, Keys("logging", "absent"))
	Delete(d, Keys("absent", "deeper"))
	Delete(d, Keys("k", "not-an-object"))
	Delete(d, nil)
	if got := string(Canonical(d)); got != `{"k":1,"logging":{"level":"info"}}` {
		t.Errorf("after Delete = %s", got)
	}
	Delete(d, Keys("k"))
	if got := string(Canonical(d)); got != `{"logging":{"level":"info"}}` {
		t.Errorf("after Delete(k) = %s", got)
	}
}
