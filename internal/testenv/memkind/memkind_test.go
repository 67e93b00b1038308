package memkind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/executor/conformance"
	"github.com/occ-platform/terraform-provider-occ/internal/provider"
	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

// The kind's registration: admission learns its row, and the provider its
// occ_compute block and executor (terraform_test.go).
func TestMain(m *testing.M) {
	if err := errors.Join(admission.RegisterKind(Row), provider.RegisterKind(terraformKind())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestConformance runs the executor contract's conformance suite against
// the in-memory kind: a third kind, registered from this package alone,
// passes the same table as the Kubernetes and SSH executors (issue 29).
//
//	go test ./internal/testenv/memkind -run TestConformance -v
func TestConformance(t *testing.T) {
	places := 0
	exec := &Executor{Targets: map[string]*Target{}}
	conformance.Run(t, conformance.Kind{
		GatewayAnswers: true,
		Name:           Kind,
		Executor:       exec,
		NewPlace: func(t *testing.T) *conformance.Place {
			places++
			host := fmt.Sprintf("t%d", places)
			target := NewTarget()
			exec.Targets[host] = target
			t.Cleanup(func() { delete(exec.Targets, host) })
			return memoryPlace(t, exec, host, target)
		},
		HeldCode: executor.CodeRuntime(runtimerecord.CodeModelProbeTimeout),
		FailCode: executor.DeploymentFailed,
		// AC1: the failed revision never became ready; revision 1 keeps
		// serving while revision 2 is written, never activated.
		AfterFailedUpdate:   conformance.Observation{Revision: 1, Drifts: []executor.DriftReason{executor.DriftUnfinished}},
		RemovedDrift:        executor.DriftWorkload,
		EditedDrift:         executor.DriftEdited,
		KeepsActivationTime: true,
		ForeignIDs:          []string{"occ-acme/support", "10.0.0.5/support", "ssh://edge/support"},
	})
}

// memoryPlace is one target of the in-memory kind.
func memoryPlace(t *testing.T, exec *Executor, host string, target *Target) *conformance.Place {
	compute := Compute("m-"+host, host, "")
	return &conformance.Place{
		Compute: compute,
		Where:   "memory target " + host,
		ID:      func(name string) string { return AgentID(compute, name) },
		Revision: func(t *testing.T, name string, variant int, b conformance.Behaviour) *admission.Revision {
			t.Helper()
			c := Compute("m-"+host, host, fmt.Sprintf("/memkind/%s/v%d", b, variant))
			return conformance.EmbeddedRevision(t, name, c, admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1,
				SecretRef: &admission.SecretRef{Name: "model-key", Key: "api-key"}}, "")
		},
		Remove:    func(_ context.Context, _ *testing.T, name string) { target.Remove(name) },
		Edit:      func(_ context.Context, _ *testing.T, name string) { target.Edit(name) },
		LookAlike: func(_ context.Context, _ *testing.T, name string) { target.LookAlike(name) },
		Leftovers: func(_ context.Context, _ *testing.T, name string) []string { return target.Leftovers(name) },
		Incarnation: func(_ context.Context, _ *testing.T, name string) string {
			if n := target.Starts(name); n > 0 {
				return strconv.Itoa(n)
			}
			return ""
		},
		Unreachable: func(*testing.T) (executor.Executor, admission.Compute) {
			return exec, Compute("m-"+host, "nowhere", "")
		},
	}
}
