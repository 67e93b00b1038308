// Package startup is the runtime containers' startup wrapper
// (cmd/occ-runtime): it runs the startup phases of PR9 it performs, in
// order (login, model probe, peer status, workspace setup, process spawn;
// not plugin install or state migration, see runtimerecord.Phases), writes
// one runtime.startup_phase record per phase
// and the probe records (PR6, PR7) through the one record definition in
// internal/runtimerecord, and either hands over to the runtime or holds
// the container unready until it is restarted (PR5).
//
// Nothing here writes a credential, a model or provider name, a path or
// provider output: records are built from closed sets only.
package startup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// Harnesses the wrapper starts.
const (
	HarnessOpenClaw = "openclaw"
	HarnessCodex    = "codex"
)

// Options are the wrapper's command line and surroundings.
type Options struct {
	Container string // gateway, harness or node
	Harness   string // openclaw or codex
	// ProbeFile is the admitted probe settings (admission.Probe as JSON);
	// empty: this container runs no probe (a dedicated gateway).
	ProbeFile string
	// WaitPeer names the peer the container waits for before it starts:
	// PeerHarness, a dedicated OpenClaw gateway's Codex harness (PR10);
	// empty: none.
	WaitPeer string
	// Command is the runtime to exec: argv[0] is looked up on PATH.
	Command []string

	Getenv    func(string) string
	Records   io.Writer // the container's stdout
	CgroupDir string    // default /sys/fs/cgroup
	// CodexBin overrides the codex binary the login and probe run
	// (default: Command[0] for Codex, looked up on PATH).
	CodexBin string
	// DefaultBaseURLs overrides the built-in providers' default endpoints
	// (tests and mirrors); an overridden endpoint still counts as default.
	DefaultBaseURLs map[string]string
	Now             func() time.Time
	Start           time.Time
}

// Result says what to do after the startup phases.
type Result struct {
	// Held is the code that holds the container unready; empty when the
	// runtime is to be spawned.
	Held runtimerecord.Code
	// Path and Argv are the runtime to exec.
	Path string
	Argv []string
}

// ErrStopped is returned when the wrapper was told to stop mid-startup.
var ErrStopped = errors.New("startup: stopped")

// Run runs the phases up to (not including) the spawn. It writes every
// record; the caller execs Result.Path or holds.
func Run(ctx context.Context, o Options) (Result, *Recorder, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Start.IsZero() {
		o.Start = o.Now()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.CgroupDir == "" {
		o.CgroupDir = "/sys/fs/cgroup"
	}
	rec := NewRecorder(o.Records, o.Container, o.Start, o.Now)
	if len(o.Command) == 0 {
		return Result{}, rec, fmt.Errorf("startup: no runtime command after --")
	}
	if o.Harness != HarnessOpenClaw && o.Harness != HarnessCodex {
		return Result{}, rec, fmt.Errorf("startup: unknown harness %q", o.Harness)
	}
	if o.WaitPeer != "" && (o.WaitPeer != PeerHarness || o.Harness != HarnessOpenClaw) {
		return Result{}, rec, fmt.Errorf("startup: --wait-peer=%q: only an OpenClaw gateway waits for a peer, its harness (%q)", o.WaitPeer, PeerHarness)
	}
	var probe *admission.Probe
	if o.ProbeFile != "" {
		b, err := os.ReadFile(o.ProbeFile)
		if err != nil {
			return Result{}, rec, fmt.Errorf("startup: probe settings: %w", err)
		}
		probe = &admission.Probe{}
		if err := json.Unmarshal(b, probe); err != nil {
			return Result{}, rec, fmt.Errorf("startup: probe settings: %w", err)
		}
	}
	s := &run{o: o, rec: rec, probe: probe}
	for _, step := range []struct {
		phase runtimerecord.Phase
		fn    func(context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error)
	}{
		{runtimerecord.PhaseLogin, s.login},
		{runtimerecord.PhaseModelProbe, s.modelProbe},
		{runtimerecord.PhasePeerStatus, s.peerStatus},
		{runtimerecord.PhaseWorkspaceSetup, s.workspace},
	} {
		began := o.Now()
		out, extra, err := step.fn(ctx)
		if err != nil {
			if out == runtimerecord.OutcomeFailed {
				_ = rec.Phase(step.phase, out, began, extra)
			}
			return Result{}, rec, err
		}
		if out == runtimerecord.OutcomeSkipped {
			began = time.Time{}
		}
		if werr := rec.Phase(step.phase, out, began, extra); werr != nil {
			return Result{}, rec, werr
		}
		if s.held != "" {
			return Result{Held: s.held}, rec, nil
		}
	}
	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		return Result{}, rec, fmt.Errorf("startup: runtime %q not found on PATH", o.Command[0])
	}
	return Result{Path: path, Argv: o.Command}, rec, nil
}

