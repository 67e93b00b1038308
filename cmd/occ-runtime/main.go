// Command occ-runtime is the startup wrapper of the OCC runtime images:
// the entrypoint of the gateway and harness containers. It runs the
// startup phases (login, model probe, ..., process spawn), writes the
// startup records on stdout (stderr for Codex, whose stdout is protocol),
// and then either becomes the runtime (exec) or, on a held failure, stays
// alive and unready until the container is restarted, answering the
// kubelet on --health-port. See internal/startup and
// templates/guides/startup-probe.md.tmpl.
//
//	occ-runtime --container=gateway --harness=openclaw --probe=/etc/openclaw/probe.json -- openclaw gateway run
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/startup"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type endpoints map[string]string

func (e endpoints) String() string { return "" }
func (e endpoints) Set(v string) error {
	k, u, ok := strings.Cut(v, "=")
	if !ok || k == "" || u == "" {
		return errors.New("want provider=URL")
	}
	e[k] = u
	return nil
}

// wrapperArgs is the wrapper's command line: the startup options, and the
// port it answers health checks on while held.
type wrapperArgs struct {
	startup.Options
	HealthPort int
}

// parseArgs reads the wrapper's command line: flags, then -- and the runtime.
func parseArgs(args []string, stderr io.Writer) (wrapperArgs, error) {
	fs := flag.NewFlagSet("occ-runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o wrapperArgs
	defaults := endpoints{}
	fs.StringVar(&o.Container, "container", "", "container name: gateway, harness or node")
	fs.StringVar(&o.Harness, "harness", "", "harness: openclaw or codex")
	fs.StringVar(&o.ProbeFile, "probe", "", "admitted probe settings (JSON); none: no model probe")
	fs.StringVar(&o.WaitPeer, "wait-peer", "", "peer the container waits for before the runtime starts: harness (a dedicated Codex gateway waits, with no deadline of its own, until its harness answers /readyz; the peer_status phase, PR10); none: no wait")
	fs.StringVar(&o.CgroupDir, "cgroup", "/sys/fs/cgroup", "cgroup directory for the CPU limit and throttling")
	fs.StringVar(&o.CodexBin, "codex", "", "codex binary for login and probe (default: the runtime command)")
	fs.IntVar(&o.HealthPort, "health-port", 0, "port of the runtime's /healthz and /readyz; while held the wrapper answers there (alive, not ready); 0: nothing listens")
	fs.Var(defaults, "default-endpoint", "provider=URL: a built-in provider's default endpoint (tests, mirrors); repeatable")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.HealthPort < 0 || o.HealthPort > 65535 {
		fmt.Fprintf(stderr, "invalid value %d for flag -health-port: want a TCP port\n", o.HealthPort)
		return o, errors.New("health-port out of range")
	}
	o.Command = fs.Args()
	o.DefaultBaseURLs = defaults
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	start := time.Now()
	o, err := parseArgs(args, stderr)
	if err != nil {
		return 2
	}
	o.Records = stdout
	if o.Harness == startup.HarnessCodex {
		// LG3: a Codex app server's stdout is protocol; its logs, and so
		// the wrapper's records, go to stderr.
		o.Records = stderr
	}
	o.Start = start

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan os.Signal, 1)
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		for s := range sigs {
			select {
			case stopped <- s:
			default:
			}
			cancel()
		}
	}()

	res, rec, err := startup.Run(ctx, o.Options)
	if ctx.Err() != nil || errors.Is(err, startup.ErrStopped) {
		return exitFor(<-stopped) // SIGTERM exits at once
	}
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime: %v\n", err)
		return 1
	}
	if res.Held != "" {
		// PR5: the runtime is never spawned and nothing retries the model
		// call. On the health port the process answers alive but never
		// ready, so a liveness probe does not restart the container (each
		// restart would run the model probe, and its charge, again).
		fmt.Fprintf(stderr, "occ-runtime: startup held: %s; the runtime stays unready until the container restarts\n", res.Held)
		stop := serveHeld(o.HealthPort, string(res.Held), stderr)
		defer stop()
		return exitFor(<-stopped)
	}
	// Stop catching SIGTERM/SIGINT before the exec: one that arrives from
	// now on takes its default action (it ends this process, or the
	// runtime this process becomes). signal.Stop returns only once every
	// signal caught before it was relayed, so one that arrived meanwhile is
	// in stopped, and the runtime is not started: a signal caught here
	// would otherwise be lost with the exec and the runtime would never
	// see it.
	signal.Stop(sigs)
	close(sigs)
	<-watcher
	select {
	case s := <-stopped:
		return exitFor(s)
	default:
	}
	if err := startup.Spawn(rec, res, os.Environ()); err != nil {
		fmt.Fprintf(stderr, "occ-runtime: %v\n", err)
		return 1
	}
	return 0 // not reached: Spawn execs
}

func exitFor(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// serveHeld answers health checks on port while the startup is held: /healthz
// 200 (the process is alive and holding), every other path, /readyz
// included, 503; both bodies name the held code and nothing else. Nothing
// here calls the model. Port 0 listens nowhere.
func serveHeld(port int, code string, stderr io.Writer) (stop func()) {
	if port == 0 {
		return func() {}
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime: cannot answer health checks while held: %v\n", err)
		return func() {}
	}
	body, _ := json.Marshal(map[string]string{"status": "held", "code": code})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }
}
