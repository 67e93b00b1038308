package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the pause process: with OCC_PAUSE_CHILD set it
// runs run() (the code main runs) and says "ready" once its signal
// handlers are in place.
func TestMain(m *testing.M) {
	if os.Getenv("OCC_PAUSE_CHILD") == "1" {
		run(func() { fmt.Println("ready") })
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// start runs the pause process (in a PID namespace of its own when newPID)
// and waits until it handles signals.
func start(t *testing.T, newPID bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OCC_PAUSE_CHILD=1")
	cmd.Stderr = os.Stderr
	if newPID {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		if newPID && errors.Is(err, syscall.EPERM) {
			needRoot(t, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "ready\n" {
			t.Fatalf("pause said %q, want ready", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not get ready in 10 s")
	}
	return cmd
}

// needRoot skips (fails under CI=true) a test that needs a PID namespace.
func needRoot(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("a PID namespace is needed (run as root): %v", err)
	}
	t.Skipf("a PID namespace is needed (run as root): %v", err)
}

// exits0 sends sig and waits for a clean exit.
func exits0(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after %v: %v, want exit status 0", sig, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5 s after %v", sig)
	}
}

func TestExitsOnSIGTERMAndSIGINT(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			exits0(t, start(t, false), sig)
		})
	}
}

// children lists the processes whose parent is pid, with their state
// (R, S, Z, ...), from /proc.
func children(t *testing.T, pid int) map[int]string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	kids := map[int]string{}
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/status")
		if err != nil {
			continue // gone meanwhile
		}
		var state string
		ppid := -1
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				state = strings.Fields(v)[0]
			}
			if v, ok := strings.CutPrefix(l, "PPid:"); ok {
				fmt.Sscan(v, &ppid)
			}
		}
		if ppid == pid {
			var n int
			fmt.Sscan(filepath.Base(d), &n)
			kids[n] = state
		}
	}
	return kids
}

// As PID 1 of its namespace the pause process inherits the orphans; when
// one exits, it must not stay a zombie.
func TestReapsOrphans(t *testing.T) {
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter (util-linux) is not installed")
	}
	pause := start(t, true)
	pid := pause.Process.Pid
	// sh starts a short sleep and exits at once: the sleep is orphaned and
	// reparented to the namespace's init, the pause process.
	if out, err := exec.Command("nsenter", "--target", fmt.Sprint(pid), "--pid", "--",
		"/bin/sh", "-c", "sleep 2 >/dev/null 2>&1 & exit 0").CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	if kids := children(t, pid); len(kids) == 0 {
		t.Fatal("the orphaned sleep was not reparented to the pause process (nothing to reap)")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids := children(t, pid)
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of the pause process 10 s after the sleep: %v (Z: not reaped)", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	exits0(t, pause, syscall.SIGTERM)
}
