package sshexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Executor deploys, reads, lists and deletes agents on SSH hosts; it
// implements executor.Executor. One is shared by every operation of a
// provider process: per-operation values (the log) travel with each call.
type Executor struct {
	Pool *Pool
	// User logs in where a compute names no user; KnownHostsFile verifies
	// hosts of agents imported by HOST/NAME (no compute in state).
	User           string
	KnownHostsFile string
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// PollInterval is how often the unit and the gateway are looked at
	// while waiting; default 500 ms.
	PollInterval time.Duration
	// JournalLines is how many journal lines a Failure carries; default
	// and most executor.MaxQuotedLines.
	JournalLines int
	// ReadTimeout bounds a refresh (connect and read); default 60 s.
	ReadTimeout time.Duration
	// BeforeWrite, when set, is called before each command or upload that
	// may change a host, with the host's address and the operation. Only
	// fault tests set it (to cut a connection or kill the process there).
	BeforeWrite func(addr, op string)
	// unitDir replaces render.UnitDir where List looks for unit files;
	// only tests set it (the unit directory of the machine their sshd
	// runs on is not theirs to write).
	unitDir string
}

func (e *Executor) readTimeout() time.Duration {
	if e.ReadTimeout > 0 {
		return e.ReadTimeout
	}
	return 60 * time.Second
}

var _ executor.Executor = (*Executor)(nil)

// DefaultConfigDir is where agents' revisions live when the compute names
// no config_dir.
const DefaultConfigDir = "/etc/openclaw"

// Kind is admission.KindSSH.
func (e *Executor) Kind() string { return admission.KindSSH }

// target is how to reach a compute's host: its settings, the provider's
// user when the compute names none.
func (e *Executor) target(c admission.Compute) Target {
	user := c.SSH().User
	if user == "" {
		user = e.User
	}
	t := Target{Host: c.SSH().Host, Port: int(c.SSH().Port), User: user, HostKey: c.SSH().HostKey, InsecureIgnoreHostKey: c.SSH().InsecureIgnoreHostKey}
	if b := c.SSH().Bastion; b != nil {
		t.Bastion = &Hop{Host: b.Host, Port: int(b.Port), User: b.User, HostKey: b.HostKey}
	}
	return t
}

// Prepare has nothing to prepare on a host: Deploy's preflight checks it.
func (e *Executor) Prepare(context.Context, executor.Prepare) (executor.Prepared, error) {
	return executor.Prepared{}, nil
}

// Inspect reads nothing live: an SSH compute offers what its settings say.
func (e *Executor) Inspect(_ context.Context, c admission.Compute) (admission.Installation, bool, error) {
	return admission.ComputeInstallation(c), false, nil
}

// Release has nothing to release.
func (e *Executor) Release(context.Context, executor.Release) (executor.Released, error) {
	return executor.Released{}, nil
}

// AgentID is an SSH agent's id, HOST/NAME.
func AgentID(c admission.Compute, agent string) string {
	return fmt.Sprintf("%s/%s", c.SSH().Host, agent)
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Executor) poll() time.Duration {
	if e.PollInterval > 0 {
		return e.PollInterval
	}
	return 500 * time.Millisecond
}

