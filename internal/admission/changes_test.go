package admission

import (
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
)

// RevisionChanges names what a new revision id comes from, in the HCL
// interface's words, and never a document's values (rule AD3: the
// revision freezes exactly these inputs).
func TestAD3_RevisionChangesNameWhatDiffers(t *testing.T) {
	base := func() *Revision {
		doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}, channels: {telegram: {botToken: "${TG}"}}}`)
		if err != nil {
			t.Fatal(err)
		}
		return &Revision{Agent: "a", Harness: HarnessOpenClaw, HarnessVersion: "openclaw@2026.9.6", ExecutionMode: ModeEmbedded, ConfigurationGeneration: 3,
			AdmittedDocument: doc, GatewayDocument: doc,
			ComputeSettings: ComputeSettings{Kind: KindKubernetes, Name: "k", Settings: KubernetesSettings{Namespace: "ns", CPUMillis: 2000, MemoryLimit: "4Gi", RuntimeImage: PinnedRuntimeImage}}}
	}
	cases := []struct {
		name   string
		change func(r *Revision)
		want   []string
		absent []string
	}{
		{name: "nothing", change: func(*Revision) {}},
		{name: "a compute setting", change: func(r *Revision) {
			r.ComputeSettings = r.ComputeSettings.WithKubernetes(func(k *KubernetesSettings) { k.CPUMillis = 1000 })
		},
			want: []string{"the compute's cpu_limit 2000m → 1000m"}},
		{name: "a compute map", change: func(r *Revision) {
			r.ComputeSettings = r.ComputeSettings.WithKubernetes(func(k *KubernetesSettings) { k.PodLabels = map[string]string{"team": "a"} })
		},
			want: []string{"the compute's pod_labels"}},
		{name: "the runtime image", change: func(r *Revision) {
			r.ComputeSettings = r.ComputeSettings.WithKubernetes(func(k *KubernetesSettings) { k.RuntimeImage = "example.com/rt:1" })
			r.HarnessVersion = "openclaw@image:example.com/rt:1"
		},
			want: []string{`the harness version "openclaw@2026.9.6" → "openclaw@image:example.com/rt:1"`, `the compute's runtime_image "` + PinnedRuntimeImage + `" → "example.com/rt:1"`}},
		{name: "the document names its keys, not its values", change: func(r *Revision) {
			doc, _ := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-opus-4-1"}}, channels: {telegram: {botToken: "${TG2}"}}}`)
			r.AdmittedDocument, r.GatewayDocument, r.ConfigurationGeneration = doc, doc, 4
		}, want: []string{"the configuration's generation 3 → 4", "the configuration document at agents.defaults, channels.telegram"},
			absent: []string{"opus", "TG2", "gateway's configuration"}},
		{name: "the gateway document alone", change: func(r *Revision) {
			doc, _ := occconfig.Parse(`{agents: {defaults: {model: "x/y"}}}`)
			r.GatewayDocument = doc
		}, want: []string{"the gateway's configuration at agents.defaults, channels"}},
		{name: "the mode", change: func(r *Revision) { r.ExecutionMode = ModeDedicated },
			want: []string{`the execution mode "embedded" → "dedicated"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			tc.change(cur)
			got := RevisionChanges(old, cur)
			if len(tc.want) == 0 && len(got) > 0 {
				t.Fatalf("changes %q, want none", got)
			}
			joined := strings.Join(got, "; ")
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("changes %q lack %q", got, w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(joined, a) {
					t.Errorf("changes %q quote %q", got, a)
				}
			}
			if (old.ID() == cur.ID()) != (len(got) == 0) {
				t.Errorf("ids equal %v but changes %q", old.ID() == cur.ID(), got)
			}
		})
	}
}

func TestPinnedImageOf(t *testing.T) {
	for in, want := range map[string]string{
		"openclaw@2026.9.6":          "ghcr.io/occ-platform/runtime/openclaw:2026.9.6",
		"openclaw@2026.8.1":          "ghcr.io/occ-platform/runtime/openclaw:2026.8.1",
		"codex@0.160.0":              "ghcr.io/occ-platform/runtime/codex:0.160.0",
		"openclaw@image:example/x:1": "",
		"":                           "",
		"other@1":                    "",
	} {
		if got := PinnedImageOf(in); got != want {
			t.Errorf("PinnedImageOf(%q) = %q, want %q", in, got, want)
		}
	}
}
