package sshhost

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Copy modes for the per-start root directory.
const (
	// CopyAuto tries CopyOverlay and falls back to CopyFull.
	CopyAuto = "auto"
	// CopyOverlay mounts an overlayfs: the cached rootfs as the read-only
	// lower layer, a per-start upper layer. Costs nothing per start.
	CopyOverlay = "overlay"
	// CopyFull copies the whole rootfs (cp -a --reflink=auto).
	CopyFull = "copy"
)

// Operator is the non-root user of the systemd host, with passwordless sudo.
const Operator = "occ"

// SystemdHostOptions configure StartSystemdHost. The zero value is fine.
type SystemdHostOptions struct {
	// Rootfs is the cached rootfs built by `make testenv-ssh`. Default:
	// $OCC_TESTENV_ROOTFS, else $OCC_TESTENV_CACHE/rootfs/bookworm
	// (OCC_TESTENV_CACHE defaults to ~/.cache/occ-testenv).
	Rootfs string
	// RunDir holds the per-start directories; default
	// $TMPDIR/occ-sshhost. Leftovers of dead test processes are removed.
	RunDir string
	// Copy is CopyAuto (default), CopyOverlay or CopyFull; the environment
	// variable OCC_SSHHOST_COPY overrides an empty value.
	Copy string
	// Name is the machine (and host) name; default occ-<random>.
	Name string
	// BootTimeout bounds the wait for SSH and for systemd to finish booting;
	// default 90 s. ctx may end the wait earlier.
	BootTimeout time.Duration
}

// Host is a booted systemd-nspawn container with sshd on a free loopback
// port (it shares the host's network). The embedded Endpoint has its
// address, host key and the authorized client key; Run logs in as root.
// The same client key logs in as Operator.
type Host struct {
	Endpoint
	// Name is the machine name (also the container's hostname).
	Name string
	// Port is sshd's port on 127.0.0.1.
	Port int
	// Users that the client key logs in as: "root" and Operator.
	Users []string
	// HostKeys and ClientKeys are the generated key pairs.
	HostKeys, ClientKeys *KeyPair
	// Root is the container's root directory on this machine (an overlay
	// mount or a copy), removed by Stop.
	Root string
	// CopyMode is how Root was made: CopyOverlay or CopyFull.
	CopyMode string
	// Rootfs is the cached rootfs Root was made from.
	Rootfs string
	// LogPath is systemd-nspawn's output: the container's console.
	LogPath string
	// OpenClaw describes the OpenClaw installed in the rootfs (from
	// /opt/openclaw/.occ-version), empty when there is none.
	OpenClaw string
	// SystemState is what `systemctl is-system-running --wait` said
	// (running or degraded), and FailedUnits the failed units if degraded.
	SystemState string
	FailedUnits []string
	// Timings of the start: preparing Root, launch to first SSH login,
	// launch to systemd finished booting.
	PrepareTime, BootToSSH, BootToRunning time.Duration

	dir        string // per-start directory (contains Root)
	proc       *process
	stopOnce   sync.Once
	stopResult error
}

// PID returns the systemd-nspawn process ID.
func (h *Host) PID() int { return h.proc.pid() }

// LogTail returns the last n lines of the container console.
func (h *Host) LogTail(n int) string {
	if h.proc == nil {
		return fileTail(h.LogPath, n)
	}
	return h.proc.logTail(n)
}

// DefaultRootfs returns where `make testenv-ssh` puts the rootfs.
func DefaultRootfs() string {
	if v := os.Getenv("OCC_TESTENV_ROOTFS"); v != "" {
		return v
	}
	cache := os.Getenv("OCC_TESTENV_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "occ-testenv")
	}
	return filepath.Join(cache, "rootfs", "bookworm")
}

