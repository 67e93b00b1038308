package admission

import (
	"fmt"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// PlatformKey is a key of the gateway's native configuration that the
// platform writes when it renders a revision: the deployment wiring
// (listener, gateway auth, Control UI, the offline start, the Codex
// plugin's app-server wiring). It is the one list of those
// keys: render writes exactly these (render.GatewayDocument and
// render.SystemdGatewayDocument read it), and admission refuses a
// configuration that sets one of them to anything else (CheckPlatformKeys),
// so that no value a user wrote is silently replaced after admission (AD3:
// what the revision freezes is what runs).
type PlatformKey struct {
	Path occconfig.Path
	// Value is what render writes. A configuration may hold the same value
	// (it changes nothing); any other value is refused.
	Value any
	// Remove: render deletes the key; any value is refused.
	Remove bool
	// Computed: render computes the value per revision number, which is
	// given only at apply (the address of the revision's own sandboxed
	// harness), so it is the one kind of key the admitted document does
	// not hold; any value is refused.
	Computed bool
	// Why says what the platform does with the key, in a refusal.
	Why string
}

// Document paths of the platform's wiring.
var (
	PathGatewayMode         = occconfig.Keys("gateway", "mode")
	PathGatewayBind         = occconfig.Keys("gateway", "bind")
	PathGatewayPort         = occconfig.Keys("gateway", "port")
	PathGatewayAuthMode     = occconfig.Keys("gateway", "auth", "mode")
	PathGatewayAuthToken    = occconfig.Keys("gateway", "auth", "token")
	PathGatewayAuthPassword = occconfig.Keys("gateway", "auth", "password")
	PathGatewayControlUI    = occconfig.Keys("gateway", "controlUi", "enabled")
	PathGatewayReloadMode   = occconfig.Keys("gateway", "reload", "mode")
	PathMDNSMode            = occconfig.Keys("discovery", "mdns", "mode")
	PathUpdateCheckOnStart  = occconfig.Keys("update", "checkOnStart")
	PathCatalogRefresh      = occconfig.Keys("models", "catalogRefresh", "enabled")
	PathCodexPluginEnabled  = pathCodexPluginOn
	PathCodexTransport      = pathCodexTransport
	PathCodexAppServerURL   = occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "url")
	PathCodexAppServerToken = occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "authToken")
)

// offlineKeys: every gateway starts offline (SS1): no mDNS, no update check
// (the revision pins its runtime), no model catalog refresh (the gateway
// keeps the catalog of the runtime the revision was admitted against).
var offlineKeys = []PlatformKey{
	{Path: PathMDNSMode, Value: "off", Why: "the platform starts every gateway offline and announces nothing over mDNS"},
	{Path: PathUpdateCheckOnStart, Value: false, Why: "the platform starts every gateway offline; the revision pins its runtime, so the gateway never checks for updates"},
	{Path: PathCatalogRefresh, Value: false, Why: "the platform starts every gateway offline; it keeps the model catalog of the runtime the revision was admitted against"},
}

// AppServerTokenEnv carries the dedicated Codex harness's app-server token
// into the gateway, where the Codex plugin resolves it as the env
// SecretRef of appServer.authToken and sends the value as
// "Authorization: Bearer <token>", which the app server's capability-token
// mode checks.
const AppServerTokenEnv = "OCC_APP_SERVER_TOKEN"

// PlatformKeys is the wiring render writes into the gateway document of a
// revision on a compute of kind running harness in mode: what the kind's
// row says (KindSupport.PlatformKeys); nothing for a kind without a row.
func PlatformKeys(kind, harness, mode string) []PlatformKey {
	if row := kindRow(kind); row.PlatformKeys != nil {
		return row.PlatformKeys(harness, mode)
	}
	return nil
}

