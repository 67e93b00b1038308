package startup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// PeerHarness is the one peer a wrapper waits for (--wait-peer): the
// dedicated Codex harness of an OpenClaw gateway (PR10).
const PeerHarness = "harness"

// WaitingForHarness is what a dedicated gateway logs while it waits for
// its harness (PR10).
const WaitingForHarness = "Waiting for Harness plugin runtime status"

// How often the gateway asks the harness for its status, and logs that it
// still waits (PR10: at most every 30 s). Tests shorten them.
var (
	peerPoll     = 2 * time.Second
	peerLogEvery = 30 * time.Second
)

// peerStatus is the peer status phase: a dedicated gateway waits for its
// harness (--wait-peer=harness); any other container skips it.
func (s *run) peerStatus(ctx context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error) {
	if s.o.WaitPeer == PeerHarness {
		return s.waitHarness(ctx)
	}
	return runtimerecord.OutcomeSkipped, nil, nil
}

// waitHarness holds the gateway before it starts until its dedicated
// harness reports ready: the app server the gateway's Codex plugin
// connects to (plugins.entries.codex.config.appServer.url) answers
// /readyz with 200. The wait has no deadline of its own (the deployment's
// convergence deadline governs a harness that never reports) and logs
// WaitingForHarness when it begins and at most every peerLogEvery after;
// the gateway stays unready meanwhile, for nothing answers on its port.
func (s *run) waitHarness(ctx context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error) {
	status, err := harnessStatusURL(s.o.Getenv("OPENCLAW_CONFIG_PATH"))
	if err != nil {
		return runtimerecord.OutcomeFailed, nil, fmt.Errorf("startup: waiting for the harness: %w", err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var logged time.Time
	for {
		if harnessReady(ctx, client, status) {
			return runtimerecord.OutcomeOK, nil, nil
		}
		if ctx.Err() != nil {
			return "", nil, ErrStopped
		}
		if now := s.o.Now(); logged.IsZero() || now.Sub(logged) >= peerLogEvery {
			if err := s.rec.Log(WaitingForHarness); err != nil {
				return runtimerecord.OutcomeFailed, nil, err
			}
			logged = now
		}
		select {
		case <-ctx.Done():
			return "", nil, ErrStopped
		case <-time.After(peerPoll):
		}
	}
}

// harnessStatusURL is the harness's readiness endpoint: the app server of
// the Codex plugin in the gateway's configuration at path, over HTTP.
func harnessStatusURL(path string) (string, error) {
	if path == "" {
		return "", errors.New("OPENCLAW_CONFIG_PATH is not set")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", errors.New("the gateway configuration cannot be read")
	}
	doc, err := occconfig.Parse(string(b))
	if err != nil {
		return "", errors.New("the gateway configuration cannot be parsed")
	}
	raw, _ := occconfig.String(doc, occconfig.Keys("plugins", "entries", "codex", "config", "appServer", "url"))
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Host == "" {
		return "", errors.New("the gateway configuration names no harness app server (plugins.entries.codex.config.appServer.url)")
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("the harness app server's URL has scheme %q, want ws or wss", u.Scheme)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/readyz"}).String(), nil
}

// harnessReady asks the harness once: ready only on 200.
func harnessReady(ctx context.Context, client *http.Client, status string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, status, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64*1024))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
