package controller

import (
	"fmt"

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
	deleting := !sp.DeletionTimestamp.IsZero()
	setReadySummary(&sp.Status.Conditions, sp.Generation, deleting,
		fmt.Sprintf("%s: waiting for channels %v", conflux.ReasonChannelsRemaining, s.channels), s.err,
		conflux.SpaceServiceReadyCondition, conflux.SpaceServerReadyCondition)
	if s.err == nil && !deleting {
		sp.Status.ObservedGeneration = sp.Generation
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