// preflightScript checks what must hold before anything is written: root
// through sudo (the command itself), a running systemd of version 240 or
// newer (the activation's systemd-run flags), a gateway port that no other
// unit's process listens on, and a credentials file (when it exists; a
// missing one is systemd's to report) that only root can read or change:
// the file root-owned and closed to other users and to any group but
// root's, every directory above it, and above what it links to,
// root-owned and writable by root alone. The config_dir must be the
// same (a directory another user can write lets them swap what the
// root-run activation executes), and an existing agent directory in it
// must hold only what the provider writes: a directory of the host's own
// (config_dir /usr and agent bin) is never taken over. It prints the
// host's clock.
const preflightScript = agentDirFuncs + `unit=$1 port=$2 envfile=$3 configdir=$4 agentdir=$5
command -v systemctl >/dev/null 2>&1 || { echo "systemctl not found: the host must run systemd" >&2; exit 69; }
[ -d /run/systemd/system ] || { echo "systemd is not the running init system" >&2; exit 69; }
v=$(systemctl --version 2>/dev/null | awk 'NR == 1 { print $2 }')
case "$v" in ''|*[!0-9]*) v=0 ;; esac
[ "$v" -ge 240 ] || { echo "systemd $v is too old: the activation runs as a transient unit (systemd-run --wait --collect --service-type=exec), which needs systemd 240 or newer" >&2; exit 69; }
if command -v ss >/dev/null 2>&1; then
	owners=$(ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)
	if [ -n "$owners" ]; then
		for p in $owners; do
			if ! grep -q "/$unit\$" "/proc/$p/cgroup" 2>/dev/null; then
				echo "port $port on the host's loopback is taken by another process (pid $p, $(cat /proc/$p/comm 2>/dev/null)); set gateway.port in the agent's configuration to a free port" >&2
				exit 73
			fi
		done
	fi
fi
unsafe() {
	echo "the credential source's environment_file $envfile $1" >&2
	echo "only root may read or change it: chown root:root $envfile && chmod 0600 $envfile" >&2
	echo "keep it in directories root owns and only root can write, then apply again" >&2
	exit 74
}
# owned_by_root PATH: every existing directory from PATH up is root's
# and writable by root alone; prints what is not.
owned_by_root() {
	d=$1
	while :; do
		if [ -e "$d" ]; then
			set -- $(stat -L -c '%u %g %a' -- "$d")
			[ "$1" = 0 ] || { echo "$d is owned by uid $1, not root"; return; }
			[ $((0$3 & 02)) = 0 ] || { echo "$d can be written by every user (mode $3)"; return; }
			[ $((0$3 & 020)) = 0 ] || [ "$2" = 0 ] || { echo "$d can be written by group $2 (mode $3)"; return; }
		fi
		[ "$d" = / ] && return
		d=$(dirname -- "$d")
	done
}
if [ -n "$configdir" ]; then
	bad=$(owned_by_root "$configdir")
	if [ -n "$bad" ]; then
		echo "the compute's config_dir $configdir is not root's alone: $bad" >&2
		echo "the activation runs as root from it: use a config_dir in directories only root can write (the default /etc/openclaw), then apply again" >&2
		exit 75
	fi
	if [ -L "$agentdir" ] || { [ -e "$agentdir" ] && [ ! -d "$agentdir" ]; }; then
		echo "$agentdir, the agent's directory in config_dir, exists and is not a directory the provider made; choose another config_dir or agent name" >&2
		exit 75
	fi
	if [ -d "$agentdir" ]; then
		other=$(foreign_entry "$agentdir")
		if [ -n "$other" ]; then
			echo "$agentdir, the agent's directory in config_dir, holds $other, which the provider did not write: it is not an agent directory" >&2
			echo "choose another config_dir or agent name; nothing was changed" >&2
			exit 75
		fi
	fi
fi
if [ -n "$envfile" ] && [ -e "$envfile" ]; then
	real=$(readlink -f -- "$envfile")
	set -- $(stat -c '%u %g %a' -- "$real")
	[ "$1" = 0 ] || unsafe "is owned by uid $1, not root"
	[ $((0$3 & 07)) = 0 ] || unsafe "is open to every user on the host (mode $3)"
	[ $((0$3 & 070)) = 0 ] || [ "$2" = 0 ] || unsafe "is open to group $2 (mode $3)"
	for f in "$envfile" "$real"; do
		bad=$(owned_by_root "$(dirname -- "$f")")
		[ -z "$bad" ] || unsafe "is in a directory not root's alone: $bad"
	done
fi
date +%s%6N
`

// prepareScript creates the service user when missing and the agent's and
// revision's directories (root-owned, readable by the service group only),
// and, once, the agent's gateway token (render.GatewayTokenFile: 32 random
// bytes of the host's, in a file only root reads; systemd loads it before
// it drops privileges). The token stays across revisions and never leaves
// the host but for a turn the provider sends.
// A concurrent useradd may hold /etc/passwd's lock: retried.
const prepareScript = `set -eu
user=$1 agentdir=$2 revdir=$3
if ! id -u "$user" >/dev/null 2>&1; then
	i=0
	until useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --comment "OCC agent gateway" "$user"; do
		id -u "$user" >/dev/null 2>&1 && break
		i=$((i + 1))
		[ "$i" -lt 10 ] || { echo "useradd $user failed" >&2; exit 1; }
		sleep 1
	done
fi
mkdir -p -m 0755 -- "$(dirname -- "$agentdir")"
mkdir -p -- "$agentdir" "$revdir"
chown root:"$user" -- "$agentdir" "$revdir"
chmod 0750 -- "$agentdir" "$revdir"
rm -f -- "$agentdir"/.occ-upload.* "$revdir"/.occ-upload.* "$agentdir/.current.tmp"
tok="$agentdir/` + render.GatewayTokenFile + `"
if ! grep -qx 'OPENCLAW_GATEWAY_TOKEN=[0-9a-f]\{64\}' "$tok" 2>/dev/null; then
	t=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
	[ ${#t} -eq 64 ] || { echo "could not read 32 random bytes for the gateway token" >&2; exit 1; }
	(umask 077 && printf 'OPENCLAW_GATEWAY_TOKEN=%s\n' "$t" > "$agentdir/.occ-upload.token")
	mv -fT -- "$agentdir/.occ-upload.token" "$tok"
fi
chown root:root -- "$tok"
chmod 0600 -- "$tok"
`

