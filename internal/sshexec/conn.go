package sshexec

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	skeemaknownhosts "github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// Target is one host and how to log in to it.
type Target struct {
	Host string
	Port int
	User string
	// HostKey is the host's public key as an authorized_keys line
	// ("ssh-ed25519 AAAA…"). It is what the host must present.
	HostKey string
	// KnownHostsFile is used when HostKey is empty (an imported agent whose
	// compute is not known yet): the host must be in it.
	KnownHostsFile string
	// InsecureIgnoreHostKey accepts any host key. Only when asked.
	InsecureIgnoreHostKey bool
	// Bastion, when set, is the jump host the connection goes through
	// (as OpenSSH's ProxyJump): the provider logs in to it with the same
	// credentials and opens a TCP channel from it to Addr.
	Bastion *Hop
}

// Hop is a jump host. HostKey holds one or more public keys in
// authorized_keys form, one per line; the host must present one of them.
type Hop struct {
	Host    string
	Port    int
	User    string
	HostKey string
}

// Addr is host:port.
func (h Hop) Addr() string {
	return Target{Host: h.Host, Port: h.Port}.Addr()
}

// Addr is host:port.
func (t Target) Addr() string {
	port := t.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(port))
}

func (t Target) key() string {
	parts := []string{t.User, t.Addr(), strings.Join(strings.Fields(t.HostKey), " "), t.KnownHostsFile, strconv.FormatBool(t.InsecureIgnoreHostKey)}
	if b := t.Bastion; b != nil {
		parts = append(parts, "via", b.User, b.Addr(), strings.Join(strings.Fields(b.HostKey), " "))
	}
	return strings.Join(parts, "|")
}

// Credentials are the provider's client credentials.
type Credentials struct {
	// PrivateKey is a PEM or OpenSSH private key, protected by Passphrase
	// when that is set.
	PrivateKey string
	Passphrase string
	// Certificate is an OpenSSH user certificate of PrivateKey's public
	// key ("ssh-ed25519-cert-v01@openssh.com AAAA…"), offered instead of
	// the bare key, for hosts that trust a user CA.
	Certificate string
	// Agent authenticates with the SSH agent at AgentSocket (default
	// $SSH_AUTH_SOCK).
	Agent       bool
	AgentSocket string
}

// Options tune a Pool. The zero value is fine.
type Options struct {
	// MaxSessions bounds the sessions (commands) one connection runs at
	// once; OpenSSH allows 10 per connection by default. Default 8.
	MaxSessions int
	// KeepAlive is the interval of keepalive requests; a connection that
	// does not answer one within the same interval is closed. Default 15 s.
	KeepAlive time.Duration
	// IdleTimeout closes a connection that ran nothing for that long.
	// Default 2 minutes.
	IdleTimeout time.Duration
	// ConnectTimeout caps the TCP connect and the SSH handshake (the
	// context may end them earlier). Default 30 s.
	ConnectTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxSessions <= 0 {
		o.MaxSessions = 8
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	return o
}

// Pool holds one connection per target, reused by every operation on that
// host within the process.
type Pool struct {
	creds Credentials
	opts  Options

	mu      sync.Mutex
	entries map[string]*poolEntry
	closed  bool

	authOnce sync.Once
	auth     []ssh.AuthMethod
	authErr  error
	offered  []string // fingerprints of the client keys offered
}

type poolEntry struct {
	mu   sync.Mutex // held while dialing, so concurrent users share one dial
	conn *Conn
}

// NewPool returns a pool that logs in with creds.
func NewPool(creds Credentials, opts Options) *Pool {
	return &Pool{creds: creds, opts: opts.withDefaults(), entries: map[string]*poolEntry{}}
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	entries := p.entries
	p.entries = map[string]*poolEntry{}
	p.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		if e.conn != nil {
			e.conn.Close()
		}
		e.mu.Unlock()
	}
	return nil
}

