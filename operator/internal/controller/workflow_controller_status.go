package controller

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
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
	setWorkflowJobConditions(s)
	setWorkflowSuspendedCondition(s)
	setReadySummary(&wf.Status.Conditions, wf.Generation, false, "", s.err,
		conflux.WorkflowChannelsResolvedCondition, conflux.WorkflowComponentsReadyCondition)
	wf.Status.Phase = workflowPhase(s)
	setWorkflowTimes(s)
	if s.err == nil {
		wf.Status.ObservedGeneration = wf.Generation
	}
}

// workflowPhase: Succeeded and Failed because of Jobs are final (a later reconcile error
// shows in Ready only); a suspended Workflow is Pending.
func workflowPhase(s *workflowScope) conflux.WorkflowPhase {
	wf := s.workflow
	if wf.Status.CompletionTime != nil && (wf.Status.Phase == conflux.WorkflowSucceeded || wf.Status.Phase == conflux.WorkflowFailed) {
		return wf.Status.Phase
	}
	if p := jobsPhase(s); p != "" {
		return p
	}
	switch {
	case s.err != nil:
		return conflux.WorkflowFailed
	case len(s.missingChannels) > 0 || s.decisions == nil || wf.Spec.Suspend:
		return conflux.WorkflowPending
	}
	for _, c := range wf.Spec.Components {
		if st := s.components[c.Name]; !componentReady(st) {
			return conflux.WorkflowProgressing
		}
	}
	return conflux.WorkflowRunning
}

// jobsPhase is Failed when a Job component failed, Succeeded when the Workflow's
// runPolicy is Complete and every Job component completed, otherwise empty.
func jobsPhase(s *workflowScope) conflux.WorkflowPhase {
	if len(s.components) == 0 {
		return ""
	}
	for _, st := range s.components {
		if st.job != nil && st.job.phase == conflux.ComponentFailed {
			return conflux.WorkflowFailed
		}
	}
	if workflowJobsDone(s) {
		return conflux.WorkflowSucceeded
	}
	return ""
}

// componentReady: a service has its replicas ready, a Job runs or completed.
func componentReady(st *componentState) bool {
	switch {
	case st == nil || !st.created:
		return false
	case st.job != nil:
		return st.job.phase == conflux.ComponentRunning || st.job.phase == conflux.ComponentSucceeded
	}
	return st.ready >= st.replicas
}

// setWorkflowTimes stamps the start (first workloads created while not suspended) and the
// completion (the phase became final), once each.
func setWorkflowTimes(s *workflowScope) {
	wf := s.workflow
	if wf.Status.StartTime == nil && !wf.Spec.Suspend {
		for _, st := range s.components {
			if st.created {
				wf.Status.StartTime = s.now.DeepCopy()
				break
			}
		}
	}
	if wf.Status.CompletionTime == nil && jobsPhase(s) != "" {
		wf.Status.CompletionTime = s.now.DeepCopy()
	}
}