// guardScript reads, before anything is written, which revision the host
// selects and that revision's activation record: what AC3's stale guard
// and a create's ownership check judge (guardVerdict). It also reads the
// agent directory the agent's unit file runs from (the unit, the state
// directory and the service user are one per agent name on a host) and,
// when that is another directory (another config_dir), what that one
// selects.
const guardScript = agentDirFuncs + `agentdir=$1 unitpath=$2 agent=$3
! foreign_unit "$unitpath" "$agent" || echo "unit_foreign=1"
selected() {
	cur=$(readlink -- "$2/current" 2>/dev/null || true)
	echo "${1}current=$cur"
	if [ -n "$cur" ] && [ -f "$2/current/` + render.ActivationFile + `" ]; then
		printf '%sactivation=' "$1"
		tr -d '\n' < "$2/current/` + render.ActivationFile + `"
		echo
	fi
}
selected "" "$agentdir"
unitdir=$(unit_agent_dir "$unitpath")
# The same directory by another path (a config_dir through a link) is the agent's own.
[ -z "$unitdir" ] || ! same_dir "$unitdir" "$agentdir" || unitdir=$agentdir
echo "unit_dir=$unitdir"
[ -z "$unitdir" ] || [ "$unitdir" = "$agentdir" ] || selected unit_ "$unitdir"
`

// activateScript runs the activation on the host as a transient systemd
// unit (systemd-run), so that it completes on its own when the SSH
// connection drops or the provider is killed half-way: the connection only
// waits for it. The unit, under the agent's lock (flock), refuses to
// switch when the host selects a newer revision than this one (AC3), and
// otherwise switches the current link atomically (a new link renamed over
// the old one), reloads systemd, enables the unit and restarts it. Its
// output (the host's clock before the restart, the restart's exit status,
// or stale=N) goes to a file this script prints afterwards: a write to a
// connection that is gone must not stop it between the switch and the
// restart.
const activateScript = `set -eu
agentdir=$1 rev=$2 unit=$3
out="$agentdir/.activate.out" job="$agentdir/.activate.sh"
rm -f -- "$out"
cat > "$job" <<'OCC_ACTIVATE'
set -eu
agentdir=$1 rev=$2 unit=$3 out=$4
exec 9>"$agentdir/.lock"
flock 9
exec >"$out" 2>&1
cur=$(readlink -- "$agentdir/current" 2>/dev/null || true)
case "$cur" in
r[0-9]*) if [ "${cur#r}" -gt "${rev#r}" ]; then echo "stale=${cur#r}"; exit 0; fi ;;
esac
rm -f -- "$agentdir/$rev/` + render.ActivationFile + `"
ln -sfn -- "$rev" "$agentdir/.current.tmp"
mv -fT -- "$agentdir/.current.tmp" "$agentdir/current"
sync -- "$agentdir"
systemctl daemon-reload
systemctl enable --quiet -- "$unit"
systemctl reset-failed -- "$unit" 2>/dev/null || true
echo "since=$(date +%s%6N)"
set +e
systemctl restart -- "$unit"
echo "restart=$?"
OCC_ACTIVATE
chmod 0700 -- "$job"
rc=0
systemd-run --quiet --wait --collect --service-type=exec --unit="occ-activate-${unit%.service}-$(date +%s%N)" \
	/bin/sh "$job" "$agentdir" "$rev" "$unit" "$out" >/dev/null || rc=$?
cat -- "$out" 2>/dev/null || true
exit "$rc"
`

// pruneScript removes revision directories beyond the newest $2, never the
// current one. Only rN directories are touched.
const pruneScript = `agentdir=$1 keep=$2 current=$3
ls -1 -- "$agentdir" | grep -E '^r[0-9]+$' | sed 's/^r//' | sort -n | head -n "-$keep" | while read -r n; do
	[ "r$n" = "$current" ] || rm -rf -- "$agentdir/r$n"
done
`

// Deploy installs revision n of an admitted revision on the host and
// blocks until its gateway answers /readyz: the configuration is written
// atomically to its own revision directory (earlier revisions stay), the
// unit is written, the current link is switched and the unit restarted
// (AC1: the predecessor serves until then). A unit that fails fails the
// deployment at once with the journal lines of this activation; so does
// ctx ending. Once ready, the activation audit record is written (AC4).
// Every error is a *executor.Failure whose Wrote says whether anything
// reached the host.
func (e *Executor) Deploy(ctx context.Context, d executor.Deployment) (executor.Result, error) {
	t := e.target(d.Compute)
	var writes executor.Writes
	res, err := e.deploy(ctx, d, t, &writes)
	return res, executor.Normalize(err, exit(executor.OpDeploy, d.Revision.Agent, d.N, t.Addr(), &writes))
}

