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

	conflux "conflux.dev/operator/api/v1alpha1"
)

// FabricReconciler reports, for each Fabric, which nodes can run its pods: they match its
// nodeSelector and advertise its device resource. A Fabric is Ready only when some can;
// placement uses only Ready Fabrics.
type FabricReconciler struct {
	client.Client
}

type fabricScope struct {
	fabric *conflux.Fabric
	nodes  *fabricNodes // nil when the nodes could not be listed
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
	// Read-only: the cache's Nodes are not copied (they are trimmed, see trimNode).
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.MatchingLabels(f.Spec.NodeSelector), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	s.nodes = observeFabricNodes(f, nodes.Items)
	return ctrl.Result{}, nil
}

func updateFabricStatus(s *fabricScope) {
	f := s.fabric
	if n := s.nodes; n != nil {
		f.Status.MatchingNodes, f.Status.ReadyNodes, f.Status.NodeStates = n.matching, n.ready, n.states
	}
	setFabricNodesAvailableCondition(s)
	setReadySummary(&f.Status.Conditions, f.Generation, false, "", s.err, conflux.FabricNodesAvailableCondition)
	if s.err == nil {
		f.Status.ObservedGeneration = f.Generation
	}
}

func setFabricNodesAvailableCondition(s *fabricScope) {
	f, n := s.fabric, s.nodes
	switch {
	case n == nil:
		return
	case n.matching == 0:
		setCondition(&f.Status.Conditions, f.Generation, conflux.FabricNodesAvailableCondition, metav1.ConditionFalse, conflux.ReasonNoMatchingNodes,
			fmt.Sprintf("no node matches nodeSelector %v", f.Spec.NodeSelector))
	case n.ready == 0:
		setCondition(&f.Status.Conditions, f.Generation, conflux.FabricNodesAvailableCondition, metav1.ConditionFalse, conflux.ReasonResourceNotAdvertised,
			fmt.Sprintf("%d node(s) match but none has %s allocatable", n.matching, f.Spec.ResourceName))
	default:
		setCondition(&f.Status.Conditions, f.Generation, conflux.FabricNodesAvailableCondition, metav1.ConditionTrue, conflux.ReasonNodesReady,
			fmt.Sprintf("%d of %d matching node(s) ready", n.ready, n.matching))
	}
}

// SetupWithManager registers the reconciler. A Node event queues only the Fabrics whose
// selector matches the node's old or new labels, and only when what a Fabric reads of it
// changed (labels, allocatable resources, existence).
func (r *FabricReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&conflux.Fabric{}, builder.WithPredicates(specChanged)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.fabricsOfNode), builder.WithPredicates(nodeChangedForFabrics)).
		WithOptions(opts).
		Named("fabric").
		Complete(r)
}
