package controller

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/placement"
)

// updateWorkflowStatus computes the whole status of a Workflow from its scope.
func updateWorkflowStatus(s *workflowScope) {
	wf := s.workflow
	setWorkflowComponentStatuses(s)
	setWorkflowChannelsResolvedCondition(s)
	setWorkflowPlacedCondition(s)
	setWorkflowComponentsReadyCondition(s)
	setReadySummary(&wf.Status.Conditions, wf.Generation, false, "", s.err,
		conflux.WorkflowChannelsResolvedCondition, conflux.WorkflowComponentsReadyCondition)
	wf.Status.Phase = workflowPhase(s)
	if s.err == nil {
		wf.Status.ObservedGeneration = wf.Generation
	}
}

func workflowPhase(s *workflowScope) conflux.WorkflowPhase {
	switch {
	case s.err != nil:
		return conflux.WorkflowFailed
	case len(s.missingChannels) > 0 || s.decisions == nil:
		return conflux.WorkflowPending
	}
	for _, c := range s.workflow.Spec.Components {
		st := s.components[c.Name]
		if st == nil || !st.created || st.ready < st.replicas {
			return conflux.WorkflowProgressing
		}
	}
	return conflux.WorkflowRunning
}

func setWorkflowComponentStatuses(s *workflowScope) {
	wf := s.workflow
	if s.decisions == nil {
		return // nothing decided this time: keep the last statuses
	}
	out := make([]conflux.ComponentStatus, 0, len(wf.Spec.Components))
	for _, c := range wf.Spec.Components {
		cs := conflux.ComponentStatus{Name: c.Name, Replicas: replicasOf(c)}
		if d, ok := s.decisions[c.Name]; ok {
			cs.Fabric, cs.Link, cs.Reason, cs.Message = d.Fabric, d.Link, d.Reason, d.Message
		}
		if st := s.components[c.Name]; st != nil {
			cs.ReadyReplicas = st.ready
			if len(st.waitingFor) > 0 && !st.created {
				cs.Reason = conflux.ReasonWaitingForDependencies
				cs.Message = fmt.Sprintf("waiting for %v to be ready", st.waitingFor)
			}
		}
		out = append(out, cs)
	}
	wf.Status.Components = out
}

func setWorkflowChannelsResolvedCondition(s *workflowScope) {
	wf := s.workflow
	if len(s.missingChannels) > 0 {
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowChannelsResolvedCondition, metav1.ConditionFalse, conflux.ReasonChannelNotFound,
			fmt.Sprintf("Channel(s) %s not found in namespace %q", strings.Join(s.missingChannels, ", "), wf.Namespace))
		return
	}
	if s.decisions == nil && s.err != nil {
		return // the lookup itself failed; Ready carries the error
	}
	setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowChannelsResolvedCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
}

// setWorkflowPlacedCondition is informational: a TCP fallback does not make the workflow
// unready, but it shows here and in the component statuses.
func setWorkflowPlacedCondition(s *workflowScope) {
	wf := s.workflow
	if s.decisions == nil {
		return
	}
	var fallback []string
	for _, c := range wf.Spec.Components {
		d := s.decisions[c.Name]
		if c.Fabric != "" && d.Link != conflux.LinkFast {
			fallback = append(fallback, fmt.Sprintf("%s (%s)", c.Name, d.Reason))
		}
	}
	if len(fallback) > 0 {
		sort.Strings(fallback)
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowPlacedCondition, metav1.ConditionFalse, conflux.ReasonFallbackToTCP,
			"components asked for a fabric but run over TCP: "+strings.Join(fallback, ", "))
		return
	}
	setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowPlacedCondition, metav1.ConditionTrue, placement.ReasonFabricAssigned, "")
}

func setWorkflowComponentsReadyCondition(s *workflowScope) {
	wf := s.workflow
	if s.decisions == nil {
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowComponentsReadyCondition, metav1.ConditionFalse, conflux.ReasonNotReady, "workloads not created")
		return
	}
	var waiting, notReady []string
	for _, c := range wf.Spec.Components {
		st := s.components[c.Name]
		switch {
		case st == nil:
			notReady = append(notReady, c.Name)
		case len(st.waitingFor) > 0 && !st.created:
			waiting = append(waiting, c.Name)
		case st.ready < st.replicas:
			notReady = append(notReady, fmt.Sprintf("%s %d/%d", c.Name, st.ready, st.replicas))
		}
	}
	switch {
	case len(waiting) > 0:
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowComponentsReadyCondition, metav1.ConditionFalse, conflux.ReasonWaitingForDependencies,
			"waiting for dependencies: "+strings.Join(waiting, ", "))
	case len(notReady) > 0:
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowComponentsReadyCondition, metav1.ConditionFalse, conflux.ReasonComponentsNotReady,
			"not ready: "+strings.Join(notReady, ", "))
	default:
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowComponentsReadyCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
	}
}
