// Package sshexec is the SSH executor: it deploys admitted revisions of
// embedded OpenClaw agents to systemd hosts over SSH, watches them until the
// gateway is ready, reads them back and removes them. It knows nothing of
// Terraform; the provider turns its results and errors into state and
// diagnostics.
//
// Connections verify the host key always (a fixed key from the compute, or
// a known_hosts file), are reused per host within a process, keep alive,
// bound the sessions they run at once, and end with the caller's context.
// Failures come back as values with a class: *Error for the connection and
// commands, *Failure for a revision that did not become ready.
package sshexec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Class is the kind of an SSH failure.
type Class string

const (
	// ClassUnreachable: no TCP connection, or it dropped before or during
	// the SSH handshake, or later in the middle of an operation.
	ClassUnreachable Class = "UNREACHABLE"
	// ClassAuthRefused: the host refused every authentication method.
	ClassAuthRefused Class = "AUTH_REFUSED"
	// ClassHostKeyMismatch: the host presented another key than expected.
	ClassHostKeyMismatch Class = "HOST_KEY_MISMATCH"
	// ClassCommandFailed: a command ran and exited non-zero.
	ClassCommandFailed Class = "COMMAND_FAILED"
	// ClassConfig: the connection settings cannot be used (no user, no
	// key, an unparsable key).
	ClassConfig Class = "INVALID_SSH_SETTINGS"
)

// Error is a classified SSH failure. It carries no secret: stderr tails come
// from the provider's own commands, which never touch the credentials file.
type Error struct {
	Class Class
	// Addr is host:port, User the login user.
	Addr, User string
	// Op says what was being done ("connect", "write /etc/…", …).
	Op string
	// ExitCode and Stderr (its last lines) of a failed command.
	ExitCode int
	Stderr   string
	// Want and Got are the SHA256 fingerprints of a host key mismatch.
	Want, Got string
	Err       error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s@%s", e.Class, e.User, e.Addr)
	if e.Op != "" {
		fmt.Fprintf(&b, ": %s", e.Op)
	}
	switch e.Class {
	case ClassHostKeyMismatch:
		fmt.Fprintf(&b, ": the host presented key %s, but the compute's host_key is %s", e.Got, e.Want)
	case ClassCommandFailed:
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
		if s := strings.TrimSpace(e.Stderr); s != "" {
			fmt.Fprintf(&b, ": %s", s)
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
	switch e.Class {
	case ClassUnreachable:
		return "Check that the host is up, that sshd listens on the compute's host and port, and that nothing in between drops the connection; then apply again."
	case ClassAuthRefused:
		return fmt.Sprintf("The host refused user %q with the provider's credentials: add the provider's public key to ~%s/.ssh/authorized_keys on the host (or fix ssh.private_key / ssh.agent in the provider, or the compute's ssh.user).", e.User, e.User)
	case ClassHostKeyMismatch:
		return "Either the host was reinstalled or re-keyed, or something is between you and the host. Compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host; only when it is the host's, set the compute's ssh.host_key to its public key."
	case ClassCommandFailed:
		if strings.Contains(e.Stderr, "sudo") && (strings.Contains(e.Stderr, "password") || strings.Contains(e.Stderr, "not in the sudoers")) {
			return fmt.Sprintf("User %q needs passwordless sudo (NOPASSWD) on the host for systemctl, useradd and the config_dir; or log in as root.", e.User)
		}
		return "The command's error output is above; fix the host and apply again."
	case ClassConfig:
		return "Fix the provider's ssh block (user, private_key or agent = true) or the compute's ssh settings."
	}
	return ""
}

// IsClass reports whether err is an *Error of class c.
func IsClass(err error, c Class) bool {
	var e *Error
	return errors.As(err, &e) && e.Class == c
}

// NotWritten is a deployment that failed before its first write to the
// host: nothing of the revision reached it.
type NotWritten struct{ Err error }

func (e *NotWritten) Error() string { return e.Err.Error() }
func (e *NotWritten) Unwrap() error { return e.Err }

// Failure codes of the executor, beside the runtime's held codes.
const (
	CodeStartFailed = "UNIT_START_FAILED"
	CodeCrashed     = "UNIT_FAILED"
	CodeDeadline    = "DEADLINE_EXCEEDED"
	CodeBadRecord   = "INVALID_STARTUP_RECORD"
	CodeNoTunnel    = "READINESS_UNREACHABLE"
)

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

// Failure is a revision that did not become ready: what happened, what
// systemd says of the unit, and the journal lines of this activation. It
// carries no secret: journal lines that can quote the credentials file are
// withheld (AU7).
type Failure struct {
	Code     string
	Agent    string
	Revision int64
	Unit     string
	Phase    string
	State    UnitState
	Reason   string
	Record   *runtimerecord.Record
	Journal  []string
	Next     string
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: agent %q revision %d", f.Code, f.Agent, f.Revision)
	if f.Unit != "" {
		fmt.Fprintf(&b, ", unit %s", f.Unit)
	}
	if f.Phase != "" {
		fmt.Fprintf(&b, ", phase %s", f.Phase)
	}
	if f.Reason != "" {
		fmt.Fprintf(&b, ": %s", f.Reason)
	}
	return b.String()
}
