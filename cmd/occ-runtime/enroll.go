package main

// The enrollment broker: the platform's side of a native OpenClaw node's
// one-use enrollment (rule ND2), a process of its own beside the gateway
// in the gateway's Pod:
//
//	occ-runtime enrollment-broker --verifier=/var/run/occ/enrollment-verifier/sha256 \
//	  --public-url=ws://NAME-gateway.NS.svc.cluster.local:18789 --gateway=ws://127.0.0.1:18789 \
//	  --state=/var/lib/occ-enrollment -- openclaw
//
// It holds only the verifier (the digest of the node's secret) and the
// gateway's token (OPENCLAW_GATEWAY_TOKEN, which never leaves the gateway
// Pod). A request that presents the secret gets one setup code of
// OpenClaw's node profile, issued by the gateway itself through its admin
// RPC (`openclaw gateway call device.pair.setupCode`). The secret admits
// one device: once a device has paired with the code, it is spent (409);
// until then the same code is handed out again (a lost answer, a restarted
// node), or a fresh one once it nears its 10 minutes. /readyz answers 200
// once the enrolled device is paired and connected, so the gateway's Pod,
// and with it the Agent, turns ready only with its node (ND3); it stays
// ready afterwards (a later disconnect fails turns, ND3, without taking
// the Service down).

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
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
)

// brokerCommand is the wrapper's first argument that selects the broker.
const brokerCommand = "enrollment-broker"

type broker struct {
	verifierFile string
	publicURL    string
	gatewayURL   string
	stateFile    string
	cli          []string
	env          []string
	log          io.Writer
	now          func() time.Time
	pollEvery    time.Duration

	mu       sync.Mutex
	st       brokerState
	watching bool
	ready    atomic.Bool
	logMu    sync.Mutex
}

// brokerState survives a restart of the broker's container (its own
// emptyDir); it holds the issued setup code, as the gateway's state does.
type brokerState struct {
	SetupID     string `json:"setupId,omitempty"`
	SetupCode   string `json:"setupCode,omitempty"`
	ExpiresAtMs int64  `json:"expiresAtMs,omitempty"`
	DeviceID    string `json:"deviceId,omitempty"`
}

// reissueMargin: a setup code this close to its expiry is not handed out
// again; a fresh one is issued.
const reissueMargin = time.Minute

func runBroker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("occ-runtime "+brokerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	b := &broker{log: stdout, now: time.Now, pollEvery: 3 * time.Second}
	listen := fs.String("listen", fmt.Sprintf(":%d", enrollment.Port), "address the broker listens on")
	state := fs.String("state", "", "directory of the broker's own state (private)")
	fs.StringVar(&b.verifierFile, "verifier", "", "file with the hex sha256 of the node's enrollment token")
	fs.StringVar(&b.publicURL, "public-url", "", "gateway URL the node connects to (written into the setup code)")
	fs.StringVar(&b.gatewayURL, "gateway", "", "gateway URL the broker's OpenClaw CLI calls (loopback)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b.cli = fs.Args()
	if b.verifierFile == "" || b.publicURL == "" || b.gatewayURL == "" || *state == "" || len(b.cli) == 0 {
		fmt.Fprintln(stderr, "occ-runtime enrollment-broker: --verifier, --public-url, --gateway, --state and the OpenClaw CLI after -- are required")
		return 2
	}
	if os.Getenv("OPENCLAW_GATEWAY_TOKEN") == "" {
		fmt.Fprintln(stderr, "occ-runtime enrollment-broker: OPENCLAW_GATEWAY_TOKEN is not set")
		return 2
	}
	if err := os.MkdirAll(*state, 0o700); err != nil {
		fmt.Fprintf(stderr, "occ-runtime enrollment-broker: %v\n", err)
		return 1
	}
	b.stateFile = filepath.Join(*state, "enrollment.json")
	b.env = os.Environ()
	if raw, err := os.ReadFile(b.stateFile); err == nil {
		_ = json.Unmarshal(raw, &b.st)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var stoppedBy atomic.Value
	go func() {
		s := <-sigs
		stoppedBy.Store(s)
		cancel()
	}()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "occ-runtime enrollment-broker: %v\n", err)
		return 1
	}
	if b.st.SetupID != "" {
		b.watch(ctx)
	}
	srv := &http.Server{Handler: b.handler(ctx), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	b.record("listening", "")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "occ-runtime enrollment-broker: %v\n", err)
		return 1
	}
	if s, ok := stoppedBy.Load().(os.Signal); ok {
		return exitFor(s)
	}
	return 0
}

func (b *broker) handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if b.ready.Load() {
			writeJSON(w, http.StatusOK, map[string]any{"ready": true})
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "waiting": "the node has not paired and connected yet"})
	})
	mux.HandleFunc(enrollment.Path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "POST only"})
			return
		}
		status, body := b.enroll(ctx, r)
		writeJSON(w, status, body)
	})
	return mux
}

