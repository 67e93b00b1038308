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
	"os/exec"
	"os/signal"
	"strconv"
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
	if len(args) > 0 {
		switch args[0] {
		case "monitor-detach":
			return detachMonitor(args[1:], stderr)
		case "monitor":
			return runMonitor(args[1:], stdout, stderr)
		}
	}
	o, err := parseArgs(args, stderr)
	if err != nil {
		return 2
	}
	o.Records = recordsOut(o.Harness, stdout, stderr)
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
	if o.Container == "gateway" {
		startMonitor(o, start, stderr)
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

// recordsOut is where the records of a harness's container go: stdout, but
// stderr for Codex (LG3: a Codex app server's stdout is protocol; its logs,
// and so the wrapper's records, go to stderr).
func recordsOut(harness string, stdout, stderr io.Writer) io.Writer {
	if harness == startup.HarnessCodex {
		return stderr
	}
	return stdout
}

// startMonitor leaves a monitor beside the gateway this process is about
// to become (startup.Monitor): when this start is a respawn of the
// container's gateway, or the gateway has a dedicated harness to watch. It
// goes through monitor-detach, which starts the monitor and exits, so that
// the monitor is reaped by tini (the image's subreaper), not left to the
// gateway. A monitor that cannot start costs records, never the gateway.
func startMonitor(o wrapperArgs, start time.Time, stderr io.Writer) {
	n, err := startup.CountStart(os.TempDir())
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime: %v (no gateway-respawn record)\n", err)
	}
	mo := startup.MonitorOptions{Start: n}
	if o.HealthPort > 0 {
		mo.GatewayReady = fmt.Sprintf("http://127.0.0.1:%d/readyz", o.HealthPort)
	}
	if o.WaitPeer == startup.PeerHarness {
		if mo.PeerReady, err = startup.HarnessStatusURL(os.Getenv("OPENCLAW_CONFIG_PATH")); err != nil {
			fmt.Fprintf(stderr, "occ-runtime: %v (no peer-status-changed records)\n", err)
		}
	}
	if !mo.MonitorNeeded() {
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime: cannot start the monitor: %v\n", err)
		return
	}
	cmd := exec.Command(self, "monitor-detach",
		"--container="+o.Container, "--harness="+o.Harness, "--start="+strconv.Itoa(mo.Start),
		"--gateway-ready="+mo.GatewayReady, "--peer-ready="+mo.PeerReady,
		"--since="+strconv.FormatInt(start.UnixMilli(), 10), "--gateway-pid="+strconv.Itoa(os.Getpid()))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(stderr, "occ-runtime: cannot start the monitor: %v\n", err)
	}
}

// detachMonitor starts "monitor" with the same arguments and returns at
// once, leaving it orphaned.
func detachMonitor(args []string, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime: monitor: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, append([]string{"monitor"}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "occ-runtime: monitor: %v\n", err)
		return 1
	}
	return 0
}

// runMonitor is the monitor process: the gateway's respawn and peer
// records (startup.Monitor) on the container's output, until SIGTERM.
func runMonitor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("occ-runtime monitor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var container, harness, gatewayReady, peerReady string
	var startN, gatewayPID int
	var since int64
	fs.StringVar(&container, "container", "gateway", "container name")
	fs.StringVar(&harness, "harness", "", "harness: openclaw or codex (codex writes records on stderr)")
	fs.IntVar(&startN, "start", 1, "this start's number of the container's gateway")
	fs.StringVar(&gatewayReady, "gateway-ready", "", "the gateway's readiness URL")
	fs.StringVar(&peerReady, "peer-ready", "", "the dedicated harness's readiness URL")
	fs.Int64Var(&since, "since", 0, "the wrapper's start, Unix milliseconds")
	fs.IntVar(&gatewayPID, "gateway-pid", 0, "the gateway's PID (the wrapper's, which execs it): the monitor ends when it does")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	began := time.Now()
	if since > 0 {
		began = time.UnixMilli(since)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if gatewayPID > 0 {
		ctx = startup.WhileAlive(ctx, gatewayPID)
	}
	err := startup.Monitor(ctx, startup.MonitorOptions{Rec: startup.NewRecorder(recordsOut(harness, stdout, stderr), container, began, nil),
		Start: startN, GatewayReady: gatewayReady, PeerReady: peerReady})
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime: monitor: %v\n", err)
		return 1
	}
	return 0
}
