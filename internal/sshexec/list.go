package sshexec

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// listScript prints, for each unit file in $1 named $2NAME.service that
// the provider wrote (it holds the line $4=NAME) and whose NAME is a DNS
// label, a line "$3 NAME" ($3 is the caller's marker, which nothing on the
// host knows, so that no file's content can start a section of its own)
// and then what readScript prints of the agent. Any other file is passed
// over before its name is given to a command: names on the host are not
// the provider's to trust.
const listScript = `unitdir=$1 prefix=$2 marker=$3 key=$4
for unitpath in "$unitdir/$prefix"*.service; do
	[ -f "$unitpath" ] || continue
	agent=${unitpath#"$unitdir/$prefix"}
	agent=${agent%.service}
	case "$agent" in
	[a-z] | [a-z]*[a-z0-9]) ;;
	*) continue ;;
	esac
	case "$agent" in *[!a-z0-9-]*) continue ;; esac
	[ ${#agent} -le 63 ] || continue
	grep -Fqx -- "$key=$agent" "$unitpath" || continue
	echo "$marker $agent"
	(
	set -- "$prefix$agent.service" "$unitpath" ""
` + readScript + `)
done
exit 0
`

// hostAgent is one agent listScript found, and what the host says of it.
type hostAgent struct {
	Name string
	View hostView
}

// List names the agents on the compute's host (Host, and Port when not
// 22), reached as an import is: with the provider's user,
// the host verified through the provider's known_hosts file. One command
// finds every unit file the provider wrote and reads each agent as Read
// does (readScript, observedOf), within Read's deadline. A host without
// agents gives an empty list.
func (e *Executor) List(ctx context.Context, on admission.Compute) ([]executor.Listed, error) {
	where := HostPort(on.SSH().Host, int(on.SSH().Port))
	host, port, ok := parseHost(where)
	if !ok {
		return nil, &executor.Failure{Code: executor.InvalidRequest, Op: executor.OpList, Summary: fmt.Sprintf("%q is not an SSH host", where),
			Reason: "an SSH host is named HOST or HOST:PORT, as an agent id writes it",
			Next:   "Name the host such as 10.0.0.5, edge.example.com:2222 or [fe80::1]:2222."}
	}
	t := e.hostTarget(host, port)
	var agents []hostAgent
	err := e.readBounded(ctx, "listing", func(ctx context.Context) (err error) {
		agents, err = e.list(ctx, t)
		return err
	})
	if err != nil {
		return nil, executor.Normalize(err, exit(executor.OpList, "", 0, t.Addr(), nil))
	}
	// The id imports the agent: the port stays when it is not 22.
	idHost := host
	if port != 0 {
		idHost = net.JoinHostPort(host, strconv.Itoa(port))
	}
	out := make([]executor.Listed, 0, len(agents))
	for _, a := range agents {
		out = append(out, executor.Listed{Name: a.Name, ID: AgentID(admission.Compute{Settings: admission.SSHCompute{Host: idHost}}, a.Name), Observed: observedOf(a.View)})
	}
	return out, nil
}

func (e *Executor) list(ctx context.Context, t Target) ([]hostAgent, error) {
	conn, err := e.Pool.Get(ctx, t)
	if err != nil {
		return nil, err
	}
	unitDir := render.UnitDir
	if e.unitDir != "" {
		unitDir = e.unitDir
	}
	marker := "occ-list-" + rand.Text()
	res, err := conn.RunOK(ctx, "list the agents", listScript, nil, unitDir, render.UnitPrefix, marker, render.UnitKeyAgent)
	if err != nil {
		return nil, err
	}
	return parseListed(res.Stdout, marker), nil
}

// parseListed reads listScript's output: the agents in name order, each
// once, with what the host says of each. A section whose name is no DNS
// label is passed over: the script passes such names over already, but
// the host's output is not trusted to.
func parseListed(out, marker string) []hostAgent {
	if marker == "" {
		return nil
	}
	var agents []hostAgent
	sections := strings.Split("\n"+out, "\n"+marker+" ")
	for _, s := range sections[1:] {
		name, body, _ := strings.Cut(s, "\n")
		if len(validation.IsDNS1035Label(name)) > 0 || slices.ContainsFunc(agents, func(a hostAgent) bool { return a.Name == name }) {
			continue
		}
		agents = append(agents, hostAgent{Name: name, View: parseObserved(body)})
	}
	slices.SortFunc(agents, func(a, b hostAgent) int { return strings.Compare(a.Name, b.Name) })
	return agents
}
