//go:build !windows

package sshexec

import "net"

// defaultAgentSocket is where the agent listens when SSH_AUTH_SOCK is not
// set: nowhere known on Unix, where the agent sets the variable.
const defaultAgentSocket = ""

// dialAgent connects to the SSH agent's Unix socket.
func dialAgent(sock string) (net.Conn, error) {
	return net.Dial("unix", sock)
}
