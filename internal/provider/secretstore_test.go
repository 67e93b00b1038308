package provider

import (
	"context"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// Secret storage is a capability a kind's executor has or lacks: a
// credential source on a Kubernetes compute writes through the executor's
// SecretStore, one on an SSH compute writes nothing (rule AU7: the value
// goes to the target its agents read it from, and nowhere else).
func TestSecretStore_IsACapabilityOfTheKind(t *testing.T) {
	d := &Data{}
	ctx := context.Background()
	if _, ok, err := d.secretStore(ctx, admission.Compute{Kind: admission.KindSSH, Name: "edge", Settings: admission.SSHCompute{Host: "10.0.0.5"}}); err != nil || ok {
		t.Fatalf("an SSH compute: store = %v, err = %v; want no store", ok, err)
	}
	if _, ok, err := d.secretStore(ctx, admission.Compute{Kind: "nomad"}); err == nil || ok {
		t.Fatalf("a kind with no executor: store = %v, err = %v; want an error", ok, err)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBE_HOST", "https://127.0.0.1:1")
	if _, ok, err := d.secretStore(ctx, admission.Compute{Kind: admission.KindKubernetes, Name: "k", Settings: admission.KubernetesCompute{Namespace: "occ-a"}}); err != nil || !ok {
		t.Fatalf("a Kubernetes compute: store = %v, err = %v; want its executor's store", ok, err)
	}
}
