package sshexec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
	"github.com/occ-platform/terraform-provider-occ/internal/testenv/sshhost"
)

// listHost is a host laid out for List in a directory of the test's own:
// the unit files in Units, the agents' directories in Config. The machine
// the test sshd runs on has no systemd; ForceCommand puts a systemctl
// first on the PATH that says every unit runs.
type listHost struct {
	s             *sshhost.SSHD
	pool          *Pool
	Units, Config string
}

func newListHost(t *testing.T) *listHost {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	h := &listHost{Units: filepath.Join(dir, "units"), Config: filepath.Join(dir, "config")}
	for _, d := range []string{bin, h.Units, h.Config} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	systemctl := "#!/bin/sh\n[ \"$1\" = show ] || exit 1\nprintf 'LoadState=loaded\\nActiveState=active\\nSubState=running\\nResult=success\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(systemctl), 0o755); err != nil {
		t.Fatal(err)
	}
	h.s, _, h.pool = plainSSHD(t, `ForceCommand PATH=`+bin+`:$PATH; export PATH; exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"`)
	return h
}

// executor lists through addr (the sshd's, or a proxy's in front of it),
// verified through a known_hosts file as an import is, in units.
func (h *listHost) executor(t *testing.T, addr, units string) *Executor {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte("["+host+"]:"+port+" "+h.s.HostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Executor{Pool: h.pool, User: h.s.User, KnownHostsFile: kh, ReadTimeout: 30 * time.Second, unitDir: units}
}

// agent writes what a deploy of revisions 1..n of agent name leaves: its
// unit file under the name unit (the agent's own unit name when ""), its
// revision directories, the current link and revision n's activation
// record.
func (h *listHost) agent(t *testing.T, name, unit string, n int64) render.Activation {
	t.Helper()
	if unit == "" {
		unit = render.UnitName(name)
	}
	agentDir := filepath.Join(h.Config, name)
	var act render.Activation
	for r := int64(1); r <= n; r++ {
		rdir := filepath.Join(agentDir, render.RevisionDirName(r))
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			t.Fatal(err)
		}
		config := []byte(`{"revision":` + strconv.FormatInt(r, 10) + `}`)
		sum := sha256.Sum256(config)
		act = render.Activation{Agent: name, Revision: r, RevisionID: name + "-id-" + strconv.FormatInt(r, 10), Digest: hex.EncodeToString(sum[:]),
			ActivatedAt: time.Date(2026, 12, 1, 10, 0, int(r), 0, time.UTC), Endpoint: "http://127.0.0.1:18789"}
		rec, _ := json.Marshal(act)
		write(t, filepath.Join(rdir, "openclaw.json"), string(config))
		write(t, filepath.Join(rdir, render.ActivationFile), string(rec))
	}
	if err := os.Symlink(render.RevisionDirName(n), filepath.Join(agentDir, render.CurrentLink)); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(h.Units, unit), "[Unit]\nDescription=OpenClaw agent "+name+"\n"+render.UnitKeyAgent+"="+name+"\n"+render.UnitKeyAgentDir+"="+agentDir+"\n\n[Service]\nExecStart=/bin/true\n")
	return act
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// List finds the agents whose unit files the provider wrote, in name
// order, once each however many revisions they keep, each read as Read
// reads it, with the id that imports it. Unit files whose names are no
// DNS labels (upper case, a leading digit, a newline that would forge a
// section, a command substitution) are passed over although they hold the
// provider's key, as are a unit made by hand without it, a directory and
// a unit of another prefix; so is an agent directory with no unit.
func TestList_NamesTheHostsAgents(t *testing.T) {
	h := newListHost(t)
	alpha := h.agent(t, "alpha", "", 1)
	beta := h.agent(t, "beta", "", 3)
	for _, stray := range []string{"Bad_Name", "9lives", "a\nocc-list-x alpha", "x$(touch pwned)"} {
		h.agent(t, stray, render.UnitPrefix+stray+".service", 1)
	}
	write(t, filepath.Join(h.Units, render.UnitName("hand")), "[Service]\nExecStart=/bin/true\n")
	write(t, filepath.Join(h.Units, "nginx.service"), render.UnitKeyAgent+"=nginx\n")
	if err := os.MkdirAll(filepath.Join(h.Units, render.UnitName("folder")), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(h.Config, "Not_DNS", "r1"), 0o755); err != nil {
		t.Fatal(err)
	}

	e := h.executor(t, h.s.Addr, h.Units)
	ctx := ctxT(t, 60*time.Second)
	got, err := e.List(ctx, onHost(t, h.s.Addr))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []executor.Listed{
		{Name: "alpha", ID: h.s.Addr + "/alpha", Observed: executor.Observed{Exists: true, Revision: 1, RevisionID: alpha.RevisionID, ActivatedAt: alpha.ActivatedAt, Endpoint: alpha.Endpoint}},
		{Name: "beta", ID: h.s.Addr + "/beta", Observed: executor.Observed{Exists: true, Revision: 3, RevisionID: beta.RevisionID, ActivatedAt: beta.ActivatedAt, Endpoint: beta.Endpoint}},
	}
	if len(got) != len(want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("listed %+v, want %+v", got[i], want[i])
		}
	}
	for _, l := range got {
		if _, _, name, ok := parseImportID(l.ID); !ok || name != l.Name {
			t.Errorf("id %q does not import agent %s", l.ID, l.Name)
		}
	}

	// A configuration edited on the host lists the agent drifted, in
	// Read's words, without the revision (as Read reports it).
	write(t, filepath.Join(h.Config, "beta", "r3", "openclaw.json"), `{"edited":true}`)
	got, err = e.List(ctx, onHost(t, h.s.Addr))
	if err != nil || len(got) != 2 || got[1].Revision != 0 || got[1].Drift == executor.DriftNone || !strings.HasPrefix(got[1].DriftDetail, "the configuration of revision 3 was edited on the host") {
		t.Errorf("after editing beta's configuration: %+v, %v", got, err)
	}
}

