package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// The layout of an agent on an SSH host (rule SS1):
//
//	/etc/systemd/system/occ-agent-NAME.service   the unit (one per agent, revision-independent)
//	CONFIG_DIR/NAME/rN/openclaw.json             revision N's gateway configuration (0640 root:occ-NAME)
//	CONFIG_DIR/NAME/rN/revision.json             what revision N is (number, id, digest, harness)
//	CONFIG_DIR/NAME/rN/activated.json            the activation audit record, written once N was ready (AC4)
//	CONFIG_DIR/NAME/current -> rN                the revision that runs, switched by an atomic rename
//	CONFIG_DIR/NAME/gateway-token.env            the gateway's token (0600 root:root), made on the host once
//	/var/lib/occ-agent/NAME                      the gateway's state and home (systemd StateDirectory)
//
// The unit points OPENCLAW_CONFIG_PATH at CONFIG_DIR/NAME/current/openclaw.json,
// so activating a revision is switching one link and restarting one unit.
const (
	UnitDir        = "/etc/systemd/system"
	UnitPrefix     = "occ-agent-"
	StateRoot      = "/var/lib/occ-agent"
	CurrentLink    = "current"
	RevisionRecord = "revision.json"
	ActivationFile = "activated.json"
	// GatewayTokenFile holds OPENCLAW_GATEWAY_TOKEN=<the agent's own
	// token>: generated on the host by the first deploy, readable by root
	// only, loaded by systemd (as root, before it drops privileges) after
	// the operator's credentials file, so it wins over a token there. The
	// token never leaves the host except to a turn the provider sends.
	GatewayTokenFile = "gateway-token.env"
	// KeepRevisions is how many revision directories an agent keeps on its
	// host (the current one included); older ones are removed after an
	// activation.
	KeepRevisions = 10

	// Unit keys the provider reads back (systemd ignores X- keys).
	UnitKeyAgent    = "X-OCC-Agent"
	UnitKeyAgentDir = "X-OCC-Agent-Dir"
)

// UnitName is the systemd unit of an agent.
func UnitName(agent string) string { return UnitPrefix + agent + ".service" }

// UnitPath is where the agent's unit file lives.
func UnitPath(agent string) string { return UnitDir + "/" + UnitName(agent) }

// AgentDir is the agent's directory under the compute's config_dir.
func AgentDir(configDir, agent string) string { return path.Join(configDir, agent) }

// RevisionDirName names revision n's directory inside the agent directory.
func RevisionDirName(n int64) string { return "r" + strconv.FormatInt(n, 10) }

// ParseRevisionDirName reads n from "rN"; ok is false for anything else.
func ParseRevisionDirName(s string) (int64, bool) {
	if !strings.HasPrefix(s, "r") {
		return 0, false
	}
	n, err := strconv.ParseInt(s[1:], 10, 64)
	return n, err == nil && n > 0 && s[1:] == strconv.FormatInt(n, 10)
}

// StateDir is the agent's state directory (its HOME and OPENCLAW_STATE_DIR's parent).
func StateDir(agent string) string { return StateRoot + "/" + agent }

// ServiceUser is the dedicated system user an agent's gateway runs as:
// occ-NAME, or, when that is longer than useradd's 32 characters,
// occ_PREFIX_HASH: the name's first 11 characters and 64 bits of its
// sha256. The underscores, which an agent name (a DNS label) cannot hold,
// keep the two forms apart: no agent's plain user is another agent's
// hashed one, and two long names share a user only if their hashes do.
func ServiceUser(agent string) string {
	u := "occ-" + agent
	if len(u) <= 32 {
		return u
	}
	sum := sha256.Sum256([]byte(agent))
	return "occ_" + strings.TrimRight(agent[:11], "-") + "_" + hex.EncodeToString(sum[:])[:16]
}

// ConfigDirOverlapsState reports whether a config_dir is StateRoot or
// inside it: the agents' directories would then sit in a service user's
// state, which that user can write, and the root-run activation would
// execute what it wrote.
func ConfigDirOverlapsState(configDir string) bool {
	c := path.Clean(configDir)
	return c == StateRoot || strings.HasPrefix(c, StateRoot+"/")
}

// RevisionInfo is revision.json: what a revision directory holds.
type RevisionInfo struct {
	Agent          string `json:"agent"`
	Revision       int64  `json:"revision"`
	RevisionID     string `json:"revision_id"`
	Digest         string `json:"digest"`
	HarnessVersion string `json:"harness_version"`
}

