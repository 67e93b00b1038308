package kubeenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one server of the cluster, started from a binary with its
// stdout and stderr in a log file of its own.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// startProcess starts BIN ARGS with ENV added to this process's environment.
// The child gets SIGKILL if this process dies first (Pdeathsig), so a test
// binary that panics or is killed leaves no server behind.
func startProcess(name, bin string, args []string, env []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true, // a Ctrl-C in the terminal reaches the test, which stops the servers in order
		Pdeathsig: syscall.SIGKILL,
	}
	fmt.Fprintf(logFile, "+ %s %s\n", bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *process) PID() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace for the exit, then SIGKILLs and
// waits again. It returns once the process is gone (its port is free).
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// exitError describes how the process ended, for error messages.
func (p *process) exitError() error {
	if !p.exited() {
		return nil
	}
	if p.waitErr == nil {
		return fmt.Errorf("%s exited with status 0", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.waitErr)
}

// tail returns the last n lines of the process log.
func (p *process) tail(n int) string {
	return tailFile(p.logPath, n)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// startError is a failed start: which server, why, and the end of its log.
type startError struct {
	Process string
	Err     error
	LogPath string
	LogTail string
}

func (e *startError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "testenv/kubeenv: %s did not start: %v", e.Process, e.Err)
	if e.LogTail != "" {
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s\n--- end of %s log ---", e.LogPath, e.LogTail, e.Process)
	}
	return b.String()
}

func (e *startError) Unwrap() error { return e.Err }

func (p *process) startFailed(err error) error {
	if exitErr := p.exitError(); exitErr != nil {
		err = fmt.Errorf("%w (%v)", err, exitErr)
	}
	return &startError{Process: p.name, Err: err, LogPath: p.logPath, LogTail: p.tail(logTailLines)}
}

const logTailLines = 40

// portAllocator hands out free loopback ports, never the same one twice in
// one start. A port is free when asked; the server binds it a moment later
// (the usual test-server race, rare in practice; a clash fails the start
// with the server's "address already in use" in the log tail).
type portAllocator struct {
	used map[int]bool
}

func (a *portAllocator) next() (int, error) {
	if a.used == nil {
		a.used = map[int]bool{}
	}
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !a.used[port] {
			a.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port")
}
