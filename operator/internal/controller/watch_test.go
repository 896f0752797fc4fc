package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// The indexes name each related object once; the predicates let spec changes and
// deletions through and stop status-only updates.
func TestIndexesAndPredicates(t *testing.T) {
	g := NewWithT(t)
	wf := &conflux.Workflow{Spec: conflux.WorkflowSpec{Components: []conflux.Component{
		{Name: "a", Outputs: []string{"x", "y"}, Fabric: "ib"},
		{Name: "b", Inputs: []string{"x"}, Outputs: []string{"z"}, Fabric: conflux.AnyFastFabric},
		{Name: "c", Inputs: []string{"z", "y"}, Fabric: "ib"},
	}}}
	g.Expect(workflowChannels(wf)).To(Equal([]string{"x", "y", "z"}))
	g.Expect(workflowFabrics(wf)).To(Equal([]string{"ib", conflux.AnyFastFabric}))
	g.Expect(channelSpace(&conflux.Channel{})).To(BeEmpty())
	g.Expect(channelSpace(&conflux.Channel{Spec: conflux.ChannelSpec{Space: "s"}})).To(Equal([]string{"s"}))

	old := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	statusOnly := old.DeepCopy()
	statusOnly.Status.Bytes = 10
	g.Expect(specChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: statusOnly})).To(BeFalse())
	spec := old.DeepCopy()
	spec.Generation = 2
	g.Expect(specChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: spec})).To(BeTrue())
	deleting := old.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	g.Expect(specChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: deleting})).To(BeTrue())

	sp := &conflux.Space{}
	counted := sp.DeepCopy()
	counted.Status.ChannelCount = 3
	g.Expect(spaceServes.Update(event.UpdateEvent{ObjectOld: sp, ObjectNew: counted})).To(BeFalse())
	served := sp.DeepCopy()
	served.Status.Endpoint = "s.ns.svc:7400"
	g.Expect(spaceServes.Update(event.UpdateEvent{ObjectOld: sp, ObjectNew: served})).To(BeTrue())
}
