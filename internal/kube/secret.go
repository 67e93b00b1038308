package kube

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/executor"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// SecretKey is the key a provider-written credential value lives under.
const SecretKey = "value"

// LabelCredentialSource marks the Secrets the provider writes for a source.
const LabelCredentialSource = "occ-platform.io/credential-source"

// LabelCredentialOwner holds the owner id of the credential source
// resource that wrote a Secret: a random id it keeps in its private
// state. Two configurations with a source of the same name in one
// namespace derive the same Secret names; the owner tells them apart.
const LabelCredentialOwner = "occ-platform.io/credential-owner"

var _ executor.SecretStore = (*Executor)(nil)

// WriteSecret writes one immutable Secret per value version (AU7) in the
// compute's namespace: running revisions keep the Secret they were
// admitted with until redeployed. An existing Secret of that name is this
// source's own (a retried apply) only when it carries owner; any other one
// (another configuration's source of the same name, a Secret made by
// hand) is RESOURCE_CONFLICT, and nothing is changed.
func (e *Executor) WriteSecret(ctx context.Context, sec executor.Secret) error {
	ns, name, source, owner, value := sec.Compute.Kubernetes().Namespace, sec.Name, sec.Source, sec.Owner, sec.Value
	immutable := true
	labels := map[string]string{LabelCredentialSource: source, render.LabelManagedBy: render.ManagedBy}
	if owner != "" { // "": a source from before owners keeps writing as it did
		labels[LabelCredentialOwner] = owner
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  &immutable,
		Data:       map[string][]byte{SecretKey: value},
	}
	_, err := e.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: render.FieldManager})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("write Secret %s/%s: %w", ns, name, err)
	}
	exists, curOwner, curSource, err := e.credentialLabels(ctx, ns, name)
	switch {
	case err != nil:
		return err
	case !exists:
		return fmt.Errorf("write Secret %s/%s: it existed, then was deleted during the write; apply again", ns, name)
	}
	if curOwner == owner && curSource == source {
		return nil
	}
	return &executor.Failure{Code: executor.ResourceConflict,
		Summary: fmt.Sprintf("credential Secret %s already exists in namespace %s", name, ns),
		Reason:  fmt.Sprintf("this credential source %q did not write it: another Terraform configuration's credential source of the same name, or a Secret made by hand, holds the name", source),
		Next:    "Give this credential source another name (its Secrets are named after it), or remove the other one. Nothing was changed."}
}

// DeleteSecrets removes the Secrets a source wrote in the compute's
// namespace, except those named in keep: those labelled with its name and
// owner, or, with owner "" (a source from before owners), with its name
// and no owner. One DeleteCollection by labels and names: no list right
// needed.
func (e *Executor) DeleteSecrets(ctx context.Context, c admission.Compute, source, owner string, keep ...string) error {
	ns := c.Kubernetes().Namespace
	sel := LabelCredentialSource + "=" + source + "," + render.LabelManagedBy + "=" + render.ManagedBy + ","
	if owner != "" {
		sel += LabelCredentialOwner + "=" + owner
	} else {
		sel += "!" + LabelCredentialOwner
	}
	var fields []string
	for _, k := range keep {
		if k != "" {
			fields = append(fields, "metadata.name!="+k)
		}
	}
	err := e.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel, FieldSelector: strings.Join(fields, ",")})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the Secrets of source %s: %w", source, err)
	}
	return nil
}

// SecretOwner reads the owner label of a provider-written credential
// Secret in the compute's namespace (metadata only): what an imported
// source adopts.
func (e *Executor) SecretOwner(ctx context.Context, c admission.Compute, name string) (exists bool, owner string, err error) {
	exists, owner, _, err = e.credentialLabels(ctx, c.Kubernetes().Namespace, name)
	return exists, owner, err
}

// credentialLabels reads a Secret's owner and source labels (metadata
// only: the value never reaches the provider).
func (e *Executor) credentialLabels(ctx context.Context, ns, name string) (exists bool, owner, source string, err error) {
	cur, err := e.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, "", "", nil
	case err != nil:
		return false, "", "", fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
	}
	return true, cur.Labels[LabelCredentialOwner], cur.Labels[LabelCredentialSource], nil
}

// HasSecretKey reports whether a Secret exists in the compute's namespace
// and holds key. It reads only the key's presence; the value never leaves
// this function.
func (e *Executor) HasSecretKey(ctx context.Context, c admission.Compute, name, key string) (exists, hasKey bool, err error) {
	ns := c.Kubernetes().Namespace
	s, err := e.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
	}
	_, ok := s.Data[key]
	return true, ok, nil
}
