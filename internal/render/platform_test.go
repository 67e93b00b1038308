package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// renderedGateway is the gateway document of a revision as it is written:
// the ConfigMap's file on Kubernetes, the revision's file on an SSH host.
func renderedGateway(t *testing.T, rev *admission.Revision) (occconfig.Document, error) {
	t.Helper()
	if rev.ComputeSettings.Kind == admission.KindSSH {
		h, err := Systemd(rev, 1)
		if err != nil {
			return nil, err
		}
		return occconfig.Parse(string(h.Config))
	}
	objs, err := Kubernetes(rev, 1, admission.Compute{})
	if err != nil {
		return nil, err
	}
	for _, cm := range objs.ConfigMaps {
		if *cm.Name == ConfigMapName(rev.Agent, 1) {
			return occconfig.Parse(cm.Data[ConfigFile])
		}
	}
	t.Fatalf("no gateway ConfigMap")
	return nil, nil
}

// leaves lists every scalar (and empty container) of a document by path.
func leaves(v any, at occconfig.Path, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[at.String()] = "{}"
		}
		for k, e := range x {
			leaves(e, at.Key(k), out)
		}
	case occconfig.Document:
		leaves(map[string]any(x), at, out)
	default:
		b, _ := json.Marshal(x)
		out[at.String()] = string(b)
	}
}

// rule AD3: render writes exactly the platform-owned keys admission lists
// (admission.PlatformKeys), and nothing else of the admitted gateway
// document changes; so the list admission refuses user values of is the
// list render overrides. Every topology, Kubernetes and SSH.
func TestAD3_RenderWritesExactlyThePlatformKeys(t *testing.T) {
	sshPort := sshInput(t, `{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, gateway: {port: 18790}}`)
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
		"ssh":             sshInput(t, anthropicSSH),
		"ssh, own port":   sshPort,
	} {
		t.Run(name, func(t *testing.T) {
			rev := admit(t, in)
			got, err := renderedGateway(t, rev)
			if err != nil {
				t.Fatal(err)
			}
			keys := admission.PlatformKeys(rev.ComputeSettings.Kind, rev.Harness, rev.ExecutionMode)
			owned := map[string]bool{}
			for _, k := range keys {
				owned[k.Path.String()] = true
				v, ok := occconfig.Lookup(got, k.Path)
				switch {
				case k.Remove && ok:
					t.Errorf("%s = %v, want it removed", k.Path, v)
				case k.Computed && !ok:
					t.Errorf("%s is not rendered", k.Path)
				case !k.Remove && !k.Computed && canonJSON(v) != canonJSON(k.Value):
					t.Errorf("%s = %v, want the platform's %v", k.Path, v, k.Value)
				}
			}
			before, after := map[string]string{}, map[string]string{}
			leaves(rev.GatewayDocument, nil, before)
			leaves(got, nil, after)
			for p, v := range after {
				if before[p] == v || owned[p] {
					continue
				}
				// SSH: the gateway.port render writes is the user's, or
				// OpenClaw's default when the document has none.
				if rev.ComputeSettings.Kind == admission.KindSSH && p == "gateway.port" && (before[p] == "" || before[p] == v) {
					continue
				}
				t.Errorf("render changed %s from %q to %q, which admission.PlatformKeys does not list", p, before[p], v)
			}
			for p, v := range before {
				if _, kept := after[p]; !kept && !owned[p] {
					t.Errorf("render dropped %s = %s, which admission.PlatformKeys does not list", p, v)
				}
			}
			if name == "ssh, own port" {
				if p, _ := occconfig.Lookup(got, admission.PathGatewayPort); p != int64(18790) {
					t.Errorf("ssh gateway.port = %v, want the user's 18790", p)
				}
			}
		})
	}
}

func canonJSON(v any) string { return string(occconfig.Canonical(v)) }

// rules AD3, AD6: a revision whose gateway document holds a non-object
// where the platform's wiring goes (admission refuses such a document; a
// revision from elsewhere, such as an older state, may still hold one) is
// not rendered: render fails naming the key instead of skipping the wiring
// (bind, port, reload off, mDNS off) without a word, as it did when the
// result of occconfig.Set was ignored.
func TestAD6_RenderFailsClosedOnANonObjectPlatformPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   admission.Input
		key  string
		val  any
		want string
	}{
		{"k8s gateway string", embeddedInput(t, "anthropic/claude-sonnet-4-5"), "gateway", "x", "gateway.mode"},
		{"k8s discovery number", embeddedInput(t, "anthropic/claude-sonnet-4-5"), "discovery", int64(5), "discovery.mdns.mode"},
		{"k8s update bool", codexInput(t, admission.MethodAPIKey), "update", true, "update.checkOnStart"},
		{"k8s plugins list", codexInput(t, admission.MethodAPIKey), "plugins", []any{}, "plugins.entries.codex.enabled"},
		{"ssh gateway string", sshInput(t, anthropicSSH), "gateway", "x", "gateway.mode"},
		{"ssh discovery number", sshInput(t, anthropicSSH), "discovery", int64(5), "discovery.mdns.mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := admit(t, tc.in)
			rev.GatewayDocument[tc.key] = tc.val
			_, err := renderedGateway(t, rev)
			if err == nil {
				t.Fatalf("rendered a gateway document without the platform's %s", tc.want)
			}
			if !strings.HasPrefix(err.Error(), "render: ") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.key+" is not an object") {
				t.Errorf("error %q does not name %s and %s", err, tc.want, tc.key)
			}
		})
	}
}

// rule AD3: the gateway runs the document the plan shows. Admission froze
// the platform's wiring into the revision, so render's file is the
// revision's gateway document plus only the computed keys (the address of
// the revision's own Codex harness, which names the revision number).
func TestAD3_RenderedGatewayIsTheAdmittedDocument(t *testing.T) {
	for name, in := range map[string]admission.Input{
		"embedded":        embeddedInput(t, "anthropic/claude-sonnet-4-5"),
		"dedicated codex": codexInput(t, admission.MethodAPIKey),
		"sandboxed codex": sandboxedCodexInput(t),
		"ssh":             sshInput(t, anthropicSSH),
	} {
		t.Run(name, func(t *testing.T) {
			rev := admit(t, in)
			got, err := renderedGateway(t, rev)
			if err != nil {
				t.Fatal(err)
			}
			computed := map[string]bool{}
			for _, k := range admission.PlatformKeys(rev.ComputeSettings.Kind, rev.Harness, rev.ExecutionMode) {
				if k.Computed {
					computed[k.Path.String()] = true
				}
			}
			before, after := map[string]string{}, map[string]string{}
			leaves(rev.GatewayDocument, nil, before)
			leaves(got, nil, after)
			for p, v := range after {
				if before[p] != v && !computed[p] {
					t.Errorf("render wrote %s = %s, which the revision's document does not hold (%q)", p, v, before[p])
				}
			}
			for p := range computed {
				if _, ok := after[p]; !ok {
					t.Errorf("render did not write the computed %s", p)
				}
			}
			for p, v := range before {
				if _, kept := after[p]; !kept {
					t.Errorf("render dropped %s = %s", p, v)
				}
			}
		})
	}
}