// Activation is activated.json, the activation audit record (AC4).
type Activation struct {
	Agent       string    `json:"agent"`
	Revision    int64     `json:"revision"`
	RevisionID  string    `json:"revision_id"`
	Digest      string    `json:"digest"`
	ActivatedAt time.Time `json:"activated_at"`
	Endpoint    string    `json:"endpoint"`
	// References is the deploy's executor.Deployment.References: what an
	// import reads back.
	References string `json:"references,omitempty"`
}

// SystemdHost is everything one revision of an agent puts on an SSH host.
type SystemdHost struct {
	Agent      string
	Revision   int64
	RevisionID string

	Unit     string // occ-agent-NAME.service
	UnitPath string
	UnitText string
	// User (and its group of the same name) runs the gateway; created with
	// useradd --system when missing.
	User string

	AgentDir    string // CONFIG_DIR/NAME
	RevisionDir string // CONFIG_DIR/NAME/rN
	ConfigPath  string // CONFIG_DIR/NAME/rN/openclaw.json
	// Config is the gateway configuration as written (canonical JSON), and
	// Digest its sha256 in hex (equal to occconfig.Digest of the document).
	Config []byte
	Digest string
	// RevisionInfo is revision.json's content.
	RevisionInfo []byte
	// CurrentLink is CONFIG_DIR/NAME/current; ActiveConfigPath is the path
	// the unit gives OPENCLAW_CONFIG_PATH, through that link.
	CurrentLink      string
	ActiveConfigPath string

	StateDir string
	// Port is the gateway's loopback port, where /readyz answers.
	Port     int64
	Endpoint string
	// EnvironmentFile is the operator's credentials file (AU5): loaded by
	// systemd, never read or written by the provider.
	EnvironmentFile string
	// TokenFile is the agent's GatewayTokenFile, in AgentDir.
	TokenFile string
}

