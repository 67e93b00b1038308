// Package enrollment is the contract of a native OpenClaw node's one-use
// enrollment (rule ND2), shared by the executor that writes it
// (internal/kube), render that mounts it (internal/render), the node's
// startup wrapper that redeems it (internal/startup) and the enrollment
// broker beside the gateway that honours it (cmd/occ-runtime). It is pure:
// names, the file format and the digest.
//
// How OpenClaw 2026.9.6 enrolls a node, and why the platform needs a
// broker: a node joins with `openclaw connect --ephemeral --target-file F`,
// F holding a setup code (base64url JSON of the gateway URL and a bootstrap
// token). Only the gateway issues bootstrap tokens (RPC
// device.pair.setupCode, operator.admin); it keeps each one in its own
// state, valid 10 minutes and spent by the first device that pairs with
// it. A token of the node profile ("bootstrapProfile": "node") approves the
// device and its first command surface at once (approvedVia "bootstrap"):
// no human, no trusted network. OpenClaw has no configuration that takes a
// platform-made token or a digest of one. So the platform's one-use secret
// is a Target: the node holds it (a private file), the gateway Pod holds
// only its digest (the verifier), and the broker in the gateway Pod issues
// one node setup code to whoever presents the secret.
package enrollment

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
)

// The broker's endpoint.
const (
	// Port is where the broker listens in the gateway Pod.
	Port = 18791
	// Path redeems a Target: POST with "Authorization: Bearer <token>".
	Path = "/v1/enroll"
)

// Environment of the node container, read by its startup wrapper.
const (
	// EnvFile names the enrollment Target (the Secret's file, read-only).
	EnvFile = "OCC_ENROLLMENT_FILE"
	// EnvConnectTarget names the file `openclaw connect --target-file`
	// consumes: the wrapper writes the setup code there, private (0600),
	// before every start; OpenClaw removes it after reading.
	EnvConnectTarget = "OCC_CONNECT_TARGET"
)

// IssuedSuffix names, beside the connect target, the setup code the node
// was issued: a restarted node container hands it to OpenClaw again, which
// then reconnects with the device token it saved instead of pairing anew.
const IssuedSuffix = ".issued"

// Target is the content of a node's enrollment file: the broker to redeem
// it at and the one-use secret.
type Target struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// Encode is the file content.
func (t Target) Encode() ([]byte, error) { return json.Marshal(t) }

// Decode reads an enrollment file.
func Decode(b []byte) (Target, error) {
	var t Target
	if err := json.Unmarshal(b, &t); err != nil {
		return Target{}, errors.New("enrollment: the target file is not an enrollment target")
	}
	if t.URL == "" || t.Token == "" {
		return Target{}, errors.New("enrollment: the target file has no broker URL or no token")
	}
	return t, nil
}

// Digest is the verifier of a token: hex sha256.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Verify reports, in constant time, whether token matches the verifier.
func Verify(token, verifier string) bool {
	if token == "" {
		return false
	}
	want, err := hex.DecodeString(strings.TrimSpace(verifier))
	if err != nil || len(want) != sha256.Size {
		return false
	}
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], want) == 1
}

// Issued is the broker's answer to a redeemed Target.
type Issued struct {
	// SetupCode is what `openclaw connect --target-file` reads.
	SetupCode string `json:"setupCode"`
}
