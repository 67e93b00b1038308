package sshexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
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

// gatewayTarget reads where the agent's activated gateway listens on the
// host and the token it takes, for op: the connection, the host, what
// turnScript printed and the agent's directory. what is what the user
// does after the fix ("send the turn").
func (e *Executor) gatewayTarget(ctx context.Context, a executor.Agent, op executor.Op, what string) (*Conn, Target, turnTarget, string, error) {
	if a.Compute == nil {
		return nil, Target{}, turnTarget{}, "", &executor.Failure{Code: executor.NotFound, Op: op, Agent: a.Name, Reason: "the agent's compute is not known", Next: "apply the agent first"}
	}
	tg, agentDir, err := e.location(a)
	if err != nil {
		return nil, tg, turnTarget{}, "", err
	}
	conn, err := e.Pool.Get(ctx, tg)
	if err != nil {
		return nil, tg, turnTarget{}, "", executor.Normalize(err, exit(op, a.Name, 0, tg.Addr(), nil))
	}
	res, err := conn.RunOK(ctx, "read the activated revision of "+render.UnitName(a.Name), turnScript, nil, render.UnitPath(a.Name), agentDir)
	var se *Error
	switch {
	case errors.As(err, &se) && se.Code == executor.CommandFailed && se.ExitCode == 3:
		return nil, tg, turnTarget{}, "", &executor.Failure{Code: executor.NotFound, Op: op, Agent: a.Name, Where: tg.Addr(),
			Reason: fmt.Sprintf("agent %s has no activated revision on %s", a.Name, tg.Addr()), Next: "apply the agent, then " + what}
	case err != nil:
		return nil, tg, turnTarget{}, "", executor.Normalize(err, exit(op, a.Name, 0, tg.Addr(), nil))
	}
	tt, err := parseTurnTarget(res.Stdout)
	code := executor.TurnFailed
	if op != executor.OpTurn {
		code = executor.Unavailable
	}
	if err != nil {
		return nil, tg, turnTarget{}, "", &executor.Failure{Code: code, Op: op, Agent: a.Name, Where: tg.Addr(), Reason: err.Error(), Next: "apply the agent again: its revision's file on the host is not the one the provider wrote"}
	}
	if tt.Auth == "token" && tt.Token == "" {
		return nil, tg, turnTarget{}, "", &executor.Failure{Code: code, Op: op, Agent: a.Name, Where: fmt.Sprintf("the gateway on %s, loopback port %d", tg.Addr(), tt.Port),
			Reason: fmt.Sprintf("the gateway authenticates with a token (gateway.auth.mode = \"token\") and the agent's token file %s has no OPENCLAW_GATEWAY_TOKEN line", path.Join(agentDir, render.GatewayTokenFile)),
			Next:   "apply the agent again: the deploy makes the token file when it is missing or malformed and restarts the gateway with it; then " + what + " again"}
	}
	return conn, tg, tt, agentDir, nil
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
	conn, tg, tt, agentDir, err := e.gatewayTarget(ctx, a, executor.OpTurn, "send the turn")
	if err != nil {
		return turn.Answer{}, err
	}
	where := fmt.Sprintf("the gateway on %s, loopback port %d", tg.Addr(), tt.Port)
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

// GatewayToken reads the agent's own gateway token from its root-only
// file on the host (render.GatewayTokenFile), or the one its activated
// revision's document names; "" for a gateway with auth mode none.
func (e *Executor) GatewayToken(ctx context.Context, a executor.Agent) (string, error) {
	_, _, tt, _, err := e.gatewayTarget(ctx, a, executor.OpGateway, "read its gateway token")
	if err != nil {
		return "", err
	}
	return tt.Token, nil
}

// OpenGateway listens on a loopback port of the provider's machine and
// joins each connection to the gateway's loopback port on the host
// through the SSH connection (ssh -L), until Close or until ctx ends. A
// connection dropped in between is dialled again for the next client;
// a connection carrying a forward is not closed as idle.
func (e *Executor) OpenGateway(ctx context.Context, a executor.Agent) (*executor.Gateway, error) {
	conn, tg, tt, _, err := e.gatewayTarget(ctx, a, executor.OpGateway, "open the gateway")
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", tt.Port)
	where := fmt.Sprintf("the gateway on %s, loopback port %d", tg.Addr(), tt.Port)
	fail := func(code executor.Code, reason, next string, err error) error {
		return &executor.Failure{Code: code, Op: executor.OpGateway, Agent: a.Name, Where: where, Reason: reason, Next: next, Err: err}
	}
	// One connection now, so that a host that refuses to forward, or a
	// gateway that does not listen, fails the open and not the first use.
	probe, err := conn.DialContext(ctx, "tcp", addr)
	switch {
	case err != nil && forwardingRefused(err):
		return nil, fail(executor.ReadinessUnreachable, "the host's sshd refuses to forward to the gateway's loopback port", "allow TCP forwarding for the provider's user (AllowTcpForwarding local)", err)
	case err != nil:
		return nil, fail(executor.Unavailable, "the gateway does not accept connections: "+err.Error(), "check the agent's status with terraform plan (a refresh reads it) and its unit's journal", err)
	}
	probe.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fail(executor.Unavailable, "listening on the provider's loopback: "+err.Error(), "", err)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := e.Pool.Get(ctx, tg)
		if err != nil {
			return nil, err
		}
		release := c.Hold()
		nc, err := c.DialContext(ctx, network, addr)
		if err != nil {
			release()
			return nil, err
		}
		return &heldConn{Conn: nc, release: release}, nil
	}
	stop := executor.Forward(ctx, ln, dial, addr)
	return executor.NewGateway(ln.Addr().String(), tt.Token, where, stop), nil
}

// heldConn is a forwarded connection that holds its SSH connection open
// (Conn.Hold) until it is closed.
type heldConn struct {
	net.Conn
	release func()
}

func (h *heldConn) Close() error {
	defer h.release()
	return h.Conn.Close()
}

// CloseWrite half-closes the forwarded connection, as the SSH channel can.
func (h *heldConn) CloseWrite() error {
	if cw, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
