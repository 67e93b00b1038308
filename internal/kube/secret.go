package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

// SecretKey is the key a provider-written credential value lives under.
const SecretKey = "value"

// LabelCredentialSource marks the Secrets the provider writes for a source.
const LabelCredentialSource = "occ-platform.io/credential-source"

// WriteCredentialSecret writes one immutable Secret per value version (AU7):
// running revisions keep the Secret they were admitted with until
// redeployed. An existing Secret of that name is left as it is.
func (e *Executor) WriteCredentialSecret(ctx context.Context, ns, name, source string, value []byte) error {
	immutable := true
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{LabelCredentialSource: source, render.LabelManagedBy: render.ManagedBy}},
		Type:      corev1.SecretTypeOpaque,
		Immutable: &immutable,
		Data:      map[string][]byte{SecretKey: value},
	}
	_, err := e.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: render.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write Secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// SecretHasKey reports whether a Secret exists and holds key. It reads only
// the key's presence; the value never leaves this function.
func (e *Executor) SecretHasKey(ctx context.Context, ns, name, key string) (exists, hasKey bool, err error) {
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

// DeleteCredentialSecrets removes the Secrets the provider wrote for a source.
func (e *Executor) DeleteCredentialSecrets(ctx context.Context, ns, source string) error {
	sel := LabelCredentialSource + "=" + source + "," + render.LabelManagedBy + "=" + render.ManagedBy
	err := e.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the Secrets of source %s: %w", source, err)
	}
	return nil
}
