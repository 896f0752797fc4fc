package controller

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
)

// applyRolled against the API server, without a manager: a workload written by an operator
// without the image annotation is not rewritten, a lagging one is admitted while the wave
// has room and waits (with one UpgradePending event) when it has none.
func TestApplyRolledLegacyAndWave(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fresh := func() *appsv1.Deployment { return &appsv1.Deployment{} }
	mutateWith := func(name, image string) func(*appsv1.Deployment) error {
		return func(d *appsv1.Deployment) error {
			sel := map[string]string{"app": name}
			d.Labels = managedLabels(map[string]string{"app": name})
			if d.CreationTimestamp.IsZero() {
				d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
			}
			d.Spec.Replicas = ptr(int32(1))
			d.Spec.Template = appTemplate()
			d.Spec.Template.Labels = sel
			sidecar.Inject(&d.Spec.Template.Spec, sidecar.Config{Image: image, Transport: "tcp"})
			return nil
		}
	}
	owner := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
	rec := record.NewFakeRecorder(100)
	wave := func(image string) *Upgrades {
		return NewUpgrades(k8sClient, rec, image, UpgradeConfig{Policy: UpgradeWaves, MaxInFlight: intstr.FromInt32(1)})
	}

	// written as before the annotation existed (the hash covered the image)
	keyA := client.ObjectKey{Namespace: ns, Name: "a"}
	legacy, _, err := applyOwned(ctx, k8sClient, keyA, fresh, mutateWith("a", "conflux/confluxd:v1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(legacy.Annotations).NotTo(HaveKey(ImageAnnotation))
	got, waiting, err := applyRolled(ctx, k8sClient, wave("conflux/confluxd:v1"), owner, keyA, fresh, mutateWith("a", "conflux/confluxd:v1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeFalse())
	g.Expect(got.ResourceVersion).To(Equal(legacy.ResourceVersion), "a workload from an older operator is not rewritten")

	// a second workload, on v1 with the annotation
	keyB := client.ObjectKey{Namespace: ns, Name: "b"}
	_, _, err = applyRolled(ctx, k8sClient, wave("conflux/confluxd:v1"), owner, keyB, fresh, mutateWith("b", "conflux/confluxd:v1"))
	g.Expect(err).NotTo(HaveOccurred())

	// v2 with maxInFlight 1: the first is admitted, the second waits (the first is not Available)
	u := wave("conflux/confluxd:v2")
	got, waiting, err = applyRolled(ctx, k8sClient, u, owner, keyA, fresh, mutateWith("a", "conflux/confluxd:v2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeFalse())
	g.Expect(got.Annotations).To(HaveKeyWithValue(ImageAnnotation, "conflux/confluxd:v2"))
	g.Expect(*confluxdImage(got)).To(Equal("conflux/confluxd:v2"))
	before := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, keyB, before)).To(Succeed())
	for range 2 { // asked twice: waits both times, one event
		got, waiting, err = applyRolled(ctx, k8sClient, u, owner, keyB, fresh, mutateWith("b", "conflux/confluxd:v2"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(waiting).To(BeTrue())
		g.Expect(got.ResourceVersion).To(Equal(before.ResourceVersion), "a waiting workload is not written")
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	pending := 0
	for _, e := range events {
		if strings.Contains(e, ReasonUpgradePending) {
			pending++
			g.Expect(e).To(ContainSubstring("Deployment b keeps confluxd image conflux/confluxd:v1, not conflux/confluxd:v2"))
		}
	}
	g.Expect(pending).To(Equal(1), "events: %v", events)
	g.Expect(events).To(ContainElement(ContainSubstring(ReasonUpgrading + " Deployment a: confluxd image conflux/confluxd:v1 -> conflux/confluxd:v2")))

	// the first turns Available: the second goes
	a := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, keyA, a)).To(Succeed())
	a.Status = appsv1.DeploymentStatus{ObservedGeneration: a.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	g.Expect(k8sClient.Status().Update(ctx, a)).To(Succeed())
	got, waiting, err = applyRolled(ctx, k8sClient, u, owner, keyB, fresh, mutateWith("b", "conflux/confluxd:v2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeFalse())
	g.Expect(*confluxdImage(got)).To(Equal("conflux/confluxd:v2"))

	// a change of its own spec takes the image at once, whatever the wave
	keyC := client.ObjectKey{Namespace: ns, Name: "c"}
	_, _, err = applyRolled(ctx, k8sClient, wave("conflux/confluxd:v2"), owner, keyC, fresh, mutateWith("c", "conflux/confluxd:v2"))
	g.Expect(err).NotTo(HaveOccurred())
	onChange := NewUpgrades(k8sClient, rec, "conflux/confluxd:v3", UpgradeConfig{Policy: UpgradeOnChange})
	got, waiting, err = applyRolled(ctx, k8sClient, onChange, owner, keyC, fresh, mutateWith("c", "conflux/confluxd:v3"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeFalse(), "OnChange does not requeue")
	g.Expect(*confluxdImage(got)).To(Equal("conflux/confluxd:v2"))
	changed := func(d *appsv1.Deployment) error {
		_ = mutateWith("c", "conflux/confluxd:v3")(d)
		d.Spec.Replicas = ptr(int32(2))
		return nil
	}
	got, _, err = applyRolled(ctx, k8sClient, onChange, owner, keyC, fresh, changed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*confluxdImage(got)).To(Equal("conflux/confluxd:v3"))
	g.Expect(*got.Spec.Replicas).To(Equal(int32(2)))
}
