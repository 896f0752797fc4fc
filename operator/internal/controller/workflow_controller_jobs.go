package controller

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// jobOutcome is what a Job component's Job reports (or, once the Job is gone, what its
// status recorded): the component's phase, times and the reason of its final condition.
type jobOutcome struct {
	phase            conflux.ComponentPhase
	start, completed *metav1.Time
	condType         string // conflux.WorkflowCompleteCondition or WorkflowFailedCondition, when final
	reason, message  string
}

func (o *jobOutcome) final() bool {
	return o != nil && (o.phase == conflux.ComponentSucceeded || o.phase == conflux.ComponentFailed)
}

// outcomeOfJob reads a Job's status as its controller wrote it: a True Complete or Failed
// condition is final; a Job with a start time that is not suspended runs.
func outcomeOfJob(j *batchv1.Job) *jobOutcome {
	o := &jobOutcome{phase: conflux.ComponentPending, start: j.Status.StartTime}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			o.phase, o.condType, o.reason, o.message = conflux.ComponentSucceeded, conflux.WorkflowCompleteCondition, c.Reason, c.Message
			o.completed = j.Status.CompletionTime
			if o.completed == nil {
				o.completed = &c.LastTransitionTime
			}
			if o.reason == "" {
				o.reason = conflux.ReasonJobsComplete
			}
			return o
		case batchv1.JobFailed:
			o.phase, o.condType, o.reason, o.message = conflux.ComponentFailed, conflux.WorkflowFailedCondition, c.Reason, c.Message
			o.completed = &c.LastTransitionTime
			if o.reason == "" {
				o.reason = conflux.ReasonJobFailed
			}
			return o
		}
	}
	if j.Status.StartTime != nil && (j.Spec.Suspend == nil || !*j.Spec.Suspend) {
		o.phase = conflux.ComponentRunning
	}
	return o
}

// outcomeOfStatus is the final outcome a component's status recorded, or nil: a Job
// deleted after it finished (ttlSecondsAfterFinished) is not run again.
func outcomeOfStatus(cs *conflux.ComponentStatus) *jobOutcome {
	if cs == nil || (cs.Phase != conflux.ComponentSucceeded && cs.Phase != conflux.ComponentFailed) {
		return nil
	}
	o := &jobOutcome{phase: cs.Phase, start: cs.StartTime, completed: cs.CompletionTime, condType: conflux.WorkflowCompleteCondition}
	if cs.Phase == conflux.ComponentFailed {
		o.condType = conflux.WorkflowFailedCondition
	}
	for _, c := range cs.Conditions {
		if c.Type == o.condType {
			o.reason, o.message = c.Reason, c.Message
		}
	}
	return o
}

// applyJob creates the Job of a Job component, or updates what a Job lets change:
// parallelism, suspend and ttlSecondsAfterFinished (its template, completions, backoffLimit
// and activeDeadlineSeconds are set once, at creation).
func (r *WorkflowReconciler) applyJob(ctx context.Context, s *workflowScope, c conflux.Component, key client.ObjectKey,
	labels map[string]string, tpl corev1.PodTemplateSpec) (*batchv1.Job, error) {
	wf := s.workflow
	if tpl.Spec.RestartPolicy == "" {
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	suspend := wf.Spec.Suspend
	job, _, err := applyOwned(ctx, r.Client, key, func() *batchv1.Job { return &batchv1.Job{} }, func(j *batchv1.Job) error {
		j.Labels = labels
		if j.CreationTimestamp.IsZero() {
			j.Spec.Template = tpl
			j.Spec.Completions = c.Completions
			j.Spec.BackoffLimit = c.BackoffLimit
			j.Spec.ActiveDeadlineSeconds = c.ActiveDeadlineSeconds
		}
		j.Spec.Parallelism = c.Parallelism
		j.Spec.TTLSecondsAfterFinished = c.TTLSecondsAfterFinished
		j.Spec.Suspend = &suspend
		return controllerutil.SetControllerReference(wf, j, r.Scheme())
	})
	return job, err
}

// workflowJobsDone reports whether a Workflow with runPolicy Complete is finished: one Job
// component failed, or all completed.
func workflowJobsDone(s *workflowScope) bool {
	wf := s.workflow
	if wf.Spec.RunPolicy != conflux.RunComplete {
		return false
	}
	all := true
	for _, c := range wf.Spec.Components {
		if workloadKind(c) != conflux.WorkloadJob {
			continue
		}
		o := s.components[c.Name].job
		if o != nil && o.phase == conflux.ComponentFailed {
			return true
		}
		all = all && o != nil && o.phase == conflux.ComponentSucceeded
	}
	return all
}

// deleteBackground deletes obj and, in the background, what it owns (a Job's pods would
// otherwise be orphaned: batch/v1's default).
func deleteBackground(ctx context.Context, c client.Client, obj client.Object) error {
	return client.IgnoreNotFound(c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}