// StartSystemdHost copies (or overlays) the cached rootfs, writes a fresh
// ed25519 host key, authorizes a fresh client key for root and Operator,
// sets sshd to 127.0.0.1 and a free port, boots it with
//
//	systemd-nspawn --boot --directory=ROOT --machine=NAME --register=no --keep-unit --console=read-only
//
// and waits until SSH answers and systemd reports running or degraded. ctx
// bounds the start only. A failed start returns an error with the console
// tail and leaves nothing behind.
func StartSystemdHost(ctx context.Context, opts SystemdHostOptions) (_ *Host, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("systemd-nspawn needs root")
	}
	nspawn, err := exec.LookPath("systemd-nspawn")
	if err != nil {
		return nil, fmt.Errorf("systemd-nspawn not found; run `make testenv` (testenv-ssh installs systemd-container): %w", err)
	}
	rootfs := opts.Rootfs
	if rootfs == "" {
		rootfs = DefaultRootfs()
	}
	if rootfs, err = filepath.EvalSymlinks(rootfs); err != nil {
		return nil, fmt.Errorf("no cached rootfs (%w); run `make testenv` (or `make testenv-ssh`) as root to build it", err)
	}
	for _, f := range []string{"usr/lib/systemd/systemd", "usr/sbin/sshd", "etc/passwd"} {
		if _, err := os.Stat(filepath.Join(rootfs, f)); err != nil {
			return nil, fmt.Errorf("rootfs %s is incomplete (%v); run `make testenv-ssh-clean testenv-ssh`", rootfs, err)
		}
	}
	runDir := opts.RunDir
	if runDir == "" {
		runDir = filepath.Join(os.TempDir(), "occ-sshhost")
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	sweepStale(runDir)

	name := opts.Name
	if name == "" {
		name = "occ-" + randomHex(4)
	}
	h := &Host{Name: name, Rootfs: rootfs, Users: []string{"root", Operator}}
	if h.dir, err = os.MkdirTemp(runDir, name+"-"); err != nil {
		return nil, err
	}
	h.Root = filepath.Join(h.dir, "root")
	h.LogPath = filepath.Join(h.dir, "nspawn.log")
	defer func() {
		if err != nil {
			_ = h.Stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(h.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}

	t0 := time.Now()
	mode := opts.Copy
	if mode == "" {
		mode = os.Getenv("OCC_SSHHOST_COPY")
	}
	if h.CopyMode, err = prepareRoot(ctx, rootfs, h.dir, h.Root, mode); err != nil {
		return nil, err
	}
	if h.Port, err = freeLoopbackPort(); err != nil {
		return nil, err
	}
	if err := h.configure(); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", h.Root, err)
	}
	h.PrepareTime = time.Since(t0)
	if b, err := os.ReadFile(filepath.Join(h.Root, "opt/openclaw/.occ-version")); err == nil {
		h.OpenClaw = strings.TrimSpace(string(b))
	}

	cmd := exec.Command(nspawn, "--boot", "--directory="+h.Root, "--machine="+name,
		"--register=no", "--keep-unit", "--console=read-only",
		// Plain console text in the log (no ANSI colours).
		"--setenv=SYSTEMD_COLORS=0")
	launched := time.Now()
	if h.proc, err = startProcess(cmd, h.LogPath); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(h.dir, "nspawn.pid"), []byte(strconv.Itoa(h.proc.pid())), 0o644)

	timeout := opts.BootTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fail := func(what string, err error) error {
		return fmt.Errorf("systemd host %s (%s): %s: %w\n--- systemd-nspawn console tail ---\n%s",
			name, h.Addr, what, err, h.proc.logTail(40))
	}
	if err := waitForSSH(bctx, &h.Endpoint, "root", h.proc); err != nil {
		return nil, fail("SSH did not answer", err)
	}
	h.BootToSSH = time.Since(launched)
	r, err := h.RunAs(bctx, "root", "systemctl is-system-running --wait", nil)
	if err != nil {
		return nil, fail("systemctl is-system-running", err)
	}
	h.SystemState = strings.TrimSpace(r.Stdout)
	if h.SystemState != "running" && h.SystemState != "degraded" {
		return nil, fail("systemd did not boot", fmt.Errorf("is-system-running said %q (exit %d) %s", h.SystemState, r.Exit, r.Stderr))
	}
	h.BootToRunning = time.Since(launched)
	if h.SystemState == "degraded" {
		if r, err := h.RunAs(bctx, "root", "systemctl list-units --state=failed --no-legend --plain", nil); err == nil {
			for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
				if f := strings.Fields(line); len(f) > 0 {
					h.FailedUnits = append(h.FailedUnits, f[0])
				}
			}
		}
	}
	return h, nil
}

