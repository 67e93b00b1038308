package executor

import (
	"context"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
)

// SecretStore is an optional capability of an Executor: a compute kind
// whose agents read credential sources' values from their target (on
// Kubernetes, Secrets in the compute's namespace) implements it, and the
// occ_credential_source resource writes, checks and removes those values
// through it, never through a kind's own package. A kind without it keeps
// credentials its own way (an SSH host's environment file): a source on
// such a compute writes nothing.
//
// A value goes from the configuration to the target and nowhere else
// (AU7): no method returns it, and none may log it.
type SecretStore interface {
	// WriteSecret writes one credential value, immutable, one per value
	// version: running revisions keep the one they were admitted with
	// until redeployed. An existing secret of that name is the source's
	// own (a retried apply) only when it carries its source and owner;
	// any other is a RESOURCE_CONFLICT *Failure, and nothing is changed.
	WriteSecret(ctx context.Context, s Secret) error
	// DeleteSecrets removes the values a source wrote on the compute's
	// target, except those named in keep. Owner "" means a source from
	// before owners: its values carry none.
	DeleteSecrets(ctx context.Context, c admission.Compute, source, owner string, keep ...string) error
	// SecretOwner reads the owner of a value the provider wrote (what an
	// imported source adopts); exists is false when it is gone.
	SecretOwner(ctx context.Context, c admission.Compute, name string) (exists bool, owner string, err error)
	// HasSecretKey reports whether a secret the user made (secret_ref)
	// exists on the compute's target and holds key; the value is never
	// read out.
	HasSecretKey(ctx context.Context, c admission.Compute, name, key string) (exists, hasKey bool, err error)
}

// Secret is one credential value a source writes to its compute's target.
type Secret struct {
	Compute admission.Compute
	// Name is the secret's name (one per value version); Source the
	// credential source's name; Owner the id that tells this source from
	// one of the same name in another configuration ("" for a source from
	// before owners).
	Name, Source, Owner string
	Value               []byte
}