// Get returns the connection to t, dialing it when there is none or the
// previous one died. ctx bounds the dial only.
func (p *Pool) Get(ctx context.Context, t Target) (*Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &Error{Code: executor.InvalidRequest, Addr: t.Addr(), User: t.User, Op: "connect", Err: errors.New("the connection pool is closed")}
	}
	e := p.entries[t.key()]
	if e == nil {
		e = &poolEntry{}
		p.entries[t.key()] = e
	}
	p.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil && e.conn.alive() {
		return e.conn, nil
	}
	c, err := p.dial(ctx, t)
	if err != nil {
		return nil, err
	}
	e.conn = c
	return c, nil
}

func (p *Pool) authMethods() ([]ssh.AuthMethod, []string, error) {
	p.authOnce.Do(func() {
		signer, err := signerOf(p.creds)
		if err != nil {
			p.authErr = err
			return
		}
		if signer != nil {
			p.auth = append(p.auth, ssh.PublicKeys(signer))
			p.offered = append(p.offered, ssh.FingerprintSHA256(signer.PublicKey()))
		}
		if p.creds.Agent {
			sock := p.creds.AgentSocket
			if sock == "" {
				sock = os.Getenv("SSH_AUTH_SOCK")
			}
			if sock == "" {
				sock = defaultAgentSocket // "" where there is none (Unix: the agent sets SSH_AUTH_SOCK)
			}
			if sock == "" {
				p.authErr = errors.New("agent = true, but SSH_AUTH_SOCK is not set")
				return
			}
			conn, err := dialAgent(sock)
			if err != nil {
				p.authErr = fmt.Errorf("cannot reach the SSH agent at %s: %v", sock, err)
				return
			}
			ag := agent.NewClient(conn)
			if keys, err := ag.List(); err == nil {
				for _, k := range keys {
					p.offered = append(p.offered, ssh.FingerprintSHA256(k))
				}
			}
			p.auth = append(p.auth, ssh.PublicKeysCallback(ag.Signers))
		}
		if len(p.auth) == 0 {
			p.authErr = errors.New("no SSH credentials: set private_key, or agent = true, in the provider's ssh block")
		}
	})
	return p.auth, p.offered, p.authErr
}

// CredentialError is a provider ssh setting that cannot be used;
// Setting names it ("private_key", "private_key_passphrase",
// "certificate"). It quotes neither the key nor the passphrase.
type CredentialError struct {
	Setting string
	Err     error
}

func (e *CredentialError) Error() string { return e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

// CheckCredentials checks, without contacting any host, that the private
// key parses (with its passphrase) and that the certificate certifies it;
// a failure is a *CredentialError.
func CheckCredentials(c Credentials) error {
	_, err := signerOf(c)
	return err
}

// signerOf is the signer of the credentials' private key, offering the
// certificate when there is one; nil without a private key.
func signerOf(c Credentials) (ssh.Signer, error) {
	k := strings.TrimSpace(c.PrivateKey)
	if k == "" {
		if strings.TrimSpace(c.Certificate) != "" {
			return nil, &CredentialError{"certificate", errors.New("ssh.certificate is set without ssh.private_key: the certificate signs the private key's public half; set both")}
		}
		return nil, nil
	}
	signer, err := parseSigner(k, c.Passphrase)
	if err == nil && strings.TrimSpace(c.Certificate) != "" {
		signer, err = certSigner(signer, c.Certificate)
	}
	return signer, err
}

// parseSigner reads a private key, with its passphrase when it has one.
// No error quotes the key or the passphrase.
func parseSigner(key, passphrase string) (ssh.Signer, error) {
	if passphrase != "" {
		signer, err := ssh.ParsePrivateKeyWithPassphrase([]byte(key), []byte(passphrase))
		switch {
		case errors.Is(err, x509.IncorrectPasswordError):
			return nil, &CredentialError{"private_key_passphrase", errors.New("ssh.private_key_passphrase does not decrypt ssh.private_key: check the passphrase")}
		case err != nil && (strings.Contains(err.Error(), "not password protected") || strings.Contains(err.Error(), "not an encrypted key")):
			return nil, &CredentialError{"private_key_passphrase", errors.New("ssh.private_key is not protected by a passphrase: remove ssh.private_key_passphrase")}
		case err != nil:
			return nil, &CredentialError{"private_key", fmt.Errorf("the private key cannot be parsed: %v", err)}
		}
		return signer, nil
	}
	signer, err := ssh.ParsePrivateKey([]byte(key))
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, &CredentialError{"private_key_passphrase", errors.New("the private key is protected by a passphrase: set ssh.private_key_passphrase, or load the key into an SSH agent and set agent = true")}
	case err != nil:
		return nil, &CredentialError{"private_key", fmt.Errorf("the private key cannot be parsed: %v", err)}
	}
	return signer, nil
}