func setWorkflowComponentStatuses(s *workflowScope) {
	wf := s.workflow
	if s.decisions == nil {
		return // nothing decided this time: keep the last statuses
	}
	prev := map[string]conflux.ComponentStatus{}
	for _, cs := range wf.Status.Components {
		prev[cs.Name] = cs
	}
	out := make([]conflux.ComponentStatus, 0, len(wf.Spec.Components))
	for _, c := range wf.Spec.Components {
		p := prev[c.Name]
		cs := conflux.ComponentStatus{Name: c.Name, Replicas: replicasOf(c), StartTime: p.StartTime, Conditions: p.Conditions}
		if d, ok := s.decisions[c.Name]; ok {
			cs.Fabric, cs.Link, cs.Reason, cs.Message = d.Fabric, d.Link, d.Reason, d.Message
		}
		if st := s.components[c.Name]; st != nil {
			cs.Replicas, cs.ReadyReplicas = st.replicas, st.ready
			if len(st.waitingFor) > 0 && !st.created {
				cs.Reason = conflux.ReasonWaitingForDependencies
				cs.Message = fmt.Sprintf("waiting for %v to be ready", st.waitingFor)
			}
			setComponentPhase(s, &cs, st, wf.Generation)
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
		case st.job != nil && !componentReady(st):
			notReady = append(notReady, fmt.Sprintf("%s %s", c.Name, st.job.phase))
		case !componentReady(st):
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

// setComponentPhase fills a component's phase, times and (Job) conditions. A service is
// Pending until created and while suspended, Running after, Succeeded once a finished
// Workflow scaled it to zero; a Job reports what its Job reports.
func setComponentPhase(s *workflowScope, cs *conflux.ComponentStatus, st *componentState, gen int64) {
	if o := st.job; o != nil {
		cs.Phase = o.phase
		if o.start != nil {
			cs.StartTime = o.start.DeepCopy()
		}
		if o.completed != nil {
			cs.CompletionTime = o.completed.DeepCopy()
		}
		if o.condType != "" {
			setCondition(&cs.Conditions, gen, o.condType, metav1.ConditionTrue, o.reason, o.message)
		}
		return
	}
	switch {
	case !st.created || s.workflow.Spec.Suspend:
		cs.Phase = conflux.ComponentPending
	case s.finished:
		cs.Phase = conflux.ComponentSucceeded
	default:
		cs.Phase = conflux.ComponentRunning
	}
	if st.created && cs.StartTime == nil {
		cs.StartTime = s.now.DeepCopy()
	}
}

// setWorkflowJobConditions sets Complete and Failed when the Workflow has Job components:
// Failed carries the reason and message of the first failed Job's Failed condition.
func setWorkflowJobConditions(s *workflowScope) {
	wf := s.workflow
	if s.decisions == nil || len(s.components) == 0 || !hasJobs(wf) {
		return
	}
	var running, failed []string
	reason, msg := "", ""
	for _, c := range wf.Spec.Components {
		st := s.components[c.Name]
		if st == nil || workloadKind(c) != conflux.WorkloadJob {
			continue
		}
		switch {
		case st.job != nil && st.job.phase == conflux.ComponentFailed:
			if reason == "" {
				reason, msg = st.job.reason, fmt.Sprintf("component %s: %s", c.Name, st.job.message)
			}
			failed = append(failed, c.Name)
		case st.job == nil || st.job.phase != conflux.ComponentSucceeded:
			running = append(running, c.Name)
		}
	}
	if len(failed) > 0 {
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowFailedCondition, metav1.ConditionTrue, reason, msg)
	} else {
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowFailedCondition, metav1.ConditionFalse, conflux.ReasonReconciled, "")
	}
	if len(running)+len(failed) == 0 {
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowCompleteCondition, metav1.ConditionTrue, conflux.ReasonJobsComplete, "")
		return
	}
	setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowCompleteCondition, metav1.ConditionFalse, conflux.ReasonJobsRunning,
		"not complete: "+strings.Join(append(running, failed...), ", "))
}

func hasJobs(wf *conflux.Workflow) bool {
	for _, c := range wf.Spec.Components {
		if workloadKind(c) == conflux.WorkloadJob {
			return true
		}
	}
	return false
}

// setWorkflowSuspendedCondition: True while suspended, absent otherwise.
func setWorkflowSuspendedCondition(s *workflowScope) {
	wf := s.workflow
	if wf.Spec.Suspend {
		setCondition(&wf.Status.Conditions, wf.Generation, conflux.WorkflowSuspendedCondition, metav1.ConditionTrue, conflux.ReasonSuspended,
			"spec.suspend is set: Jobs are suspended and services have zero replicas")
		return
	}
	meta.RemoveStatusCondition(&wf.Status.Conditions, conflux.WorkflowSuspendedCondition)
}
