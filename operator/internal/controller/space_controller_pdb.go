package controller

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;delete

// reconcileDisruptionBudget ensures the PodDisruptionBudget of the space server when
// spec.disruptionBudget asks for one, and deletes the one it owns otherwise.
func (r *SpaceReconciler) reconcileDisruptionBudget(ctx context.Context, s *spaceScope) (bool, error) {
	sp := s.space
	key := client.ObjectKey{Namespace: sp.Namespace, Name: sp.Name}
	if sp.Spec.DisruptionBudget == nil {
		return false, deleteOwnedPDB(ctx, r.Client, key, sp)
	}
	maxUnavailable := intstr.FromInt32(sp.Spec.DisruptionBudget.MaxUnavailable)
	_, _, err := applyOwned(ctx, r.Client, key, func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
		func(pdb *policyv1.PodDisruptionBudget) error {
			pdb.Labels = managedLabels(spaceLabels(sp))
			pdb.Spec = policyv1.PodDisruptionBudgetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: spaceLabels(sp)},
				MaxUnavailable: &maxUnavailable,
			}
			return controllerutil.SetControllerReference(sp, pdb, r.Scheme())
		})
	if err != nil {
		return false, fmt.Errorf("poddisruptionbudget %s: %w", key.Name, err)
	}
	return false, nil
}

// deleteOwnedPDB deletes the PodDisruptionBudget named key when owner controls it; one
// that is absent or someone else's is left alone.
func deleteOwnedPDB(ctx context.Context, c client.Client, key client.ObjectKey, owner metav1.Object) error {
	var pdb policyv1.PodDisruptionBudget
	if err := c.Get(ctx, key, &pdb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&pdb, owner) {
		return nil
	}
	if err := client.IgnoreNotFound(c.Delete(ctx, &pdb)); err != nil {
		return fmt.Errorf("deleting poddisruptionbudget %s: %w", key.Name, err)
	}
	return nil
}
