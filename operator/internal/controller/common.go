// Package controller holds the reconcilers of Space, Channel, Workflow and Fabric. Each is
// written the Cluster API way: get the object, ensure the finalizer, run small phase
// functions over a scope, and compute the status once, in a deferred updateStatus made of
// small pure setXxxCondition functions.
package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

const (
	// ManagedByLabel marks every object the operator creates; the manager caches only those.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "conflux-operator"
	// FieldOwner names the operator in managed fields.
	FieldOwner = "conflux-operator"
)

// CacheOptions restricts the manager's cache of Deployments, StatefulSets, Jobs, Services and
// PodDisruptionBudgets to the objects the operator manages, so that it does not mirror every
// workload of the cluster, and keeps of each Node only what the Fabric reconciler reads (trimNode).
func CacheOptions() cache.Options {
	sel := labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            {Label: sel},
		&appsv1.StatefulSet{}:           {Label: sel},
		&corev1.Service{}:               {Label: sel},
		&corev1.Node{}:                  {Transform: trimNode},
		&batchv1.Job{}:                  {Label: sel},
		&policyv1.PodDisruptionBudget{}: {Label: sel},
	}}
}

// phase is one step of a reconcile.
type phase[S any] func(ctx context.Context, s S) (done bool, err error)

// setCondition sets a condition stamped with the object's generation.
func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// setReadySummary sets Ready from the other listed condition types: True when all are True,
// otherwise False with reason NotReady and the failing types in the message. A reconcile
// error or a deletion wins over the summary.
func setReadySummary(conds *[]metav1.Condition, gen int64, deleting bool, deletingMsg string, reconcileErr error, types ...string) {
	switch {
	case deleting:
		setCondition(conds, gen, conflux.ReadyCondition, metav1.ConditionFalse, conflux.ReasonDeleting, deletingMsg)
		return
	case reconcileErr != nil:
		setCondition(conds, gen, conflux.ReadyCondition, metav1.ConditionFalse, conflux.ReasonReconcileError, reconcileErr.Error())
		return
	}
	var bad []string
	for _, t := range types {
		c := meta.FindStatusCondition(*conds, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			reason := "Unknown"
			if c != nil {
				reason = c.Reason
			}
			bad = append(bad, fmt.Sprintf("%s=%s", t, reason))
		}
	}
	if len(bad) == 0 {
		setCondition(conds, gen, conflux.ReadyCondition, metav1.ConditionTrue, conflux.ReasonReconciled, "")
		return
	}
	sort.Strings(bad)
	setCondition(conds, gen, conflux.ReadyCondition, metav1.ConditionFalse, conflux.ReasonNotReady, "not ready: "+strings.Join(bad, ", "))
}

// patchStatus writes obj's status as a merge patch from base; a vanished object is fine.
// Nothing is sent when the status did not change: an idle operator writes nothing.
func patchStatus(ctx context.Context, c client.Client, obj, base client.Object) error {
	patch := client.MergeFrom(base)
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.RawPatch(patch.Type(), data)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func managedLabels(extra map[string]string) map[string]string {
	l := map[string]string{ManagedByLabel: ManagedByValue}
	for k, v := range extra {
		l[k] = v
	}
	return l
}
