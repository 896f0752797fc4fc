package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// The watches map an event to exactly the objects it concerns, through field indexes on the
// relations: a Channel event queues the Workflows that bind it, a Fabric event the Workflows
// that name it. No event lists a whole namespace or the cluster, and the lists of the map
// functions read the cache without deep copies (they only take names).
const (
	// channelSpaceIndex indexes Channels by spec.space.
	channelSpaceIndex = "spec.space"
	// workflowChannelIndex indexes Workflows by every Channel their components bind.
	workflowChannelIndex = "spec.components.channels"
	// workflowFabricIndex indexes Workflows by every Fabric their components name
	// (conflux.AnyFastFabric included: such a Workflow cares about every Fabric).
	workflowFabricIndex = "spec.components.fabric"
)

// SetupIndexes registers the field indexes the reconcilers and watches list by.
func SetupIndexes(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &conflux.Channel{}, channelSpaceIndex, channelSpace); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &conflux.Workflow{}, workflowChannelIndex, workflowChannels); err != nil {
		return err
	}
	return idx.IndexField(ctx, &conflux.Workflow{}, workflowFabricIndex, workflowFabrics)
}

func channelSpace(o client.Object) []string {
	if s := o.(*conflux.Channel).Spec.Space; s != "" {
		return []string{s}
	}
	return nil
}

func workflowChannels(o client.Object) []string {
	var out []string
	for _, c := range o.(*conflux.Workflow).Spec.Components {
		out = append(append(out, c.Inputs...), c.Outputs...)
	}
	return unique(out)
}

func workflowFabrics(o client.Object) []string {
	var out []string
	for _, c := range o.(*conflux.Workflow).Spec.Components {
		if c.Fabric != "" {
			out = append(out, c.Fabric)
		}
	}
	return unique(out)
}

func unique(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// requestsFor lists the objects of list matching opts (read-only, no deep copy) as requests.
func requestsFor(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	switch l := list.(type) {
	case *conflux.ChannelList:
		for i := range l.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
		}
	case *conflux.WorkflowList:
		for i := range l.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
		}
	case *conflux.FabricList:
		for i := range l.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
		}
	}
	return reqs
}

// specChanged passes creations, deletions and updates that change the spec (generation),
// labels, annotations or start the deletion, but not status-only updates: a reconciler's
// own status patch does not queue its object again.
var specChanged = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
	predicate.AnnotationChangedPredicate{}, deletionStarted)

// deletionStarted passes the update that sets the deletion timestamp.
var deletionStarted = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

// existenceChanged passes creations and deletions only.
var existenceChanged = predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}

// spaceServes passes a Space update only when what its Channels use changed: its endpoint
// or its deletion. The Space's own condition and count updates do not queue its Channels.
var spaceServes = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*conflux.Space), e.ObjectNew.(*conflux.Space)
	return o.Status.Endpoint != n.Status.Endpoint || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
}}
