package sshexec

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// Observed is what a host says about an agent.
type Observed struct {
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
	// revision switched but never activated.
	Drift string
}

// readScript prints, as key=value lines, the unit file's presence,
// systemd's view of the unit, the current link, the sha256 of the current
// configuration, its activation record and the revision directories. It
// reads nothing else (never the credentials file).
const readScript = `unit=$1 unitpath=$2 agentdir=$3
if [ -f "$unitpath" ]; then
	echo "unit_file=present"
	[ -n "$agentdir" ] || agentdir=$(sed -n 's/^X-OCC-Agent-Dir=//p' "$unitpath" | head -n 1 | sed 's/%%/%/g')
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

// Read observes an agent on the host. agentDir is CONFIG_DIR/NAME from the
// compute; empty (an import) reads it from the unit file.
func (e *Executor) Read(ctx context.Context, t Target, agent, agentDir string) (Observed, error) {
	var o Observed
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return o, err
	}
	res, err := conn.RunOK(ctx, "read "+render.UnitName(agent), readScript, nil, render.UnitName(agent), render.UnitPath(agent), agentDir)
	if err != nil {
		return o, err
	}
	return parseObserved(res.Stdout), nil
}

func parseObserved(out string) Observed {
	var o Observed
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
	o.Drift = drift(o, kv["current"])
	return o
}

// drift judges what was observed; "" when the activated revision runs.
func drift(o Observed, current string) string {
	switch {
	case !o.Exists:
		return ""
	case !o.UnitFile:
		return "the unit file was removed from the host"
	case o.Unit.LoadState == "not-found":
		return "systemd does not know the unit (daemon-reload missing?)"
	case o.Unit.ActiveState != "active":
		return fmt.Sprintf("the unit is %s, not running (stopped outside Terraform?)", o.Unit.String())
	case current == "":
		return "no revision is selected (the current link is missing)"
	case o.Activation == nil:
		return fmt.Sprintf("revision %s is selected but was never activated (an apply stopped half-way)", strings.TrimPrefix(current, "r"))
	case o.Activation.Revision != o.Current:
		return fmt.Sprintf("the current link selects revision %d, but its activation record is of revision %d", o.Current, o.Activation.Revision)
	case o.Digest == "":
		return fmt.Sprintf("the configuration file of revision %d was removed", o.Current)
	case o.Digest != o.Activation.Digest:
		return fmt.Sprintf("the configuration of revision %d was edited on the host (sha256 %.12s…, activated %.12s…)", o.Current, o.Digest, o.Activation.Digest)
	}
	return ""
}

// deleteScript stops and disables the unit, removes it, the agent's
// revision directories, its current link and state directory. It removes
// only what the provider writes: the credentials file is never touched, and
// an agent directory holding anything else is kept.
const deleteScript = `set -u
agent=$1 unit=$2 unitpath=$3 agentdir=$4 statedir=$5
if [ -z "$agentdir" ] && [ -f "$unitpath" ]; then
	agentdir=$(sed -n 's/^X-OCC-Agent-Dir=//p' "$unitpath" | head -n 1 | sed 's/%%/%/g')
fi
systemctl disable --now --quiet -- "$unit" 2>/dev/null || systemctl stop -- "$unit" 2>/dev/null || true
rm -f -- "$unitpath"
systemctl daemon-reload
systemctl reset-failed -- "$unit" 2>/dev/null || true
case "$agentdir" in
"" | / | */"$agent" | "$agent") ;;
*) echo "refusing to remove $agentdir: it is not an agent directory of $agent" >&2; exit 1 ;;
esac
if [ -n "$agentdir" ] && [ "$agentdir" != / ] && [ -d "$agentdir" ]; then
	for d in "$agentdir"/r[0-9]*; do
		case "${d##*/}" in r*[!0-9]*) continue ;; esac
		[ -d "$d" ] && rm -rf -- "$d"
	done
	rm -f -- "$agentdir/current" "$agentdir/.current.tmp" "$agentdir"/.occ-upload.*
	rmdir -- "$agentdir" 2>/dev/null || echo "kept $agentdir: it holds files the provider did not write" >&2
fi
rm -rf -- "$statedir"
exit 0
`

// Delete removes an agent from the host. agentDir empty reads it from the
// unit file.
func (e *Executor) Delete(ctx context.Context, t Target, agent, agentDir string) error {
	if agentDir != "" && path.Base(agentDir) != agent {
		return fmt.Errorf("agent directory %s is not agent %s's", agentDir, agent)
	}
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return err
	}
	res, err := conn.RunOK(ctx, "delete "+render.UnitName(agent), deleteScript, nil,
		agent, render.UnitName(agent), render.UnitPath(agent), agentDir, render.StateDir(agent))
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(res.Stderr); s != "" {
		e.log("delete: "+s, map[string]any{"work.operation": "delete", "unit": render.UnitName(agent)})
	}
	return nil
}
