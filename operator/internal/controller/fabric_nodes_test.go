package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Only what a Fabric reads of a Node queues Fabrics: heartbeats and conditions do not.
func TestNodeChangedForFabrics(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"fabric": "ib"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"example.com/nic": resource.MustParse("2")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"heartbeat", func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
			n.ResourceVersion = "2"
		}, false},
		{"same quantity spelt differently", func(n *corev1.Node) {
			n.Status.Allocatable["example.com/nic"] = resource.MustParse("2000m")
		}, false},
		{"label added", func(n *corev1.Node) { n.Labels["zone"] = "a" }, true},
		{"label removed", func(n *corev1.Node) { delete(n.Labels, "fabric") }, true},
		{"resource count", func(n *corev1.Node) { n.Status.Allocatable["example.com/nic"] = resource.MustParse("1") }, true},
		{"resource gone", func(n *corev1.Node) { delete(n.Status.Allocatable, "example.com/nic") }, true},
		{"deletion starts", func(n *corev1.Node) { now := metav1.NewTime(time.Now()); n.DeletionTimestamp = &now }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base.DeepCopy()
			tt.mutate(n)
			got := nodeChangedForFabrics.Update(event.UpdateEvent{ObjectOld: base.DeepCopy(), ObjectNew: n})
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	g.Expect(nodeChangedForFabrics.Create(event.CreateEvent{Object: base})).To(BeTrue())
	g.Expect(nodeChangedForFabrics.Delete(event.DeleteEvent{Object: base})).To(BeTrue())
}

// The cached Node keeps what the Fabric reconciler reads and nothing else.
func TestTrimNode(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"fabric": "ib"}, ResourceVersion: "7",
			Annotations: map[string]string{"big": "x"}, DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"example.com/nic": resource.MustParse("2")},
			Capacity:    corev1.ResourceList{"example.com/nic": resource.MustParse("2")},
			Images:      []corev1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}},
		},
	}
	out, err := trimNode(n)
	g.Expect(err).NotTo(HaveOccurred())
	tn := out.(*corev1.Node)
	g.Expect(tn.Name).To(Equal("n"))
	g.Expect(tn.ResourceVersion).To(Equal("7"))
	g.Expect(tn.Labels).To(Equal(n.Labels))
	g.Expect(tn.DeletionTimestamp).To(Equal(&now))
	g.Expect(tn.Status.Allocatable).To(Equal(n.Status.Allocatable))
	g.Expect(tn.Annotations).To(BeNil())
	g.Expect(tn.ManagedFields).To(BeNil())
	g.Expect(tn.Spec).To(Equal(corev1.NodeSpec{}))
	g.Expect(tn.Status.Images).To(BeNil())
	g.Expect(tn.Status.Capacity).To(BeNil())
	other, err := trimNode("not a node")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).To(Equal("not a node"))
}
