package controller

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/spaceclient"
)

// updateChannelStatus computes the whole status of a Channel from its scope.
func updateChannelStatus(s *channelScope) {
	ch := s.channel
	if st := s.stats; st != nil {
		ch.Status.Writers, ch.Status.Readers = st.Writers, st.Readers
		ch.Status.Segments, ch.Status.Bytes = st.Segments, st.Bytes
		ch.Status.Links = nil
		for _, l := range st.Links {
			ch.Status.Links = append(ch.Status.Links, conflux.LinkUsage{Transport: l.Transport, Count: l.Count})
		}
	}
	deleting := !ch.DeletionTimestamp.IsZero()
	if !deleting {
		setChannelSpaceResolvedCondition(s)
		setChannelRegisteredCondition(s)
		setChannelStatsCondition(s)
	}
	deletingMsg := "unlinking from space"
	if s.unlinkErr != nil {
		deletingMsg += ": " + s.unlinkErr.Error() + " (retrying)"
	}
	setReadySummary(&ch.Status.Conditions, ch.Generation, deleting, deletingMsg, s.err,
		conflux.ChannelSpaceResolvedCondition, conflux.ChannelRegisteredCondition)
	// A missing space is not a reconcile error, but the channel is not usable: Ready says why.
	if r := s.spaceReason; r == conflux.ReasonSpaceNotFound || r == conflux.ReasonSpaceDeleting {
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ReadyCondition, metav1.ConditionFalse, r, s.spaceMessage)
	}
	if s.err == nil && !deleting {
		ch.Status.ObservedGeneration = ch.Generation
	}
}

func setChannelSpaceResolvedCondition(s *channelScope) {
	ch := s.channel
	switch s.spaceReason {
	case "":
		if s.space == nil { // the lookup failed with an API error
			if s.err != nil {
				setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelSpaceResolvedCondition, metav1.ConditionUnknown, conflux.ReasonReconcileError, s.err.Error())
			}
			return
		}
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelSpaceResolvedCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
	case conflux.ReasonNoSpace:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelSpaceResolvedCondition, metav1.ConditionTrue, conflux.ReasonNoSpace,
			"events channel without a space: writers reach readers directly")
	default:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelSpaceResolvedCondition, metav1.ConditionFalse, s.spaceReason, s.spaceMessage)
	}
}

func setChannelStatsCondition(s *channelScope) {
	ch := s.channel
	switch {
	case s.spaceReason == conflux.ReasonNoSpace:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelStatsReportedCondition, metav1.ConditionTrue, conflux.ReasonNoSpace, "no space server: nothing stored to report")
	case errors.Is(s.statsErr, spaceclient.ErrStatsUnsupported):
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelStatsReportedCondition, metav1.ConditionFalse, conflux.ReasonStatsUnsupported, s.statsErr.Error())
	case s.statsErr != nil:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelStatsReportedCondition, metav1.ConditionFalse, conflux.ReasonStatsUnavailable, s.statsErr.Error())
	case s.stats != nil:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelStatsReportedCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
	case s.spaceReason != "":
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelStatsReportedCondition, metav1.ConditionFalse, s.spaceReason, "waiting for the space")
	}
}

func setChannelRegisteredCondition(s *channelScope) {
	ch := s.channel
	switch {
	case s.spaceReason == conflux.ReasonNoSpace:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelRegisteredCondition, metav1.ConditionTrue, conflux.ReasonNoSpace, "nothing to register")
	case s.registered:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelRegisteredCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
	case s.registerErr != nil:
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelRegisteredCondition, metav1.ConditionFalse, conflux.ReasonRegistrationFailed, s.registerErr.Error())
	case s.spaceReason != "":
		setCondition(&ch.Status.Conditions, ch.Generation, conflux.ChannelRegisteredCondition, metav1.ConditionFalse, s.spaceReason, "waiting for the space")
	}
}
