package sshexec

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// hostView is what a host says about an agent, in the host's terms.
type hostView struct {
	// Exists is false when neither the unit file nor any revision of the
	// agent is on the host.
	Exists bool
	// UnitFile is true when the unit file is present; Unit is systemd's view.
	UnitFile bool
	Unit     UnitState
	// AgentDir is where the agent's revisions are (from the compute, or,
	// for an import, from the unit file).
	AgentDir string
	// Current is the revision the current link selects (0: none), and
	// Activation its activation record (nil: never activated).
	Current    int64
	Activation *render.Activation
	// Digest is the sha256 of the current configuration file as it is now.
	Digest string
	// Revisions are the revision directories on the host, ascending.
	Revisions []int64
	// Drift explains why what runs is not the activated revision ("" when
	// it is): a removed or stopped unit, a configuration edited by hand, a
	// revision switched but never activated; Reason classifies it.
	Drift  string
	Reason executor.DriftReason
}

// readScript prints, as key=value lines, the unit file's presence,
// systemd's view of the unit, the current link, the sha256 of the current
// configuration, its activation record and the revision directories. It
// reads nothing else (never the credentials file).
const readScript = agentDirFuncs + `unit=$1 unitpath=$2 agentdir=$3
if [ -f "$unitpath" ]; then
	echo "unit_file=present"
	[ -n "$agentdir" ] || agentdir=$(unit_agent_dir "$unitpath")
else
	echo "unit_file=absent"
fi
systemctl show -p ` + unitProperties + ` -- "$unit" 2>/dev/null
echo "agent_dir=$agentdir"
[ -n "$agentdir" ] || exit 0
cur=$(readlink -- "$agentdir/current" 2>/dev/null || true)
echo "current=$cur"
if [ -n "$cur" ] && [ -f "$agentdir/current/openclaw.json" ]; then
	s=$(sha256sum -- "$agentdir/current/openclaw.json")
	echo "digest=${s%% *}"
fi
if [ -n "$cur" ] && [ -f "$agentdir/$cur/activated.json" ]; then
	printf 'activation='
	tr -d '\n' < "$agentdir/$cur/activated.json"
	echo
fi
printf 'revisions='
ls -1 -- "$agentdir" 2>/dev/null | grep -E '^r[0-9]+$' | tr '\n' ' '
echo
`

// location is where an SSH agent lives: its compute's host and agent
// directory, or, for an agent imported by HOST[:PORT]/NAME whose compute
// is not in state yet, the host from the id, verified through the
// provider's known_hosts file, and the agent directory from the unit file
// (agentDir "").
func (e *Executor) location(a executor.Agent) (t Target, agentDir string, err error) {
	if c := a.Compute; c != nil {
		configDir := c.SSH().ConfigDir
		if configDir == "" {
			configDir = DefaultConfigDir
		}
		return e.target(*c), render.AgentDir(configDir, a.Name), nil
	}
	host, port, _, ok := parseImportID(a.ImportID)
	if !ok {
		return t, "", fmt.Errorf("%q is not an SSH agent id", a.ImportID)
	}
	return e.hostTarget(host, port), "", nil
}

// hostTarget is how to reach a host named by an agent id, not by a
// compute in state: the provider's user, the host verified through the
// provider's known_hosts file.
func (e *Executor) hostTarget(host string, port int) Target {
	return Target{Host: host, Port: port, User: e.User, KnownHostsFile: e.KnownHostsFile}
}

// readBounded runs a read-only operation within ReadTimeout: a refresh or
// a listing has no timeouts block, and a host that accepts the connection
// but never answers (a hung systemctl) must not hold the plan for ever.
// what names the operation in the error.
func (e *Executor) readBounded(ctx context.Context, what string, read func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, e.readTimeout())
	defer cancel()
	err := read(rctx)
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("the host did not answer the %s within %s: %w", what, e.readTimeout(), err)
	}
	return err
}

// Read observes an agent on the host.
func (e *Executor) Read(ctx context.Context, a executor.Agent) (executor.Observed, error) {
	t, agentDir, err := e.location(a)
	if err != nil {
		return executor.Observed{}, executor.Normalize(err, exit(executor.OpRead, a.Name, 0, a.ImportID, nil))
	}
	var v hostView
	err = e.readBounded(ctx, "refresh", func(ctx context.Context) (err error) {
		v, err = e.read(ctx, t, a.Name, agentDir)
		return err
	})
	if err != nil {
		return executor.Observed{}, executor.Normalize(err, exit(executor.OpRead, a.Name, 0, t.Addr(), nil))
	}
	return observedOf(v), nil
}

