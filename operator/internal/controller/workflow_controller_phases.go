package controller

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/placement"
	"conflux.dev/operator/internal/sidecar"
)

// WorkloadName is the name of the Deployment or StatefulSet of a component.
func WorkloadName(workflow, component string) string { return workflow + "-" + component }

// resolveChannels checks that every bound Channel exists; workloads wait until they do.
func (r *WorkflowReconciler) resolveChannels(ctx context.Context, s *workflowScope) (bool, error) {
	wf := s.workflow
	seen := map[string]bool{}
	for _, c := range wf.Spec.Components {
		for _, name := range append(append([]string{}, c.Inputs...), c.Outputs...) {
			if seen[name] {
				continue
			}
			seen[name] = true
			err := r.Get(ctx, client.ObjectKey{Namespace: wf.Namespace, Name: name}, &conflux.Channel{})
			switch {
			case apierrors.IsNotFound(err):
				s.missingChannels = append(s.missingChannels, name)
			case err != nil:
				return true, fmt.Errorf("getting channel %q: %w", name, err)
			}
		}
	}
	sort.Strings(s.missingChannels)
	if len(s.missingChannels) > 0 {
		r.Recorder.Eventf(wf, corev1.EventTypeWarning, conflux.ReasonChannelNotFound, "channels not found: %v", s.missingChannels)
		return true, nil
	}
	return false, nil
}

// place decides the fabric of every component.
func (r *WorkflowReconciler) place(ctx context.Context, s *workflowScope) (bool, error) {
	var list conflux.FabricList
	if err := r.List(ctx, &list); err != nil {
		return true, fmt.Errorf("listing fabrics: %w", err)
	}
	s.fabrics = map[string]*conflux.Fabric{}
	var fabrics []placement.Fabric
	for i := range list.Items {
		f := &list.Items[i]
		if !f.DeletionTimestamp.IsZero() {
			continue
		}
		s.fabrics[f.Name] = f
		fabrics = append(fabrics, placementFabric(f))
	}
	current := currentFabrics(s.workflow)
	var comps []placement.Component
	for _, c := range s.workflow.Spec.Components {
		pc := placement.Component{Name: c.Name, Fabric: c.Fabric, Inputs: c.Inputs, Outputs: c.Outputs, Current: current[c.Name]}
		if c.Placement != nil {
			pc.ColocateWith = c.Placement.ColocateWith
		}
		comps = append(comps, pc)
	}
	s.decisions = placement.Decide(comps, fabrics)
	return false, nil
}

// reconcileWorkloads creates or updates the workload of every component whose dependencies
// are ready, in spec order, and records the replicas of each.
func (r *WorkflowReconciler) reconcileWorkloads(ctx context.Context, s *workflowScope) (bool, error) {
	wf := s.workflow
	// First observe every existing workload, so dependsOn can be judged.
	for _, c := range wf.Spec.Components {
		st := &componentState{replicas: replicasOf(c)}
		s.components[c.Name] = st
		obj := emptyWorkload(c)
		err := r.Get(ctx, client.ObjectKey{Namespace: wf.Namespace, Name: WorkloadName(wf.Name, c.Name)}, obj)
		switch {
		case err == nil:
			st.created, st.ready = true, readyReplicas(obj)
		case !apierrors.IsNotFound(err):
			return true, err
		}
	}
	for _, c := range wf.Spec.Components {
		st := s.components[c.Name]
		for _, d := range c.DependsOn {
			if ds, ok := s.components[d]; !ok || !ds.created || ds.ready < ds.replicas {
				st.waitingFor = append(st.waitingFor, d)
			}
		}
		if len(st.waitingFor) > 0 && !st.created {
			continue // never created yet: wait; once created it is kept up to date
		}
		obj, err := r.applyWorkload(ctx, s, c)
		if err != nil {
			return true, fmt.Errorf("component %s: %w", c.Name, err)
		}
		st.created, st.ready = true, readyReplicas(obj)
	}
	return false, nil
}

