package startup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// The gateway's records after its start (PR9): the wrapper execs the
// gateway, so a monitor process it leaves beside it writes them on the same
// output.
//
//   - gateway-respawn: the container started the gateway before (its
//     kubelet restarted it after an exit); once the restarted gateway
//     answers /readyz again, one record with attempt = this start's number.
//   - peer-status-changed: a dedicated gateway's harness stopped answering
//     its /readyz (peerStatus "lost", after two failed checks in a row) or
//     answers again ("ready"), for as long as the gateway runs.

// startsFile counts the gateway starts of a container instance. It lives
// in TMPDIR, which on Kubernetes is the Pod's emptyDir: it outlives a
// container restart, not the Pod.
const startsFile = ".occ-runtime-gateway-starts"

// CountStart records one more start of the gateway in dir and returns its
// number: 1 for the first start of this container instance.
func CountStart(dir string) (int, error) {
	path := filepath.Join(dir, startsFile)
	n := 0
	if b, err := os.ReadFile(path); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("startup: read the start count: %w", err)
	}
	n++
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return 0, fmt.Errorf("startup: write the start count: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("startup: write the start count: %w", err)
	}
	return n, nil
}

// MonitorOptions configure Monitor.
type MonitorOptions struct {
	// Rec writes the records (the gateway container's).
	Rec *Recorder
	// Start is this start's number (CountStart); above 1 it is a respawn,
	// reported once GatewayReady answers 200.
	Start        int
	GatewayReady string
	// PeerReady is the harness's readiness URL; "" watches no peer.
	PeerReady string
	// Poll is how often each is asked (default 2 s).
	Poll time.Duration
}

// MonitorNeeded reports whether a start has anything to monitor.
func (o MonitorOptions) MonitorNeeded() bool {
	return (o.Start > 1 && o.GatewayReady != "") || o.PeerReady != ""
}

// Monitor writes the gateway's respawn and peer records until ctx ends
// (or, without a peer to watch, once the respawn is reported).
func Monitor(ctx context.Context, o MonitorOptions) error {
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	client := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	respawnDue := o.Start > 1 && o.GatewayReady != ""
	peerUp, misses := true, 0 // the wrapper started the gateway once the harness answered
	for {
		if respawnDue && harnessReady(ctx, client, o.GatewayReady) {
			respawnDue = false
			if err := o.Rec.Write(runtimerecord.Record{Event: runtimerecord.EventGatewayRespawn, Attempt: o.Start,
				ElapsedMS: o.Rec.now().Sub(o.Rec.start).Milliseconds()}); err != nil {
				return err
			}
		}
		if o.PeerReady != "" {
			switch up := harnessReady(ctx, client, o.PeerReady); {
			case up && !peerUp:
				peerUp, misses = true, 0
				if err := o.peerRecord("ready"); err != nil {
					return err
				}
			case up:
				misses = 0
			case peerUp:
				if misses++; misses >= 2 {
					peerUp = false
					if err := o.peerRecord("lost"); err != nil {
						return err
					}
				}
			}
		} else if !respawnDue {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (o MonitorOptions) peerRecord(status string) error {
	return o.Rec.Write(runtimerecord.Record{Event: runtimerecord.EventPeerStatusChanged, Peer: PeerHarness, PeerStatus: status,
		ElapsedMS: o.Rec.now().Sub(o.Rec.start).Milliseconds()})
}

// WhileAlive is ctx, cancelled once the process pid is gone (checked every
// second): the monitor ends with the gateway it watches.
func WhileAlive(ctx context.Context, pid int) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ctx
}

// HarnessStatusURL is a dedicated gateway's harness readiness URL, read
// from the gateway configuration at path (OPENCLAW_CONFIG_PATH).
func HarnessStatusURL(path string) (string, error) { return harnessStatusURL(path) }