// observedOf is what Read reports of what the host says: the activated
// revision only while it runs unchanged.
func observedOf(v hostView) executor.Observed {
	o := executor.Observed{Exists: v.Exists, Drift: v.Reason, DriftDetail: v.Drift}
	if !v.Exists {
		o.Drift, o.DriftDetail = executor.DriftGone, "the agent is not on the host"
	}
	if v.Activation != nil {
		o.References = v.Activation.References // also of a drifted agent: an import adopts it
	}
	if o.Drift == executor.DriftNone && v.Activation != nil {
		act := v.Activation
		o.Revision, o.RevisionID, o.ActivatedAt, o.Endpoint = act.Revision, act.RevisionID, act.ActivatedAt.UTC(), act.Endpoint
	}
	return o
}

func (e *Executor) read(ctx context.Context, t Target, agent, agentDir string) (hostView, error) {
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return hostView{}, err
	}
	res, err := conn.RunOK(ctx, "read "+render.UnitName(agent), readScript, nil, render.UnitName(agent), render.UnitPath(agent), agentDir)
	if err != nil {
		return hostView{}, err
	}
	return parseObserved(res.Stdout), nil
}

func parseObserved(out string) hostView {
	var o hostView
	kv := keyValues(out)
	o.UnitFile = kv["unit_file"] == "present"
	o.Unit = ParseUnitState(out)
	o.AgentDir = kv["agent_dir"]
	o.Current, _ = render.ParseRevisionDirName(kv["current"])
	o.Digest = kv["digest"]
	if a := kv["activation"]; a != "" {
		var rec render.Activation
		if json.Unmarshal([]byte(a), &rec) == nil {
			o.Activation = &rec
		}
	}
	for _, f := range strings.Fields(kv["revisions"]) {
		if n, ok := render.ParseRevisionDirName(f); ok {
			o.Revisions = append(o.Revisions, n)
		}
	}
	slices.Sort(o.Revisions)
	o.Exists = o.UnitFile || kv["current"] != "" || len(o.Revisions) > 0
	o.Reason, o.Drift = drift(o, kv["current"])
	return o
}

// drift judges what was observed; "" when the activated revision runs.
func drift(o hostView, current string) (executor.DriftReason, string) {
	switch {
	case !o.Exists:
		return executor.DriftNone, ""
	case !o.UnitFile:
		return executor.DriftWorkload, "the unit file was removed from the host"
	case o.Unit.LoadState == "not-found":
		return executor.DriftWorkload, "systemd does not know the unit (daemon-reload missing?)"
	case o.Unit.ActiveState != "active":
		return executor.DriftWorkload, fmt.Sprintf("the unit is %s, not running (stopped outside Terraform?)", o.Unit.String())
	case current == "":
		return executor.DriftUnfinished, "no revision is selected (the current link is missing)"
	case o.Activation == nil:
		return executor.DriftUnfinished, fmt.Sprintf("revision %s is selected but was never activated (an apply stopped half-way)", strings.TrimPrefix(current, "r"))
	case o.Activation.Revision != o.Current:
		return executor.DriftUnfinished, fmt.Sprintf("the current link selects revision %d, but its activation record is of revision %d", o.Current, o.Activation.Revision)
	case o.Digest == "":
		return executor.DriftEdited, fmt.Sprintf("the configuration file of revision %d was removed", o.Current)
	case o.Digest != o.Activation.Digest:
		return executor.DriftEdited, fmt.Sprintf("the configuration of revision %d was edited on the host (sha256 %.12s…, activated %.12s…)", o.Current, o.Digest, o.Activation.Digest)
	}
	return executor.DriftNone, ""
}

