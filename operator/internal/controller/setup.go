package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"conflux.dev/operator/internal/spaceclient"
	cxwebhook "conflux.dev/operator/internal/webhook"
)

// EventSource is the component name on the operator's Events.
const EventSource = "conflux-operator"

// SetupAll registers the field indexes, every reconciler and, when webhooks is true, the
// admission webhooks on mgr. main and the envtest suites both use it.
func SetupAll(ctx context.Context, mgr ctrl.Manager, image string, spaces spaceclient.SpaceClient, webhooks bool) error {
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	rec := mgr.GetEventRecorderFor(EventSource)
	if err := (&SpaceReconciler{Client: mgr.GetClient(), Recorder: rec, Image: image}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ChannelReconciler{Client: mgr.GetClient(), Recorder: rec, Spaces: spaces}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&WorkflowReconciler{Client: mgr.GetClient(), Recorder: rec, Image: image}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&FabricReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if webhooks {
		cxwebhook.SetupPodInjector(mgr, image)
		if err := cxwebhook.SetupWorkflowValidator(mgr); err != nil {
			return err
		}
	}
	return nil
}