// certSigner offers an OpenSSH user certificate with the key it certifies.
func certSigner(signer ssh.Signer, line string) (ssh.Signer, error) {
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, &CredentialError{"certificate", fmt.Errorf("ssh.certificate is not an OpenSSH certificate line (\"ssh-ed25519-cert-v01@openssh.com AAAA…\", the content of id_ed25519-cert.pub): %v", err)}
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, &CredentialError{"certificate", errors.New("ssh.certificate is a plain public key, not a certificate: give the -cert.pub file that ssh-keygen -s wrote")}
	}
	if cert.CertType != ssh.UserCert {
		return nil, &CredentialError{"certificate", errors.New("ssh.certificate is a host certificate; the provider logs in with a user certificate (ssh-keygen -s without -h)")}
	}
	cs, err := ssh.NewCertSigner(cert, signer)
	if err != nil {
		return nil, &CredentialError{"certificate", fmt.Errorf("ssh.certificate does not certify ssh.private_key's public key: %v", err)}
	}
	return cs, nil
}

// hostKeyCheck returns the host key callback for t and the host key
// algorithms to ask for. mismatch receives a mismatch the callback saw.
func hostKeyCheck(t Target, mismatch *Error) (ssh.HostKeyCallback, []string, error) {
	switch {
	case t.InsecureIgnoreHostKey:
		return ssh.InsecureIgnoreHostKey(), nil, nil
	case strings.TrimSpace(t.HostKey) != "":
		return pinnedKeys(t.HostKey, mismatch)
	case t.KnownHostsFile != "":
		db, err := skeemaknownhosts.NewDB(t.KnownHostsFile)
		if err != nil {
			return nil, nil, fmt.Errorf("known_hosts file: %v", err)
		}
		kh := db.HostKeyCallback()
		cb := func(host string, remote net.Addr, got ssh.PublicKey) error {
			err := kh(host, remote, got)
			var ke *knownhosts.KeyError
			var re *knownhosts.RevokedError
			if errors.As(err, &re) {
				*mismatch = Error{Code: executor.HostKeyMismatch, Got: ssh.FingerprintSHA256(got), KeySetting: "the known_hosts file " + t.KnownHostsFile, Revoked: true}
				return mismatch
			}
			if errors.As(err, &ke) {
				if len(ke.Want) == 0 {
					return fmt.Errorf("the host is not in %s; add its key (ssh-keyscan, checked against the host) or import after the compute is in state", t.KnownHostsFile)
				}
				*mismatch = Error{Code: executor.HostKeyMismatch, Want: ssh.FingerprintSHA256(ke.Want[0].Key), Got: ssh.FingerprintSHA256(got), KeySetting: "the known_hosts file " + t.KnownHostsFile}
				return mismatch
			}
			return err
		}
		// Ask the host for the key types the file holds for it (its
		// @cert-authority's certificates included): a host recorded only
		// by its ssh-ed25519 line must not be asked for its ECDSA key
		// first and then called a mismatch. Nil (the host is not in the
		// file): the client's defaults, and the callback says so.
		return cb, recordedAlgorithms(db, t.Addr()), nil
	}
	return nil, nil, errors.New("no host key to verify the host with: set the compute's ssh.host_key")
}

