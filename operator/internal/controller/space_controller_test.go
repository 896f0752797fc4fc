package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

func newSpace(ns, name string) *conflux.Space {
	class := "fast-ssd"
	maxBytes := resource.MustParse("512Mi")
	return &conflux.Space{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: conflux.SpaceSpec{Storage: conflux.SpaceStorage{
			Size: resource.MustParse("1Gi"), StorageClassName: &class,
			Retention: &conflux.Retention{MaxBytes: &maxBytes},
		}},
	}
}

func TestSpaceCreatesStatefulSetServiceAndClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sp := newSpace(ns, "sim")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())

	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sim"}, sts)
	}, timeout, interval).Should(Succeed())
	g.Expect(sts.Spec.Replicas).To(HaveValue(Equal(int32(1))))
	g.Expect(sts.Spec.ServiceName).To(Equal("sim"))
	g.Expect(metav1.IsControlledBy(sts, sp)).To(BeTrue(), "the Space owns its StatefulSet")
	c := sts.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(testImage))
	g.Expect(c.Args).To(ConsistOf("--role=space", "--dir=/var/lib/conflux/space", "--listen=tcp://0.0.0.0:7400", "--retain-bytes=536870912"))
	g.Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
	pvc := sts.Spec.VolumeClaimTemplates[0]
	g.Expect(pvc.Name).To(Equal(SpaceDataVolume))
	g.Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal("fast-ssd")))
	g.Expect(pvc.Spec.Resources.Requests[corev1.ResourceStorage]).To(Equal(resource.MustParse("1Gi")))
	g.Expect(c.VolumeMounts).To(ContainElement(HaveField("Name", SpaceDataVolume)))

	svc := &corev1.Service{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sim"}, svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), "headless")
	g.Expect(svc.Spec.Ports).To(ConsistOf(
		And(HaveField("Port", int32(conflux.SpacePort)), HaveField("Protocol", corev1.ProtocolTCP)),
		And(HaveField("Port", int32(conflux.SpacePort)), HaveField("Protocol", corev1.ProtocolUDP))))
	g.Expect(svc.Spec.Selector).To(Equal(sts.Spec.Selector.MatchLabels))
	g.Expect(metav1.IsControlledBy(svc, sp)).To(BeTrue())

	// No kubelet in envtest: the server is not ready, and the status says so.
	g.Eventually(func(g Gomega) {
		cond := condition(g, sp, func() []metav1.Condition { return sp.Status.Conditions }, conflux.SpaceServerReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(conflux.ReasonWaitingForReplicas))
		g.Expect(sp.Status.Endpoint).To(Equal("sim." + ns + ".svc:7400"))
		g.Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation))
		g.Expect(sp.Finalizers).To(ContainElement(conflux.FinalizerName))
		ready := condition(g, sp, func() []metav1.Condition { return sp.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("ServerReady=WaitingForReplicas"))
	}, timeout, interval).Should(Succeed())

	// Play the StatefulSet controller: one ready replica makes the Space Ready.
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
	sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.ObservedGeneration = 1, 1, sts.Generation
	g.Expect(k8sClient.Status().Update(ctx, sts)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := condition(g, sp, func() []metav1.Condition { return sp.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
}

func TestSpaceDeletionWaitsForChannels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sp := newSpace(ns, "store")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "frames", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "store"}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		g.Expect(sp.Status.ChannelCount).To(Equal(int32(1)))
		g.Expect(sp.Finalizers).To(ContainElement(conflux.FinalizerName))
	}, timeout, interval).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, sp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := condition(g, sp, func() []metav1.Condition { return sp.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(conflux.ReasonDeleting))
		g.Expect(ready.Message).To(ContainSubstring("frames"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), &conflux.Space{})
	}, "1s", interval).Should(Succeed(), "the Space must wait for its channels")

	g.Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), &conflux.Space{}))
	}, timeout, interval).Should(BeTrue(), "the Space goes once its channels are gone")
}
