package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

func sshInput(t *testing.T, document string) admission.Input {
	return admission.Input{
		Agent:         admission.Agent{Name: "support"},
		Configuration: admission.Configuration{ID: "support", Name: "support", Generation: 2, Document: doc(t, document)},
		Compute:       admission.Compute{ID: "edge", Name: "edge", Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: "10.0.0.5", Port: 22, OpenClawPath: "/usr/bin/openclaw", ConfigDir: "/etc/openclaw"}},
		Source: admission.CredentialSource{ID: "host", Name: "host", Method: admission.MethodRuntime, Generation: 1, ComputeID: "edge",
			EnvironmentFile: "/etc/occ/openclaw.env"},
	}
}

const anthropicSSH = `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`

func unitLines(text string) map[string][]string {
	out := map[string][]string{}
	for _, l := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSS1_SystemdRendersEmbeddedOpenClaw: one hardened unit per agent that
// runs the gateway from the current revision with the operator's
// credentials file (SS1, AU5).
func TestSS1_SystemdRendersEmbeddedOpenClaw(t *testing.T) {
	rev := admit(t, sshInput(t, anthropicSSH))
	h, err := Systemd(rev, 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.Unit != "occ-agent-support.service" || h.UnitPath != "/etc/systemd/system/occ-agent-support.service" || h.User != "occ-support" {
		t.Errorf("unit %s at %s as %s", h.Unit, h.UnitPath, h.User)
	}
	if h.RevisionDir != "/etc/openclaw/support/r3" || h.ConfigPath != "/etc/openclaw/support/r3/openclaw.json" ||
		h.CurrentLink != "/etc/openclaw/support/current" || h.ActiveConfigPath != "/etc/openclaw/support/current/openclaw.json" {
		t.Errorf("paths: %+v", h)
	}
	u := unitLines(h.UnitText)
	want := map[string]string{
		"ExecStart": "/usr/bin/openclaw gateway run", "Restart": "on-failure",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"User": "occ-support", "Group": "occ-support", "StateDirectory": "occ-agent/support", "Type": "exec",
		"X-OCC-Agent": "support", "X-OCC-Agent-Dir": "/etc/openclaw/support", "WantedBy": "multi-user.target",
	}
	for k, v := range want {
		if len(u[k]) != 1 || u[k][0] != v {
			t.Errorf("%s = %q, want %q", k, u[k], v)
		}
	}
	// AU5, issue 27: the operator's credentials file, then the agent's
	// own token file, which wins for OPENCLAW_GATEWAY_TOKEN.
	if got := u["EnvironmentFile"]; len(got) != 2 || got[0] != "/etc/occ/openclaw.env" || got[1] != "/etc/openclaw/support/"+GatewayTokenFile || h.TokenFile != got[1] {
		t.Errorf("EnvironmentFile = %q (TokenFile %s), want the credentials file, then the agent's token file", got, h.TokenFile)
	}
	env := strings.Join(u["Environment"], "\n")
	for _, e := range []string{"OPENCLAW_CONFIG_PATH=/etc/openclaw/support/current/openclaw.json", "OPENCLAW_STATE_DIR=/var/lib/occ-agent/support/state",
		"OPENCLAW_GATEWAY_PORT=18789", "HOME=/var/lib/occ-agent/support", "TMPDIR=/tmp"} {
		if !strings.Contains(env, e) {
			t.Errorf("Environment lacks %s:\n%s", e, env)
		}
	}
	// AU5: the credential is never in the unit, only the file systemd loads.
	if strings.Contains(h.UnitText, "API_KEY") {
		t.Errorf("the unit names a model key:\n%s", h.UnitText)
	}
	// RestrictSUIDSGID breaks the gateway's state lock (openat2 → ENOSYS).
	if _, ok := u["RestrictSUIDSGID"]; ok {
		t.Error("RestrictSUIDSGID is set")
	}
}

// TestSS1_SystemdGatewayDocumentStartsOfflineOnLoopback: the platform's
// wiring is in the written configuration; the digest is of those bytes.
func TestSS1_SystemdGatewayDocumentStartsOfflineOnLoopback(t *testing.T) {
	rev := admit(t, sshInput(t, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, gateway: {mode: "local"}}`)) // no auth: the platform sets token auth
	h, err := Systemd(rev, 1)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(h.Config, &d); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]any{
		"gateway.mode": "local", "gateway.bind": "loopback", "gateway.port": float64(18789), "gateway.reload.mode": "off",
		"discovery.mdns.mode": "off", "update.checkOnStart": false, "models.catalogRefresh.enabled": false,
		"gateway.auth.mode": "token", "logging.consoleStyle": "json", "agents.defaults.model": "anthropic/claude-sonnet-4-5",
	} {
		got, _ := occconfig.Lookup(d, occconfig.Keys(strings.Split(p, ".")...))
		if got != want {
			t.Errorf("%s = %v, want %v", p, got, want)
		}
	}
	sum := sha256.Sum256(h.Config)
	gw, err := SystemdGatewayDocument(rev, 18789)
	if err != nil {
		t.Fatal(err)
	}
	if h.Digest != hex.EncodeToString(sum[:]) || h.Digest != occconfig.Digest(gw) {
		t.Errorf("digest %s is not the sha256 of the written bytes", h.Digest)
	}
	var info RevisionInfo
	if err := json.Unmarshal(h.RevisionInfo, &info); err != nil || info.Revision != 1 || info.Digest != h.Digest || info.RevisionID != rev.ID() {
		t.Errorf("revision.json = %s (%v)", h.RevisionInfo, err)
	}
	// rule AD3: the file is exactly the revision's gateway document, which
	// admission froze with the platform's wiring (and the port), so the
	// plan's admitted_document shows what runs; rendering changes nothing.
	if got, want := string(h.Config), string(occconfig.Canonical(rev.GatewayDocument)); got != want {
		t.Errorf("the written file differs from the revision's gateway document:\n%s\n%s", got, want)
	}
}

// TestSystemd_UnitDoesNotChangeBetweenRevisions: a revision is selected by
// the current link, so the unit is the same for every revision.
func TestSystemd_UnitDoesNotChangeBetweenRevisions(t *testing.T) {
	h1, err := Systemd(admit(t, sshInput(t, anthropicSSH)), 1)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Systemd(admit(t, sshInput(t, `{agents: {defaults: {model: "anthropic/claude-opus-4-1"}}}`)), 2)
	if err != nil {
		t.Fatal(err)
	}
	if h1.UnitText != h2.UnitText {
		t.Errorf("unit differs between revisions:\n%s\n---\n%s", h1.UnitText, h2.UnitText)
	}
	if h1.ConfigPath == h2.ConfigPath || h1.Digest == h2.Digest {
		t.Error("two revisions share a configuration file or digest")
	}
}

func TestSystemd_GatewayPortFromConfiguration(t *testing.T) {
	h, err := Systemd(admit(t, sshInput(t, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, gateway: {port: 19001}}`)), 1)
	if err != nil {
		t.Fatal(err)
	}
	if h.Port != 19001 || h.Endpoint != "http://127.0.0.1:19001" || !strings.Contains(h.UnitText, "OPENCLAW_GATEWAY_PORT=19001\n") {
		t.Errorf("port %d, endpoint %s", h.Port, h.Endpoint)
	}
	for _, bad := range []string{`0`, `70000`, `"18789"`, `1.5`} {
		rev := admit(t, sshInput(t, anthropicSSH))
		rev.GatewayDocument["gateway"] = map[string]any{"port": doc(t, `{p: `+bad+`}`)["p"]}
		if _, err := Systemd(rev, 1); err == nil || !strings.Contains(err.Error(), "gateway.port") {
			t.Errorf("port %s: err = %v", bad, err)
		}
	}
}

