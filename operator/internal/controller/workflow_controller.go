package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
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
	// Pods: the sidecar's resources and the image pull secrets added to every pod.
	Pods PodOptions
	// Upgrades: when a running workload takes a new Image (nil: at once).
	Upgrades *Upgrades
}

// componentState is what one reconcile learned about a component.
type componentState struct {
	replicas, ready int32
	created         bool     // the workload exists
	waitingFor      []string // dependsOn components not ready yet
	job             *jobOutcome
}

// satisfied: a component that depends on this one may start (a Job: it completed).
func (st *componentState) satisfied() bool {
	if st.job != nil {
		return st.job.phase == conflux.ComponentSucceeded
	}
	return st.created && st.ready >= st.replicas
}

// workflowScope is what the phases of one Workflow reconcile share.
type workflowScope struct {
	workflow        *conflux.Workflow
	missingChannels []string
	fabrics         map[string]*conflux.Fabric
	decisions       map[string]placement.Decision
	components      map[string]*componentState
	// finished: runPolicy Complete and the Jobs are done; services scale to zero.
	finished bool
	now      metav1.Time
	err      error
	// upgradeWaiting: a workload waits for an upgrade wave (reconcile again).
	upgradeWaiting bool
}

// workflows/finalizers: the workloads' owner references block the Workflow's deletion
// (OwnerReferencesPermissionEnforcement). A workload whose kind changed is deleted.
// +kubebuilder:rbac:groups=conflux.dev,resources=workflows,verbs=get;list;watch
// +kubebuilder:rbac:groups=conflux.dev,resources=workflows/status,verbs=patch
// +kubebuilder:rbac:groups=conflux.dev,resources=workflows/finalizers,verbs=update
// +kubebuilder:rbac:groups=conflux.dev,resources=channels,verbs=get;list;watch
// +kubebuilder:rbac:groups=conflux.dev,resources=fabrics,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;delete

// Reconcile brings one Workflow to its desired state. Workloads are owned by the Workflow,
// so deleting it deletes them; no finalizer is needed.
func (r *WorkflowReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	wf := &conflux.Workflow{}
	if err := r.Get(ctx, req.NamespacedName, wf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wf.DeletionTimestamp.IsZero() || !managedByConflux(wf) {
		return ctrl.Result{}, nil
	}
	base := wf.DeepCopy()
	s := &workflowScope{workflow: wf, components: map[string]*componentState{}, now: metav1.Now()}
	defer func() {
		s.err = retErr
		updateWorkflowStatus(s)
		if err := patchStatus(ctx, r.Client, wf, base); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	for _, p := range []phase[*workflowScope]{r.resolveChannels, r.place, r.reconcileWorkloads, r.reconcileDisruptionBudgets, r.deleteOrphans} {
		done, err := p(ctx, s)
		if err != nil {
			r.Recorder.Eventf(wf, corev1.EventTypeWarning, conflux.ReasonReconcileError, "%v", err)
			return ctrl.Result{}, err
		}
		if done {
			break
		}
	}
	if s.upgradeWaiting {
		return ctrl.Result{RequeueAfter: r.Upgrades.Recheck}, nil
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler. A Channel's creation or deletion queues the
// Workflows that bind it, a Fabric change the Workflows that name it (or any-fast).
func (r *WorkflowReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&conflux.Workflow{}, builder.WithPredicates(specChanged)).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&conflux.Channel{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return requestsFor(ctx, r, &conflux.WorkflowList{}, client.InNamespace(o.GetNamespace()),
				client.MatchingFields{workflowChannelIndex: o.GetName()})
		}), builder.WithPredicates(existenceChanged)).
		Watches(&conflux.Fabric{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			named := requestsFor(ctx, r, &conflux.WorkflowList{}, client.MatchingFields{workflowFabricIndex: o.GetName()})
			return append(named, requestsFor(ctx, r, &conflux.WorkflowList{}, client.MatchingFields{workflowFabricIndex: conflux.AnyFastFabric})...)
		})).
		WithOptions(opts).
		Named("workflow").
		Complete(r)
}

// managedByConflux: spec.managedBy is empty or names this operator; any other controller's
// Workflow is not touched (not even its status).
func managedByConflux(wf *conflux.Workflow) bool {
	return wf.Spec.ManagedBy == "" || wf.Spec.ManagedBy == conflux.ManagedByConflux
}