// configure writes the per-start files into h.Root and fills h.Endpoint.
func (h *Host) configure() error {
	var err error
	if h.HostKeys, err = NewKeyPair("occ-testenv-host-" + h.Name); err != nil {
		return err
	}
	if h.ClientKeys, err = NewKeyPair("occ-testenv-client"); err != nil {
		return err
	}
	h.Endpoint = Endpoint{
		Addr:          "127.0.0.1:" + strconv.Itoa(h.Port),
		HostKey:       h.HostKeys.AuthorizedKey,
		HostPublicKey: h.HostKeys.PublicKey(),
		ClientKey:     h.ClientKeys.PrivatePEM,
		ClientSigner:  h.ClientKeys.Signer,
		User:          "root",
	}
	root := h.Root
	write := func(rel string, data string, mode os.FileMode) error {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		_ = os.Remove(p) // a symlink or a file from the rootfs
		return os.WriteFile(p, []byte(data), mode)
	}
	// A machine ID of its own (the rootfs's is shared by every start).
	if err := write("etc/machine-id", randomHex(16)+"\n", 0o444); err != nil {
		return err
	}
	// systemd sets the hostname from /etc/hostname (debootstrap copied this
	// machine's); sudo wants the name to resolve.
	if err := write("etc/hostname", h.Name+"\n", 0o644); err != nil {
		return err
	}
	if err := write("etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\t"+h.Name+"\n::1\tlocalhost ip6-localhost ip6-loopback\n", 0o644); err != nil {
		return err
	}
	if err := write("etc/ssh/ssh_host_ed25519_key", string(h.HostKeys.PrivatePEM), 0o600); err != nil {
		return err
	}
	if err := write("etc/ssh/ssh_host_ed25519_key.pub", h.HostKeys.AuthorizedKey+" "+h.Name+"\n", 0o644); err != nil {
		return err
	}
	// Debian's sshd_config includes sshd_config.d/*.conf first, and the first
	// value of an option wins.
	dropIn := fmt.Sprintf(`# Generated by internal/testenv/sshhost for this start.
ListenAddress %s
HostKey /etc/ssh/ssh_host_ed25519_key
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
LogLevel VERBOSE
`, h.Addr)
	if err := write("etc/ssh/sshd_config.d/occ-testenv.conf", dropIn, 0o644); err != nil {
		return err
	}
	auth := h.ClientKeys.AuthorizedKey + " occ-testenv-client\n"
	if err := os.MkdirAll(filepath.Join(root, "root/.ssh"), 0o700); err != nil {
		return err
	}
	if err := write("root/.ssh/authorized_keys", auth, 0o600); err != nil {
		return err
	}
	uid, gid, home, err := lookupUser(filepath.Join(root, "etc/passwd"), Operator)
	if err != nil {
		return fmt.Errorf("rootfs has no operator user (rebuild it with `make testenv-ssh-clean testenv-ssh`): %w", err)
	}
	sshDir := filepath.Join(root, strings.TrimPrefix(home, "/"), ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return err
	}
	keys := filepath.Join(sshDir, "authorized_keys")
	if err := os.WriteFile(keys, []byte(auth), 0o600); err != nil {
		return err
	}
	for _, p := range []string{sshDir, keys} {
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// lookupUser reads uid, gid and home of name from a passwd file.
func lookupUser(passwd, name string) (uid, gid int, home string, err error) {
	f, err := os.Open(passwd)
	if err != nil {
		return 0, 0, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 6 && fields[0] == name {
			uid, err1 := strconv.Atoi(fields[2])
			gid, err2 := strconv.Atoi(fields[3])
			if err := errors.Join(err1, err2); err != nil {
				return 0, 0, "", err
			}
			return uid, gid, fields[5], nil
		}
	}
	return 0, 0, "", fmt.Errorf("user %q not in %s", name, passwd)
}

// prepareRoot makes root from rootfs: an overlay mount (upper and work
// directories in dir) or a full copy. It returns the mode used.
func prepareRoot(ctx context.Context, rootfs, dir, root, mode string) (string, error) {
	if mode == "" {
		mode = CopyAuto
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	var overlayErr error
	if mode == CopyAuto || mode == CopyOverlay {
		upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
		for _, d := range []string{upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return "", err
			}
		}
		data := "lowerdir=" + rootfs + ",upperdir=" + upper + ",workdir=" + work
		if overlayErr = syscall.Mount("overlay", root, "overlay", 0, data); overlayErr == nil {
			return CopyOverlay, nil
		}
		overlayErr = fmt.Errorf("overlay mount of %s: %w", rootfs, overlayErr)
		if mode == CopyOverlay {
			return "", overlayErr
		}
	}
	if mode != CopyAuto && mode != CopyFull {
		return "", fmt.Errorf("unknown copy mode %q (want %s, %s or %s)", mode, CopyAuto, CopyOverlay, CopyFull)
	}
	out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", rootfs+"/.", root).CombinedOutput()
	if err != nil {
		return "", errors.Join(overlayErr, fmt.Errorf("copy %s: %v: %s", rootfs, err, out))
	}
	return CopyFull, nil
}

// Stop sends SIGTERM to systemd-nspawn (the container shuts down), waits
// up to 5 s, then SIGKILL, and removes the per-start root. Safe to call more
// than once; the error reports a needed SIGKILL or a failed cleanup.
func (h *Host) Stop() error {
	h.stopOnce.Do(func() {
		if h.proc != nil && h.proc.stop(5*time.Second) {
			h.stopResult = fmt.Errorf("systemd-nspawn (pid %d) did not stop within 5 s of SIGTERM and was killed", h.proc.pid())
		}
		if h.dir != "" {
			if err := removeRunDir(h.dir); err != nil {
				h.stopResult = errors.Join(h.stopResult, err)
			}
		}
	})
	return h.stopResult
}

// removeRunDir unmounts dir/root if it is a mount and removes dir.
func removeRunDir(dir string) error {
	root := filepath.Join(dir, "root")
	if isMountPoint(root) {
		var err error
		for i := 0; i < 20; i++ {
			if err = syscall.Unmount(root, 0); err == nil || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			if err2 := syscall.Unmount(root, syscall.MNT_DETACH); err2 != nil {
				return fmt.Errorf("unmount %s: %v; lazy unmount: %w (not removing it)", root, err, err2)
			}
		}
	}
	if isMountPoint(root) {
		return fmt.Errorf("%s is still mounted; not removing it", root)
	}
	return os.RemoveAll(dir)
}

// isMountPoint reports whether path is a mount point in this mount
// namespace (from /proc/self/mountinfo).
func isMountPoint(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountPath(f[4]) == path {
			return true
		}
	}
	return false
}

func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// sweepStale removes per-start directories whose test process is gone
// (killed before its cleanup ran): it stops their systemd-nspawn if still
// there, unmounts and removes them.
func sweepStale(runDir string) {
	entries, err := os.ReadDir(runDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(runDir, e.Name())
		owner := readPID(filepath.Join(dir, "owner.pid"))
		if owner == 0 || processAlive(owner) {
			continue
		}
		if pid := readPID(filepath.Join(dir, "nspawn.pid")); pid > 0 && processAlive(pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd-nspawn" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				for i := 0; i < 50 && processAlive(pid); i++ {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
		_ = removeRunDir(dir)
	}
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
