// Command occ-pause is the sandbox ("pause") container of the test
// environment's real Kubernetes node: the process that holds a Pod's
// namespaces while its containers come and go. containerd names its image in
// sandbox_image; testenv/images.sh builds it as a static binary into
// localhost/occ-testenv/pause:1, so the node needs no image from a registry.
//
// It does what the upstream pause does: it blocks until SIGTERM or SIGINT
// (and then exits 0), and, as PID 1 of a Pod that shares its process
// namespace, it reaps the orphans that are reparented to it, so none stays a
// zombie. `occ-pause -v` prints its version.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the tag of the pause image (testenv/images.sh PAUSE_IMAGE).
const version = "1"

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("occ-pause", version)
		return
	}
	run(nil)
}

// run blocks until SIGTERM or SIGINT, reaping exited children meanwhile.
// ready, when not nil, is called once the signal handlers are in place.
func run(ready func()) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Orphans that exited before the handler was in place sent their
	// SIGCHLD to nobody.
	reap()
	if ready != nil {
		ready()
	}
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		return
	}
}

// reap collects every child that has exited (SIGCHLDs coalesce: one signal
// may stand for several children) and returns when none is left to collect.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