// enroll answers one redemption; the answers' reasons are a closed set.
func (b *broker) enroll(ctx context.Context, r *http.Request) (int, any) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	verifier, err := os.ReadFile(b.verifierFile)
	if !ok || err != nil || !enrollment.Verify(strings.TrimSpace(token), string(verifier)) {
		b.record("refused", "")
		return http.StatusForbidden, map[string]string{"error": "the enrollment target is not this gateway's"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st.SetupID != "" && b.st.DeviceID == "" {
		if dev, _ := b.completedDevice(ctx, b.st.SetupID); dev != "" {
			b.st.DeviceID = dev
			b.save()
		}
	}
	if b.st.DeviceID != "" {
		b.record("spent", "")
		return http.StatusConflict, map[string]string{"error": "the enrollment target is spent: a node has enrolled with it"}
	}
	if b.st.SetupCode != "" && b.now().Add(reissueMargin).Before(time.UnixMilli(b.st.ExpiresAtMs)) {
		b.record("reissued", "")
		return http.StatusOK, enrollment.Issued{SetupCode: b.st.SetupCode}
	}
	var out struct {
		SetupID     string `json:"setupId"`
		SetupCode   string `json:"setupCode"`
		ExpiresAtMs int64  `json:"expiresAtMs"`
		Access      string `json:"access"`
	}
	params, _ := json.Marshal(map[string]any{"bootstrapProfile": "node", "includeQr": false, "publicUrl": b.publicURL})
	if err := b.call(ctx, "device.pair.setupCode", string(params), &out); err != nil || out.SetupCode == "" || out.SetupID == "" {
		b.record("unavailable", "the gateway did not issue a setup code")
		return http.StatusServiceUnavailable, map[string]string{"error": "the gateway is not ready to issue a setup code"}
	}
	if out.Access != "node" {
		// Only the node profile: no operator role for the node (ND2).
		b.record("refused", "the gateway issued a setup code beyond the node profile")
		return http.StatusBadGateway, map[string]string{"error": "the gateway issued a setup code beyond the node profile"}
	}
	b.st = brokerState{SetupID: out.SetupID, SetupCode: out.SetupCode, ExpiresAtMs: out.ExpiresAtMs}
	b.save()
	b.record("issued", "")
	b.watch(ctx)
	return http.StatusOK, enrollment.Issued{SetupCode: out.SetupCode}
}

// watch starts, once, the wait for the enrolled device to pair and connect.
func (b *broker) watch(ctx context.Context) {
	if b.watching {
		return
	}
	b.watching = true
	go func() {
		for ctx.Err() == nil {
			if b.pairedAndConnected(ctx) {
				b.ready.Store(true)
				b.record("paired", "")
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(b.pollEvery):
			}
		}
	}()
}

func (b *broker) pairedAndConnected(ctx context.Context) bool {
	b.mu.Lock()
	setupID, dev := b.st.SetupID, b.st.DeviceID
	b.mu.Unlock()
	if dev == "" {
		dev, _ = b.completedDevice(ctx, setupID)
		if dev == "" {
			return false
		}
		b.mu.Lock()
		if b.st.SetupID == setupID {
			b.st.DeviceID = dev
			b.save()
		}
		b.mu.Unlock()
	}
	var node struct {
		Paired    bool `json:"paired"`
		Connected bool `json:"connected"`
	}
	params, _ := json.Marshal(map[string]string{"nodeId": dev})
	return b.call(ctx, "node.describe", string(params), &node) == nil && node.Paired && node.Connected
}

// completedDevice is the device that paired with setup setupID, or "".
func (b *broker) completedDevice(ctx context.Context, setupID string) (string, error) {
	var st struct {
		Completion *struct {
			DeviceID string `json:"deviceId"`
		} `json:"completion"`
		DeliveryUncertain *struct {
			DeviceID string `json:"deviceId"`
		} `json:"deliveryUncertain"`
	}
	params, _ := json.Marshal(map[string]string{"setupId": setupID})
	if err := b.call(ctx, "device.pair.setupStatus", string(params), &st); err != nil {
		return "", err
	}
	switch {
	case st.Completion != nil:
		return st.Completion.DeviceID, nil
	case st.DeliveryUncertain != nil:
		return st.DeliveryUncertain.DeviceID, nil
	}
	return "", nil
}

// call runs one gateway RPC through the OpenClaw CLI: the gateway on
// loopback (OPENCLAW_GATEWAY_URL), its token from OPENCLAW_GATEWAY_TOKEN,
// never on a command line.
func (b *broker) call(ctx context.Context, method, params string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	argv := append(append([]string{}, b.cli[1:]...), "gateway", "call", method, "--json", "--params", params)
	cmd := exec.CommandContext(ctx, b.cli[0], argv...)
	cmd.Env = append(append([]string{}, b.env...), "OPENCLAW_GATEWAY_URL="+b.gatewayURL)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	return json.Unmarshal(out, into)
}

func (b *broker) save() {
	raw, _ := json.Marshal(b.st)
	tmp := b.stateFile + ".tmp"
	if os.WriteFile(tmp, raw, 0o600) == nil {
		_ = os.Rename(tmp, b.stateFile)
	}
}

// record logs one broker event: closed outcomes, no token, no setup code.
func (b *broker) record(outcome, detail string) {
	rec := map[string]any{"time": b.now().UTC().Format(time.RFC3339Nano), "event": "occ.node_enrollment", "outcome": outcome}
	if detail != "" {
		rec["detail"] = detail
	}
	line, _ := json.Marshal(rec)
	b.logMu.Lock()
	defer b.logMu.Unlock()
	fmt.Fprintf(b.log, "%s\n", line)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