// Preflight runs, reading only, what Deploy checks on the host before its
// first write (preflightScript, then guardScript and its verdict): the
// host answers with the pinned key and admits the provider's credentials,
// its systemd is new enough, the gateway port is free or the agent's own,
// the paths are usable, and no newer revision or other agent holds the
// name. A host that does not answer is the error (the plan says it was
// not checked); anything else it finds is a refusal with the deploy's code.
func (e *Executor) Preflight(ctx context.Context, d executor.Deployment) (executor.Preflighted, error) {
	var out executor.Preflighted
	rev, n := d.Revision, d.N
	t := e.target(d.Compute)
	err := executor.Normalize(e.preflight(ctx, d, t), exit(executor.OpPreflight, rev.Agent, n, t.Addr(), nil))
	var f *executor.Failure
	switch {
	case err == nil:
	case errors.As(err, &f) && (f.Code == executor.Unavailable || f.Code == executor.Deadline):
		return out, err
	default:
		out.Refuse(err, rev.Agent, n)
	}
	return out, nil
}

func (e *Executor) preflight(ctx context.Context, d executor.Deployment, t Target) error {
	rev, n := d.Revision, d.N
	h, err := render.Systemd(rev, n)
	if err != nil {
		return &executor.Failure{Code: executor.InvalidRequest, Summary: fmt.Sprintf("agent %q revision %d cannot be rendered for SSH", rev.Agent, n), Reason: err.Error(), Err: err}
	}
	d.Log.Print("checking the host", map[string]any{"work.operation": "preflight", "revision": n, "host": t.Addr()})
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return err
	}
	if _, err := conn.RunOK(ctx, "preflight", preflightScript, nil, h.Unit, strconv.FormatInt(h.Port, 10), h.EnvironmentFile, path.Dir(h.AgentDir), h.AgentDir); err != nil {
		return err
	}
	g, err := conn.RunOK(ctx, "read the selected revision", guardScript, nil, h.AgentDir, h.UnitPath, rev.Agent)
	if err != nil {
		return err
	}
	_, err = guardVerdict(rev.Agent, t.Addr(), h.AgentDir, n, d.Serving, h.RevisionID, parseSelected(g.Stdout))
	return err
}