// TestAU5_SystemdRefusesAnythingButEmbeddedRuntime: rendering checks the
// combination again (AD6), whatever reached it.
func TestAU5_SystemdRefusesAnythingButEmbeddedRuntime(t *testing.T) {
	base := admit(t, sshInput(t, anthropicSSH))
	cases := map[string]func(r *admission.Revision){
		"api_key":       func(r *admission.Revision) { r.Source.Method = admission.MethodAPIKey },
		"no file":       func(r *admission.Revision) { r.Source.EnvironmentFile = "" },
		"dedicated":     func(r *admission.Revision) { r.ExecutionMode = admission.ModeDedicated },
		"codex":         func(r *admission.Revision) { r.Harness = admission.HarnessCodex },
		"kubernetes":    func(r *admission.Revision) { r.ComputeSettings.Kind = admission.KindKubernetes },
		"relative file": func(r *admission.Revision) { r.Source.EnvironmentFile = "occ.env" },
		"newline in path": func(r *admission.Revision) {
			r.ComputeSettings = r.ComputeSettings.WithSSH(func(s *admission.SSHSettings) { s.OpenClawPath = "/usr/bin/openclaw\nExecStartPre=/bin/sh" })
		},
		"config_dir /": func(r *admission.Revision) {
			r.ComputeSettings = r.ComputeSettings.WithSSH(func(s *admission.SSHSettings) { s.ConfigDir = "/" })
		},
		"file in agent dir": func(r *admission.Revision) { r.Source.EnvironmentFile = "/etc/openclaw/support/openclaw.env" },
		"file in state dir": func(r *admission.Revision) { r.Source.EnvironmentFile = "/var/lib/occ-agent/support/.env" },
		"revision 0":        nil,
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			r := *base
			n := int64(1)
			if mutate == nil {
				n = 0
			} else {
				mutate(&r)
			}
			if _, err := Systemd(&r, n); err == nil {
				t.Fatal("rendered")
			}
		})
	}
}