// kubernetesPlatformKeys is a Kubernetes compute's wiring: the gateway
// listens on the Pod network behind the agent's Service, with the
// platform's token, offline; dedicated Codex reaches its harness through
// the Codex plugin.
func kubernetesPlatformKeys(harness, mode string) []PlatformKey {
	listen := fmt.Sprintf("the platform binds the gateway to the Pod network (bind \"lan\") on port %d, where the Agent's Service and its probes reach it", GatewayPort)
	keys := []PlatformKey{
		{Path: PathGatewayMode, Value: "local", Why: "the platform runs the gateway in local mode in its own Pod"},
		{Path: PathGatewayBind, Value: "lan", Why: listen},
		{Path: PathGatewayPort, Value: int64(GatewayPort), Why: listen},
		{Path: PathGatewayAuthMode, Value: "token", Why: "the platform authenticates to the gateway with its own token (OPENCLAW_GATEWAY_TOKEN, from the agent's Secret)"},
		{Path: PathGatewayAuthToken, Remove: true, Why: "the platform supplies the gateway token as OPENCLAW_GATEWAY_TOKEN from the agent's Secret; it is never in the file"},
		{Path: PathGatewayAuthPassword, Remove: true, Why: "the platform authenticates to the gateway with a token only; a password is never in the file"},
		{Path: PathGatewayControlUI, Value: false, Why: "the platform serves no Control UI to browsers"},
	}
	keys = append(keys, offlineKeys...)
	if harness == HarnessCodex && mode == ModeDedicated {
		keys = append(keys,
			PlatformKey{Path: PathCodexPluginEnabled, Value: true, Why: "dedicated Codex reaches its harness through the Codex plugin, which the platform enables"},
			PlatformKey{Path: PathCodexTransport, Value: "websocket", Why: "the platform connects the Codex plugin to the harness's app server over websocket"},
			PlatformKey{Path: PathCodexAppServerURL, Computed: true, Why: "the platform points the Codex plugin at the revision's own harness"},
			PlatformKey{Path: PathCodexAppServerToken, Value: "${" + AppServerTokenEnv + "}", Why: "the platform supplies the app server's capability token from the agent's Secret, as the variable " + AppServerTokenEnv},
		)
	}
	return keys
}

// sshPlatformKeys is an SSH host's wiring: the gateway listens on the
// host's loopback with the agent's own token, offline, activated by a
// restart. Its gateway.port is
// the user's (agents sharing a host need distinct ports) and is not in
// the list (KindSupport.UserGatewayPort).
func sshPlatformKeys(_, _ string) []PlatformKey {
	keys := []PlatformKey{
		{Path: PathGatewayMode, Value: "local", Why: "the platform runs the gateway in local mode under systemd"},
		{Path: PathGatewayBind, Value: "loopback", Why: "the platform binds the gateway to the host's loopback (readiness is read through the SSH connection; no port is opened to the outside); gateway.port stays yours"},
		{Path: PathGatewayReloadMode, Value: "off", Why: "the platform activates a revision by a restart, never by live reload of a half-switched file"},
		{Path: PathGatewayAuthMode, Value: "token", Why: "the platform authenticates to the gateway with the agent's own token (OPENCLAW_GATEWAY_TOKEN, from a file on the host only root can read), so no other user or agent on the host can drive it"},
		{Path: PathGatewayAuthToken, Remove: true, Why: "the platform supplies the gateway token as OPENCLAW_GATEWAY_TOKEN from the agent's root-only token file on the host; it is never in the file"},
		{Path: PathGatewayAuthPassword, Remove: true, Why: "the platform authenticates to the gateway with a token only; a password is never in the file"},
	}
	return append(keys, offlineKeys...)
}

// StampPlatformKeys writes the platform's wiring (PlatformKeys) into an
// admitted document: fixed values set, removed keys deleted. So the
// admitted document is what the gateway runs (AD3), and the plan shows it:
// render writes the same values again and adds only the computed ones. On
// a kind where gateway.port is the user's (an SSH host), where the document has none,
// OpenClaw's default is written, the port the unit's gateway listens on
// and readiness is read at. A document the wiring cannot be written into
// (CheckPlatformKeys refuses it) is refused, never stamped in part.
func StampPlatformKeys(doc occconfig.Document, kind, harness, mode string) Errors {
	if errs := CheckPlatformKeys(doc, kind, harness, mode); len(errs) > 0 {
		return errs
	}
	// A computed key's value is given only at apply: render writes it.
	var keys []PlatformKey
	for _, k := range PlatformKeys(kind, harness, mode) {
		if !k.Computed {
			keys = append(keys, k)
		}
	}
	if err := WritePlatformKeys(doc, keys, nil); err != nil {
		// CheckPlatformKeys found no non-object on the way: not reached.
		return Errors{{Class: InvalidRequest, Rule: "AD3", Attribute: []string{"document"}, Message: err.Error()}}
	}
	if kindRow(kind).UserGatewayPort {
		if _, ok := occconfig.Lookup(doc, PathGatewayPort); !ok {
			occconfig.Set(doc, PathGatewayPort, int64(GatewayPort))
		}
	}
	return nil
}

