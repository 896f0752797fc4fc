package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// FabricReconciler counts the nodes of each Fabric; placement prefers fabrics with nodes.
type FabricReconciler struct {
	client.Client
}

type fabricScope struct {
	fabric *conflux.Fabric
	nodes  *int32
	err    error
}

// +kubebuilder:rbac:groups=conflux.dev,resources=fabrics,verbs=get;list;watch
// +kubebuilder:rbac:groups=conflux.dev,resources=fabrics/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile updates one Fabric's status.
func (r *FabricReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	f := &conflux.Fabric{}
	if err := r.Get(ctx, req.NamespacedName, f); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := f.DeepCopy()
	s := &fabricScope{fabric: f}
	defer func() {
		s.err = retErr
		updateFabricStatus(s)
		if err := patchStatus(ctx, r.Client, f, base); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.MatchingLabels(f.Spec.NodeSelector)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	n := int32(len(nodes.Items))
	s.nodes = &n
	return ctrl.Result{}, nil
}

func updateFabricStatus(s *fabricScope) {
	f := s.fabric
	if s.nodes != nil {
		f.Status.Nodes = *s.nodes
	}
	setFabricNodesAvailableCondition(s)
	setReadySummary(&f.Status.Conditions, f.Generation, false, "", s.err, conflux.FabricNodesAvailableCondition)
	if s.err == nil {
		f.Status.ObservedGeneration = f.Generation
	}
}

func setFabricNodesAvailableCondition(s *fabricScope) {
	f := s.fabric
	switch {
	case s.nodes == nil:
		return
	case *s.nodes == 0:
		setCondition(&f.Status.Conditions, f.Generation, conflux.FabricNodesAvailableCondition, metav1.ConditionFalse, conflux.ReasonNoMatchingNodes,
			fmt.Sprintf("no node matches nodeSelector %v", f.Spec.NodeSelector))
	default:
		setCondition(&f.Status.Conditions, f.Generation, conflux.FabricNodesAvailableCondition, metav1.ConditionTrue, conflux.ReasonReconciled,
			fmt.Sprintf("%d node(s)", *s.nodes))
	}
}

// SetupWithManager registers the reconciler; any Node change requeues every Fabric.
func (r *FabricReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&conflux.Fabric{}, builder.WithPredicates(specChanged)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return requestsFor(ctx, r, &conflux.FabricList{})
		}), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(opts).
		Named("fabric").
		Complete(r)
}
