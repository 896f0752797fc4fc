package controller

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// SpaceReconciler runs each Space as a StatefulSet of one confluxd --role=space pod with a
// volume claim template, behind a headless Service.
type SpaceReconciler struct {
	client.Client
	Recorder record.EventRecorder
	// Image of confluxd.
	Image string
	// ImagePullSecrets (names) added to the space server pods.
	ImagePullSecrets []string
	// Upgrades: when a running StatefulSet takes a new Image (nil: at once).
	Upgrades *Upgrades
	// Edge, when the operator runs the edge: what it does with each Space (the Exposed
	// condition). Nil: exposure is not served.
	Edge ExposureView
	// EdgeChanges requeues the Spaces whose exposure the edge changed (with Edge).
	EdgeChanges <-chan event.GenericEvent
}

// ExposureView is the edge as the Space reconciler sees it (edge.Server).
type ExposureView interface {
	Exposure(namespace, name string) (exposed bool, holder string, built bool)
}

// spaceScope is what the phases of one Space reconcile share.
type spaceScope struct {
	space       *conflux.Space
	statefulSet *appsv1.StatefulSet // as observed after the phase ran
	service     *corev1.Service
	channels    []string // names of the Channels using the space
	err         error    // the aggregated phase error
	// the edge's view of the Space (Exposed condition)
	edgeOn, edgeBuilt, exposed bool
	exposureHolder             string
	// released: the finalizer is gone, so is the object; no status to write.
	released bool
	// upgradeWaiting: the StatefulSet waits for an upgrade wave (reconcile again).
	upgradeWaiting bool
}

// Only what the code does: the finalizer is patched, the status is patched, owned objects
// are created and updated (applyOwned), never patched or deleted (the garbage collector
// deletes them; only a PodDisruptionBudget no longer asked for is deleted, see
// space_controller_pdb.go). spaces/finalizers: the owner references of the StatefulSet and Service
// block their owner's deletion, which OwnerReferencesPermissionEnforcement allows only
// with update on the owner's finalizers. Events: every reconciler's recorder (core/v1).
// +kubebuilder:rbac:groups=conflux.dev,resources=spaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=conflux.dev,resources=spaces/status,verbs=patch
// +kubebuilder:rbac:groups=conflux.dev,resources=spaces/finalizers,verbs=update
// +kubebuilder:rbac:groups=conflux.dev,resources=channels,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile brings one Space to its desired state.
func (r *SpaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	space := &conflux.Space{}
	if err := r.Get(ctx, req.NamespacedName, space); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := space.DeepCopy()
	s := &spaceScope{space: space, edgeOn: r.Edge != nil}
	if r.Edge != nil {
		s.exposed, s.exposureHolder, s.edgeBuilt = r.Edge.Exposure(space.Namespace, space.Name)
	}
	defer func() {
		if s.released {
			return
		}
		s.err = retErr
		updateSpaceStatus(s)
		if err := patchStatus(ctx, r.Client, space, base); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	if !space.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(space, conflux.FinalizerName) {
		if err := r.Patch(ctx, space, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
		base = space.DeepCopy()
	}

	var errs []error
	for _, p := range []phase[*spaceScope]{r.reconcileService, r.reconcileStatefulSet, r.reconcileDisruptionBudget, r.reconcileChannels} {
		if _, err := p(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := kerrors.NewAggregate(errs); err != nil {
		r.Recorder.Eventf(space, corev1.EventTypeWarning, conflux.ReasonReconcileError, "reconcile failed: %v", err)
		return ctrl.Result{}, err
	}
	if s.upgradeWaiting {
		return ctrl.Result{RequeueAfter: r.Upgrades.Recheck}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileDelete waits until no Channel uses the space, then lets it go; the owned
// StatefulSet, Service and (per the StatefulSet's policy) claims are garbage-collected.
func (r *SpaceReconciler) reconcileDelete(ctx context.Context, s *spaceScope) (ctrl.Result, error) {
	if _, err := r.reconcileChannels(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if len(s.channels) > 0 {
		r.Recorder.Eventf(s.space, corev1.EventTypeNormal, conflux.ReasonChannelsRemaining,
			"waiting for %d channel(s) to be deleted: %v", len(s.channels), s.channels)
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	base := s.space.DeepCopy()
	if controllerutil.RemoveFinalizer(s.space, conflux.FinalizerName) {
		if err := r.Patch(ctx, s.space, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	s.released = true
	return ctrl.Result{}, nil
}

func (r *SpaceReconciler) edgeChanges() <-chan event.GenericEvent {
	if r.EdgeChanges == nil {
		return make(chan event.GenericEvent) // never fires
	}
	return r.EdgeChanges
}

// SetupWithManager registers the reconciler; a Channel's creation, deletion or spec change
// (its space) queues its Space, its status updates do not.
func (r *SpaceReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&conflux.Space{}, builder.WithPredicates(specChanged)).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&conflux.Channel{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ch := o.(*conflux.Channel)
			if ch.Spec.Space == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ch.Namespace, Name: ch.Spec.Space}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.edgeChanges(), &handler.EnqueueRequestForObject{})).
		WithOptions(opts).
		Named("space").
		Complete(r)
}
