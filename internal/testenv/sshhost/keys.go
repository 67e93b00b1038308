// Package sshhost starts real SSH servers for tests, on loopback only:
//
//   - StartSystemdHost boots the cached Debian rootfs (built by
//     `make testenv-ssh`, testenv/ssh.sh) with systemd-nspawn: a real systemd
//     as PID 1, a real sshd on a free loopback port with a host key generated
//     for this start, a client key authorized for root and for the non-root
//     operator `occ` (passwordless sudo), and OpenClaw under /opt/openclaw.
//   - StartPlainSSHD runs the machine's own sshd in the foreground from a
//     private configuration (no systemd): fast protocol tests. NewCutProxy puts
//     a TCP proxy in front of any address that can cut connections after a
//     number of bytes, to test a connection dropped mid-transfer.
//
// Everything is stopped by PID; the *T variants register t.Cleanup so a test
// that fails half-way leaves nothing running, and skip (or, under CI, fail
// with the backend's log tail) when the backend cannot start.
package sshhost

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"strings"

	"golang.org/x/crypto/ssh"
)

// KeyPair is an ed25519 key in the forms tests and sshd need.
type KeyPair struct {
	Signer ssh.Signer
	// PrivatePEM is the private key in OpenSSH PEM format
	// ("-----BEGIN OPENSSH PRIVATE KEY-----"), as ssh-keygen writes it.
	PrivatePEM []byte
	// AuthorizedKey is the public key as one authorized_keys / known_hosts
	// line without host or options: "ssh-ed25519 AAAA...".
	AuthorizedKey string
}

// PublicKey returns the key pair's public key.
func (k *KeyPair) PublicKey() ssh.PublicKey { return k.Signer.PublicKey() }

// Fingerprint returns the SHA256 fingerprint ("SHA256:...").
func (k *KeyPair) Fingerprint() string { return ssh.FingerprintSHA256(k.Signer.PublicKey()) }

// NewKeyPair generates a fresh ed25519 key pair.
func NewKeyPair(comment string) (*KeyPair, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		Signer:        signer,
		PrivatePEM:    pem.EncodeToMemory(block),
		AuthorizedKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))),
	}, nil
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago (the kernel picks it; the race with other processes is small).
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
