package sshhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
)

// Endpoint is what a client needs to reach one of the servers: its address,
// the host key to verify and a client key that is authorized.
type Endpoint struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
	// HostKey is the server's host public key as an authorized_keys line
	// ("ssh-ed25519 AAAA..."), the form the provider's host_key takes.
	HostKey string
	// HostPublicKey is HostKey parsed.
	HostPublicKey ssh.PublicKey
	// ClientKey is the authorized client private key (OpenSSH PEM).
	ClientKey []byte
	// ClientSigner is ClientKey parsed.
	ClientSigner ssh.Signer
	// User is the user Run logs in as (root on the systemd host; the
	// current user for the plain sshd).
	User string
}

// Run runs cmd as e.User over a fresh connection with host-key
// verification. A non-zero exit status is returned in exit, not as err; err
// is for connection and authentication failures and ctx ending.
func (e *Endpoint) Run(ctx context.Context, cmd string) (stdout, stderr string, exit int, err error) {
	r, err := e.RunAs(ctx, e.User, cmd, nil)
	return r.Stdout, r.Stderr, r.Exit, err
}

// ClientConfig returns a client configuration for user that authenticates
// with the client key and verifies the host key exactly
// (ssh.FixedHostKey).
func (e *Endpoint) ClientConfig(user string) *ssh.ClientConfig {
	return &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(e.ClientSigner)},
		HostKeyCallback: ssh.FixedHostKey(e.HostPublicKey),
		HostKeyAlgorithms: []string{
			e.HostPublicKey.Type(),
		},
		Timeout: 10 * time.Second,
	}
}

// Dial opens an SSH connection to addr with cfg, bounded by ctx for the
// connect and the handshake.
func Dial(ctx context.Context, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if !stop() {
		// ctx ended during the handshake: the connection is closed.
		if err == nil {
			c.Close()
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", addr, context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// Result is the outcome of a command run over SSH.
type Result struct {
	Stdout, Stderr string
	// Exit is the command's exit status; -1 when it ended without one
	// (killed by a signal, connection lost).
	Exit int
}

// RunOn runs cmd in a new session of client with stdin (may be nil). A
// non-zero exit status is not an error: it is in Exit. The error reports
// transport failures and ctx ending (the session is closed then).
func RunOn(ctx context.Context, client *ssh.Client, cmd string, stdin io.Reader) (Result, error) {
	res := Result{Exit: -1}
	sess, err := client.NewSession()
	if err != nil {
		return res, fmt.Errorf("new session: %w", err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr, sess.Stdin = &stdout, &stderr, stdin
	done := make(chan error, 1)
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		res.Stdout, res.Stderr = stdout.String(), stderr.String()
		return res, fmt.Errorf("command %q: %w", cmd, context.Cause(ctx))
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	var exitErr *ssh.ExitError
	switch {
	case err == nil:
		res.Exit = 0
	case errors.As(err, &exitErr):
		res.Exit = exitErr.ExitStatus()
		if exitErr.Signal() != "" {
			res.Exit = -1
		}
	default:
		return res, fmt.Errorf("command %q: %w", cmd, err)
	}
	return res, nil
}

// RunAs dials the endpoint as user, runs cmd with stdin (may be nil) and
// closes the connection.
func (e *Endpoint) RunAs(ctx context.Context, user, cmd string, stdin io.Reader) (Result, error) {
	c, err := Dial(ctx, e.Addr, e.ClientConfig(user))
	if err != nil {
		return Result{Exit: -1}, err
	}
	defer c.Close()
	return RunOn(ctx, c, cmd, stdin)
}