type run struct {
	o     Options
	rec   *Recorder
	probe *admission.Probe
	held  runtimerecord.Code
	codex *Codex
}

func (s *run) tmpDir() string {
	if d := s.o.Getenv("TMPDIR"); d != "" {
		return d
	}
	return os.TempDir()
}

func (s *run) codexFor() (*Codex, error) {
	if s.codex != nil {
		return s.codex, nil
	}
	bin := s.o.CodexBin
	if bin == "" {
		bin = s.o.Command[0]
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, err
	}
	c := &Codex{Bin: path, Home: s.o.Getenv("CODEX_HOME"), TmpDir: s.tmpDir(), Getenv: s.o.Getenv,
		LoginMode: s.o.Getenv(admission.EnvCodexLoginMode), Now: s.o.Now}
	if c.Home == "" {
		c.Home = filepath.Join(s.o.Getenv("HOME"), ".codex")
	}
	c.Policy = Policy{MaxAttempts: 1, Attempt: 30 * time.Second, Budget: 30 * time.Second}
	if s.probe != nil {
		c.Policy = PolicyFor(*s.probe, CPULimitMillis(s.o.CgroupDir))
		c.Transport, c.BaseURL = s.probe.Transport, strings.TrimRight(strings.TrimSpace(s.probe.BaseURL), "/")
		if c.BaseURL == "" {
			// OpenAI's default endpoint, unless --default-endpoint names
			// another for openai (tests, mirrors), as for OpenClaw's probe.
			c.BaseURL = strings.TrimRight(s.o.DefaultBaseURLs["openai"], "/")
		}
		if ref, err := admission.ParseModelRef(s.probe.Model); err == nil {
			c.Model = ref.Model
		}
	}
	s.codex = c
	return c, nil
}

// login: Codex logs in with the credential on stdin (AU1, AU2); OpenClaw
// has no login phase.
func (s *run) login(ctx context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error) {
	if s.o.Harness != HarnessCodex || s.o.Getenv(admission.EnvCodexLoginMode) == "" {
		return runtimerecord.OutcomeSkipped, nil, nil
	}
	c, err := s.codexFor()
	if err != nil {
		s.held = runtimerecord.CodeLoginFailed
		return runtimerecord.OutcomeFailed, &runtimerecord.Record{Code: s.held, FailureClass: string(ClassConfig)}, nil
	}
	r := c.Login(ctx)
	if ctx.Err() != nil {
		return "", nil, ErrStopped
	}
	if r.OK {
		return runtimerecord.OutcomeOK, nil, nil
	}
	s.held = r.Code
	return runtimerecord.OutcomeFailed, &runtimerecord.Record{Code: r.Code, FailureClass: string(r.Class)}, nil
}

func (s *run) modelProbe(ctx context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error) {
	if s.probe == nil {
		return runtimerecord.OutcomeSkipped, nil, nil
	}
	var out Outcome
	var err error
	if s.o.Harness == HarnessCodex {
		out, err = s.codexProbe(ctx)
	} else {
		out, err = s.openclawProbe(ctx)
	}
	if err != nil {
		return "", nil, err
	}
	if out.Code != runtimerecord.CodeReady {
		s.held = out.Code
		return runtimerecord.OutcomeFailed, nil, nil
	}
	return runtimerecord.OutcomeOK, nil, nil
}

func (s *run) codexProbe(ctx context.Context) (Outcome, error) {
	c, err := s.codexFor()
	probeStart := s.o.Now()
	if err != nil {
		out := failure(ClassConfig, "config", "unsupported")
		rec := probeRecord(runtimerecord.EventCodexProbe, out)
		rec.Attempt, rec.Final = 1, true
		return out, s.rec.Write(rec)
	}
	var werr error
	out, err := c.Probe(ctx, func(a Attempt, final bool) {
		rec := probeRecord(runtimerecord.EventCodexProbe, a.Outcome)
		rec.Attempt, rec.ExitCode, rec.Signal, rec.Final = a.Number, a.ExitCode, a.Signal, final
		rec.DurationMS = a.Ended.Sub(a.Began).Milliseconds()
		rec.ElapsedMS = a.Ended.Sub(probeStart).Milliseconds()
		if e := s.rec.Write(rec); e != nil && werr == nil {
			werr = e
		}
	})
	if err != nil {
		return Outcome{}, ErrStopped
	}
	return out, werr
}

