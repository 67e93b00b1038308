package kube

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/occ-platform/terraform-provider-occ/internal/render"
	testkube "github.com/occ-platform/terraform-provider-occ/internal/testenv/kube"
)

// Fault: the API server restarts while apply waits for the revision's
// startup probe. Pass: the apply returns activated (a create that would be
// tainted otherwise), with exactly one audit Event. Its own cluster: the
// restart must not disturb the other tests' shared one.
func TestFault_APIServerRestartWhileTheGateWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := testkube.Start(ctx, testkube.Options{})
	if err != nil {
		testkube.SkipOrFail(t, err)
	}
	t.Cleanup(c.Stop)
	ns := c.TestNamespace(t)
	exec, err := New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		// Once the revision's Pod exists (the gate waits on it), take the
		// API server away for 3 s.
		sel := metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"}
		for ctx.Err() == nil {
			if pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, sel); err == nil && len(pods.Items) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		restarted <- c.RestartAPIServer(ctx, 3*time.Second)
	}()
	res, err := exec.Apply(ctx, testRevision(t, ns, testkube.Behavior(testkube.BehaviorReadyAfter, 15*time.Second)), 1, 0)
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restarting the API server: %v", rerr)
	}
	if err != nil {
		t.Fatalf("apply across an API server restart: %v", err)
	}
	if res.ActivatedAt.IsZero() {
		t.Fatal("activated without an activation time")
	}
	events, err := c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelAgent + "=bench"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events.Items); n != 1 || events.Items[0].Reason != "RevisionActivated" {
		t.Fatalf("%d audit events, want one RevisionActivated", n)
	}
}
