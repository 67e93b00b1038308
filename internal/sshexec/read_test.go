package sshexec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
)

// A refresh has a deadline of its own: a host that accepts the session
// but never answers (here every command hangs, as a hung systemctl would)
// fails the refresh with UNAVAILABLE after ReadTimeout, naming it, instead
// of holding `terraform plan` for ever.
func TestReadHasADeadline(t *testing.T) {
	// The test harness's own probe ("true") answers; every other command hangs.
	_, tg, pool := plainSSHD(t, `ForceCommand if [ "$SSH_ORIGINAL_COMMAND" = true ]; then exit 0; fi; sleep 600`)
	e := &Executor{Pool: pool, ReadTimeout: 2 * time.Second}
	c := &admission.Compute{Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: tg.Host, Port: int64(tg.Port), User: tg.User, HostKey: tg.HostKey}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.Read(ctx, executor.Agent{Name: "support", Compute: c})
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.Unavailable || !strings.Contains(err.Error()+f.Detail(""), "did not answer the refresh within 2s") {
		t.Fatalf("Read of a hung host: %v, want UNAVAILABLE naming the 2s deadline", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the refresh took %s; its deadline is 2s", d)
	}
}

// TestObservedReferences: the references record an apply wrote into the
// activation record is reported by Read, also for an agent that drifted
// (an import adopts it as it is), and is absent for an older record.
func TestObservedReferences(t *testing.T) {
	act := `{"agent":"support","revision":3,"revision_id":"abc","digest":"d1","activated_at":"2026-11-29T10:00:00Z","endpoint":"http://127.0.0.1:18789","references":"occ-references-v1:AAAA"}`
	serving := "unit_file=present\nLoadState=loaded\nActiveState=active\nSubState=running\nagent_dir=/etc/openclaw/support\ncurrent=r3\ndigest=d1\nactivation=" + act + "\nrevisions=r3 \n"
	if o := observedOf(parseObserved(serving)); o.References != "occ-references-v1:AAAA" || o.Revision != 3 {
		t.Errorf("serving agent: %+v", o)
	}
	edited := strings.Replace(serving, "digest=d1", "digest=d2", 1)
	if o := observedOf(parseObserved(edited)); o.Drift == executor.DriftNone || o.References != "occ-references-v1:AAAA" {
		t.Errorf("edited agent: %+v", o)
	}
	older := strings.Replace(serving, `,"references":"occ-references-v1:AAAA"`, "", 1)
	if o := observedOf(parseObserved(older)); o.References != "" {
		t.Errorf("older record: %+v", o)
	}
}

// Issue 30: what reads the provider's known_hosts_file. An agent located
// by its id (an import, the refresh of an imported agent, the occ_agent
// data source by id) and a host listed by address (the list resource:
// List calls hostTarget too) are verified through the file; an agent
// whose compute is known is verified by the compute's host_key alone. The
// provider's attribute description names these readers
// (TestKnownHostsFile_DescriptionNamesItsReaders in internal/provider).
func TestKnownHostsFile_ReadOnlyWithoutACompute(t *testing.T) {
	e := &Executor{User: "occ", KnownHostsFile: "/home/occ/.ssh/known_hosts"}
	byID, _, err := e.location(executor.Agent{Name: "support", ImportID: "ssh://edge.example:2222/support"})
	if err != nil {
		t.Fatal(err)
	}
	if byID.KnownHostsFile != e.KnownHostsFile || byID.HostKey != "" || byID.Host != "edge.example" || byID.Port != 2222 {
		t.Errorf("an agent located by its id: %+v; want the known_hosts file", byID)
	}
	if l := e.hostTarget("edge.example", 22); l.KnownHostsFile != e.KnownHostsFile {
		t.Errorf("a listed host: %+v; want the known_hosts file", l)
	}
	c := admission.Compute{Name: "edge", Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: "edge.example", Port: 22, HostKey: "ssh-ed25519 AAAA"}}
	byCompute, _, err := e.location(executor.Agent{Name: "support", Compute: &c})
	if err != nil {
		t.Fatal(err)
	}
	if byCompute.KnownHostsFile != "" || byCompute.HostKey != "ssh-ed25519 AAAA" {
		t.Errorf("an agent with its compute: %+v; want the compute's host_key alone", byCompute)
	}
}
