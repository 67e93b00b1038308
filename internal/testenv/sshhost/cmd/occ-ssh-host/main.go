// Command occ-ssh-host boots the test environment's systemd host (package
// testenv/sshhost: systemd-nspawn, a real sshd on a free loopback port and
// the real OpenClaw) and keeps it up until SIGINT or SIGTERM. `make
// demo-ssh` runs it in the background; people can also use it to look at
// what the provider does on a host.
//
//	occ-ssh-host -dir .dev/ssh-host
//
// Once the host answers it writes, in DIR:
//
//	host.env      OCC_SSH_HOST, OCC_SSH_PORT, OCC_SSH_HOST_KEY, OCC_SSH_KEY_FILE, OCC_SSH_USER, OCC_SSH_NAME,
//	              and with -model-key OCC_SSH_MODEL_URL
//	client_key    the authorized client private key (OpenSSH PEM, mode 0600)
//	host_key.pub  the host's public key (the compute's host_key)
//
// and removes them when it stops. The client key logs in as root and as
// the operator `occ` (passwordless sudo).
//
// With -model-key KEY it also serves a local fake model endpoint on this
// machine's loopback, which the host shares (OpenAI Responses and chat
// completions, Anthropic Messages): it answers "ok" to KEY and 401
// invalid_api_key to any other. Nothing is billed and nothing leaves the
// machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/fakemodel"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

func main() {
	dir := flag.String("dir", ".dev/ssh-host", "directory for host.env, the client key and the host key")
	name := flag.String("name", "", "machine name (default occ-<random>)")
	modelKey := flag.String("model-key", "", "serve a local fake model endpoint on the loopback the host shares that accepts only this key (its URL goes to DIR/host.env as OCC_SSH_MODEL_URL)")
	flag.Parse()
	if err := run(*dir, *name, *modelKey); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir, name, modelKey string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	h, err := sshhost.StartSystemdHost(sctx, sshhost.SystemdHostOptions{Name: name})
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		if err := h.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()

	keyFile := filepath.Join(dir, "client_key")
	hostKeyFile := filepath.Join(dir, "host_key.pub")
	envFile := filepath.Join(dir, "host.env")
	for _, f := range []string{keyFile, hostKeyFile, envFile} {
		defer os.Remove(f)
	}
	if err := os.WriteFile(keyFile, h.ClientKey, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(hostKeyFile, []byte(h.HostKey+"\n"), 0o644); err != nil {
		return err
	}
	env := fmt.Sprintf("OCC_SSH_HOST=127.0.0.1\nOCC_SSH_PORT=%d\nOCC_SSH_HOST_KEY=%q\nOCC_SSH_KEY_FILE=%s\nOCC_SSH_USER=%s\nOCC_SSH_NAME=%s\n",
		h.Port, h.HostKey, keyFile, sshhost.Operator, h.Name)
	if modelKey != "" {
		srv := fakemodel.New(fakemodel.Step{Kind: fakemodel.OK})
		srv.Accept = modelKey
		defer srv.Close()
		env += "OCC_SSH_MODEL_URL=" + srv.URL + "\n"
		fmt.Printf("  local model endpoint %s (on the loopback the host shares; nothing is billed)\n", srv.URL)
	}
	if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
		return err
	}
	fmt.Printf("systemd host %s up: sshd on %s (systemd %s, SSH %v after launch), %s\n",
		h.Name, h.Addr, h.SystemState, h.BootToSSH.Round(time.Millisecond), h.OpenClaw)
	fmt.Printf("  ssh -i %s -p %d -o StrictHostKeyChecking=no %s@127.0.0.1\n", keyFile, h.Port, sshhost.Operator)
	fmt.Printf("  settings: %s\n", envFile)
	fmt.Printf("stop with Ctrl-C (or SIGTERM to pid %d)\n", os.Getpid())

	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping the host…")
	return nil
}
