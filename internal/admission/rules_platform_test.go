package admission

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// withDoc is an input whose document is the primary model plus extra root
// keys (JSON5, without braces).
func withExtraDoc(in Input, model, extra string) Input {
	src := `{agents: {defaults: {model: "` + model + `"}}`
	if extra != "" {
		src += ", " + extra
	}
	in.Configuration = configuration(mustDoc(src + "}"))
	return in
}

// rule AD3: the wiring render writes into the gateway document is the
// platform's. A configuration that sets one of those keys to another value,
// or holds a non-object where the wiring must go, is refused at plan with
// INVALID_REQUEST naming the key, instead of being replaced (or the wiring
// skipped) at render time. A value equal to the platform's is admitted.
func TestAD3_PlatformOwnedKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Input
		model   string
		extra   string
		docPath string // "": admitted
		say     string // the refusal says this
	}{
		// Kubernetes, every topology.
		{"k8s gateway.port", k8sEmbeddedInput(), anthropicModel, `gateway: {port: 18790}`, "gateway.port", "on port 18789"},
		{"k8s gateway.port equal", k8sEmbeddedInput(), anthropicModel, `gateway: {port: 18789}`, "", ""},
		{"k8s gateway.bind", k8sEmbeddedInput(), anthropicModel, `gateway: {bind: "loopback"}`, "gateway.bind", `bind "lan"`},
		{"k8s gateway.bind equal", k8sEmbeddedInput(), anthropicModel, `gateway: {bind: "lan"}`, "", ""},
		{"k8s gateway.mode", k8sEmbeddedInput(), anthropicModel, `gateway: {mode: "remote"}`, "gateway.mode", "local mode"},
		{"k8s gateway.auth.mode", k8sEmbeddedInput(), anthropicModel, `gateway: {auth: {mode: "none"}}`, "gateway.auth.mode", "OPENCLAW_GATEWAY_TOKEN"},
		{"k8s gateway.auth.token", k8sEmbeddedInput(), anthropicModel, `gateway: {auth: {token: "${GW_TOKEN}"}}`, "gateway.auth.token", "never in the file"},
		{"k8s gateway.auth.password", k8sEmbeddedInput(), anthropicModel, `gateway: {auth: {password: "${GW_PASSWORD}"}}`, "gateway.auth.password", "token only"},
		{"k8s controlUi", k8sEmbeddedInput(), anthropicModel, `gateway: {controlUi: {enabled: true}}`, "gateway.controlUi.enabled", "no Control UI"},
		{"k8s mdns", k8sEmbeddedInput(), anthropicModel, `discovery: {mdns: {mode: "full"}}`, "discovery.mdns.mode", "mDNS"},
		{"k8s update check", k8sEmbeddedInput(), anthropicModel, `update: {checkOnStart: true}`, "update.checkOnStart", "never checks for updates"},
		{"k8s catalog refresh", k8sEmbeddedInput(), anthropicModel, `models: {catalogRefresh: {enabled: true}}`, "models.catalogRefresh.enabled", "model catalog"},
		{"k8s other gateway keys stay the user's", k8sEmbeddedInput(), anthropicModel, `gateway: {trustedProxies: ["10.0.0.0/8"]}, update: {channel: "stable"}`, "", ""},
		// A non-object on the wiring's path: render could not write the
		// platform's values there (occconfig.Set refuses to descend).
		{"k8s gateway not an object", k8sEmbeddedInput(), anthropicModel, `gateway: "x"`, "gateway", "writes gateway.mode inside it"},
		{"k8s discovery not an object", k8sEmbeddedInput(), anthropicModel, `discovery: 5`, "discovery", "writes discovery.mdns.mode inside it"},
		{"k8s mdns not an object", k8sEmbeddedInput(), anthropicModel, `discovery: {mdns: true}`, "discovery.mdns", "writes discovery.mdns.mode"},
		// Dedicated Codex: the plugin's app-server wiring.
		{"codex plugin websocket as MR6 asks", dedicatedCodexInput(), openaiModel, `plugins: {entries: {codex: {enabled: true, config: {appServer: {transport: "websocket"}}}}}`, "", ""},
		{"codex plugin disabled", dedicatedCodexInput(), codexModel, `plugins: {entries: {codex: {enabled: false}}}`, "plugins.entries.codex.enabled", "enables"},
		{"codex plugin stdio", dedicatedCodexInput(), codexModel, `plugins: {entries: {codex: {config: {appServer: {transport: "stdio"}}}}}`, "plugins.entries.codex.config.appServer.transport", "over websocket"},
		{"codex app-server url", dedicatedCodexInput(), codexModel, `plugins: {entries: {codex: {config: {appServer: {url: "ws://elsewhere:1"}}}}}`, "plugins.entries.codex.config.appServer.url", "revision's own harness"},
		{"codex app-server token", dedicatedCodexInput(), codexModel, `plugins: {entries: {codex: {config: {appServer: {authToken: "${MINE}"}}}}}`, "plugins.entries.codex.config.appServer.authToken", "capability token"},
		{"codex plugin entry not an object", dedicatedCodexInput(), codexModel, `plugins: {entries: {codex: true}}`, "plugins.entries.codex", "must be an object"},
		{"embedded keeps its own codex plugin url", k8sEmbeddedInput(), anthropicModel, `plugins: {entries: {codex: {enabled: false, config: {appServer: {url: "ws://x:1"}}}}}`, "", ""},
		// SSH: the port stays the user's; bind, mode, reload and the offline start do not.
		{"ssh gateway.port is the user's", sshInput(), anthropicModel, `gateway: {port: 18790}`, "", ""},
		{"ssh gateway.bind", sshInput(), anthropicModel, `gateway: {bind: "lan"}`, "gateway.bind", "loopback"},
		{"ssh gateway.reload", sshInput(), anthropicModel, `gateway: {reload: {mode: "hot"}}`, "gateway.reload.mode", "restart"},
		{"ssh mdns", sshInput(), anthropicModel, `discovery: {mdns: {mode: "full"}}`, "discovery.mdns.mode", "mDNS"},
		// SSH (issue 27): the gateway authenticates with the agent's own
		// token from its root-only file; no user or agent can turn it off.
		{"ssh gateway.auth.mode token", sshInput(), anthropicModel, `gateway: {auth: {mode: "token"}}`, "", ""},
		{"ssh gateway.auth.mode none", sshInput(), anthropicModel, `gateway: {auth: {mode: "none"}}`, "gateway.auth.mode", "no other user or agent on the host"},
		{"ssh gateway.auth.token", sshInput(), anthropicModel, `gateway: {auth: {mode: "token", token: "${OPENCLAW_GATEWAY_TOKEN}"}}`, "gateway.auth.token", "root-only token file"},
		{"ssh gateway.auth.password", sshInput(), anthropicModel, `gateway: {auth: {password: "${PW}"}}`, "gateway.auth.password", "token only"},
		{"ssh gateway not an object", sshInput(), anthropicModel, `gateway: "x"`, "gateway", "must be an object"},
		// SSH: the user's port is checked at plan, not first at render.
		{"ssh gateway.port out of range", sshInput(), anthropicModel, `gateway: {port: 99999}`, "gateway.port", "between 1 and 65535, not 99999"},
		{"ssh gateway.port a string", sshInput(), anthropicModel, `gateway: {port: "18790"}`, "gateway.port", "remove gateway.port for OpenClaw's default 18789"},
		{"ssh gateway.port zero", sshInput(), anthropicModel, `gateway: {port: 0}`, "gateway.port", "whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := withExtraDoc(tc.in, tc.model, tc.extra)
			if tc.in.Agent.Harness == "" && strings.HasPrefix(tc.model, "openai/") {
				in.Agent.Harness = HarnessOpenClaw
			}
			rev, errs := Admit(in)
			if tc.docPath == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				if rev == nil {
					t.Fatal("no revision")
				}
				return
			}
			checkRefusal(t, errs, refusal{Class: InvalidRequest, Rule: "AD3", Attr: attrConfig, DocPath: tc.docPath})
			if msg := errs[0].Detail(); !strings.Contains(msg, tc.say) {
				t.Errorf("refusal %q does not say %q", msg, tc.say)
			}
			if !strings.HasPrefix(errs[0].Error(), "INVALID_REQUEST: ") {
				t.Errorf("summary %q does not start with the class", errs[0].Error())
			}
		})
	}
}

