package controller

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// reconcileDisruptionBudgets ensures a PodDisruptionBudget, named like the workload, for
// every component whose disruptionBudget asks for one, and deletes those the Workflow owns
// for components that no longer ask (or are gone). RBAC: space_controller_pdb.go.
func (r *WorkflowReconciler) reconcileDisruptionBudgets(ctx context.Context, s *workflowScope) (bool, error) {
	wf := s.workflow
	want := map[string]bool{}
	for _, c := range wf.Spec.Components {
		db := c.DisruptionBudget
		if db == nil || workloadKind(c) == conflux.WorkloadJob {
			continue
		}
		want[c.Name] = true
		key := client.ObjectKey{Namespace: wf.Namespace, Name: WorkloadName(wf.Name, c.Name)}
		sel := map[string]string{conflux.WorkflowLabel: wf.Name, conflux.ComponentLabel: c.Name}
		_, _, err := applyOwned(ctx, r.Client, key, func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
			func(pdb *policyv1.PodDisruptionBudget) error {
				pdb.Labels = managedLabels(sel)
				pdb.Spec = policyv1.PodDisruptionBudgetSpec{
					Selector:       &metav1.LabelSelector{MatchLabels: sel},
					MinAvailable:   db.MinAvailable,
					MaxUnavailable: db.MaxUnavailable,
				}
				return controllerutil.SetControllerReference(wf, pdb, r.Scheme())
			})
		if err != nil {
			return true, fmt.Errorf("component %s: poddisruptionbudget: %w", c.Name, err)
		}
	}
	var list policyv1.PodDisruptionBudgetList
	if err := r.List(ctx, &list, client.InNamespace(wf.Namespace),
		client.MatchingLabels{conflux.WorkflowLabel: wf.Name, ManagedByLabel: ManagedByValue}); err != nil {
		return true, err
	}
	for i := range list.Items {
		pdb := &list.Items[i]
		if want[pdb.Labels[conflux.ComponentLabel]] || !metav1.IsControlledBy(pdb, wf) {
			continue
		}
		if err := client.IgnoreNotFound(r.Delete(ctx, pdb)); err != nil {
			return true, fmt.Errorf("deleting poddisruptionbudget %s: %w", pdb.Name, err)
		}
	}
	return false, nil
}