// A host without agents, and one without the unit directory at all, give
// an empty list; a host that is no HOST[:PORT] is refused before anything
// is dialled.
func TestList_EmptyHostAndMalformedHost(t *testing.T) {
	h := newListHost(t)
	ctx := ctxT(t, 60*time.Second)
	for _, units := range []string{h.Units, filepath.Join(h.Units, "missing")} {
		got, err := h.executor(t, h.s.Addr, units).List(ctx, onHost(t, h.s.Addr))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("List with unit directory %s = %+v, %v; want an empty list", units, got, err)
		}
	}
	_, err := h.executor(t, h.s.Addr, h.Units).List(ctx, onHost(t, "10.0.0.5/support"))
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.InvalidRequest || f.Op != executor.OpList {
		t.Errorf("List of %q: %v, want INVALID_REQUEST", "10.0.0.5/support", err)
	}
}

// A connection that drops under the listing fails it with UNAVAILABLE,
// naming the host.
func TestList_DroppedConnectionIsUnavailable(t *testing.T) {
	h := newListHost(t)
	h.agent(t, "alpha", "", 1)
	proxy := sshhost.NewCutProxyT(t, h.s.Addr)
	e := h.executor(t, proxy.Addr, h.Units)
	ctx := ctxT(t, 60*time.Second)
	if got, err := e.List(ctx, onHost(t, proxy.Addr)); err != nil || len(got) != 1 {
		t.Fatalf("List before the cut = %+v, %v", got, err)
	}
	proxy.CutAfter(1)
	_, err := e.List(ctx, onHost(t, proxy.Addr))
	var f *executor.Failure
	if !errors.As(err, &f) || f.Code != executor.Unavailable || f.Op != executor.OpList || f.SummaryText() != "cannot list the agents on SSH host "+proxy.Addr {
		t.Fatalf("List over a dropped connection: %v, want UNAVAILABLE naming %s", err, proxy.Addr)
	}
}

// onHost is the compute a listing of HOST[:PORT] reads.
func onHost(t *testing.T, where string) admission.Compute {
	t.Helper()
	host, port := where, 0
	if h, p, err := net.SplitHostPort(where); err == nil {
		host = h
		if port, err = strconv.Atoi(p); err != nil {
			t.Fatal(err)
		}
	}
	return admission.Compute{Kind: admission.KindSSH, Settings: admission.SSHCompute{Host: host, Port: int64(port)}}
}