func (e *Executor) deploy(ctx context.Context, d executor.Deployment, t Target, writes *executor.Writes) (executor.Result, error) {
	rev, n, log := d.Revision, d.N, d.Log
	switch d.Mode {
	case executor.ModeActivate:
	case executor.ModeSettings:
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Agent: rev.Agent, Revision: n,
			Summary: fmt.Sprintf("agent %q: an SSH host has no network policies", rev.Agent), Reason: "network policies are a Kubernetes compute's setting"}
	case executor.ModeFinish:
		// Read never reports an SSH agent unretired: a host keeps its
		// newest earlier revisions by design (render.KeepRevisions), and
		// the next activation prunes the rest.
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Agent: rev.Agent, Revision: n,
			Summary: fmt.Sprintf("agent %q: nothing to finish on an SSH host", rev.Agent), Reason: "an SSH host keeps earlier revisions by design; there is no retirement to finish"}
	default:
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Agent: rev.Agent, Revision: n,
			Summary: fmt.Sprintf("agent %q: unknown deploy mode %s", rev.Agent, d.Mode)}
	}
	h, err := render.Systemd(rev, n)
	if err != nil {
		return executor.Result{}, &executor.Failure{Code: executor.InvalidRequest, Agent: rev.Agent, Revision: n,
			Summary: fmt.Sprintf("agent %q revision %d cannot be rendered for SSH", rev.Agent, n), Reason: err.Error(), Err: err}
	}
	fields := map[string]any{"revision": n, "unit": h.Unit, "host": t.Addr()}
	phase := func(p string) map[string]any {
		return executor.Fields(fields, map[string]any{"work.operation": p})
	}
	if t.InsecureIgnoreHostKey {
		log.Print("SSH host key verification is off for this compute (insecure_ignore_host_key)", executor.Fields(phase("connect"), map[string]any{"level": "warn"}))
	}
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return executor.Result{}, err
	}
	log.Print("checking the host", phase("preflight"))
	if _, err := conn.RunOK(ctx, "preflight", preflightScript, nil, h.Unit, strconv.FormatInt(h.Port, 10), h.EnvironmentFile, path.Dir(h.AgentDir), h.AgentDir); err != nil {
		return executor.Result{}, err
	}

	log.Print("writing the revision", phase("write"))
	// The write helpers: every command and upload from here on may change
	// the host, so each marks the operation's Writes before it runs.
	run := func(op, script string, args ...string) (Output, error) {
		writes.Mark()
		if e.BeforeWrite != nil {
			e.BeforeWrite(t.Addr(), op)
		}
		return conn.RunOK(ctx, op, script, nil, args...)
	}
	upload := func(path string, data []byte, mode, group string) error {
		writes.Mark()
		if e.BeforeWrite != nil {
			e.BeforeWrite(t.Addr(), "write "+path)
		}
		return conn.Upload(ctx, path, data, mode, group)
	}
	// Judged before the first write: a newer revision selected (AC3), or
	// on create another configuration's agent under this name.
	g, err := conn.RunOK(ctx, "read the selected revision", guardScript, nil, h.AgentDir, h.UnitPath, rev.Agent)
	if err != nil {
		return executor.Result{}, err
	}
	sel := parseSelected(g.Stdout)
	movedFrom, err := guardVerdict(rev.Agent, t.Addr(), h.AgentDir, n, d.Serving, h.RevisionID, sel)
	if err != nil {
		return executor.Result{}, err
	}
	if sel.Revision == n {
		// The host already selects revision n: an apply wrote and started
		// it but stopped before activating it (killed, or past its
		// deadline). Its gateway may still be starting on these files, and
		// it reloads when they change; stopped half-way through that, the
		// runtime refuses its state on the next start ("requires state
		// migration"). The activation restarts the unit anyway, so it is
		// stopped before the files are rewritten.
		log.Print("stopping the unactivated revision before rewriting it", phase("write"))
		if _, err := run("stop "+h.Unit, `systemctl stop -- "$1"`, h.Unit); err != nil {
			return executor.Result{}, err
		}
	}
	if _, err := run("prepare "+h.RevisionDir, prepareScript, h.User, h.AgentDir, h.RevisionDir); err != nil {
		return executor.Result{}, err
	}
	if err := upload(h.ConfigPath, h.Config, "0640", h.User); err != nil {
		return executor.Result{}, err
	}
	if err := upload(h.RevisionDir+"/"+render.RevisionRecord, h.RevisionInfo, "0640", h.User); err != nil {
		return executor.Result{}, err
	}
	if err := upload(h.UnitPath, []byte(h.UnitText), "0644", ""); err != nil {
		return executor.Result{}, err
	}

	log.Print("activating the revision", phase("activate"))
	res, err := run("activate "+h.Unit, activateScript, h.AgentDir, render.RevisionDirName(n), h.Unit)
	if err != nil {
		return executor.Result{}, err
	}
	out := keyValues(res.Stdout)
	if live, err := strconv.ParseInt(out["stale"], 10, 64); err == nil {
		return executor.Result{}, staleFailure(rev.Agent, n, live, "activation", fmt.Sprintf("revision %d was written but not selected", n))
	}
	since := time.Time{}
	if us, err := strconv.ParseInt(out["since"], 10, 64); err == nil {
		since = time.UnixMicro(us).UTC()
	}
	w := &watch{e: e, conn: conn, h: h, since: since, addr: t.Addr()}
	if out["restart"] != "0" {
		return executor.Result{}, w.failure(ctx, executor.UnitStartFailed, "systemd could not start the unit (systemctl restart failed)", "start")
	}
	log.Print("waiting for the gateway's /readyz", phase("gate"))
	if err := w.untilReady(ctx); err != nil {
		return executor.Result{}, err
	}

	at := e.now().UTC().Truncate(time.Second)
	rec, err := json.Marshal(render.Activation{Agent: h.Agent, Revision: n, RevisionID: h.RevisionID, Digest: h.Digest, ActivatedAt: at, Endpoint: h.Endpoint, References: d.References})
	if err != nil {
		return executor.Result{}, err
	}
	if err := upload(h.RevisionDir+"/"+render.ActivationFile, append(rec, '\n'), "0640", h.User); err != nil {
		return executor.Result{}, fmt.Errorf("revision %d is ready, but its activation record was not written: %w", n, err)
	}
	// Retiring old revisions is a safe effect: a failure leaves only
	// unused directories, which the next activation removes.
	if _, err := run("prune revisions", pruneScript, h.AgentDir, strconv.Itoa(render.KeepRevisions), render.RevisionDirName(n)); err != nil {
		log.Print("pruning earlier revisions failed; the next activation retries", executor.Fields(phase("prune"), map[string]any{"work.outcome": "failed"}))
	}
	if movedFrom != "" && path.Base(movedFrom) == rev.Agent {
		// The compute's config_dir changed: the unit now runs from the new
		// agent directory, and the old one is what the provider wrote
		// there.
		if r, err := run("remove "+movedFrom, agentDirFuncs+`remove_agent_dir "$1"`, movedFrom); err != nil {
			log.Print("removing the agent's directory in the earlier config_dir failed: "+err.Error(), executor.Fields(phase("prune"), map[string]any{"work.outcome": "failed"}))
		} else if s := strings.TrimSpace(r.Stderr); s != "" {
			log.Print(s, phase("prune"))
		}
	}
	return executor.Result{ActivatedAt: at, Endpoint: h.Endpoint}, nil
}

// watch follows one activation.
type watch struct {
	e     *Executor
	conn  *Conn
	h     *render.SystemdHost
	since time.Time
	state UnitState
	addr  string
	// op is the operation watched (OpDeploy when unset: an activation;
	// OpRestart: a restart of the activated revision).
	op executor.Op
}