// openclawProbe is embedded OpenClaw's probe: the upfront empty request to
// a default endpoint, then one streamed call, inside 20 s plus 45
// CPU-seconds at the CPU limit (PR1); a timeout while the cgroup was
// throttled is MODEL_PROBE_CPU_STARVED (PR7).
func (s *run) openclawProbe(ctx context.Context) (Outcome, error) {
	start := s.o.Now()
	pol := PolicyFor(*s.probe, CPULimitMillis(s.o.CgroupDir))
	thr0, thrOK := Throttled(s.o.CgroupDir)
	out, attempts := s.openclawCall(ctx, pol, start)
	if ctx.Err() != nil {
		return Outcome{}, ErrStopped
	}
	elapsed := s.o.Now().Sub(start)
	if out.Class == ClassTimeout && thrOK {
		if thr1, ok := Throttled(s.o.CgroupDir); ok && starved(thr1-thr0, elapsed) {
			out.Code = runtimerecord.CodeModelProbeCPUStarved
		}
	}
	rec := probeRecord(runtimerecord.EventOpenClawProbe, out)
	rec.Attempt, rec.Final = max(attempts, 1), true
	rec.DurationMS = elapsed.Milliseconds()
	rec.ElapsedMS = elapsed.Milliseconds()
	return out, s.rec.Write(rec)
}

func (s *run) openclawCall(ctx context.Context, pol Policy, start time.Time) (Outcome, int) {
	path := s.o.Getenv("OPENCLAW_CONFIG_PATH")
	b, err := os.ReadFile(path)
	if err != nil {
		return failure(ClassConfig, "config", "unsupported"), 0
	}
	doc, err := occconfig.Parse(string(b))
	if err != nil {
		return failure(ClassConfig, "config", "unsupported"), 0
	}
	ep, err := ResolveEndpoint(doc, s.probe.Model, s.o.Getenv, s.o.DefaultBaseURLs)
	if err != nil {
		return failure(ClassConfig, "config", "unsupported"), 0
	}
	if ep.Key == "" {
		return Outcome{Code: runtimerecord.CodeAuthenticationFailed, Class: ClassConfig}, 0
	}
	ctx, cancel := context.WithTimeout(ctx, pol.Budget)
	defer cancel()
	if ep.Default {
		if o, rejected := Upfront(ctx, ep, nil); rejected {
			return o, 0
		}
	}
	p := &HTTPProbe{Endpoint: ep, Policy: pol, OutputTokens: s.probe.OutputTokens, Now: s.o.Now, Start: start}
	r := p.Run(ctx)
	return r.Outcome, r.Attempts
}

// workspace prepares what the runtime writes to: OpenClaw's workspace and
// state directories (MR7), or Codex's home with the host-owned
// configuration copied in (LG3).
func (s *run) workspace(context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error) {
	var dirs []string
	switch s.o.Harness {
	case HarnessOpenClaw:
		for _, k := range []string{"OPENCLAW_WORKSPACE", "OPENCLAW_STATE_DIR"} {
			if d := s.o.Getenv(k); d != "" {
				dirs = append(dirs, d)
			}
		}
	case HarnessCodex:
		if d := s.o.Getenv("CODEX_HOME"); d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return runtimerecord.OutcomeFailed, nil, fmt.Errorf("startup: workspace setup failed")
		}
	}
	if src := s.o.Getenv("OCC_CODEX_CONFIG"); s.o.Harness == HarnessCodex && src != "" {
		home := s.o.Getenv("CODEX_HOME")
		b, err := os.ReadFile(src)
		if err != nil || home == "" {
			return runtimerecord.OutcomeFailed, nil, fmt.Errorf("startup: workspace setup failed")
		}
		if err := os.WriteFile(filepath.Join(home, "config.toml"), b, 0o600); err != nil {
			return runtimerecord.OutcomeFailed, nil, fmt.Errorf("startup: workspace setup failed")
		}
	}
	return runtimerecord.OutcomeOK, nil, nil
}