// recordedAlgorithms are the host key algorithms to ask addr for: those
// of the keys the file records for it, and, when a @cert-authority line
// matches it, every certificate algorithm: a CA of one key type signs
// host keys of any type, and the library derives the certificate
// algorithm from the CA's own type only.
func recordedAlgorithms(db *skeemaknownhosts.HostKeyDB, addr string) []string {
	algos := db.HostKeyAlgorithms(addr)
	if !slices.ContainsFunc(db.HostKeys(addr), func(k skeemaknownhosts.PublicKey) bool { return k.Cert }) {
		return algos
	}
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		if strings.HasSuffix(a, "-cert-v01@openssh.com") && !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	return algos
}

// ParseHostKey reads one host_key line: an authorized_keys line
// ("ssh-ed25519 AAAA… comment") or, as ssh-keyscan writes it, a
// known_hosts line with the host in front. A known_hosts line with a
// marker is refused: "@revoked" names a key that must never be accepted,
// and "@cert-authority" a CA that signs host keys, not the host's key.
func ParseHostKey(line string) (ssh.PublicKey, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err == nil {
		return k, nil
	}
	marker, _, k, _, _, kerr := ssh.ParseKnownHosts([]byte(line))
	switch {
	case kerr != nil:
		return nil, fmt.Errorf("host_key is not a public key line (\"ssh-ed25519 AAAA…\"): %v", err)
	case marker != "":
		return nil, fmt.Errorf("host_key holds a known_hosts line marked @%s: a %s key is not the host's key; give the key the host presents, without the marker", marker, marker)
	}
	return k, nil
}

// pinnedKeys verifies a host against one or more public keys, one
// authorized_keys line each (several while a host's key is rotated): the
// host must present one of them.
func pinnedKeys(lines string, mismatch *Error) (ssh.HostKeyCallback, []string, error) {
	var want []ssh.PublicKey
	var algos []string
	for _, line := range strings.Split(lines, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, err := ParseHostKey(line)
		if err != nil {
			return nil, nil, err
		}
		want = append(want, k)
		for _, a := range algorithmsFor(k.Type()) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	cb := func(_ string, _ net.Addr, got ssh.PublicKey) error {
		for _, k := range want {
			if bytes.Equal(got.Marshal(), k.Marshal()) {
				return nil
			}
		}
		fps := make([]string, len(want))
		for i, k := range want {
			fps[i] = ssh.FingerprintSHA256(k)
		}
		*mismatch = Error{Code: executor.HostKeyMismatch, Want: strings.Join(fps, " or "), Got: ssh.FingerprintSHA256(got)}
		return mismatch
	}
	return cb, algos, nil
}

// algorithmsFor lists the host key algorithms that verify a key type.
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

func (p *Pool) dial(ctx context.Context, t Target) (*Conn, error) {
	fail := func(code executor.Code, err error) error {
		return &Error{Code: code, Addr: t.Addr(), User: t.User, Op: "connect", Err: err}
	}
	if t.User == "" {
		return nil, fail(executor.InvalidRequest, errors.New("no SSH user: set ssh.user in the provider or in the compute"))
	}
	if t.Host == "" {
		return nil, fail(executor.InvalidRequest, errors.New("no host"))
	}
	auth, offered, err := p.authMethods()
	if err != nil {
		return nil, fail(executor.InvalidRequest, err)
	}
	// Settings errors before any connection: the host's key, and the
	// bastion's.
	host, err := newHop(t, "connect", "")
	if err != nil {
		return nil, err
	}
	var jumpHop *hop
	if b := t.Bastion; b != nil {
		bt := Target{Host: b.Host, Port: b.Port, User: b.User, HostKey: b.HostKey}
		if bt.User == "" {
			bt.User = t.User
		}
		if jumpHop, err = newHop(bt, "connect to the bastion", "the compute's bastion.host_key"); err != nil {
			return nil, err
		}
	}
	dctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	defer cancel()
	var jump *ssh.Client
	var raw net.Conn
	var d net.Dialer
	if jumpHop != nil {
		// ProxyJump: log in to the bastion, then open a TCP channel from
		// it to the host; the host's handshake runs inside that channel.
		tcp, err := d.DialContext(dctx, "tcp", jumpHop.t.Addr())
		if err != nil {
			return nil, jumpHop.fail(executor.Unavailable, err)
		}
		if jump, err = jumpHop.handshake(dctx, tcp, auth, offered); err != nil {
			return nil, err
		}
		raw, err = jump.DialContext(dctx, "tcp", t.Addr())
		if err != nil {
			jump.Close()
			return nil, fail(executor.Unavailable, fmt.Errorf("the bastion %s could not open a connection to the host: %v", jumpHop.t.Addr(), err))
		}
	} else if raw, err = d.DialContext(dctx, "tcp", t.Addr()); err != nil {
		return nil, fail(executor.Unavailable, err)
	}
	client, err := host.handshake(dctx, raw, auth, offered)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		return nil, err
	}
	c := &Conn{target: t, client: client, jump: jump, sem: make(chan struct{}, p.opts.MaxSessions),
		dead: make(chan struct{}), keepAlive: p.opts.KeepAlive, idle: p.opts.IdleTimeout}
	c.touch()
	go func() {
		_ = c.client.Wait()
		c.markDead()
		if jump != nil {
			jump.Close()
		}
	}()
	if jump != nil {
		go func() {
			_ = jump.Wait() // a lost bastion takes the host's connection with it
			c.Close()
		}()
	}
	go c.keepalive()
	return c, nil
}