// agentDirFuncs are the shell functions of an agent's files on a host,
// with the one list of what the provider writes in an agent directory
// beside its rN revision directories and its .occ-upload.* uploads:
//
//   - remove_agent_dir DIR removes what the provider writes there, then
//     the directory when nothing else is left in it;
//   - foreign_entry DIR prints the first entry the provider did not write;
//   - unit_agent_dir UNITPATH prints the agent directory a unit file runs
//     from (its render.UnitKeyAgentDir, unescaped; "" without one);
//   - foreign_unit UNITPATH AGENT: a unit file (or link: systemctl mask's
//     included) is there that the provider did not write for AGENT (no
//     render.UnitKeyAgent line naming it);
//   - same_dir A B: A and B are one directory, through links too.
const agentDirFuncs = `agent_dir_files='` + render.CurrentLink + ` .current.tmp .lock .activate.sh .activate.out ` + render.GatewayTokenFile + `'
remove_agent_dir() {
	for d in "$1"/r[0-9]*; do
		case "${d##*/}" in r*[!0-9]*) continue ;; esac
		[ -d "$d" ] && rm -rf -- "$d"
	done
	for f in $agent_dir_files; do rm -f -- "$1/$f"; done
	rm -f -- "$1"/.occ-upload.*
	rmdir -- "$1" 2>/dev/null || echo "kept $1: it holds files the provider did not write" >&2
}
foreign_entry() {
	find "$1" -mindepth 1 -maxdepth 1 ! -name 'r[0-9]*' ! -name '.occ-upload.*' -print 2>/dev/null | while IFS= read -r p; do
		case " $agent_dir_files " in *" ${p##*/} "*) ;; *) echo "$p"; break ;; esac
	done
}
unit_agent_dir() {
	[ -f "$1" ] && sed -n 's/^` + render.UnitKeyAgentDir + `=//p' "$1" | head -n 1 | sed 's/%%/%/g'
	return 0
}
same_dir() {
	[ "$(readlink -f -- "$1")" = "$(readlink -f -- "$2")" ]
}
foreign_unit() {
	[ -e "$1" ] || [ -L "$1" ] || return 1
	[ ! -L "$1" ] && [ -f "$1" ] && [ "$(sed -n 's/^` + render.UnitKeyAgent + `=//p' "$1" | head -n 1)" = "$2" ] && return 1
	return 0
}
`

// deleteScript stops and disables the unit, removes it, the agent's
// revision directories, its current link and state directory. It removes
// only what the provider writes: the credentials file is never touched, and
// an agent directory holding anything else is kept. A unit that runs the
// agent from another agent directory than the compute's (another
// config_dir: another configuration's agent of this name) is left with
// its state and user; only this compute's agent directory goes.
const deleteScript = agentDirFuncs + `set -u
agent=$1 unit=$2 unitpath=$3 agentdir=$4 statedir=$5 user=$6
if foreign_unit "$unitpath" "$agent"; then
	# A unit file of this name the provider did not write for this agent:
	# someone else's, kept with the state directory and the user.
	[ -n "$agentdir" ] && [ -d "$agentdir" ] && [ ! -L "$agentdir" ] && remove_agent_dir "$agentdir"
	echo "kept $unitpath, the state directory and the user: the unit file is not one the provider wrote for agent $agent" >&2
	exit 0
fi
unitdir=$(unit_agent_dir "$unitpath")
if [ -n "$agentdir" ] && [ -n "$unitdir" ] && ! same_dir "$unitdir" "$agentdir"; then
	# The unit runs an agent of this name from another config_dir:
	# another configuration's, whose unit, state and user stay.
	[ -d "$agentdir" ] && [ ! -L "$agentdir" ] && remove_agent_dir "$agentdir"
	echo "kept $unit, its state directory and its user: the unit runs agent $agent from $unitdir, another config_dir than this compute's" >&2
	exit 0
fi
[ -n "$agentdir" ] || agentdir=$unitdir
systemctl disable --now --quiet -- "$unit" 2>/dev/null || systemctl stop -- "$unit" 2>/dev/null || true
rm -f -- "$unitpath" "$(dirname -- "$unitpath")/.occ-upload.$(basename -- "$unitpath")."*
systemctl daemon-reload
systemctl reset-failed -- "$unit" 2>/dev/null || true
case "$agentdir" in
"" | / | */"$agent" | "$agent") ;;
*) echo "refusing to remove $agentdir: it is not an agent directory of $agent" >&2; exit 1 ;;
esac
if [ -n "$agentdir" ] && [ "$agentdir" != / ] && [ -d "$agentdir" ]; then
	remove_agent_dir "$agentdir"
fi
rm -rf -- "$statedir"
# The service user the first deploy created (userdel refuses while a
# process still runs as it).
if id -u "$user" >/dev/null 2>&1; then
	userdel -- "$user" 2>/dev/null || echo "kept the user $user: userdel failed" >&2
fi
exit 0
`

