package sshexec

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// runOK runs a trivial command over a pooled connection to t.
func runOK(t *testing.T, pool *Pool, tg Target) {
	t.Helper()
	c, err := pool.Get(ctxT(t, 30*time.Second), tg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunOK(ctxT(t, 30*time.Second), "check", "true", nil); err != nil {
		t.Fatal(err)
	}
}

// A host reached through a bastion (ProxyJump): the provider logs in to
// the bastion with its own credentials, opens a TCP channel from there to
// the host and verifies the host's key inside it. The bastion's log shows
// the login and the forwarded channel; a bastion whose key is not the
// configured one is HOST_KEY_MISMATCH naming bastion.host_key, and a host
// the bastion cannot reach is UNAVAILABLE naming the bastion.
func TestBastion_ReachesTheHostThroughTheJumpHost(t *testing.T) {
	host, tg, pool := plainSSHD(t, "")
	bastion := sshhost.StartPlainSSHDT(t, sshhost.PlainSSHDOptions{})
	// The bastion admits the same client key as the host.
	if err := os.WriteFile(filepath.Join(bastion.Dir, "authorized_keys"), []byte(host.ClientKeys.AuthorizedKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := targetOf(t, bastion.Addr, bastion.User, bastion.HostKey)
	tg.Bastion = &Hop{Host: b.Host, Port: b.Port, HostKey: bastion.HostKey}
	runOK(t, pool, tg)
	log := bastion.LogTail(200)
	if !strings.Contains(log, "Accepted publickey for "+bastion.User) {
		t.Errorf("the bastion logged no login:\n%s", log)
	}

	// A wrong bastion key is refused before anything reaches the host.
	other, err := sshhost.NewKeyPair("other")
	if err != nil {
		t.Fatal(err)
	}
	bad := tg
	bad.Bastion = &Hop{Host: b.Host, Port: b.Port, HostKey: other.AuthorizedKey}
	_, err = pool.Get(ctxT(t, 20*time.Second), bad)
	var e *Error
	if !errors.As(err, &e) || e.Code != executor.HostKeyMismatch || !strings.Contains(err.Error(), "bastion.host_key") || e.Addr != bastion.Addr {
		t.Fatalf("wrong bastion key: %v, want %s naming bastion.host_key at %s", err, executor.HostKeyMismatch, bastion.Addr)
	}

	// A host the bastion cannot reach.
	gone := tg
	gone.Port = 1
	_, err = pool.Get(ctxT(t, 20*time.Second), gone)
	if !errors.As(err, &e) || e.Code != executor.Unavailable || !strings.Contains(err.Error(), "the bastion "+bastion.Addr+" could not open a connection") {
		t.Fatalf("unreachable behind the bastion: %v", err)
	}
}

// Several pinned host keys (a rotation): the host must present one of
// them; a mismatch names every fingerprint.
func TestHostKeys_AnyOfSeveral(t *testing.T) {
	s, tg, pool := plainSSHD(t, "")
	old, err := sshhost.NewKeyPair("old")
	if err != nil {
		t.Fatal(err)
	}
	tg.HostKey = old.AuthorizedKey + "\n" + s.HostKey + "\n"
	runOK(t, pool, tg)
	tg.HostKey = old.AuthorizedKey + "\n"
	_, err = pool.Get(ctxT(t, 20*time.Second), tg)
	var e *Error
	if !errors.As(err, &e) || e.Code != executor.HostKeyMismatch {
		t.Fatalf("err = %v, want %s", err, executor.HostKeyMismatch)
	}
}

// A passphrase-protected private key logs in with its passphrase; a wrong
// or missing passphrase, or one given for a key that has none, is a
// settings error that quotes neither key nor passphrase.
func TestPassphraseProtectedKey(t *testing.T) {
	s, tg, _ := plainSSHD(t, "")
	const passphrase = "correct horse battery"
	key, signer := newEncryptedKey(t, passphrase)
	if err := os.WriteFile(filepath.Join(s.Dir, "authorized_keys"), ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := NewPool(Credentials{PrivateKey: key, Passphrase: passphrase}, Options{})
	defer ok.Close()
	runOK(t, ok, tg)
	cases := []struct {
		name  string
		creds Credentials
		want  string
	}{
		{"a wrong passphrase", Credentials{PrivateKey: key, Passphrase: "wrong " + passphrase}, "does not decrypt"},
		{"no passphrase", Credentials{PrivateKey: key}, "private_key_passphrase"},
		{"a passphrase for a key without one", Credentials{PrivateKey: string(s.ClientKey), Passphrase: passphrase}, "not protected by a passphrase"},
	}
	for _, tc := range cases {
		pool := NewPool(tc.creds, Options{})
		_, err := pool.Get(ctxT(t, 20*time.Second), tg)
		pool.Close()
		var e *Error
		if !errors.As(err, &e) || e.Code != executor.InvalidRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, executor.InvalidRequest, tc.want)
			continue
		}
		if strings.Contains(err.Error(), passphrase) || strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes a secret: %v", tc.name, err)
		}
	}
}

// A user certificate signed by a CA the host trusts (TrustedUserCAKeys)
// logs in with a key the host's authorized_keys does not list; without the
// certificate the same key is refused; a certificate of another key, or a
// host certificate, is a settings error.
func TestUserCertificate(t *testing.T) {
	dir := t.TempDir()
	_, caPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ssh.NewSignerFromKey(caPriv)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pub")
	if err := os.WriteFile(caFile, ssh.MarshalAuthorizedKey(ca.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, tg, _ := plainSSHD(t, "TrustedUserCAKeys "+caFile)
	key, signer := newEncryptedKey(t, "")
	sign := func(pub ssh.PublicKey, typ uint32) string {
		cert := &ssh.Certificate{Key: pub, CertType: typ, KeyId: "occ-test", ValidPrincipals: []string{s.User},
			ValidAfter: uint64(time.Now().Add(-time.Minute).Unix()), ValidBefore: ssh.CertTimeInfinity}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		return string(ssh.MarshalAuthorizedKey(cert))
	}
	withCert := NewPool(Credentials{PrivateKey: key, Certificate: sign(signer.PublicKey(), ssh.UserCert)}, Options{})
	defer withCert.Close()
	runOK(t, withCert, tg)

	bare := NewPool(Credentials{PrivateKey: key}, Options{})
	defer bare.Close()
	_, err = bare.Get(ctxT(t, 20*time.Second), tg)
	var e *Error
	if !errors.As(err, &e) || e.Code != executor.AuthRefused {
		t.Fatalf("the bare key: %v, want %s", err, executor.AuthRefused)
	}
	_, otherSigner := newEncryptedKey(t, "")
	for name, cert := range map[string]string{
		"another key's certificate": sign(otherSigner.PublicKey(), ssh.UserCert),
		"a host certificate":        sign(signer.PublicKey(), ssh.HostCert),
		"a plain public key":        string(ssh.MarshalAuthorizedKey(signer.PublicKey())),
	} {
		pool := NewPool(Credentials{PrivateKey: key, Certificate: cert}, Options{})
		_, err := pool.Get(ctxT(t, 20*time.Second), tg)
		pool.Close()
		if !errors.As(err, &e) || e.Code != executor.InvalidRequest || !strings.Contains(err.Error(), "ssh.certificate") {
			t.Errorf("%s: %v, want %s naming ssh.certificate", name, err, executor.InvalidRequest)
		}
	}
}

// newEncryptedKey returns a fresh ed25519 key, its OpenSSH PEM encrypted
// with passphrase, and its signer.
func newEncryptedKey(t *testing.T, passphrase string) (string, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), signer
}
