package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// unlinkRetryInterval is the pause between two unlink attempts of one deleted Channel.
const unlinkRetryInterval = 2 * time.Second

// reconcileDelete unlinks the channel from its space server and removes the finalizer. It
// never waits for ever on a server that is not there: a Space that is gone has nothing left
// to unlink from; a Space being deleted takes its server and store with it, so one failed
// attempt is enough; otherwise a failed unlink is retried until UnlinkTimeout after the
// deletion started. Giving up is a Warning event (UnlinkAbandoned) naming what may remain.
func (r *ChannelReconciler) reconcileDelete(ctx context.Context, s *channelScope) (ctrl.Result, error) {
	ch := s.channel
	if ch.Spec.Space != "" {
		sp := &conflux.Space{}
		err := r.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ch.Spec.Space}, sp)
		switch {
		case apierrors.IsNotFound(err): // the Space and its server are gone: nothing to unlink
		case err != nil:
			return ctrl.Result{}, err
		default:
			s.space = sp
			if err := r.Spaces.UnlinkChannel(ctx, r.ref(s)); err != nil {
				timeout := r.unlinkTimeout()
				retry, why := unlinkRetry(ch, sp, timeout, time.Now())
				if retry > 0 {
					s.unlinkErr = err
					r.Recorder.Eventf(ch, corev1.EventTypeWarning, conflux.ReasonUnlinkFailed,
						"unlinking from space %q: %v (retrying; giving up %s after the deletion)", ch.Spec.Space, err, timeout)
					return ctrl.Result{RequeueAfter: retry}, nil
				}
				r.Recorder.Eventf(ch, corev1.EventTypeWarning, conflux.ReasonUnlinkAbandoned,
					"gave up unlinking from space %q (%s): %v; the channel's name and segments may remain in that space server's store",
					ch.Spec.Space, why, err)
			}
		}
	}
	base := ch.DeepCopy()
	if controllerutil.RemoveFinalizer(ch, conflux.FinalizerName) {
		if err := r.Patch(ctx, ch, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	s.released = true
	return ctrl.Result{}, nil
}

func (r *ChannelReconciler) unlinkTimeout() time.Duration {
	if r.UnlinkTimeout > 0 {
		return r.UnlinkTimeout
	}
	return DefaultUnlinkTimeout
}

// unlinkRetry says how long to wait before trying a failed unlink again, or 0 and why the
// finalizer gives up: the Space is being deleted, or timeout has passed since the Channel's
// deletion started (deletionTimestamp has a one-second resolution).
func unlinkRetry(ch *conflux.Channel, sp *conflux.Space, timeout time.Duration, now time.Time) (time.Duration, string) {
	if !sp.DeletionTimestamp.IsZero() {
		return 0, fmt.Sprintf("Space %q is being deleted, with its server and store", sp.Name)
	}
	left := ch.DeletionTimestamp.Add(timeout).Sub(now)
	if left <= 0 {
		return 0, fmt.Sprintf("still failing %s after the deletion", timeout)
	}
	return min(left, unlinkRetryInterval), ""
}