// Delete removes an agent from the host: the unit (stopped and disabled),
// its revision files, what a killed upload left, its state directory and
// its service user. The operator's credentials file is never touched (AU5).
func (e *Executor) Delete(ctx context.Context, a executor.Agent) error {
	t, agentDir, err := e.location(a)
	if err == nil {
		err = e.delete(ctx, t, a.Name, agentDir, a.Log)
	}
	return executor.Normalize(err, exit(executor.OpDelete, a.Name, 0, t.Addr(), nil))
}

func (e *Executor) delete(ctx context.Context, t Target, agent, agentDir string, log executor.Log) error {
	if agentDir != "" && path.Base(agentDir) != agent {
		return fmt.Errorf("agent directory %s is not agent %s's", agentDir, agent)
	}
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return err
	}
	res, err := conn.RunOK(ctx, "delete "+render.UnitName(agent), deleteScript, nil,
		agent, render.UnitName(agent), render.UnitPath(agent), agentDir, render.StateDir(agent), render.ServiceUser(agent))
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(res.Stderr); s != "" {
		log.Print("delete: "+s, map[string]any{"work.operation": "delete", "unit": render.UnitName(agent)})
	}
	return nil
}

// SplitAgentID reads an SSH agent id or import id (HOST/NAME,
// HOST:PORT/NAME, ssh://HOST[:PORT]/NAME) into its host, port (0: the
// default, 22) and agent name; ok is false for a Kubernetes NAMESPACE/NAME.
func SplitAgentID(id string) (host string, port int, name string, ok bool) {
	return parseImportID(id)
}

// ImportIDOf is the import id that names agent on host and port (0 or
// 22: the default), in the explicit ssh:// form, so that a host that is a
// single DNS label is not read as a Kubernetes namespace.
func ImportIDOf(host string, port int, agent string) string {
	return "ssh://" + HostPort(host, port) + "/" + agent
}

// HostPort writes host and port as an import id or a listing names a
// host: HOST, or HOST:PORT when port is neither 0 nor 22 (the default),
// an IPv6 address in brackets.
func HostPort(host string, port int) string {
	if port == 0 || port == 22 {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// ParseImportID adopts HOST/NAME, HOST:PORT/NAME or ssh://HOST[:PORT]/NAME;
// ok is false for a Kubernetes NAMESPACE/NAME. A HOST that is a single DNS
// label is read as a namespace: write it as ssh://HOST/NAME.
func (e *Executor) ParseImportID(id string) (name string, ok bool, err error) {
	_, _, name, ok = parseImportID(id)
	if !ok {
		return "", false, nil
	}
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return "", true, fmt.Errorf("import ID %q: the agent name %q is not a DNS label; use HOST/NAME, HOST:PORT/NAME or ssh://HOST[:PORT]/NAME, such as 10.0.0.5/support", id, name)
	}
	return name, true, nil
}

// parseImportID reads ssh://HOST[:PORT]/NAME, or HOST[:PORT]/NAME where
// HOST holds a dot or a colon (an address or a qualified name) or is
// bracketed IPv6. Port 0 means the default (22).
func parseImportID(id string) (host string, port int, name string, ok bool) {
	explicit := strings.HasPrefix(id, "ssh://")
	id = strings.TrimPrefix(id, "ssh://")
	i := strings.LastIndex(id, "/")
	if i <= 0 || i == len(id)-1 {
		return "", 0, "", false
	}
	hostPort, name := id[:i], id[i+1:]
	if !explicit && !strings.ContainsAny(hostPort, ".:[") {
		return "", 0, "", false // a namespace
	}
	if host, port, ok = parseHost(hostPort); !ok {
		return "", 0, "", false
	}
	return host, port, name, true
}

// parseHost reads the host of an SSH agent id: HOST, HOST:PORT or
// bracketed IPv6 with or without a port. Port 0 means the default (22).
func parseHost(hostPort string) (host string, port int, ok bool) {
	host = hostPort
	if h, p, err := net.SplitHostPort(hostPort); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, false
		}
		host, port = h, n
	} else if strings.HasPrefix(hostPort, "[") && strings.HasSuffix(hostPort, "]") {
		host = hostPort[1 : len(hostPort)-1]
	}
	// A bracket left in the host is not an IPv6 literal ("[a/x"): no
	// address would dial.
	if host == "" || strings.ContainsAny(host, "/@ []") {
		return "", 0, false
	}
	return host, port, true
}