// untilReady waits until /readyz answers 200 through the SSH connection
// while the unit keeps running; a unit that fails ends the wait at once.
func (w *watch) untilReady(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- w.readyz(rctx) }()
	tick := time.NewTicker(w.e.poll())
	defer tick.Stop()
	for ticks := 1; ; ticks++ {
		select {
		case err := <-ready:
			if err != nil {
				if ctx.Err() != nil {
					return w.deadline(ctx)
				}
				return w.failure(ctx, executor.ReadinessUnreachable, fmt.Sprintf("the gateway's /readyz on the host's loopback port %d cannot be reached through the SSH connection: %v", w.h.Port, err), "readiness")
			}
			// Ready: the answer must come from this unit's gateway, which
			// must still be running (another process on the port would
			// answer too).
			st, err := w.unitState(ctx)
			if err != nil {
				return err
			}
			if st.Failed() {
				return w.failure(ctx, executor.UnitFailed, exitedReason(st), "startup")
			}
			if msg, err := w.portOwner(ctx); err != nil {
				return err
			} else if msg != "" {
				return w.failure(ctx, executor.UnitStartFailed, msg, "readiness")
			}
			return nil
		case <-tick.C:
			st, err := w.unitState(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return w.deadline(ctx)
				}
				return err
			}
			if st.Failed() {
				code := executor.UnitFailed
				if st.ActiveState == "failed" && st.NRestarts == 0 && st.ExecMainCode == 1 && st.ExecMainStatus >= 200 {
					code = executor.UnitStartFailed // systemd could not even start it (EXEC, NAMESPACE, …)
				}
				return w.failure(ctx, code, exitedReason(st), "startup")
			}
			// The journal is read less often than the unit's state.
			if ticks%4 == 0 {
				if f := w.heldRecord(ctx); f != nil {
					return f
				}
			}
		case <-ctx.Done():
			return w.deadline(ctx)
		}
	}
}

// readyz polls GET /readyz on the host's loopback through the SSH
// connection until it answers 200; it gives up at once only when the
// host's sshd refuses to forward.
func (w *watch) readyz(ctx context.Context) error {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{
		Transport: &http.Transport{DialContext: w.conn.DialContext, DisableKeepAlives: true, ResponseHeaderTimeout: 5 * time.Second},
		Timeout:   10 * time.Second,
	}
	c.RetryMax = math.MaxInt32
	c.RetryWaitMin, c.RetryWaitMax = w.e.poll(), 2*time.Second
	c.Backoff = retryablehttp.LinearJitterBackoff
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil {
			if forwardingRefused(err) {
				return false, err
			}
			return true, nil // not listening yet
		}
		return resp.StatusCode != http.StatusOK, nil
	}
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", w.h.Port), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// forwardingRefused recognises sshd refusing a direct-tcpip channel
// (AllowTcpForwarding no).
func forwardingRefused(err error) bool {
	return strings.Contains(err.Error(), "administratively prohibited")
}

func (w *watch) unitState(ctx context.Context) (UnitState, error) {
	res, err := w.conn.RunOK(ctx, "systemctl show "+w.h.Unit, "systemctl show -p "+unitProperties+` -- "$1"`, nil, w.h.Unit)
	if err != nil {
		return w.state, err
	}
	w.state = ParseUnitState(res.Stdout)
	return w.state, nil
}

// portOwnerScript prints nothing when the gateway port's listener belongs
// to the unit (its process is in the unit's cgroup, v1 or v2), a sentence
// when it belongs to another process.
const portOwnerScript = `unit=$1 port=$2
command -v ss >/dev/null 2>&1 || exit 0
owners=$(ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)
[ -n "$owners" ] || exit 0
for p in $owners; do
	grep -q "/$unit\$" "/proc/$p/cgroup" 2>/dev/null && exit 0
done
echo "/readyz on port $port was answered by another process (pid $owners), not by the unit's gateway; set gateway.port in the agent's configuration to a free port"
`

func (w *watch) portOwner(ctx context.Context) (string, error) {
	res, err := w.conn.RunOK(ctx, "check the gateway port", portOwnerScript, nil, w.h.Unit, strconv.FormatInt(w.h.Port, 10))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(res.Stdout), nil
}

// heldRecord fails the gate at once on a held startup code in the journal
// (PR8). The pinned gateway writes no startup records on SSH (there is no
// startup wrapper and no probe, SS2); a wrapper that does is honoured.
func (w *watch) heldRecord(ctx context.Context) *executor.Failure {
	entries, err := w.journal(ctx)
	if err != nil {
		return nil
	}
	records, bad := StartupRecords(entries)
	if bad != nil {
		return w.withJournal(&executor.Failure{Code: executor.BadRecord, Phase: "startup", Reason: bad.Error(),
			Next: "The runtime on the host writes startup records outside the contract; use the pinned OpenClaw or fix the wrapper."}, entries)
	}
	for i := range records {
		r := records[i]
		if r.Code.Held() && (r.Final || r.Event == runtimerecord.EventOpenClawProbe || r.Event == runtimerecord.EventStartupPhase) {
			return w.withJournal(&executor.Failure{Code: executor.CodeRuntime(r.Code), Phase: string(runtimerecord.PhaseModelProbe), Record: &r,
				Reason: "the startup probe held the runtime unready", Next: runtimerecord.Advice(r.Code)}, entries)
		}
	}
	return nil
}