// hop is one SSH login of a connection (the host, or the bastion before
// it) with its host key check, made once from the settings: op and
// keySetting name it in errors.
type hop struct {
	t              Target
	op, keySetting string
	hostKey        ssh.HostKeyCallback
	algos          []string
	mismatch       *Error // what hostKey saw when it refused
}

// newHop checks t's host key settings; an unusable one is a settings
// error before any connection.
func newHop(t Target, op, keySetting string) (*hop, error) {
	h := &hop{t: t, op: op, keySetting: keySetting, mismatch: &Error{}}
	var err error
	if h.hostKey, h.algos, err = hostKeyCheck(t, h.mismatch); err != nil {
		return nil, h.fail(executor.InvalidRequest, err)
	}
	return h, nil
}

func (h *hop) fail(code executor.Code, err error) error {
	return &Error{Code: code, Addr: h.t.Addr(), User: h.t.User, Op: h.op, Err: err}
}

// handshake runs the SSH handshake of h over raw, within dctx, and
// classifies what fails.
func (h *hop) handshake(dctx context.Context, raw net.Conn, auth []ssh.AuthMethod, offered []string) (*ssh.Client, error) {
	t, fail := h.t, h.fail
	cfg := &ssh.ClientConfig{User: t.User, Auth: auth, HostKeyCallback: h.hostKey, HostKeyAlgorithms: h.algos}
	if dl, ok := dctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(dctx, func() { _ = raw.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(raw, t.Addr(), cfg)
	stopped := stop()
	if err != nil {
		raw.Close()
		switch {
		case h.mismatch.Code == executor.HostKeyMismatch:
			m := h.mismatch
			m.Addr, m.User, m.Op = t.Addr(), t.User, h.op
			if m.KeySetting == "" {
				m.KeySetting = h.keySetting
			}
			return nil, m
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fail(executor.AuthRefused, fmt.Errorf("the host accepted none of the offered keys (%s)", strings.Join(offered, ", ")))
		case !stopped:
			return nil, fail(executor.Unavailable, fmt.Errorf("SSH handshake did not complete: %w", context.Cause(dctx)))
		}
		return nil, fail(executor.Unavailable, err)
	}
	if !stopped {
		cc.Close()
		return nil, fail(executor.Unavailable, fmt.Errorf("SSH handshake did not complete: %w", context.Cause(dctx)))
	}
	_ = raw.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// Conn is one SSH connection to a host.
type Conn struct {
	target    Target
	client    *ssh.Client
	jump      *ssh.Client // the bastion's connection, or nil
	sem       chan struct{}
	dead      chan struct{}
	deadOnce  sync.Once
	active    atomic.Int32
	lastUsed  atomic.Int64
	keepAlive time.Duration
	idle      time.Duration
}

func (c *Conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

func (c *Conn) markDead() { c.deadOnce.Do(func() { close(c.dead) }) }

// Close closes the connection.
func (c *Conn) Close() {
	c.markDead()
	_ = c.client.Close()
	if c.jump != nil {
		_ = c.jump.Close()
	}
}

func (c *Conn) touch() { c.lastUsed.Store(time.Now().UnixNano()) }

// keepalive sends keepalive@openssh.com requests; a connection that does
// not answer, or that has been idle too long, is closed.
func (c *Conn) keepalive() {
	tick := time.NewTicker(c.keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-c.dead:
			return
		case <-tick.C:
		}
		if c.active.Load() == 0 && time.Since(time.Unix(0, c.lastUsed.Load())) > c.idle {
			c.Close()
			return
		}
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		select {
		case err := <-answered:
			if err != nil {
				c.Close()
				return
			}
		case <-time.After(c.keepAlive):
			c.Close()
			return
		case <-c.dead:
			return
		}
	}
}

func (c *Conn) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		c.active.Add(1)
		c.touch()
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *Conn) release() {
	c.touch()
	c.active.Add(-1)
	<-c.sem
}

// Output is a command's outcome.
type Output struct {
	Stdout, Stderr string
	// Exit is the exit status; -1 when the command ended without one.
	Exit int
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// command is the command line that runs script with args under /bin/sh,
// through passwordless sudo unless the user is root.
func (c *Conn) command(script string, args []string) string {
	var b strings.Builder
	if c.target.User != "root" {
		b.WriteString("sudo -n -- ")
	}
	b.WriteString("/bin/sh -c ")
	b.WriteString(shQuote(script))
	b.WriteString(" occ")
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(shQuote(a))
	}
	return b.String()
}

// Run runs script with args as root (sudo -n when the user is not root),
// stdin may be nil. A non-zero exit is in Output.Exit, not an error; the
// error is for a lost connection or ctx ending (the command is killed).
func (c *Conn) Run(ctx context.Context, op, script string, stdin io.Reader, args ...string) (Output, error) {
	res := Output{Exit: -1}
	lost := func(err error) error {
		return &Error{Code: executor.Unavailable, Addr: c.target.Addr(), User: c.target.User, Op: op, Err: err}
	}
	if err := c.acquire(ctx); err != nil {
		return res, lost(err)
	}
	defer c.release()
	sess, err := c.client.NewSession()
	if err != nil {
		if !c.alive() {
			return res, lost(fmt.Errorf("the connection was lost: %w", err))
		}
		if errors.Is(err, io.EOF) {
			c.Close()
		}
		return res, lost(fmt.Errorf("cannot open a session: %w", err))
	}
	defer sess.Close()
	over := make(chan struct{})
	var once sync.Once
	stdout, stderr := &capped{max: MaxOutput, over: over, once: &once}, &capped{max: MaxOutput, over: over, once: &once}
	sess.Stdout, sess.Stderr, sess.Stdin = stdout, stderr, stdin
	done := make(chan error, 1)
	go func() { done <- sess.Run(c.command(script, args)) }()
	tooMuch := func() error {
		return &Error{Code: executor.CommandFailed, Addr: c.target.Addr(), User: c.target.User, Op: op,
			Err: fmt.Errorf("the command's output passed %d MiB, more than any of the provider's commands prints: the host is not answering as expected", MaxOutput>>20)}
	}
	select {
	case err = <-done:
		select {
		case <-over:
			return res, tooMuch()
		default:
		}
	case <-over:
		// A host that prints without end would fill the provider's
		// memory: the command is ended, the connection kept.
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		return res, tooMuch()
	case <-ctx.Done():
		// Closing the channel does not end a remote command that ignores
		// its stdin; the signal does where sshd supports it. Do not wait.
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		return res, lost(fmt.Errorf("stopped: %w", context.Cause(ctx)))
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	var exit *ssh.ExitError
	switch {
	case err == nil:
		res.Exit = 0
	case errors.As(err, &exit) && exit.Signal() == "":
		res.Exit = exit.ExitStatus()
	default:
		// A session that ends without an exit status lost its transport:
		// drop the connection, so that the next Get dials again.
		c.Close()
		return res, lost(fmt.Errorf("the command did not complete (connection lost): %w", err))
	}
	return res, nil
}

// MaxOutput bounds what one command's stdout, and its stderr, may print;
// Run ends a command past it.
const MaxOutput = 16 << 20

// capped keeps what is written to it up to max bytes; past them it closes
// over (once, shared by a command's two streams) and discards the rest.
type capped struct {
	buf  bytes.Buffer
	max  int
	over chan struct{}
	once *sync.Once
}

func (w *capped) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		w.once.Do(func() { close(w.over) })
		return len(p), nil
	}
	return w.buf.Write(p)
}

func (w *capped) String() string { return w.buf.String() }

// RunOK is Run where a non-zero exit is an executor.CommandFailed *Error with
// the exit status and the end of stderr.
func (c *Conn) RunOK(ctx context.Context, op, script string, stdin io.Reader, args ...string) (Output, error) {
	res, err := c.Run(ctx, op, script, stdin, args...)
	if err == nil && res.Exit != 0 {
		err = &Error{Code: executor.CommandFailed, Addr: c.target.Addr(), User: c.target.User, Op: op, ExitCode: res.Exit, Stderr: tail(res.Stderr, 10, 2000)}
	}
	return res, err
}

// tail returns the last n lines of s, at most max bytes.
func tail(s string, n, max int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "\n")
	if len(out) > max {
		out = "…" + out[len(out)-max:]
	}
	return out
}

