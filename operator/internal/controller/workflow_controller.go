package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/placement"
)

// WorkflowReconciler runs each component of a Workflow as a Deployment or StatefulSet with
// the confluxd sidecar, placed in a fabric when the component asks for a fast link.
type WorkflowReconciler struct {
	client.Client
	Recorder record.EventRecorder
	// Image of confluxd.
	Image string
}

// componentState is what one reconcile learned about a component.
type componentState struct {
	replicas, ready int32
	created         bool     // the workload exists
	waitingFor      []string // dependsOn components not ready yet
}

// workflowScope is what the phases of one Workflow reconcile share.
type workflowScope struct {
	workflow        *conflux.Workflow
	missingChannels []string
	fabrics         map[string]*conflux.Fabric
	decisions       map[string]placement.Decision
	components      map[string]*componentState
	err             error
}

// +kubebuilder:rbac:groups=conflux.dev,resources=workflows,verbs=get;list;watch
// +kubebuilder:rbac:groups=conflux.dev,resources=workflows/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conflux.dev,resources=channels,verbs=get;list;watch
// +kubebuilder:rbac:groups=conflux.dev,resources=fabrics,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings one Workflow to its desired state. Workloads are owned by the Workflow,
// so deleting it deletes them; no finalizer is needed.
func (r *WorkflowReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	wf := &conflux.Workflow{}
	if err := r.Get(ctx, req.NamespacedName, wf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wf.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	base := wf.DeepCopy()
	s := &workflowScope{workflow: wf, components: map[string]*componentState{}}
	defer func() {
		s.err = retErr
		updateWorkflowStatus(s)
		if err := patchStatus(ctx, r.Client, wf, base); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	for _, p := range []phase[*workflowScope]{r.resolveChannels, r.place, r.reconcileWorkloads, r.deleteOrphans} {
		done, err := p(ctx, s)
		if err != nil {
			r.Recorder.Eventf(wf, corev1.EventTypeWarning, conflux.ReasonReconcileError, "%v", err)
			return ctrl.Result{}, err
		}
		if done {
			break
		}
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler. Channel changes requeue the Workflows of their
// namespace, Fabric changes every Workflow.
func (r *WorkflowReconciler) SetupWithManager(mgr ctrl.Manager) error {
	inNamespace := func(ctx context.Context, ns string) []reconcile.Request {
		var list conflux.WorkflowList
		if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, w := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&w)})
		}
		return reqs
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&conflux.Workflow{}).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.StatefulSet{}).
		Watches(&conflux.Channel{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return inNamespace(ctx, o.GetNamespace())
		})).
		Watches(&conflux.Fabric{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return inNamespace(ctx, "")
		})).
		Named("workflow").
		Complete(r)
}
