package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// applyHeadlessService creates the headless Service a StatefulSet component's serviceName
// names (same name as the StatefulSet), owned by the Workflow: each pod resolves as
// <workflow>-<component>-<ordinal>.<workflow>-<component>. Not-ready pods are published
// too, so peers find each other while they start (their sidecars become ready later).
func (r *WorkflowReconciler) applyHeadlessService(ctx context.Context, wf *conflux.Workflow, key client.ObjectKey,
	labels, selector map[string]string) error {
	_, _, err := applyOwned(ctx, r.Client, key, func() *corev1.Service { return &corev1.Service{} }, func(svc *corev1.Service) error {
		svc.Labels = labels
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.Selector = selector
		svc.Spec.PublishNotReadyAddresses = true
		return controllerutil.SetControllerReference(wf, svc, r.Scheme())
	})
	return err
}