// journal reads this activation's journal entries of the unit (its output
// and systemd's records about it).
func (w *watch) journal(ctx context.Context) ([]JournalEntry, error) {
	sinceArg := "@0"
	if !w.since.IsZero() {
		sinceArg = "@" + strconv.FormatInt(w.since.Unix(), 10)
	}
	res, err := w.conn.RunOK(ctx, "journalctl -u "+w.h.Unit, `journalctl -u "$1" -o json --no-pager --since "$2" -n 2000`, nil, w.h.Unit, sinceArg)
	if err != nil {
		return nil, err
	}
	return ParseJournal(res.Stdout, w.since), nil
}

// failure describes a unit that did not become ready, with the journal
// lines since this activation started.
func (w *watch) failure(ctx context.Context, code executor.Code, reason, phase string) *executor.Failure {
	// The context may be spent (deadline): diagnostics get a short one.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if st, err := w.unitState(dctx); err == nil {
		w.state = st
	}
	entries, _ := w.journal(dctx)
	f := &executor.Failure{Code: code, Phase: phase, Reason: reason}
	f.Next = advice(w.state, entries, w.h)
	return w.withJournal(f, entries)
}

func (w *watch) withJournal(f *executor.Failure, entries []JournalEntry) *executor.Failure {
	f.Op, f.Agent, f.Revision = executor.OpDeploy, w.h.Agent, w.h.Revision
	if w.op != "" {
		f.Op = w.op
	}
	f.Where = fmt.Sprintf("unit %s on %s", w.h.Unit, w.addr)
	if w.state.ActiveState != "" {
		f.State = w.state.String()
	}
	max := w.e.JournalLines
	if max <= 0 || max > executor.MaxQuotedLines {
		max = executor.MaxQuotedLines
	}
	// The unit's own output: bounded and redacted (AU7). The credentials
	// file the unit loads is the operator's, never read by the provider,
	// so the patterns do the work.
	f.Lines = executor.Redactor{}.Lines(JournalLines(entries, max))
	what := "activation"
	if w.op == executor.OpRestart {
		what = "restart"
	}
	f.LinesTitle = "Journal of this " + what + " (journalctl -u " + w.h.Unit + "):"
	if f.Record == nil {
		if records, _ := StartupRecords(entries); len(records) > 0 {
			last := records[len(records)-1]
			f.Record = &last
		}
	}
	return f
}

func (w *watch) deadline(ctx context.Context) error {
	f := w.failure(ctx, executor.Deadline, "the gateway did not answer /readyz before the deadline", "readiness")
	f.Reason += "; the unit is " + w.state.String()
	f.Next = "The journal lines above show how far the gateway got. Raise timeouts.create/update if the host is only slow, or fix what holds it, then apply again."
	return f
}

// exitedReason says what happened to a unit that failed while starting.
func exitedReason(st UnitState) string {
	switch {
	case st.ActiveState == "inactive" || st.ActiveState == "deactivating":
		return "the unit was stopped before the gateway was ready"
	case st.ActiveState == "failed" && st.NRestarts == 0 && st.ExecMainCode == 1 && st.ExecMainStatus >= 200:
		return "systemd could not start the gateway"
	}
	return "the gateway exited before it was ready"
}

// advice says what to do about a failed unit, from its exit status and
// journal.
func advice(st UnitState, entries []JournalEntry, h *render.SystemdHost) string {
	text := ""
	for _, e := range entries {
		if !e.Withheld {
			text += e.Message + "\n"
		}
	}
	switch {
	case strings.Contains(text, "Failed to load environment files"):
		return fmt.Sprintf("systemd cannot read the credentials file %s: create it on the host (root-owned, mode 0600, NAME=value lines) and apply again. The provider never writes it (rule AU5).", h.EnvironmentFile)
	case st.ExecMainCode == 1 && st.ExecMainStatus == 203 || strings.Contains(text, "Failed to locate executable") || strings.Contains(text, "status=203/EXEC"):
		return "The compute's openclaw_path cannot be executed on the host: install OpenClaw there, or set openclaw_path to its binary, and apply again."
	case strings.Contains(text, "Invalid config") || st.ExecMainCode == 1 && st.ExecMainStatus == 78:
		return "The gateway refused its configuration (journal lines above): fix the configuration document and apply again."
	case st.ExecMainCode == 1 && st.ExecMainStatus == 217:
		return fmt.Sprintf("systemd could not switch to the service user %s; check the host's user database.", h.User)
	}
	return "Read the journal lines above (`journalctl -u " + h.Unit + "` on the host); fix the host or the configuration, then apply again. The unit keeps its last state; no earlier revision is restored (rule PR8)."
}

// keyValues reads key=value lines.
func keyValues(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			out[k] = v
		}
	}
	return out
}

