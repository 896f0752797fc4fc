package controller

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// fabricNodes is what a Fabric's matching nodes offer: the totals over all of them and the
// states of the first conflux.FabricNodeStatesLimit by name.
type fabricNodes struct {
	matching, ready int32
	states          []conflux.FabricNodeState
}

// observeFabricNodes judges each node matching f's selector (the caller lists them): ready
// when it is not being deleted and, if f has a device resource, advertises it.
func observeFabricNodes(f *conflux.Fabric, nodes []corev1.Node) *fabricNodes {
	out := &fabricNodes{}
	all := make([]conflux.FabricNodeState, 0, len(nodes))
	for i := range nodes {
		st := fabricNodeState(f, &nodes[i])
		out.matching++
		if st.Ready {
			out.ready++
		}
		all = append(all, st)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	if len(all) > conflux.FabricNodeStatesLimit {
		all = all[:conflux.FabricNodeStatesLimit]
	}
	if len(all) > 0 {
		out.states = all
	}
	return out
}

func fabricNodeState(f *conflux.Fabric, n *corev1.Node) conflux.FabricNodeState {
	st := conflux.FabricNodeState{Name: n.Name}
	if rn := f.Spec.ResourceName; rn != "" {
		if q, ok := n.Status.Allocatable[corev1.ResourceName(rn)]; ok {
			st.Allocatable = q.Value()
		}
	}
	switch {
	case !n.DeletionTimestamp.IsZero():
		st.Reason = conflux.ReasonDeleting
	case f.Spec.ResourceName == "":
		st.Ready, st.Reason = true, conflux.ReasonNodeMatches
	case st.Allocatable > 0:
		st.Ready, st.Reason = true, conflux.ReasonResourceAdvertised
	default:
		st.Reason = conflux.ReasonResourceNotAdvertised
	}
	return st
}

// fabricsOfNode maps a Node to the Fabrics whose selector matches its labels. On an update
// it is called with the old and the new node, so a Fabric the node leaves is queued too.
// It lists the Fabrics (few) without copying them, and no Nodes.
func (r *FabricReconciler) fabricsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	var list conflux.FabricList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	set := labels.Set(o.GetLabels())
	var reqs []reconcile.Request
	for i := range list.Items {
		f := &list.Items[i]
		if len(f.Spec.NodeSelector) > 0 && labels.SelectorFromValidatedSet(f.Spec.NodeSelector).Matches(set) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(f)})
		}
	}
	return reqs
}

// nodeChangedForFabrics passes Node creations and deletions, and updates that change what
// a Fabric reads: labels, allocatable resources, the start of the deletion. Heartbeats and
// condition updates (most Node updates) pass nothing.
var nodeChangedForFabrics = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// trimNode keeps of a cached Node only what the Fabric reconciler reads (name, labels,
// deletion, allocatable), so that the cache of a big cluster's Nodes stays small: images,
// conditions, addresses and managed fields are dropped.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Generation: n.Generation, CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp,
			Labels: n.Labels},
		Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}, nil
}
