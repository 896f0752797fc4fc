package controller

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// are ready (a Job: completed), in spec order, and records the replicas of each. A Job that
// finished is never run again, even once deleted; a finished Workflow (runPolicy Complete)
// creates nothing more and keeps its services at zero replicas.
func (r *WorkflowReconciler) reconcileWorkloads(ctx context.Context, s *workflowScope) (bool, error) {
	wf := s.workflow
	prev := map[string]*conflux.ComponentStatus{}
	for i := range wf.Status.Components {
		prev[wf.Status.Components[i].Name] = &wf.Status.Components[i]
	}
	// First observe every existing workload, so dependsOn can be judged.
	for _, c := range wf.Spec.Components {
		st := &componentState{replicas: replicasOf(c)}
		s.components[c.Name] = st
		obj := emptyWorkload(c)
		err := r.Get(ctx, client.ObjectKey{Namespace: wf.Namespace, Name: WorkloadName(wf.Name, c.Name)}, obj)
		switch {
		case err == nil:
			st.created, st.ready = true, readyReplicas(obj)
			if j, ok := obj.(*batchv1.Job); ok {
				st.job = outcomeOfJob(j)
			}
		case !apierrors.IsNotFound(err):
			return true, err
		}
		if workloadKind(c) == conflux.WorkloadJob && !st.job.final() {
			if o := outcomeOfStatus(prev[c.Name]); o != nil {
				st.job, st.created = o, true // finished, then deleted (TTL): not run again
			}
		}
	}
	s.finished = wf.Status.CompletionTime != nil && wf.Spec.RunPolicy == conflux.RunComplete || workflowJobsDone(s)
	for _, c := range wf.Spec.Components {
		if workloadKind(c) != conflux.WorkloadJob && (wf.Spec.Suspend || s.finished) {
			s.components[c.Name].replicas = 0 // wanted: none
		}
	}
	for _, c := range wf.Spec.Components {
		st := s.components[c.Name]
		for _, d := range c.DependsOn {
			if ds, ok := s.components[d]; !ok || !ds.satisfied() {
				st.waitingFor = append(st.waitingFor, d)
			}
		}
		if (len(st.waitingFor) > 0 || s.finished) && !st.created {
			continue // never created yet: wait; once created it is kept up to date
		}
		if st.job.final() {
			continue // a finished Job is left as it is
		}
		obj, err := r.applyWorkload(ctx, s, c)
		if err != nil {
			return true, fmt.Errorf("component %s: %w", c.Name, err)
		}
		st.created, st.ready = true, readyReplicas(obj)
		if j, ok := obj.(*batchv1.Job); ok {
			st.job = outcomeOfJob(j)
		}
	}
	return false, nil
}

func (r *WorkflowReconciler) applyWorkload(ctx context.Context, s *workflowScope, c conflux.Component) (client.Object, error) {
	wf := s.workflow
	tpl := r.podTemplate(s, c)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{conflux.WorkflowLabel: wf.Name, conflux.ComponentLabel: c.Name}}
	labels := managedLabels(map[string]string{conflux.WorkflowLabel: wf.Name, conflux.ComponentLabel: c.Name})
	key := client.ObjectKey{Namespace: wf.Namespace, Name: WorkloadName(wf.Name, c.Name)}
	replicas := s.components[c.Name].replicas
	switch workloadKind(c) {
	case conflux.WorkloadJob:
		return r.applyJob(ctx, s, c, key, labels, tpl)
	case conflux.WorkloadStatefulSet:
		if err := r.applyHeadlessService(ctx, wf, key, labels, selector.MatchLabels); err != nil {
			return nil, fmt.Errorf("headless service: %w", err)
		}
		sts, waiting, err := applyRolled(ctx, r.Client, r.Upgrades, wf, key, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }, func(sts *appsv1.StatefulSet) error {
			sts.Labels = labels
			if sts.CreationTimestamp.IsZero() {
				sts.Spec.Selector = selector
				sts.Spec.ServiceName = key.Name
			}
			sts.Spec.Replicas = &replicas
			sts.Spec.Template = tpl
			return controllerutil.SetControllerReference(wf, sts, r.Scheme())
		})
		s.upgradeWaiting = s.upgradeWaiting || waiting
		return sts, err
	}
	dep, waiting, err := applyRolled(ctx, r.Client, r.Upgrades, wf, key, func() *appsv1.Deployment { return &appsv1.Deployment{} }, func(dep *appsv1.Deployment) error {
		dep.Labels = labels
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Selector = selector
		}
		dep.Spec.Replicas = &replicas
		dep.Spec.Template = tpl
		return controllerutil.SetControllerReference(wf, dep, r.Scheme())
	})
	s.upgradeWaiting = s.upgradeWaiting || waiting
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
		RestartPolicy: string(wf.Spec.RestartPolicy), Transport: "tcp",
		Resources: r.Pods.SidecarResources, ImagePullSecrets: r.Pods.ImagePullSecrets})
	if f, ok := s.fabrics[d.Fabric]; ok && d.Link == conflux.LinkFast {
		placement.ApplyFabric(&tpl, f)
	}
	placement.ApplyHints(&tpl, wf.Name, c.Name, c.Placement)
	return tpl
}