// selected is what the host selects for an agent: the current link's
// revision (0: none) and that revision's activation record, if any; and
// the agent directory its unit file runs from ("" without a unit file),
// with what that directory selects when it is not the deploy's own.
type selected struct {
	Revision   int64
	Activation *render.Activation
	UnitDir    string
	Unit       *selected
	// UnitForeign: a unit file of the agent's name that the provider did
	// not write for it (foreign_unit).
	UnitForeign bool
}

// parseSelected reads guardScript's output.
func parseSelected(out string) selected {
	kv := keyValues(out)
	sel := selectedOf(kv, "")
	sel.UnitDir = kv["unit_dir"]
	sel.UnitForeign = kv["unit_foreign"] == "1"
	if _, ok := kv["unit_current"]; ok {
		u := selectedOf(kv, "unit_")
		sel.Unit = &u
	}
	return sel
}

func selectedOf(kv map[string]string, prefix string) selected {
	var sel selected
	if n, ok := render.ParseRevisionDirName(kv[prefix+"current"]); ok {
		sel.Revision = n
	}
	var act render.Activation
	if rec := kv[prefix+"activation"]; rec != "" && json.Unmarshal([]byte(rec), &act) == nil && act.RevisionID != "" {
		sel.Activation = &act
	}
	return sel
}

// guardVerdict judges revision n of an agent (id its content address,
// agentDir its directory under the compute's config_dir) against what the
// host selects, before anything is written: a newer revision selected is
// STALE_REVISION (AC3: an older apply never overwrites a newer one); on a
// create (serving 0) an activated revision of other content is another
// configuration's agent, RESOURCE_CONFLICT naming the import id. An
// unfinished create (nothing activated) or the very revision planned (a
// create killed after activating it) is taken on. A unit file that runs
// the agent from another agent directory is another configuration's
// agent of the same name (one host has one unit, one state directory and
// one service user per name), RESOURCE_CONFLICT too, unless it selects
// the very revision this agent serves: the agent's compute moved to
// another config_dir, and moved reports the directory it leaves. A unit
// file of the name the provider did not write for the agent is someone
// else's: RESOURCE_CONFLICT, whatever else holds.
func guardVerdict(agent, addr, agentDir string, n, serving int64, id string, sel selected) (moved string, err error) {
	if sel.UnitForeign {
		return "", &executor.Failure{Code: executor.ResourceConflict, Agent: agent,
			Summary: fmt.Sprintf("unit %s on %s is not agent %q's", render.UnitName(agent), addr, agent),
			Reason: fmt.Sprintf("the unit file %s exists, and the provider did not write it for agent %q (it has no %s=%s line, or is a link such as a masked unit): "+
				"it belongs to someone else on the host, and an agent's deploy never replaces it", render.UnitPath(agent), agent, render.UnitKeyAgent, agent),
			Next: fmt.Sprintf("Give this agent another name, or remove or rename the other unit on the host (systemctl disable --now %s; rm %s), then apply again. Nothing on the host was touched.",
				render.UnitName(agent), render.UnitPath(agent))}
	}
	if sel.UnitDir != "" && sel.UnitDir != agentDir {
		if serving > 0 && sel.Unit != nil && sel.Unit.Revision == serving {
			return sel.UnitDir, nil
		}
		return "", &executor.Failure{Code: executor.ResourceConflict, Agent: agent,
			Summary: fmt.Sprintf("agent %q already runs on %s from another config_dir", agent, addr),
			Reason: fmt.Sprintf("its unit %s runs the configuration in %s, and this compute's config_dir puts the agent in %s: another Terraform configuration manages an agent of this name on this host, "+
				"and a host has one unit, one state directory and one service user per agent name", render.UnitName(agent), sel.UnitDir, agentDir),
			Next: fmt.Sprintf("Give this agent another name, or manage it from the configuration whose compute has config_dir %s (`terraform import <address> %s/%s` there). Nothing on the host was touched.",
				path.Dir(sel.UnitDir), addr, agent)}
	}
	switch {
	case serving == 0 && sel.Activation != nil && sel.Activation.RevisionID != id:
		return "", &executor.Failure{Code: executor.ResourceConflict, Agent: agent,
			Summary: fmt.Sprintf("agent %q already runs on %s", agent, addr),
			Reason:  fmt.Sprintf("the host serves its revision %d (%s), which this configuration did not create: another Terraform configuration, or a state that lost it, manages it", sel.Activation.Revision, sel.Activation.RevisionID),
			Next:    fmt.Sprintf("Adopt it with `terraform import <address> %s/%s` (it then follows this configuration), or give this agent another name. Nothing of the running agent was touched.", addr, agent)}
	case sel.Revision > n:
		return "", staleFailure(agent, n, sel.Revision, "admission", fmt.Sprintf("nothing of revision %d was written", n))
	}
	return "", nil
}

// staleFailure refuses revision n because the host selects newer
// revision live (AC3).
func staleFailure(agent string, n, live int64, phase, outcome string) *executor.Failure {
	return executor.StaleFailure(agent, n, live, "the host already selects", phase, outcome)
}
