package provider

import (
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"golang.org/x/crypto/ssh"

	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// TestAccAgent_SSHThroughBastion: an agent deployed to the nspawn systemd
// host through a bastion (a second, plain sshd on loopback, as OpenSSH's
// ProxyJump), logging in with a passphrase-protected key, the host pinned
// by two keys (the old one of a rotation and the current one). The
// bastion's log shows the provider's logins; the agent activates and
// serves; a wrong passphrase is refused at plan without contacting a host
// and without quoting it; destroy goes through the bastion too.
func TestAccAgent_SSHThroughBastion(t *testing.T) {
	env := newSSHEnv(t)
	bastion := sshhost.StartPlainSSHDT(t, sshhost.PlainSSHDOptions{})
	if err := os.WriteFile(filepath.Join(bastion.Dir, "authorized_keys"), []byte(env.host.ClientKeys.AuthorizedKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const passphrase = "a passphrase only this test knows"
	raw, err := ssh.ParseRawPrivateKey(env.host.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(raw, "", []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "encrypted_key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	provider := func(pass string) string {
		return fmt.Sprintf(`
provider "occ" {
  ssh = {
    user                   = "occ"
    private_key            = file(%q)
    private_key_passphrase = %q
    connect_timeout        = "45s"
  }
}
`, keyFile, pass)
	}
	old, err := sshhost.NewKeyPair("old")
	if err != nil {
		t.Fatal(err)
	}
	bhost, bport, _ := net.SplitHostPort(bastion.Addr)
	// The compute's host_key is env.host.HostKey; config's %q of it is
	// replaced by the two-key form below.
	extra := fmt.Sprintf(`, bastion = { host = %q, port = %s, user = %q, host_key = %q }`, bhost, bport, bastion.User, bastion.HostKey)
	config := func(pass string) string {
		c := env.config(extra, env.doc("anthropic/claude-sonnet-4-5", ""))
		c = strings.Replace(c, fmt.Sprintf("host_key = %q", env.host.HostKey), fmt.Sprintf("host_key = %q", old.AuthorizedKey+"\n"+env.host.HostKey+"\n"), 1)
		return provider(pass) + c[strings.Index(c, `resource "occ_compute"`):]
	}
	logins := func() int { return strings.Count(bastion.LogTail(2000), "Accepted publickey for "+bastion.User) }
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             env.destroyed,
		Steps: []resource.TestStep{
			{
				Config:      config("wrong " + passphrase),
				ExpectError: regexp.MustCompile(`private_key_passphrase\s+does\s+not\s+decrypt`),
			},
			{
				Config: config(passphrase),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("occ_agent.a", tfjsonpath.New("status"), knownvalue.StringExact("active")),
					sentinelAbsentFromState{passphrase},
				},
				Check: resource.ComposeTestCheckFunc(env.serving(1), func(*terraform.State) error {
					if logins() == 0 {
						return fmt.Errorf("the bastion logged no login of the provider:\n%s", bastion.LogTail(40))
					}
					return nil
				}),
			},
		},
	})
	if strings.Contains(bastion.LogTail(5000), passphrase) {
		t.Error("the passphrase reached the bastion's log")
	}
}