func (r *WorkflowReconciler) applyWorkload(ctx context.Context, s *workflowScope, c conflux.Component) (client.Object, error) {
	wf := s.workflow
	tpl := r.podTemplate(s, c)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{conflux.WorkflowLabel: wf.Name, conflux.ComponentLabel: c.Name}}
	labels := managedLabels(map[string]string{conflux.WorkflowLabel: wf.Name, conflux.ComponentLabel: c.Name})
	key := client.ObjectKey{Namespace: wf.Namespace, Name: WorkloadName(wf.Name, c.Name)}
	replicas := replicasOf(c)
	if c.Workload == conflux.WorkloadStatefulSet {
		sts, _, err := applyOwned(ctx, r.Client, key, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }, func(sts *appsv1.StatefulSet) error {
			sts.Labels = labels
			if sts.CreationTimestamp.IsZero() {
				sts.Spec.Selector = selector
				sts.Spec.ServiceName = key.Name
			}
			sts.Spec.Replicas = &replicas
			sts.Spec.Template = tpl
			return controllerutil.SetControllerReference(wf, sts, r.Scheme())
		})
		return sts, err
	}
	dep, _, err := applyOwned(ctx, r.Client, key, func() *appsv1.Deployment { return &appsv1.Deployment{} }, func(dep *appsv1.Deployment) error {
		dep.Labels = labels
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Selector = selector
		}
		dep.Spec.Replicas = &replicas
		dep.Spec.Template = tpl
		return controllerutil.SetControllerReference(wf, dep, r.Scheme())
	})
	return dep, err
}

// podTemplate is the component's template with its labels, the sidecar, the fabric and the
// placement hints.
func (r *WorkflowReconciler) podTemplate(s *workflowScope, c conflux.Component) corev1.PodTemplateSpec {
	wf := s.workflow
	tpl := *c.Template.DeepCopy()
	if tpl.Labels == nil {
		tpl.Labels = map[string]string{}
	}
	tpl.Labels[conflux.WorkflowLabel] = wf.Name
	tpl.Labels[conflux.ComponentLabel] = c.Name
	d := s.decisions[c.Name]
	sidecar.Inject(&tpl.Spec, sidecar.Config{Image: r.Image, Inputs: c.Inputs, Outputs: c.Outputs,
		RestartPolicy: string(wf.Spec.RestartPolicy), Transport: "tcp"})
	if f, ok := s.fabrics[d.Fabric]; ok && d.Link == conflux.LinkFast {
		placement.ApplyFabric(&tpl, f)
	}
	placement.ApplyHints(&tpl, wf.Name, c.Name, c.Placement)
	return tpl
}

// deleteOrphans removes workloads of components no longer in the spec, or of the other kind.
func (r *WorkflowReconciler) deleteOrphans(ctx context.Context, s *workflowScope) (bool, error) {
	wf := s.workflow
	want := map[string]conflux.WorkloadKind{}
	for _, c := range wf.Spec.Components {
		want[c.Name] = workloadKind(c)
	}
	sel := client.MatchingLabels{conflux.WorkflowLabel: wf.Name, ManagedByLabel: ManagedByValue}
	var deps appsv1.DeploymentList
	var stss appsv1.StatefulSetList
	if err := r.List(ctx, &deps, client.InNamespace(wf.Namespace), sel); err != nil {
		return true, err
	}
	if err := r.List(ctx, &stss, client.InNamespace(wf.Namespace), sel); err != nil {
		return true, err
	}
	var stale []client.Object
	for i := range deps.Items {
		if want[deps.Items[i].Labels[conflux.ComponentLabel]] != conflux.WorkloadDeployment && metav1.IsControlledBy(&deps.Items[i], wf) {
			stale = append(stale, &deps.Items[i])
		}
	}
	for i := range stss.Items {
		if want[stss.Items[i].Labels[conflux.ComponentLabel]] != conflux.WorkloadStatefulSet && metav1.IsControlledBy(&stss.Items[i], wf) {
			stale = append(stale, &stss.Items[i])
		}
	}
	for _, o := range stale {
		if err := r.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return true, err
		}
	}
	return false, nil
}

func workloadKind(c conflux.Component) conflux.WorkloadKind {
	if c.Workload == conflux.WorkloadStatefulSet {
		return conflux.WorkloadStatefulSet
	}
	return conflux.WorkloadDeployment
}

func emptyWorkload(c conflux.Component) client.Object {
	if workloadKind(c) == conflux.WorkloadStatefulSet {
		return &appsv1.StatefulSet{}
	}
	return &appsv1.Deployment{}
}

func replicasOf(c conflux.Component) int32 {
	if c.Replicas == nil {
		return 1
	}
	return *c.Replicas
}

func readyReplicas(o client.Object) int32 {
	switch w := o.(type) {
	case *appsv1.Deployment:
		return w.Status.ReadyReplicas
	case *appsv1.StatefulSet:
		return w.Status.ReadyReplicas
	}
	return 0
}
