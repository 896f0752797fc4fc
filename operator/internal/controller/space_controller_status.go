package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// updateSpaceStatus computes the whole status of a Space from its scope.
func updateSpaceStatus(s *spaceScope) {
	sp := s.space
	sp.Status.ChannelCount = int32(len(s.channels))
	if s.service != nil {
		sp.Status.Endpoint = fmt.Sprintf("%s.%s.svc:%d", sp.Name, sp.Namespace, conflux.SpacePort)
	}
	setSpaceServiceReadyCondition(s)
	setSpaceServerReadyCondition(s)
	setSpaceExposedCondition(s)
	deleting := !sp.DeletionTimestamp.IsZero()
	setReadySummary(&sp.Status.Conditions, sp.Generation, deleting,
		fmt.Sprintf("%s: waiting for channels %v", conflux.ReasonChannelsRemaining, s.channels), s.err,
		conflux.SpaceServiceReadyCondition, conflux.SpaceServerReadyCondition)
	if s.err == nil && !deleting {
		sp.Status.ObservedGeneration = sp.Generation
	}
}

func setSpaceExposedCondition(s *spaceScope) {
	sp := s.space
	conds := &sp.Status.Conditions
	x := sp.Spec.Exposure
	switch {
	case x == nil || !x.Enabled:
		meta.RemoveStatusCondition(conds, conflux.SpaceExposedCondition)
	case !s.edgeOn:
		setCondition(conds, sp.Generation, conflux.SpaceExposedCondition, metav1.ConditionFalse, conflux.ReasonEdgeDisabled,
			"the operator does not run the edge (--edge-xds-bind-address; chart value edge.enabled)")
	case s.exposed:
		setCondition(conds, sp.Generation, conflux.SpaceExposedCondition, metav1.ConditionTrue, conflux.ReasonReconciled,
			fmt.Sprintf("the edge routes TLS for %q to this Space", x.SNIHost))
	case s.exposureHolder != "":
		setCondition(conds, sp.Generation, conflux.SpaceExposedCondition, metav1.ConditionFalse, conflux.ReasonSNIConflict,
			fmt.Sprintf("sniHost %q is held by Space %s", x.SNIHost, s.exposureHolder))
	default:
		setCondition(conds, sp.Generation, conflux.SpaceExposedCondition, metav1.ConditionFalse, conflux.ReasonEdgePending,
			"waiting for the edge to serve it")
	}
}

func setSpaceServiceReadyCondition(s *spaceScope) {
	sp := s.space
	if s.service == nil {
		if s.err != nil {
			setCondition(&sp.Status.Conditions, sp.Generation, conflux.SpaceServiceReadyCondition, metav1.ConditionFalse, conflux.ReasonReconcileError, s.err.Error())
		}
		return // deleting: keep what was there
	}
	setCondition(&sp.Status.Conditions, sp.Generation, conflux.SpaceServiceReadyCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
}

func setSpaceServerReadyCondition(s *spaceScope) {
	sp := s.space
	sts := s.statefulSet
	switch {
	case sts == nil && s.err != nil:
		setCondition(&sp.Status.Conditions, sp.Generation, conflux.SpaceServerReadyCondition, metav1.ConditionFalse, conflux.ReasonReconcileError, s.err.Error())
	case sts == nil:
		return
	case sts.Status.ReadyReplicas >= 1 && sts.Status.ObservedGeneration >= sts.Generation:
		setCondition(&sp.Status.Conditions, sp.Generation, conflux.SpaceServerReadyCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
	default:
		setCondition(&sp.Status.Conditions, sp.Generation, conflux.SpaceServerReadyCondition, metav1.ConditionFalse, conflux.ReasonWaitingForReplicas,
			fmt.Sprintf("statefulset %s has %d/1 ready replicas", sts.Name, sts.Status.ReadyReplicas))
	}
}