// deleteOrphans removes workloads of components no longer in the spec, or of another kind,
// and the headless Services of components that are no longer StatefulSets.
func (r *WorkflowReconciler) deleteOrphans(ctx context.Context, s *workflowScope) (bool, error) {
	wf := s.workflow
	want := map[string]conflux.WorkloadKind{}
	for _, c := range wf.Spec.Components {
		want[c.Name] = workloadKind(c)
	}
	sel := client.MatchingLabels{conflux.WorkflowLabel: wf.Name, ManagedByLabel: ManagedByValue}
	// Each owned kind and the component kind it belongs to (a Service: a StatefulSet's).
	lists := []struct {
		list  client.ObjectList
		owner conflux.WorkloadKind
	}{
		{&appsv1.DeploymentList{}, conflux.WorkloadDeployment},
		{&appsv1.StatefulSetList{}, conflux.WorkloadStatefulSet},
		{&corev1.ServiceList{}, conflux.WorkloadStatefulSet},
		{&batchv1.JobList{}, conflux.WorkloadJob},
	}
	for _, l := range lists {
		if err := r.List(ctx, l.list, client.InNamespace(wf.Namespace), sel); err != nil {
			return true, err
		}
		items, err := meta.ExtractList(l.list)
		if err != nil {
			return true, err
		}
		for _, item := range items {
			o := item.(client.Object)
			if want[o.GetLabels()[conflux.ComponentLabel]] == l.owner || !metav1.IsControlledBy(o, wf) {
				continue
			}
			if err := deleteBackground(ctx, r.Client, o); err != nil {
				return true, err
			}
		}
	}
	return false, nil
}

func workloadKind(c conflux.Component) conflux.WorkloadKind {
	if c.Workload == conflux.WorkloadStatefulSet || c.Workload == conflux.WorkloadJob {
		return c.Workload
	}
	return conflux.WorkloadDeployment
}

func emptyWorkload(c conflux.Component) client.Object {
	switch workloadKind(c) {
	case conflux.WorkloadStatefulSet:
		return &appsv1.StatefulSet{}
	case conflux.WorkloadJob:
		return &batchv1.Job{}
	}
	return &appsv1.Deployment{}
}

// replicasOf is a service's replicas, or a Job's parallelism (batch/v1 default 1).
func replicasOf(c conflux.Component) int32 {
	n := c.Replicas
	if workloadKind(c) == conflux.WorkloadJob {
		n = c.Parallelism
	}
	if n == nil {
		return 1
	}
	return *n
}

func readyReplicas(o client.Object) int32 {
	switch w := o.(type) {
	case *appsv1.Deployment:
		return w.Status.ReadyReplicas
	case *appsv1.StatefulSet:
		return w.Status.ReadyReplicas
	case *batchv1.Job:
		if w.Status.Ready != nil {
			return *w.Status.Ready
		}
	}
	return 0
}