// Systemd renders revision n of an embedded OpenClaw agent for an SSH host.
func Systemd(rev *admission.Revision, n int64) (*SystemdHost, error) {
	cs := rev.ComputeSettings
	if cs.Kind != admission.KindSSH {
		return nil, fmt.Errorf("render: revision of agent %q is not for an SSH compute", rev.Agent)
	}
	// SS1, AU5: SSH runs embedded OpenClaw with host credentials only.
	if rev.Harness != admission.HarnessOpenClaw || rev.ExecutionMode != admission.ModeEmbedded {
		return nil, fmt.Errorf("render: an SSH host runs embedded OpenClaw only (rule SS1), not %s %s", rev.Harness, rev.ExecutionMode)
	}
	if rev.Source.Method != admission.MethodRuntime || rev.Source.EnvironmentFile == "" {
		return nil, fmt.Errorf("render: an SSH host takes credentials from an operator's environment file only (method runtime, rule AU5)")
	}
	if n < 1 {
		return nil, fmt.Errorf("render: revision number %d is not positive", n)
	}
	openclaw, configDir := cs.SSH().OpenClawPath, cs.SSH().ConfigDir
	if openclaw == "" {
		openclaw = "/usr/bin/openclaw"
	}
	if configDir == "" {
		configDir = "/etc/openclaw"
	}
	for name, p := range map[string]string{"openclaw_path": openclaw, "config_dir": configDir, "environment_file": rev.Source.EnvironmentFile} {
		if err := checkHostPath(p); err != nil {
			return nil, fmt.Errorf("render: %s: %w", name, err)
		}
	}
	// systemd refuses an executable path that holds a quote or a backslash
	// ("Executable name contains special characters"): refuse it here,
	// where the attribute can be named.
	if strings.ContainsAny(openclaw, `"'\`) {
		return nil, fmt.Errorf("render: openclaw_path: %q holds a quote or a backslash, which systemd refuses in an executable path", openclaw)
	}
	if path.Clean(configDir) == "/" {
		return nil, fmt.Errorf("render: config_dir must not be /")
	}
	port, err := gatewayPort(rev.GatewayDocument)
	if err != nil {
		return nil, err
	}
	doc, err := SystemdGatewayDocument(rev, port)
	if err != nil {
		return nil, err
	}
	config := occconfig.Canonical(doc)
	sum := sha256.Sum256(config)

	a := rev.Agent
	h := &SystemdHost{
		Agent: a, Revision: n, RevisionID: rev.ID(),
		Unit: UnitName(a), UnitPath: UnitPath(a), User: ServiceUser(a),
		AgentDir: AgentDir(configDir, a),
		Config:   config, Digest: hex.EncodeToString(sum[:]),
		StateDir: StateDir(a), Port: port,
		Endpoint:        fmt.Sprintf("http://127.0.0.1:%d", port),
		EnvironmentFile: path.Clean(rev.Source.EnvironmentFile),
	}
	// The agent's directory is root's: never inside the service users'
	// state (which each user owns) nor holding it.
	if ConfigDirOverlapsState(configDir) || h.AgentDir == StateRoot || strings.HasPrefix(StateRoot, h.AgentDir+"/") {
		return nil, fmt.Errorf("render: config_dir: %s/%s overlaps %s, where the agents' service users own their state; use a config_dir outside it (the default /etc/openclaw)", path.Clean(configDir), a, StateRoot)
	}
	// AU5: the credentials file stays outside what the provider writes
	// and removes.
	for _, managed := range []string{h.AgentDir, h.StateDir} {
		if h.EnvironmentFile == managed || strings.HasPrefix(h.EnvironmentFile, managed+"/") {
			return nil, fmt.Errorf("render: the credentials file %s is inside %s, which the provider manages; keep it elsewhere (for example /etc/occ/%s.env)", h.EnvironmentFile, managed, a)
		}
	}
	h.RevisionDir = path.Join(h.AgentDir, RevisionDirName(n))
	h.ConfigPath = path.Join(h.RevisionDir, ConfigFile)
	h.CurrentLink = path.Join(h.AgentDir, CurrentLink)
	h.TokenFile = path.Join(h.AgentDir, GatewayTokenFile)
	h.ActiveConfigPath = path.Join(h.CurrentLink, ConfigFile)
	info, err := json.Marshal(RevisionInfo{Agent: a, Revision: n, RevisionID: h.RevisionID, Digest: h.Digest, HarnessVersion: rev.HarnessVersion})
	if err != nil {
		return nil, err
	}
	h.RevisionInfo = append(info, '\n')
	h.UnitText = unitText(h, path.Clean(openclaw))
	return h, nil
}

// gatewayPort is the configuration's gateway.port, or OpenClaw's default.
// Agents that share a host need distinct ports.
func gatewayPort(d occconfig.Document) (int64, error) {
	v, ok := occconfig.Lookup(d, occconfig.Keys("gateway", "port"))
	if !ok {
		return GatewayPort, nil
	}
	p, isInt := v.(int64)
	if !isInt || p < 1 || p > 65535 {
		return 0, fmt.Errorf("render: gateway.port must be a whole number between 1 and 65535, not %v", v)
	}
	return p, nil
}

// SystemdGatewayDocument is the gateway's native configuration on an SSH
// host: the revision's private gateway configuration (MR4 applied) with the
// wiring the platform owns. The gateway listens on the host's loopback only
// (readiness is read through the SSH connection; no port is opened to the
// outside), keeps live reload off (a revision is activated by a restart,
// never by a half-switched file), and starts offline: no mDNS, no update
// check, no model catalog refresh. It authenticates every client with the
// agent's own token (OPENCLAW_GATEWAY_TOKEN from TokenFile).
//
// Which keys the platform owns there is admission.PlatformKeys (the list
// admission refuses user values of, AD3); gateway.port is the user's and
// is written back as read (or OpenClaw's default).
func SystemdGatewayDocument(rev *admission.Revision, port int64) (occconfig.Document, error) {
	d := occconfig.Clone(rev.GatewayDocument)
	if err := admission.WritePlatformKeys(d, admission.PlatformKeys(admission.KindSSH, rev.Harness, rev.ExecutionMode), nil); err != nil {
		return nil, err
	}
	if !occconfig.Set(d, admission.PathGatewayPort, port) {
		return nil, fmt.Errorf("render: the gateway configuration cannot take %s: gateway is not an object", admission.PathGatewayPort)
	}
	return d, nil
}

// unitText is the agent's unit. It does not change between revisions: the
// revision is selected by the current link. Hardening keeps the gateway to
// its state directory; RestrictSUIDSGID is left out on purpose, because it
// makes openat2 fail with ENOSYS and the gateway's state lock needs it.
func unitText(h *SystemdHost, openclaw string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Managed by terraform-provider-occ for agent %q. Do not edit: every apply rewrites it,", h.Agent)
	w("# and `terraform destroy` removes it. Credentials come from the operator's EnvironmentFile (rule AU5),")
	w("# the gateway token from the agent's own root-only file.")
	w("[Unit]")
	w("Description=OCC agent %s (embedded OpenClaw gateway)", h.Agent)
	w("After=network-online.target")
	w("Wants=network-online.target")
	// A gateway that keeps failing stops being restarted after 5 tries in 5 minutes.
	w("StartLimitIntervalSec=300")
	w("StartLimitBurst=5")
	w("%s=%s", UnitKeyAgent, h.Agent)
	w("%s=%s", UnitKeyAgentDir, unitEscape(h.AgentDir))
	w("")
	w("[Service]")
	w("Type=exec")
	w("User=%s", h.User)
	w("Group=%s", h.User)
	w("ExecStart=%s gateway run", execQuote(openclaw))
	w("Environment=%s", envQuote("OPENCLAW_CONFIG_PATH", h.ActiveConfigPath))
	w("Environment=%s", envQuote("OPENCLAW_STATE_DIR", h.StateDir+"/state"))
	w("Environment=%s", envQuote("OPENCLAW_GATEWAY_PORT", strconv.FormatInt(h.Port, 10)))
	w("Environment=%s", envQuote("HOME", h.StateDir))
	w("Environment=TMPDIR=/tmp")
	w("EnvironmentFile=%s", unitEscape(h.EnvironmentFile))
	w("EnvironmentFile=%s", unitEscape(h.TokenFile))
	w("StateDirectory=%s", strings.TrimPrefix(h.StateDir, "/var/lib/"))
	w("StateDirectoryMode=0700")
	w("WorkingDirectory=%s", unitEscape(h.StateDir))
	w("Restart=on-failure")
	w("RestartSec=5")
	w("TimeoutStopSec=90")
	w("NoNewPrivileges=yes")
	w("ProtectSystem=strict")
	w("ProtectHome=yes")
	w("PrivateTmp=yes")
	w("PrivateDevices=yes")
	w("ProtectKernelTunables=yes")
	w("ProtectKernelModules=yes")
	w("ProtectKernelLogs=yes")
	w("ProtectControlGroups=yes")
	w("ProtectClock=yes")
	w("ProtectHostname=yes")
	w("RestrictRealtime=yes")
	w("RestrictNamespaces=yes")
	w("LockPersonality=yes")
	w("SystemCallArchitectures=native")
	w("CapabilityBoundingSet=")
	w("UMask=0077")
	w("SyslogIdentifier=%s", strings.TrimSuffix(h.Unit, ".service"))
	w("")
	w("[Install]")
	w("WantedBy=multi-user.target")
	return b.String()
}

// checkHostPath accepts an absolute path without control characters (a
// newline would add unit directives), that does not end with a backslash
// (systemd would join the next line of the unit to it) or white space
// (systemd strips it from a setting's value).
func checkHostPath(p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("%q is not an absolute path", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q contains a control character", p)
		}
	}
	// The unit holds the cleaned path ("/a /" is written "/a "): judge
	// what is written.
	if c := path.Clean(p); strings.HasSuffix(c, `\`) {
		return fmt.Errorf("%q ends with a backslash, which systemd reads as the continuation of the unit file's line", p)
	} else if strings.TrimRight(c, " \t") != c {
		return fmt.Errorf("%q ends with white space (once cleaned), which systemd strips from a unit setting", p)
	}
	return nil
}

// unitEscape escapes systemd specifiers (%) in a value that systemd does
// not unquote (EnvironmentFile=, WorkingDirectory=, X- keys). The value
// must not end with a backslash or white space (checkHostPath).
func unitEscape(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// execQuote quotes the executable of an ExecStart= line, its first word:
// specifiers, quotes and backslashes escaped; quoted when it holds white
// space. systemd expands no variable in the executable path (only in the
// arguments), so "$" stays as it is: "$$" would name another file. The path
// holds no quote or backslash (Systemd refuses those, as systemd does); they
// are escaped all the same, so that the word never splits (nor vanishes,
// when empty).
func execQuote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s)
	if s == "" || strings.ContainsAny(s, " \t'") {
		return `"` + s + `"`
	}
	return s
}

// envQuote is one Environment= assignment, quoted for systemd.
func envQuote(name, value string) string {
	v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(value)
	if strings.ContainsAny(v, " \t'") {
		return `"` + name + "=" + v + `"`
	}
	return name + "=" + v
}
