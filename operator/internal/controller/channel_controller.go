package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/spaceclient"
)

// ChannelReconciler registers each Channel in its Space's server, reports its statistics,
// and unlinks it from the space when it is deleted.
type ChannelReconciler struct {
	client.Client
	Recorder record.EventRecorder
	Spaces   spaceclient.SpaceClient
	// Stats, when set, polls the space servers and queues the Channels whose stats
	// changed; a reconcile takes the stats it holds. Nil: stats are read only when the
	// Channel or its Space changes.
	Stats *StatsPoller
	// UnlinkTimeout bounds how long a deleted Channel's finalizer retries an unlink its
	// space server does not answer (0: DefaultUnlinkTimeout).
	UnlinkTimeout time.Duration
}

// channelScope is what the phases of one Channel reconcile share.
type channelScope struct {
	channel *conflux.Channel
	space   *conflux.Space // nil when absent or not needed
	// spaceReason is empty when the space resolved, else a Reason constant.
	spaceReason, spaceMessage string
	registered                bool
	registerErr               error
	stats                     *spaceclient.ChannelStats
	// statsErr: the stats could not be read (stats is nil), or are partial (an older
	// space server: wraps spaceclient.ErrStatsUnsupported).
	statsErr error
	err      error
	// unlinkErr: the last unlink of a deleted channel failed; it will be tried again.
	unlinkErr error
	// released: the finalizer is gone, so is the object; no status to write.
	released bool
}

// The finalizer is added and removed with a patch; the status is only ever patched.
// +kubebuilder:rbac:groups=conflux.dev,resources=channels,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=conflux.dev,resources=channels/status,verbs=patch
// +kubebuilder:rbac:groups=conflux.dev,resources=spaces,verbs=get;list;watch

// Reconcile brings one Channel to its desired state.
func (r *ChannelReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	ch := &conflux.Channel{}
	if err := r.Get(ctx, req.NamespacedName, ch); err != nil {
		if apierrors.IsNotFound(err) {
			forgetChannelMetrics(req.Namespace, req.Name)
			if r.Stats != nil {
				r.Stats.Forget(req.Namespace, req.Name)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := ch.DeepCopy()
	s := &channelScope{channel: ch}
	defer func() {
		if s.released {
			return
		}
		s.err = retErr
		updateChannelStatus(s)
		if err := patchStatus(ctx, r.Client, ch, base); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	if !ch.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(ch, conflux.FinalizerName) {
		if err := r.Patch(ctx, ch, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
		base = ch.DeepCopy()
	}
	for _, p := range []phase[*channelScope]{r.resolveSpace, r.register, r.readStats} {
		done, err := p(ctx, s)
		if err != nil {
			r.Recorder.Eventf(ch, corev1.EventTypeWarning, conflux.ReasonReconcileError, "%v", err)
			return ctrl.Result{}, err
		}
		if done {
			break
		}
	}
	return ctrl.Result{}, nil
}

// resolveSpace finds the Space the channel lives in. A missing or deleting Space stops the
// reconcile without an error: the Space watch brings the channel back when it appears.
func (r *ChannelReconciler) resolveSpace(ctx context.Context, s *channelScope) (bool, error) {
	ch := s.channel
	if ch.Spec.Space == "" {
		s.spaceReason = conflux.ReasonNoSpace
		return true, nil
	}
	sp := &conflux.Space{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ch.Spec.Space}, sp)
	switch {
	case apierrors.IsNotFound(err):
		s.spaceReason = conflux.ReasonSpaceNotFound
		s.spaceMessage = fmt.Sprintf("Space %q not found in namespace %q", ch.Spec.Space, ch.Namespace)
		r.Recorder.Event(ch, corev1.EventTypeWarning, conflux.ReasonSpaceNotFound, s.spaceMessage)
		return true, nil
	case err != nil:
		return true, fmt.Errorf("getting space %q: %w", ch.Spec.Space, err)
	case !sp.DeletionTimestamp.IsZero():
		s.spaceReason = conflux.ReasonSpaceDeleting
		s.spaceMessage = fmt.Sprintf("Space %q is being deleted", ch.Spec.Space)
		return true, nil
	}
	s.space = sp
	return false, nil
}

func (r *ChannelReconciler) ref(s *channelScope) spaceclient.ChannelRef {
	endpoint := ""
	if s.space != nil {
		endpoint = s.space.Status.Endpoint
	}
	return spaceclient.ChannelRef{Endpoint: endpoint, Namespace: s.channel.Namespace, Space: s.channel.Spec.Space,
		Channel: s.channel.Name, Kind: string(s.channel.Spec.Kind)}
}

// register creates the channel in its space server.
func (r *ChannelReconciler) register(ctx context.Context, s *channelScope) (bool, error) {
	if err := r.Spaces.RegisterChannel(ctx, r.ref(s)); err != nil {
		s.registerErr = err
		return true, fmt.Errorf("registering in space %q: %w", s.channel.Spec.Space, err)
	}
	s.registered = true
	return false, nil
}

// readStats copies the space server's counters into the status: the poller's last reading
// when it has one, else a reading of its own (which the poller then compares with).
func (r *ChannelReconciler) readStats(ctx context.Context, s *channelScope) (bool, error) {
	var st spaceclient.ChannelStats
	var err error
	var ok bool
	if r.Stats != nil {
		st, err, ok = r.Stats.Get(s.channel.Namespace, s.channel.Name)
	}
	if !ok {
		st, err = r.Spaces.Stats(ctx, r.ref(s))
		if r.Stats != nil {
			r.Stats.Put(s.channel.Namespace, s.channel.Name, st, err)
		}
	}
	if err != nil && !errors.Is(err, spaceclient.ErrStatsUnsupported) {
		recordChannelStats(s.channel.Namespace, s.channel.Name, nil, err)
	} else {
		recordChannelStats(s.channel.Namespace, s.channel.Name, &st, err)
	}
	if errors.Is(err, spaceclient.ErrStatsUnsupported) { // an older space server: what it gave
		s.stats, s.statsErr = &st, err
		return false, nil
	}
	if err != nil {
		s.statsErr = err
		return true, fmt.Errorf("reading stats from space %q: %w", s.channel.Spec.Space, err)
	}
	s.stats = &st
	return false, nil
}

// SetupWithManager registers the reconciler: a Space whose endpoint or deletion changed
// queues its Channels, and the stats poller queues the Channels whose stats changed.
func (r *ChannelReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&conflux.Channel{}, builder.WithPredicates(specChanged)).
		Watches(&conflux.Space{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return requestsFor(ctx, r, &conflux.ChannelList{}, client.InNamespace(o.GetNamespace()),
				client.MatchingFields{channelSpaceIndex: o.GetName()})
		}), builder.WithPredicates(spaceServes))
	if r.Stats != nil {
		b = b.WatchesRawSource(source.Channel(r.Stats.Changes(), &handler.EnqueueRequestForObject{}))
	}
	return b.WithOptions(opts).Named("channel").Complete(r)
}
