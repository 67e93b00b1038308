package startup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/enrollment"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// EnrollWait bounds how long a native node waits for its gateway's broker
// to issue a setup code: the gateway's own start and, at worst, the setup
// code's lifetime in OpenClaw (10 minutes).
var EnrollWait = 10 * time.Minute

// enrollRetry is the pause between attempts while the broker is not
// reachable or not ready yet.
const enrollRetry = 2 * time.Second

// enrollNode is the peer status of a native OpenClaw node: it obtains its
// setup code from the gateway (rule ND2). The one-use enrollment target is
// read from its private file and redeemed at the broker beside the
// gateway; the setup code it issues is written, private, where `openclaw
// connect --target-file` consumes it. A restarted container writes the
// code it was issued again (OpenClaw then reconnects with its saved device
// token). Any other container skips this phase.
func (s *run) enrollNode(ctx context.Context) (runtimerecord.Outcome, *runtimerecord.Record, error) {
	src, dst := s.o.Getenv(enrollment.EnvFile), s.o.Getenv(enrollment.EnvConnectTarget)
	if s.o.Harness != HarnessOpenClaw || src == "" || dst == "" {
		return runtimerecord.OutcomeSkipped, nil, nil
	}
	failed := func(msg string) (runtimerecord.Outcome, *runtimerecord.Record, error) {
		return runtimerecord.OutcomeFailed, nil, errors.New("startup: node enrollment: " + msg)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return failed("the connect target's directory cannot be created")
	}
	issued := dst + enrollment.IssuedSuffix
	code, err := os.ReadFile(issued)
	if err != nil {
		b, err := os.ReadFile(src)
		if err != nil {
			return failed("the enrollment target file cannot be read")
		}
		t, err := enrollment.Decode(b)
		if err != nil {
			return failed(err.Error())
		}
		setup, err := redeem(ctx, t)
		if errors.Is(err, ErrStopped) {
			return runtimerecord.OutcomeFailed, nil, err
		}
		if err != nil {
			return failed(err.Error())
		}
		code = []byte(setup)
		if err := writePrivate(issued, code); err != nil {
			return failed("the issued setup code cannot be kept")
		}
	}
	if err := writePrivate(dst, code); err != nil {
		return failed("the connect target cannot be written")
	}
	return runtimerecord.OutcomeOK, nil, nil
}

// redeem presents the target's token to the broker until it answers: a
// setup code, or a refusal. An unreachable or not yet ready broker (the
// gateway is still starting) is retried for EnrollWait.
func redeem(ctx context.Context, t enrollment.Target) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, EnrollWait)
	defer cancel()
	client := &http.Client{Timeout: 90 * time.Second}
	last := "the gateway's enrollment broker did not answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, nil)
		if err != nil {
			return "", errors.New("the enrollment target's broker URL is invalid")
		}
		req.Header.Set("Authorization", "Bearer "+t.Token)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				var is enrollment.Issued
				if json.Unmarshal(body, &is) != nil || strings.TrimSpace(is.SetupCode) == "" {
					return "", errors.New("the enrollment broker answered without a setup code")
				}
				return is.SetupCode, nil
			case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusConflict:
				// Never retried: the secret is wrong or already spent.
				return "", fmt.Errorf("the gateway refused the enrollment target (HTTP %d): %s", resp.StatusCode, brokerReason(body))
			default:
				last = fmt.Sprintf("the enrollment broker answered HTTP %d: %s", resp.StatusCode, brokerReason(body))
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return "", fmt.Errorf("no setup code within %v: %s", EnrollWait, last)
			}
			return "", ErrStopped
		case <-time.After(enrollRetry):
		}
	}
}

// brokerReason is the broker's one-line reason, from its closed set.
func brokerReason(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return "no reason given"
	}
	return e.Error
}

func writePrivate(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, bytes.TrimSpace(b), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
