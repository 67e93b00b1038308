//go:build windows

package sshexec

import (
	"net"
	"strings"
	"time"

	"github.com/Microsoft/go-winio"
)

// defaultAgentSocket is the named pipe of the Windows OpenSSH agent
// service (ssh-agent), used when SSH_AUTH_SOCK is not set.
const defaultAgentSocket = `\\.\pipe\openssh-ssh-agent`

// dialAgent connects to the SSH agent: a named pipe (the Windows OpenSSH
// agent, or SSH_AUTH_SOCK naming one), else a Unix socket (an agent such
// as Git for Windows' that listens on one).
func dialAgent(sock string) (net.Conn, error) {
	if strings.HasPrefix(sock, `\\.\pipe\`) || strings.HasPrefix(sock, `//./pipe/`) {
		timeout := 10 * time.Second
		return winio.DialPipe(sock, &timeout)
	}
	return net.Dial("unix", sock)
}
