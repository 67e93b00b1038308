package sshexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/turn"
)

// turnScript prints what a turn needs of the activated revision, as the
// host runs it: the current revision's gateway document (where the
// gateway listens and how it authenticates), then a separator, then the
// gateway token the unit's gateway was started with, the value of
// OPENCLAW_GATEWAY_TOKEN in the agent's token file (render.GatewayTokenFile)
// or, for an agent deployed before it had one, in the unit's last
// EnvironmentFile, and nothing else of that file.
const turnScript = `unit=$1 agentdir=$2
[ -f "$unit" ] && [ -f "$agentdir/current/openclaw.json" ] || { echo "no activated revision" >&2; exit 3; }
cat -- "$agentdir/current/openclaw.json"
printf '\n` + turnSeparator + `\n'
f="$agentdir/` + render.GatewayTokenFile + `"
[ -f "$f" ] || f=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' -- "$unit" | tail -n 1)
if [ -n "$f" ] && [ -f "$f" ]; then
	sed -n 's/^[[:space:]]*OPENCLAW_GATEWAY_TOKEN=//p' -- "$f" | tail -n 1
fi
`

const turnSeparator = "--occ-turn--"

// turnTarget is what turnScript printed: the gateway's port, its auth
// mode and the token to send ("" for none).
type turnTarget struct {
	Port  int64
	Auth  string
	Token string
}

// parseTurnTarget reads turnScript's output (the host's text, untrusted).
func parseTurnTarget(out string) (turnTarget, error) {
	doc, rest, ok := strings.Cut(out, "\n"+turnSeparator+"\n")
	if !ok {
		return turnTarget{}, fmt.Errorf("the host's answer has no separator")
	}
	d, err := occconfig.Parse(doc)
	if err != nil {
		return turnTarget{}, fmt.Errorf("the activated revision's openclaw.json: %w", err)
	}
	var tt turnTarget
	tt.Port = render.GatewayPort
	if v, ok := occconfig.Lookup(d, occconfig.Keys("gateway", "port")); ok {
		p, isInt := v.(int64)
		if !isInt || p < 1 || p > 65535 {
			return turnTarget{}, fmt.Errorf("the activated revision's gateway.port is not a port")
		}
		tt.Port = p
	}
	tt.Auth, _ = occconfig.String(d, occconfig.Keys("gateway", "auth", "mode"))
	if tt.Auth == "none" {
		return tt, nil // no token is sent
	}
	// A token written into the document itself (the user's choice; it is
	// in their configuration) wins over the environment, as OpenClaw reads it.
	if tok, _ := occconfig.String(d, occconfig.Keys("gateway", "auth", "token")); tok != "" && !strings.HasPrefix(tok, "${") {
		tt.Token = tok
		return tt, nil
	}
	sc := bufio.NewScanner(strings.NewReader(rest))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			tt.Token = strings.Trim(l, `"'`)
		}
	}
	return tt, nil
}

// Turn sends one message to the agent's gateway on the host's loopback,
// through the SSH connection (as readiness is read), to its chat
// completions endpoint. Where the gateway listens and how it
// authenticates come from the activated revision's file on the host; the
// gateway token is the agent's own (render.GatewayTokenFile), read for
// this turn only, never logged or kept.
// Nothing is written.
func (e *Executor) Turn(ctx context.Context, t executor.Turn) (turn.Answer, error) {
	a := t.Agent
	if a.Compute == nil {
		return turn.Answer{}, &executor.Failure{Code: executor.NotFound, Op: executor.OpTurn, Agent: a.Name, Reason: "the agent's compute is not known", Next: "apply the agent first"}
	}
	tg, agentDir, err := e.location(a)
	if err != nil {
		return turn.Answer{}, err
	}
	conn, err := e.Pool.Get(ctx, tg)
	if err != nil {
		return turn.Answer{}, executor.Normalize(err, exit(executor.OpTurn, a.Name, 0, tg.Addr(), nil))
	}
	res, err := conn.RunOK(ctx, "read the activated revision of "+render.UnitName(a.Name), turnScript, nil, render.UnitPath(a.Name), agentDir)
	var se *Error
	switch {
	case errors.As(err, &se) && se.Code == executor.CommandFailed && se.ExitCode == 3:
		return turn.Answer{}, &executor.Failure{Code: executor.NotFound, Op: executor.OpTurn, Agent: a.Name, Where: tg.Addr(),
			Reason: fmt.Sprintf("agent %s has no activated revision on %s", a.Name, tg.Addr()), Next: "apply the agent, then send the turn"}
	case err != nil:
		return turn.Answer{}, executor.Normalize(err, exit(executor.OpTurn, a.Name, 0, tg.Addr(), nil))
	}
	tt, err := parseTurnTarget(res.Stdout)
	if err != nil {
		return turn.Answer{}, &executor.Failure{Code: executor.TurnFailed, Op: executor.OpTurn, Agent: a.Name, Where: tg.Addr(), Reason: err.Error(), Next: "apply the agent again: its revision's file on the host is not the one the provider wrote"}
	}
	where := fmt.Sprintf("the gateway on %s, loopback port %d", tg.Addr(), tt.Port)
	if tt.Auth == "token" && tt.Token == "" {
		return turn.Answer{}, &executor.Failure{Code: executor.TurnFailed, Op: executor.OpTurn, Agent: a.Name, Where: where,
			Reason: fmt.Sprintf("the gateway authenticates with a token (gateway.auth.mode = \"token\") and the agent's token file %s has no OPENCLAW_GATEWAY_TOKEN line", path.Join(agentDir, render.GatewayTokenFile)),
			Next:   "apply the agent again: the deploy makes the token file when it is missing or malformed and restarts the gateway with it; then send the turn again"}
	}
	c := &http.Client{Transport: &http.Transport{DialContext: conn.DialContext, DisableKeepAlives: true}}
	t.Log.Print("turn: sending through the SSH connection", map[string]any{"agent": a.Name, "host": tg.Addr(), "port": tt.Port})
	ans, err := executor.SendTurn(ctx, c, a.Name, where, turn.Request{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", tt.Port), Token: tt.Token, Message: t.Message})
	var f *executor.Failure
	var te *turn.Error
	switch {
	case !errors.As(err, &f):
		return ans, err
	case forwardingRefused(f.Err):
		f.Code, f.Reason, f.Next = executor.ReadinessUnreachable, "the host's sshd refuses to forward to the gateway's loopback port", "allow TCP forwarding for the provider's user (AllowTcpForwarding local)"
	case errors.As(f.Err, &te) && te.Unauthorized():
		f.Next = fmt.Sprintf("the gateway token is in the agent's token file %s on the host: a gateway started before the file changed still has the old one; apply again (a restart), then send the turn again", path.Join(agentDir, render.GatewayTokenFile))
	}
	return turn.Answer{}, f
}
