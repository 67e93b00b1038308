package kube

import (
	"context"
	"sync/atomic"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// An access review the API server allowed is asked once per provider
// process: the plan's preflight, the apply's second look (AD6) and every
// deploy's prepare check the same rules of one namespace. One it refused
// is asked again, so that a permission granted since counts; another
// namespace is its own question.
func TestAllowed_AskedOncePerProcess(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	var asked atomic.Int64
	var refuse atomic.Bool
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked.Add(1)
		review := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview)
		review.Status.Allowed = !refuse.Load()
		return true, review, nil
	})
	e := &Executor{Client: client, grants: &grantSet{allowed: map[string]bool{}}}
	reviews := int64(0)
	for _, r := range RequiredRules {
		reviews += int64(len(r.Resources) * len(r.Verbs))
	}

	for range 3 {
		if err := e.op(nil).CheckPermissions(ctx, "occ-acme"); err != nil {
			t.Fatal(err)
		}
	}
	if got := asked.Load(); got != reviews {
		t.Errorf("three checks of one namespace asked %d reviews, want %d (once each)", got, reviews)
	}
	if err := e.CheckPermissions(ctx, "occ-other"); err != nil || asked.Load() != 2*reviews {
		t.Errorf("another namespace: %v, %d reviews in all, want %d", err, asked.Load(), 2*reviews)
	}

	// A refusal is not remembered.
	refuse.Store(true)
	attrs := authzv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}
	for range 2 {
		if ok, err := e.allowed(ctx, attrs); ok || err != nil {
			t.Fatalf("refused review: %v %v", ok, err)
		}
	}
	if got := asked.Load(); got != 2*reviews+2 {
		t.Errorf("a refused review was remembered: %d reviews, want %d", got, 2*reviews+2)
	}
	refuse.Store(false)
	if ok, _ := e.allowed(ctx, attrs); !ok {
		t.Error("a permission granted since the refusal does not count")
	}

	// An executor without the set (a test's) asks every time.
	bare := &Executor{Client: client}
	before := asked.Load()
	_ = bare.CheckPermissions(ctx, "occ-acme")
	if asked.Load()-before != reviews {
		t.Errorf("an executor without grants asked %d, want %d", asked.Load()-before, reviews)
	}
}