func TestSystemd_PathsAreQuotedForSystemd(t *testing.T) {
	in := sshInput(t, anthropicSSH)
	in.Compute = in.Compute.WithSSH(func(s *admission.SSHCompute) { s.OpenClawPath = "/opt/open claw/bin/openclaw%h" })
	in.Compute = in.Compute.WithSSH(func(s *admission.SSHCompute) { s.ConfigDir = "/srv/occ 100%" })
	h, err := Systemd(admit(t, in), 1)
	if err != nil {
		t.Fatal(err)
	}
	u := unitLines(h.UnitText)
	if got := u["ExecStart"][0]; got != `"/opt/open claw/bin/openclaw%%h" gateway run` {
		t.Errorf("ExecStart = %s", got)
	}
	if !strings.Contains(h.UnitText, `Environment="OPENCLAW_CONFIG_PATH=/srv/occ 100%%/support/current/openclaw.json"`) {
		t.Errorf("config path not quoted:\n%s", h.UnitText)
	}
	if h.ActiveConfigPath != "/srv/occ 100%/support/current/openclaw.json" {
		t.Errorf("ActiveConfigPath = %s", h.ActiveConfigPath)
	}
}

func TestServiceUser_FitsUseradd(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z][-a-z0-9_]*$`) // useradd's portable names
	long := strings.Repeat("a", 40) + "-" + strings.Repeat("b", 22)
	for _, agent := range []string{"support", "a", strings.Repeat("x", 28), strings.Repeat("x", 29), long, "abcdefghij-klmnopqrstuvwxyz"} {
		u := ServiceUser(agent)
		if len(u) > 32 || !valid.MatchString(u) {
			t.Errorf("ServiceUser(%q) = %q", agent, u)
		}
	}
	if ServiceUser(long) == ServiceUser(strings.Repeat("a", 40)+"-"+strings.Repeat("c", 22)) {
		t.Error("two long names share a user")
	}
}

// Issue 27: a long name's hashed user was occ-PREFIX-HASH8, which a
// shorter agent name PREFIX-HASH8 also maps to: its user, its files and
// its state. Each short name below is the user a long one had, whatever
// the form of the hash; no two of them share a user now.
func TestServiceUser_NoTwoAgentsShareAUser(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyz0123"
	sum := sha256.Sum256([]byte(long))
	agents := []string{long,
		"abcdefghijklmnopqr-" + hex.EncodeToString(sum[:])[:8], // the hashed user of the old form
		"abcdefghijk-" + hex.EncodeToString(sum[:])[:16],       // the same hash with dashes
		strings.TrimPrefix(ServiceUser(long), "occ-"),          // whatever the form is now
		strings.ReplaceAll(strings.TrimPrefix(ServiceUser(long), "occ_"), "_", "-"),
		"abcdefghijklmnopqrstuvwxyz0124", strings.Repeat("x", 28), strings.Repeat("x", 29)}
	seen := map[string]string{}
	for _, a := range agents {
		u := ServiceUser(a)
		if prev, ok := seen[u]; ok && prev != a {
			t.Errorf("agents %q and %q share the user %q", prev, a, u)
		}
		seen[u] = a
	}
}

func TestParseRevisionDirName(t *testing.T) {
	for s, want := range map[string]int64{"r1": 1, "r42": 42, "r0": 0, "r01": 0, "rx": 0, "1": 0, "r-1": 0, "current": 0} {
		n, ok := ParseRevisionDirName(s)
		if ok != (want > 0) || n != want && ok {
			t.Errorf("ParseRevisionDirName(%q) = %d, %v", s, n, ok)
		}
	}
}

// The unit holds each host path cleaned: a path that ends in white space
// or a backslash once cleaned ("/etc/occ/a /") is refused like one that
// does as written, since systemd would read another path. Found by
// FuzzSystemdUnit (testdata/fuzz/FuzzSystemdUnit/18c62232128cdda1).
func TestCheckHostPath_JudgesTheCleanedPath(t *testing.T) {
	for _, p := range []string{"/etc/occ/a /", "/etc/occ/a \t/", "/etc/occ/a//", "/x /./", `/x\/`} {
		want := p != "/etc/occ/a//"
		if err := checkHostPath(p); (err != nil) != want {
			t.Errorf("checkHostPath(%q) = %v, want an error: %v", p, err, want)
		}
	}
}

// rules AU6, AU5: an SSH host takes no secret bindings (admission refuses
// them, naming this way); a channel credential reaches the gateway as a
// NAME=value line of the runtime source's environment file, which the unit
// loads: the document's ${NAME} reference is written as is, for OpenClaw
// to substitute from the unit's environment.
func TestAU6_SSHChannelCredentialsComeFromTheEnvironmentFile(t *testing.T) {
	rev := admit(t, sshInput(t, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, channels: {telegram: {botToken: "${TELEGRAM}"}}}`))
	h, err := Systemd(rev, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := unitLines(h.UnitText)["EnvironmentFile"]; len(got) != 2 || got[0] != "/etc/occ/openclaw.env" || got[1] != h.TokenFile {
		t.Errorf("EnvironmentFile = %v, want the runtime source's file once, then the agent's token file", got)
	}
	d, err := occconfig.Parse(string(h.Config))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := occconfig.String(d, occconfig.Keys("channels", "telegram", "botToken")); v != "${TELEGRAM}" {
		t.Errorf("channels.telegram.botToken = %q, want the reference kept for the unit's environment", v)
	}
}