// WritePlatformKeys writes the platform's wiring into a gateway document:
// each key's Value, or its value from computed (by path) when Computed,
// and deletes each Remove key. It is the one writer of the platform's
// keys: admission stamps the admitted document with it
// (StampPlatformKeys) and render writes the keys computed per revision
// with it. A key whose path crosses a non-object, or a computed key
// without a value, is an error saying how to fix the document.
func WritePlatformKeys(doc occconfig.Document, keys []PlatformKey, computed map[string]any) error {
	for _, k := range keys {
		if k.Remove {
			occconfig.Delete(doc, k.Path)
			continue
		}
		v := k.Value
		if k.Computed {
			var ok bool
			if v, ok = computed[k.Path.String()]; !ok {
				return fmt.Errorf("render: no value for the platform's %s", k.Path)
			}
		}
		if !occconfig.Set(doc, k.Path, v) {
			blocked := k.Path[:len(k.Path)-1]
			for i := 1; i < len(k.Path); i++ {
				if got, ok := occconfig.Lookup(doc, k.Path[:i]); ok {
					if _, isObj := got.(map[string]any); !isObj {
						blocked = k.Path[:i]
						break
					}
				}
			}
			return fmt.Errorf("render: the gateway configuration cannot take the platform's %s: %s is not an object; make it an object or remove it (rule AD3)", k.Path, blocked)
		}
	}
	return nil
}

// CheckPlatformKeys refuses a configuration that sets a key the platform
// owns on this compute, harness and mode (PlatformKeys) to another value,
// and one that holds a non-object where the platform must write inside an
// object (`gateway = "x"`, `discovery = 5`): render would otherwise replace
// or skip the platform's wiring without a word.
func CheckPlatformKeys(doc occconfig.Document, kind, harness, mode string) Errors {
	var errs Errors
	seen := map[string]bool{}
	title := kindRow(kind).Words.Title
	for _, k := range PlatformKeys(kind, harness, mode) {
		if blocked := nonObjectAncestor(doc, k.Path); blocked != nil {
			if !seen[blocked.String()] {
				seen[blocked.String()] = true
				errs = append(errs, invalid("AD3", nil, blocked, "must be an object: on %s the platform writes %s inside it (%s)", title, k.Path, k.Why))
			}
			continue
		}
		v, ok := occconfig.Lookup(doc, k.Path)
		if !ok || (!k.Remove && !k.Computed && equalValue(v, k.Value)) {
			continue
		}
		msg := fmt.Sprintf("the platform owns this key on %s and sets it in every revision it admits: %s; remove %s", title, k.Why, k.Path)
		if !k.Remove && !k.Computed {
			msg += fmt.Sprintf(" (or set it to %s)", jsonish(k.Value))
		}
		errs = append(errs, invalid("AD3", nil, k.Path, "%s", msg))
	}
	if kindRow(kind).UserGatewayPort && len(errs) == 0 {
		// The user's port, which the unit's gateway listens on and
		// readiness is read at: refused at plan, not at render.
		if v, ok := occconfig.Lookup(doc, PathGatewayPort); ok {
			if p, isInt := v.(int64); !isInt || p < 1 || p > 65535 {
				errs = append(errs, invalid("AD3", nil, PathGatewayPort, "on an SSH host the gateway listens on the loopback at gateway.port, which must be a whole number between 1 and 65535, not %s; set a free port or remove gateway.port for OpenClaw's default %d", jsonish(v), GatewayPort))
			}
		}
	}
	return errs
}

// nonObjectAncestor is the first proper prefix of p that holds a value
// other than an object, or nil.
func nonObjectAncestor(doc occconfig.Document, p occconfig.Path) occconfig.Path {
	for i := 1; i < len(p); i++ {
		v, ok := occconfig.Lookup(doc, p[:i])
		if !ok {
			return nil
		}
		if _, isObj := v.(map[string]any); !isObj {
			return p[:i]
		}
	}
	return nil
}

func equalValue(a, b any) bool { return jsonish(a) == jsonish(b) }
