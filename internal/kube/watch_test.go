package kube

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

func pod(name, rv string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// Faults a long apply meets while it waits, injected into the watch: an
// API server that goes away (the connection refused, then a 503), a watch
// it ends, a resourceVersion compacted away (410 Gone). The wait goes on
// through all of them, resuming from the last version seen, starting over
// from the current objects after a 410; only a refusal waiting cannot
// cure ends it.
func TestWatchUntil_SurvivesRestartsAndGone(t *testing.T) {
	gone := apierrors.NewResourceExpired("too old resource version: 5 (9)")
	var opened []string
	step := 0
	open := func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opened = append(opened, opts.ResourceVersion)
		step++
		w := watch.NewFakeWithChanSize(4, false)
		switch step {
		case 1: // the revision's Pod, not ready; then the server ends the watch
			w.Add(pod("a", "5", false))
			w.Stop()
		case 2: // the API server restarts
			return nil, &netError{syscall.ECONNREFUSED}
		case 3:
			return nil, apierrors.NewServiceUnavailable("starting")
		case 4: // back, but version 5 was compacted
			w.Error(&gone.ErrStatus)
		case 5: // from the current objects: ready
			w.Add(pod("a", "12", true))
		default:
			t.Fatalf("opened a watch %d times", step)
		}
		return w, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := watchUntil(ctx, open, metav1.ListOptions{LabelSelector: "x=y"}, func(ev watch.Event) (bool, error) {
		p := ev.Object.(*corev1.Pod)
		return len(p.Status.Conditions) > 0, nil
	})
	if err != nil {
		t.Fatalf("watchUntil: %v", err)
	}
	want := []string{"", "5", "5", "5", ""}
	if len(opened) != len(want) {
		t.Fatalf("opened from %q, want %q", opened, want)
	}
	for i := range want {
		if opened[i] != want[i] {
			t.Fatalf("opened from %q, want %q", opened, want)
		}
	}

	// A refusal waiting cannot cure ends the wait with it.
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
	err = watchUntil(ctx, func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, forbidden },
		metav1.ListOptions{}, func(watch.Event) (bool, error) { return true, nil })
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a 403 gave %v", err)
	}
	// The deadline ends a wait on a server that never comes back.
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()
	err = watchUntil(short, func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		return nil, &netError{syscall.ECONNREFUSED}
	},
		metav1.ListOptions{}, func(watch.Event) (bool, error) { return true, nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an absent server gave %v", err)
	}
}

type netError struct{ errno syscall.Errno }

func (e *netError) Error() string { return "dial tcp 127.0.0.1:6443: " + e.errno.Error() }
func (e *netError) Unwrap() error { return e.errno }

// closedWatch is a watch a proxy or a restarting API server closes at
// once, without an event.
func closedWatch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	w.Stop()
	return w, nil
}

// Issue 27: a list-then-watch loop whose watch keeps closing at once backs
// off (200 ms doubling to 5 s) instead of spinning on the API server: in
// 1.5 s, at most 4 rounds (before the fix, thousands).
func TestRelist_WatchClosedAtOnceBacksOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	opens := 0
	open := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		opens++
		return closedWatch(ctx, o)
	}
	err := watchUntil(ctx, open, metav1.ListOptions{}, func(watch.Event) (bool, error) { return false, nil })
	if !errors.Is(err, context.DeadlineExceeded) || opens > 4 || opens < 2 {
		t.Errorf("watchUntil: %d watches opened in 1.5 s (%v), want 2 to 4", opens, err)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	lists := 0
	list := func(context.Context, metav1.ListOptions) (string, int, error) { lists++; return "1", 1, nil }
	err = waitGone(ctx2, "Pods", metav1.ListOptions{}, list, closedWatch)
	if err == nil || lists > 4 || lists < 2 {
		t.Errorf("waitGone: %d lists in 1.5 s (%v), want 2 to 4", lists, err)
	}
}
