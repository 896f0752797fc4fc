package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/placement"
)

// What placement reads of a Fabric and of a Workflow's last decisions. Placement is sticky
// (internal/placement): a component's current fabric is the one its status records with a
// fast link, kept while that Fabric is Ready.

// placementFabric is f as placement sees it: Ready only when its Ready condition is True
// for its current generation (a changed selector counts once the Fabric reconciler saw it).
func placementFabric(f *conflux.Fabric) placement.Fabric {
	c := meta.FindStatusCondition(f.Status.Conditions, conflux.ReadyCondition)
	judged := c != nil && c.ObservedGeneration == f.Generation
	ready := judged && c.Status == metav1.ConditionTrue
	return placement.Fabric{Name: f.Name, Ready: ready, Pending: !judged, Nodes: f.Status.ReadyNodes}
}

// currentFabrics maps each component to the fabric its status says it runs on.
func currentFabrics(wf *conflux.Workflow) map[string]string {
	out := map[string]string{}
	for _, cs := range wf.Status.Components {
		if cs.Link == conflux.LinkFast && cs.Fabric != "" {
			out[cs.Name] = cs.Fabric
		}
	}
	return out
}
