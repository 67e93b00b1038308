package kube

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watchFunc opens a watch from a resourceVersion ("": the current objects
// first, as ADDED events, then changes).
type watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

// watchUntil runs condition over the events of a watch until it reports
// done or an error, surviving what a long apply meets on the way: a watch
// the server ends is resumed from the last resourceVersion seen; an API
// server that restarts (connection refused, 5xx, a timeout) is waited for,
// with a backoff, within ctx's deadline; a resourceVersion too old to
// resume (410 Gone, after a compaction) starts over from the current
// objects, which condition judges again (every condition here judges
// state, not transitions). Only a refusal that waiting cannot cure (403,
// 401, 404, a malformed request) ends it with that error.
//
// Why not watchtools.UntilWithSync: it lists before it watches, one more
// request per deploy; a watch without a resourceVersion already starts
// with the current objects, and re-listing is exactly this restart from "".
func watchUntil(ctx context.Context, open watchFunc, opts metav1.ListOptions, condition func(watch.Event) (bool, error)) error {
	var backoff relist
	opts.AllowWatchBookmarks = true
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w, err := open(ctx, opts)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case gone(err):
				opts.ResourceVersion = ""
				continue
			case !transient(err):
				return err
			}
			if err := backoff.wait(ctx); err != nil {
				return err
			}
			continue
		}
		restart, events := false, 0
		for ev := range w.ResultChan() {
			events++
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				switch {
				case gone(err):
					opts.ResourceVersion = ""
				case !transient(err):
					w.Stop()
					return err
				}
				restart = true
				break
			}
			backoff.news()
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				opts.ResourceVersion = m.GetResourceVersion()
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			ok, err := condition(ev)
			if err != nil || ok {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if restart || events == 0 {
			// an error, or a watch the server closed at once: not again
			// straight away
			if err := backoff.wait(ctx); err != nil {
				return err
			}
		}
	}
}

// gone is a resourceVersion the server no longer has.
func gone(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// transient is an error that waiting can cure: no answer at all, or the
// server saying it is unavailable, overloaded or timing out.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // a network error: the API server is away
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}

// relist spaces out the rounds of a watch loop (watchUntil, and each
// list-then-watch loop) whose watch ended
// without news (closed at once by a proxy or a restarting API server, or
// an error event): 200 ms, doubling to 5 s, so that such a loop never
// spins on the API server; news (an event) resets it.
type relist struct{ delay time.Duration }

const relistMin, relistMax = 200 * time.Millisecond, 5 * time.Second

// wait pauses before the next round, or returns ctx's error.
func (b *relist) wait(ctx context.Context) error {
	b.delay = min(max(2*b.delay, relistMin), relistMax)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.delay):
		return nil
	}
}

// news resets the backoff after an event.
func (b *relist) news() { b.delay = 0 }

// after ends a round that saw events (news) or none (a pause first).
func (b *relist) after(ctx context.Context, events int) error {
	if events > 0 {
		b.news()
		return nil
	}
	return b.wait(ctx)
}