// rule AD3: the platform-owned list names each key once per topology, with
// a reason, and only computed keys go without a value.
func TestAD3_PlatformKeysList(t *testing.T) {
	for _, kind := range []string{KindKubernetes, KindSSH} {
		for _, hm := range []HarnessMode{{HarnessOpenClaw, ModeEmbedded}, {HarnessCodex, ModeDedicated}} {
			seen := map[string]bool{}
			for _, k := range PlatformKeys(kind, hm.Harness, hm.Mode) {
				p := k.Path.String()
				if seen[p] {
					t.Errorf("%s %v: %s listed twice", kind, hm, p)
				}
				seen[p] = true
				if k.Why == "" {
					t.Errorf("%s %v: %s has no reason", kind, hm, p)
				}
				if (k.Value == nil) != (k.Remove || k.Computed) {
					t.Errorf("%s %v: %s: value %v, remove %v, computed %v", kind, hm, p, k.Value, k.Remove, k.Computed)
				}
			}
			if kind == KindSSH && seen[PathGatewayPort.String()] {
				t.Errorf("ssh: gateway.port is the user's, not the platform's")
			}
			if kind == KindKubernetes && !seen[PathGatewayPort.String()] {
				t.Errorf("kubernetes: gateway.port is not listed")
			}
		}
	}
	// The Configuration's save-time check does not know the compute: a
	// gateway.port is saved, and refused only by the agent on Kubernetes.
	if errs := CheckDocument(mustDoc(`{gateway: {port: 18790}}`)); len(errs) > 0 {
		t.Errorf("save time refuses a gateway.port: %v", errs)
	}
}