// Issue 27: an agent's directory (config_dir/NAME) never overlaps the
// service users' state under StateRoot, which each user owns and the
// root-run activation would then execute from: a config_dir inside it,
// or one whose agent directory would be it or hold it, is refused.
func TestSystemd_ConfigDirOutsideTheState(t *testing.T) {
	for _, tc := range []struct {
		configDir, agent string
		refused          bool
	}{
		{"/etc/openclaw", "support", false},
		{"/var/lib", "support", false},
		{"/var/lib/occ-agent", "support", true},
		{"/var/lib/occ-agent/web", "support", true},
		{"/var/lib/occ-agent/../occ-agent/x", "support", true},
		{"/var/lib", "occ-agent", true},
		{"/var", "lib", true},
	} {
		in := sshInput(t, anthropicSSH)
		in.Agent.Name = tc.agent
		in.Compute = in.Compute.WithSSH(func(s *admission.SSHCompute) { s.ConfigDir = tc.configDir })
		_, err := Systemd(admit(t, in), 1)
		if tc.refused != (err != nil) || err != nil && !strings.Contains(err.Error(), "config_dir") {
			t.Errorf("config_dir %s, agent %s: %v, want refused %v naming config_dir", tc.configDir, tc.agent, err, tc.refused)
		}
		if got := ConfigDirOverlapsState(tc.configDir); got != (tc.refused && tc.agent == "support") {
			t.Errorf("ConfigDirOverlapsState(%s) = %v", tc.configDir, got)
		}
	}
}
