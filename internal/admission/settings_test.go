package admission

import (
	"encoding/json"
	"testing"
)

// rule AD3: a revision's id is the hash of what it freezes, so the per-kind
// settings types must encode exactly as the flat settings did: these ids
// and encodings were taken from the flat ComputeSettings before the
// settings were split by kind (so no agent gets a new revision from it).
// An id changes only with what a revision freezes (see the SSH row).
func TestAD3_PerKindSettingsKeepRevisionIDs(t *testing.T) {
	secs := int64(30)
	full := dedicatedCodexInput()
	full.Compute = full.Compute.WithKubernetes(func(k *KubernetesCompute) {
		k.CPUMillis, k.MemoryLimit, k.CPURequestMillis, k.MemoryRequest = 1500, "3Gi", 500, "1Gi"
		k.RuntimeImage, k.CodexImage = "", "registry.example/codex:1"
		k.PodAnnotations = map[string]string{"a": "b"}
		k.PodLabels = map[string]string{"team": "x"}
		k.NodeSelector = map[string]string{"pool": "agents"}
		k.Tolerations = []Toleration{{Key: "k", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: &secs}}
		k.PriorityClassName, k.ImagePullSecrets, k.ImagePullPolicy = "high", []string{"pull"}, "IfNotPresent"
		k.State = &State{Size: "2Gi", StorageClass: "fast", AccessMode: "ReadWriteOnce", RetainOnDestroy: true}
	})
	for _, tc := range []struct {
		name, id, settings string
		in                 Input
	}{
		{"kubernetes", "21e462d60a9704be", `{"kind":"kubernetes","name":"prod","namespace":"agents","runtime_image":"ghcr.io/occ-platform/runtime/openclaw:2026.9.6","codex_image":"ghcr.io/occ-platform/runtime/codex:0.169.0","cpu_millis":2000,"memory_limit":"4Gi"}`, k8sEmbeddedInput()},
		{"kubernetes, every setting", "b9bc6e8f03f27a1d", `{"kind":"kubernetes","name":"prod","namespace":"agents","runtime_image":"ghcr.io/occ-platform/runtime/openclaw:2026.9.6","codex_image":"registry.example/codex:1","cpu_millis":1500,"memory_limit":"3Gi","pod_annotations":{"a":"b"},"state":{"size":"2Gi","storage_class":"fast","access_mode":"ReadWriteOnce"},"node_selector":{"pool":"agents"},"tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule","toleration_seconds":30}],"priority_class_name":"high","pod_labels":{"team":"x"},"cpu_request_millis":500,"memory_request":"1Gi","image_pull_secrets":["pull"],"image_pull_policy":"IfNotPresent"}`, full},
		// The SSH id changed once since (issue 27): the platform's wiring
		// stamps gateway.auth.mode "token" into every SSH document.
		{"ssh", "665bef856153dc65", `{"kind":"ssh","name":"edge","host":"edge.example.com","port":22,"openclaw_path":"/usr/local/bin/openclaw","config_dir":"/etc/openclaw"}`, sshInput()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev, errs := Admit(tc.in)
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
			if b, _ := json.Marshal(rev.ComputeSettings); string(b) != tc.settings {
				t.Errorf("settings encode as\n%s\nwant\n%s", b, tc.settings)
			}
			if got := rev.ID(); got != tc.id {
				t.Errorf("revision id = %s, want %s (the flat settings' id)", got, tc.id)
			}
		})
	}
}

// A kind's settings that do not encode as a JSON object cannot sit beside
// the kind and name: the encoding fails instead of writing a broken one.
func TestComputeSettings_SettingsMustBeAnObject(t *testing.T) {
	if _, err := json.Marshal(ComputeSettings{Kind: "odd", Name: "x", Settings: []string{"a"}}); err == nil {
		t.Error("settings encoding as an array were accepted")
	}
	b, err := json.Marshal(ComputeSettings{Kind: "empty", Name: "x", Settings: struct{}{}})
	if err != nil || string(b) != `{"kind":"empty","name":"x"}` {
		t.Errorf("empty settings encode as %s, %v", b, err)
	}
}