// rule AD3: the admitted document is what runs. The platform's wiring
// (every fixed value of PlatformKeys, removed keys gone) is frozen into the
// admitted document and the gateway document, so the plan's
// admitted_document shows it; only the computed address of the revision's
// own harness (it names the revision number, given at apply) is left to
// render. On an SSH host gateway.port is the user's, and OpenClaw's default
// where the document has none. The stored configuration is never changed.
func TestAD3_AdmittedDocumentHoldsThePlatformWiring(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       Input
		model    string
		extra    string
		wantPort int64 // 0: no gateway.port beyond the platform's list
	}{
		{"k8s embedded", k8sEmbeddedInput(), anthropicModel, "", 0},
		{"k8s embedded, platform's own values written", k8sEmbeddedInput(), anthropicModel, `gateway: {port: 18789, bind: "lan"}`, 0},
		{"dedicated codex", dedicatedCodexInput(), codexModel, "", 0},
		{"ssh, default port", sshInput(), anthropicModel, "", int64(GatewayPort)},
		{"ssh, own port", sshInput(), anthropicModel, `gateway: {port: 18790}`, 18790},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := withExtraDoc(tc.in, tc.model, tc.extra)
			stored := canon(in.Configuration.Document)
			rev := admitOK(t, in)
			for name, doc := range map[string]map[string]any{"admitted": rev.AdmittedDocument, "gateway": rev.GatewayDocument} {
				for _, k := range PlatformKeys(rev.ComputeKind, rev.Harness, rev.ExecutionMode) {
					v, ok := occconfig.Lookup(doc, k.Path)
					switch {
					case k.Remove || k.Computed:
						if ok {
							t.Errorf("%s document holds %s = %v, want it absent", name, k.Path, v)
						}
					case !ok || canon(v) != canon(k.Value):
						t.Errorf("%s document %s = %v (present %v), want the platform's %v", name, k.Path, v, ok, k.Value)
					}
				}
				if tc.wantPort != 0 {
					if p, _ := occconfig.Lookup(doc, PathGatewayPort); p != tc.wantPort {
						t.Errorf("%s document gateway.port = %v, want %d", name, p, tc.wantPort)
					}
				}
			}
			if canon(in.Configuration.Document) != stored {
				t.Errorf("the stored configuration changed: %s", canon(in.Configuration.Document))
			}
			// Unchanged inputs, unchanged revision.
			if again := admitOK(t, in); again.ID() != rev.ID() {
				t.Errorf("revision id %s, then %s for the same inputs", rev.ID(), again.ID())
			}
		})
	}
}

// rule AD3: the stamp never writes the wiring in part: a document it
// cannot take is refused naming the key, as CheckPlatformKeys refuses it.
func TestAD3_StampRefusesWhatItCannotWrite(t *testing.T) {
	for _, tc := range []struct{ kind, src, key string }{
		{KindKubernetes, `{gateway: "x"}`, "gateway"},
		{KindKubernetes, `{discovery: 5}`, "discovery"},
		{KindSSH, `{gateway: "x"}`, "gateway"},
		{KindSSH, `{discovery: 5}`, "discovery"},
	} {
		t.Run(tc.kind+" "+tc.src, func(t *testing.T) {
			doc := mustDoc(tc.src)
			before := canon(doc)
			errs := StampPlatformKeys(doc, tc.kind, HarnessOpenClaw, ModeEmbedded)
			if len(errs) == 0 || errs[0].Rule != "AD3" || errs[0].DocPath.String() != tc.key {
				t.Fatalf("stamp of %s: %v, want an AD3 refusal at %s", tc.src, errs, tc.key)
			}
			if canon(doc) != before {
				t.Errorf("a refused stamp changed the document: %s", canon(doc))
			}
		})
	}
}
