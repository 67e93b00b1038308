package sshexec

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// restartScript restarts the agent's unit under the agent's lock (the one
// an activation holds), only while the current link still selects the
// activated revision $3: otherwise it prints current=… and touches
// nothing. It prints the host's clock before the restart (the journal is
// read from it), the credentials file the unit loads (named in advice,
// never read) and systemctl's exit status. A connection that drops after
// systemctl was called leaves the restart to systemd, whose job it is.
const restartScript = `set -eu
agentdir=$1 unitpath=$2 rev=$3 unit=$4
exec 9>"$agentdir/.lock"
flock 9
cur=$(readlink -- "$agentdir/current" 2>/dev/null || true)
if [ "$cur" != "r$rev" ]; then echo "current=$cur"; exit 0; fi
echo "envfile=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' -- "$unitpath" | grep -v -x -F -- "$agentdir/` + render.GatewayTokenFile + `" | tail -n 1)"
echo "since=$(date +%s%6N)"
set +e
systemctl restart -- "$unit"
echo "restart=$?"
`

// Restart restarts the agent's unit, which runs its activated revision,
// and blocks until the gateway answers /readyz again while the unit keeps
// running, judged as a deploy's activation is (a unit that fails, a held
// startup record, the deadline), with the journal of this restart. Only
// an activated revision that runs unchanged is restarted
// (executor.Restartable), or one whose unit is not running (stopped, or
// failing: a restart is how it comes back once its cause is fixed) while
// its files are the activated revision's; the activation record and the
// revision stay.
func (e *Executor) Restart(ctx context.Context, r executor.Restart) (executor.Restarted, error) {
	a := r.Agent
	var writes executor.Writes
	addr := a.ImportID
	out, n, err := e.restart(ctx, a, r.Log, &writes, &addr)
	return out, executor.Normalize(err, exit(executor.OpRestart, a.Name, n, addr, &writes))
}

func (e *Executor) restart(ctx context.Context, a executor.Agent, log executor.Log, writes *executor.Writes, addr *string) (executor.Restarted, int64, error) {
	if a.Compute == nil {
		return executor.Restarted{}, 0, &executor.Failure{Code: executor.NotFound, Agent: a.Name, Reason: "the agent's compute is not known", Next: "apply the agent first"}
	}
	t, agentDir, err := e.location(a)
	if err != nil {
		return executor.Restarted{}, 0, err
	}
	*addr = t.Addr()
	v, err := e.read(ctx, t, a.Name, agentDir)
	if err != nil {
		return executor.Restarted{}, 0, err
	}
	if v.Reason == executor.DriftWorkload && v.UnitFile && v.Unit.LoadState != "not-found" {
		// The unit is not running (stopped, failed, restarting after a
		// failure): starting it again is the restart's to do, when what
		// it starts is the activated revision, unchanged.
		running := v
		running.Unit.ActiveState = "active"
		current := ""
		if v.Current > 0 {
			current = render.RevisionDirName(v.Current)
		}
		running.Reason, running.Drift = drift(running, current)
		v = running
	}
	o := observedOf(v)
	if err := executor.Restartable(a.Name, o); err != nil {
		return executor.Restarted{}, o.Revision, err
	}
	n := o.Revision
	u, err := url.Parse(o.Endpoint)
	port, perr := strconv.ParseInt(u.Port(), 10, 64)
	if err != nil || perr != nil {
		return executor.Restarted{}, n, &executor.Failure{Code: executor.ResourceConflict, Where: t.Addr(),
			Reason: fmt.Sprintf("the activation record of revision %d names no gateway port (%q)", n, o.Endpoint),
			Next:   "apply the agent again: the provider writes the activation record"}
	}
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return executor.Restarted{}, n, err
	}
	unit := render.UnitName(a.Name)
	fields := map[string]any{"level": "info", "work.operation": "restart", "revision": n, "unit": unit, "host": t.Addr()}
	log.Print("restarting "+unit, fields)
	writes.Mark()
	if e.BeforeWrite != nil {
		e.BeforeWrite(t.Addr(), "restart "+unit)
	}
	res, err := conn.RunOK(ctx, "restart "+unit, restartScript, nil, agentDir, render.UnitPath(a.Name), strconv.FormatInt(n, 10), unit)
	if err != nil {
		return executor.Restarted{}, n, err
	}
	kv := keyValues(res.Stdout)
	if cur, moved := kv["current"]; moved {
		writes.Undone()
		return executor.Restarted{}, n, &executor.Failure{Code: executor.ResourceConflict, Where: t.Addr(),
			Reason: fmt.Sprintf("the host selects %q now, not the activated revision r%d (an apply changed it meanwhile); nothing was restarted", cur, n),
			Next:   "let the other apply finish, then restart again if it is still needed"}
	}
	since := time.Time{}
	if us, err := strconv.ParseInt(kv["since"], 10, 64); err == nil {
		since = time.UnixMicro(us).UTC()
	}
	h := &render.SystemdHost{Agent: a.Name, Revision: n, RevisionID: o.RevisionID, Unit: unit, UnitPath: render.UnitPath(a.Name),
		User: render.ServiceUser(a.Name), AgentDir: agentDir, Port: port, Endpoint: o.Endpoint, EnvironmentFile: kv["envfile"]}
	w := &watch{e: e, conn: conn, h: h, since: since, addr: t.Addr(), op: executor.OpRestart}
	if kv["restart"] != "0" {
		f := w.failure(ctx, executor.UnitStartFailed, "systemd could not restart the unit (systemctl restart failed)", "start")
		f.AsRestart()
		return executor.Restarted{}, n, f
	}
	log.Print("waiting for the restarted gateway's /readyz", executor.Fields(fields, map[string]any{"work.operation": "gate"}))
	if err := w.untilReady(ctx); err != nil {
		var f *executor.Failure
		if errors.As(err, &f) {
			f.AsRestart()
			if f.Code == executor.Deadline {
				f.Next = "The journal lines above show how far the gateway got. Raise the action's timeout if the host is only slow, or fix what holds it, then restart again (or apply)."
			}
		}
		return executor.Restarted{}, n, err
	}
	return executor.Restarted{Revision: n, Components: []string{unit}}, n, nil
}
