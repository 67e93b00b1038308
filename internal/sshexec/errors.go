// Package sshexec is the SSH executor: it deploys admitted revisions of
// embedded OpenClaw agents to systemd hosts over SSH, watches them until the
// gateway is ready, reads them back, lists them and removes them. It knows
// nothing of Terraform; the provider turns its results and errors into
// state and diagnostics.
//
// Connections verify the host key always (a fixed key from the compute, or
// a known_hosts file), are reused per host within a process, keep alive,
// bound the sessions they run at once, and end with the caller's context.
// Failures come back as *executor.Failure with a catalog code; inside the
// package, *Error classifies connection and command failures.
package sshexec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// Error is a classified SSH failure. It carries no secret: stderr tails come
// from the provider's own commands, which never touch the credentials file.
type Error struct {
	// Code is the failure's code in the executor catalog:
	// executor.Unavailable (no TCP connection, or it dropped before,
	// during or after the SSH handshake), executor.AuthRefused (the host
	// refused every authentication method), executor.HostKeyMismatch (the
	// host presented another key than expected), executor.CommandFailed (a
	// command ran and exited non-zero) or executor.InvalidRequest (the
	// connection settings cannot be used: no user, no key, an unparsable
	// key).
	Code executor.Code
	// Addr is host:port, User the login user.
	Addr, User string
	// Op says what was being done ("connect", "write /etc/…", …).
	Op string
	// ExitCode and Stderr (its last lines) of a failed command.
	ExitCode int
	Stderr   string
	// Want and Got are the SHA256 fingerprints of a host key mismatch;
	// KeySetting names the setting that holds Want ("" is the compute's
	// host_key).
	Want, Got  string
	KeySetting string
	// Revoked says that the host presented a key the known_hosts file
	// KeySetting marks @revoked.
	Revoked bool
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s@%s", e.Code, e.User, e.Addr)
	if e.Op != "" {
		fmt.Fprintf(&b, ": %s", e.Op)
	}
	switch e.Code {
	case executor.HostKeyMismatch:
		setting := e.KeySetting
		if setting == "" {
			setting = "the compute's host_key"
		}
		if e.Revoked {
			fmt.Fprintf(&b, ": the host presented key %s, which %s marks @revoked", e.Got, setting)
			break
		}
		verb := "is"
		if strings.HasPrefix(setting, "the known_hosts file ") {
			verb = "records"
		}
		fmt.Fprintf(&b, ": the host presented key %s, but %s %s %s", e.Got, setting, verb, e.Want)
	case executor.CommandFailed:
		if e.Err != nil {
			fmt.Fprintf(&b, ": %v", e.Err)
			break
		}
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
		if s := strings.TrimSpace(e.Stderr); s != "" {
			// The host's own output: bounded and redacted (AU7).
			fmt.Fprintf(&b, ": %s", strings.Join(executor.Redactor{}.Lines(strings.Split(s, "\n")), "\n"))
		}
	default:
		if e.Err != nil {
			fmt.Fprintf(&b, ": %v", e.Err)
		}
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Advice says what the operator can do about an error.
func (e *Error) Advice() string {
	switch e.Code {
	case executor.Unavailable:
		return "Check that the host is up, that sshd listens on the compute's host and port, and that nothing in between drops the connection; then apply again."
	case executor.AuthRefused:
		return fmt.Sprintf("The host refused user %q with the provider's credentials: add the provider's public key to ~%s/.ssh/authorized_keys on the host (or fix ssh.private_key / ssh.agent in the provider, or the compute's ssh.user).", e.User, e.User)
	case executor.HostKeyMismatch:
		return "Either the host was reinstalled or re-keyed, or something is between you and the host. Compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host; only when it is the host's, set the compute's ssh.host_key to its public key."
	case executor.CommandFailed:
		if strings.Contains(e.Stderr, "sudo") && (strings.Contains(e.Stderr, "password") || strings.Contains(e.Stderr, "not in the sudoers")) {
			return fmt.Sprintf("User %q needs passwordless sudo (NOPASSWD) on the host for systemctl, useradd and the config_dir; or log in as root.", e.User)
		}
		return "The command's error output is above; fix the host and apply again."
	case executor.InvalidRequest:
		return "Fix the provider's ssh block (user, private_key or agent = true) or the compute's ssh settings."
	}
	return ""
}

// IsCode reports whether err is an *Error with code c.
func IsCode(err error, c executor.Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

// UnitState is what systemd says of a unit.
type UnitState struct {
	LoadState   string // loaded, not-found
	ActiveState string // active, activating, failed, inactive, …
	SubState    string // running, auto-restart, dead, exited, …
	Result      string // success, exit-code, signal, …
	// ExecMainCode is how the main process ended (1 exited, 2 killed, 3
	// dumped), ExecMainStatus its exit status or signal number.
	ExecMainCode   int
	ExecMainStatus int
	NRestarts      int
	InvocationID   string
}

// ExitDescription describes how the main process ended, as systemctl does.
func (s UnitState) ExitDescription() string {
	switch s.ExecMainCode {
	case 1:
		return fmt.Sprintf("exited with status %d%s", s.ExecMainStatus, exitName(s.ExecMainStatus))
	case 2, 3:
		return fmt.Sprintf("killed by signal %d", s.ExecMainStatus)
	}
	return ""
}

// exitName names the exit statuses systemd itself uses.
func exitName(status int) string {
	switch status {
	case 78:
		return " (CONFIG)"
	case 200:
		return " (CHDIR)"
	case 203:
		return " (EXEC: the binary cannot be run)"
	case 209:
		return " (STDOUT)"
	case 217:
		return " (USER)"
	case 226:
		return " (NAMESPACE)"
	case 238:
		return " (STATE_DIRECTORY)"
	}
	return ""
}

// exit is an operation's exit on the SSH host addr (executor.Normalize):
// an error nothing classified gets the operation's default code and a
// summary naming the host; an *Error gets its code, advice and a summary
// by what failed (classify).
func exit(op executor.Op, agent string, n int64, addr string, w *executor.Writes) executor.Exit {
	x := executor.Exit{Op: op, Agent: agent, Revision: n, Writes: w, Classify: classify(addr)}
	switch op {
	case executor.OpList:
		x.Summary = "cannot list the agents on SSH host " + addr
	case executor.OpRead, executor.OpDelete:
		x.Summary = fmt.Sprintf("cannot %s agent %q on SSH host %s", op, agent, addr)
	case executor.OpDeploy:
		x.Summary = fmt.Sprintf("agent %q revision %d on SSH host %s", agent, n, addr)
	case executor.OpRestart:
		x.Summary = fmt.Sprintf("agent %q on SSH host %s was not restarted", agent, addr)
	case executor.OpPreflight:
		x.Summary = fmt.Sprintf("agent %q revision %d would not activate on SSH host %s", agent, n, addr)
	}
	return x
}

// classify words an *Error of an operation on the SSH host addr.
func classify(addr string) func(*executor.Failure, error) {
	return func(f *executor.Failure, err error) {
		var se *Error
		if !errors.As(err, &se) {
			return
		}
		f.Code, f.Next = se.Code, se.Advice()
		switch {
		case f.Op == executor.OpList || f.Op == executor.OpRead || f.Op == executor.OpDelete:
			// The operation's summary (exit) says it.
		case se.Code == executor.Unavailable:
			f.Summary = "cannot reach SSH host " + addr
		case se.Code == executor.AuthRefused:
			f.Summary = fmt.Sprintf("SSH host %s refused the login", addr)
		case se.Code == executor.HostKeyMismatch:
			f.Summary = fmt.Sprintf("SSH host %s presented another host key", addr)
		case se.Code == executor.CommandFailed:
			f.Summary = "a command failed on SSH host " + addr
		default:
			f.Summary = "cannot connect to SSH host " + addr
		}
		if f.Op == executor.OpDeploy && f.Wrote {
			f.Next += " Parts of the revision may have been written; the agent's previous revision no longer serves only if the unit was restarted. Apply again once fixed."
		}
	}
}
