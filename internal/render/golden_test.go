package render

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what render produces now (go test ./internal/render -run TestGolden -update); review the diff: it is what every agent of that topology would run")

// goldenCases are the topologies render produces, each on a compute that
// sets what shapes objects outside the revision too (state, exposure,
// network policy, sandbox driver).
func goldenCases(t *testing.T) []struct {
	name string
	in   admission.Input
} {
	exposed := func(in admission.Input) admission.Input {
		in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) {
			k.State = &admission.State{Size: "2Gi", StorageClass: "fast", AccessMode: "ReadWriteOnce"}
		})
		in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) {
			k.Exposure = admission.Exposure{Type: admission.ServiceLoadBalancer, SourceRanges: []string{"203.0.113.0/24"},
				Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}
		})
		in.Compute = in.Compute.WithKubernetes(func(k *admission.KubernetesCompute) {
			k.NetworkPolicy = admission.NetworkPolicy{ExtraEgress: []admission.EgressRule{{
				To: []admission.NetworkPeer{{IPBlock: &admission.IPBlock{CIDR: "10.20.0.0/16"}}}, Ports: []admission.NetworkPort{{Port: 8443}}}}}
		})
		return in
	}
	return []struct {
		name string
		in   admission.Input
	}{
		{"embedded", embeddedInput(t, "anthropic/claude-sonnet-4-5")},
		{"embedded-state-exposed", exposed(embeddedInput(t, "anthropic/claude-sonnet-4-5"))},
		{"dedicated-codex", codexInput(t, admission.MethodAPIKey)},
		{"sandboxed-codex", sandboxedCodexInput(t)},
		{"ssh-embedded", sshInput(t, anthropicSSH)},
	}
}

// TestGolden_RenderedObjects holds every object a revision of each
// topology renders, in the order its deploy applies them (Objects.InOrder),
// and the SSH host's unit and files, to testdata/golden: a change to what
// agents run shows as a diff of these files (rules AD3, AC1, LG4, SS1).
func TestGolden_RenderedObjects(t *testing.T) {
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			rev := admit(t, tc.in)
			var got []byte
			var err error
			if tc.in.Compute.Kind == admission.KindSSH {
				got, err = goldenSystemd(rev)
			} else {
				got, err = goldenKubernetes(rev, tc.in.Compute)
			}
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", "golden", tc.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v: run go test ./internal/render -run TestGolden -update to record it", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s renders differently from %s (if the change is meant, run go test ./internal/render -run TestGolden -update and review the diff):\n%s", tc.name, file, got)
			}
		})
	}
}

// goldenKubernetes is revision 3 of rev on c as YAML documents, one per
// object, in apply order.
func goldenKubernetes(rev *admission.Revision, c admission.Compute) ([]byte, error) {
	objs, err := Kubernetes(rev, 3, c)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# revision %s of agent %q, rendered as revision 3, in apply order\n", rev.ID(), rev.Agent)
	for _, o := range objs.InOrder() {
		v := o.Value
		if s, ok := v.(*Sandbox); ok {
			if v, err = s.Object(objs.Namespace); err != nil {
				return nil, err
			}
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.Kind, o.Name, err)
		}
		fmt.Fprintf(&b, "---\n# %s %s\n%s", o.Kind, o.Name, y)
	}
	return b.Bytes(), nil
}

// goldenSystemd is revision 3 of rev on its SSH host: the unit and the
// files written beside it, as one YAML document.
func goldenSystemd(rev *admission.Revision) ([]byte, error) {
	h, err := Systemd(rev, 3)
	if err != nil {
		return nil, err
	}
	y, err := yaml.Marshal(map[string]any{
		"unit":        map[string]string{"path": h.UnitPath, "text": h.UnitText},
		"config":      map[string]string{"path": h.ConfigPath, "text": string(h.Config), "sha256": h.Digest},
		"revision":    map[string]string{"dir": h.RevisionDir, "info": string(h.RevisionInfo)},
		"current":     h.CurrentLink,
		"active":      h.ActiveConfigPath,
		"state":       h.StateDir,
		"user":        h.User,
		"port":        h.Port,
		"endpoint":    h.Endpoint,
		"environment": h.EnvironmentFile,
	})
	if err != nil {
		return nil, err
	}
	return append([]byte(fmt.Sprintf("# revision %s of agent %q on an SSH host, rendered as revision 3\n", rev.ID(), rev.Agent)), y...), nil
}