// uploadScript writes stdin to $1 atomically: a temporary file in the same
// directory, checked against the expected sha256 (a connection that drops
// mid-transfer ends stdin early, and a short file must never be renamed
// into place), mode and group set, fsynced, renamed, and the directory
// fsynced. The temporary file is removed however the script ends (a
// dropped connection hangs it up); it is named after its destination
// (.occ-upload.NAME.XXXXXX), so that a destroy finds what a killed
// upload of its agent left in a shared directory.
const uploadScript = `set -eu
dest=$1 sum=$2 mode=$3 group=$4
dir=$(dirname -- "$dest")
tmp=$(mktemp -- "$dir/.occ-upload.$(basename -- "$dest").XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM
cat > "$tmp"
got=$(sha256sum -- "$tmp")
got=${got%% *}
if [ "$got" != "$sum" ]; then
	echo "incomplete upload of $dest: sha256 $got, want $sum" >&2
	exit 75
fi
chmod -- "$mode" "$tmp"
if [ -n "$group" ]; then chgrp -- "$group" "$tmp"; fi
sync -- "$tmp"
mv -f -- "$tmp" "$dest"
trap - EXIT
sync -- "$dir"
`

// Upload writes data to dest on the host atomically (see uploadScript):
// either dest is the complete new content, or it is what it was.
func (c *Conn) Upload(ctx context.Context, dest string, data []byte, mode, group string) error {
	_, err := c.RunOK(ctx, "write "+dest, uploadScript, bytes.NewReader(data), dest, sha256Hex(data), mode, group)
	return err
}

// Hold keeps the connection from being closed as idle until release is
// called (a forwarded connection in use runs no command); release may be
// called more than once.
func (c *Conn) Hold() (release func()) {
	c.active.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			c.touch()
			c.active.Add(-1)
		})
	}
}

// DialContext opens a TCP connection from the host to addr (a port on the
// host's loopback), tunnelled over the SSH connection: nothing is opened
// to the outside.
func (c *Conn) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c.touch()
	conn, err := c.client.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return conn, nil
}
