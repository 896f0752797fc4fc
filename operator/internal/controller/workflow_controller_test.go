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
	"conflux.dev/operator/internal/placement"
	"conflux.dev/operator/internal/sidecar"
)

func appTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
}

func createChannels(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindEvents}}
		if err := k8sClient.Create(context.Background(), ch); err != nil {
			t.Fatalf("creating channel %s: %v", n, err)
		}
	}
}

func getDeployment(g Gomega, ns, name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
	return d
}

func TestWorkflowWithMissingChannelWaits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "ana", Template: appTemplate(), Inputs: []string{"ghost", "frames"}}}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	conds := func() []metav1.Condition { return wf.Status.Conditions }
	g.Eventually(func(g Gomega) {
		c := condition(g, wf, conds, conflux.WorkflowChannelsResolvedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(conflux.ReasonChannelNotFound))
		g.Expect(c.Message).To(Equal(`Channel(s) frames, ghost not found in namespace "` + ns + `"`))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowPending))
	}, timeout, interval).Should(Succeed())
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-ana"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no workload while channels are missing")

	createChannels(t, ns, "ghost", "frames")
	g.Eventually(func(g Gomega) {
		d := getDeployment(g, ns, "wf-ana")
		g.Expect(metav1.IsControlledBy(d, wf)).To(BeTrue())
		sc := sidecar.Find(&d.Spec.Template.Spec)
		g.Expect(sc).NotTo(BeNil())
		g.Expect(sc.Args).To(ContainElements("--inputs=ghost,frames", "--transport=tcp"))
		c := condition(g, wf, conds, conflux.WorkflowChannelsResolvedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowProgressing))
	}, timeout, interval).Should(Succeed())
}

func TestWorkflowPlacementInFabric(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ib-node-" + ns, Labels: map[string]string{"conflux.dev/fabric-ib": "true"}}}
	g.Expect(k8sClient.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, node) })
	setAllocatable(t, node, "rdma/hca_shared", "1") // the device plugin advertises the fabric's resource
	fab := &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "ib-" + ns}, Spec: conflux.FabricSpec{
		Kind: conflux.FabricRDMA, NodeSelector: map[string]string{"conflux.dev/fabric-ib": "true"},
		ResourceName: "rdma/hca_shared", NetworkAttachment: "ib-net",
		Transport: &conflux.FabricTransport{UCXTLS: "rc,sm,self",
			Hugepages: &conflux.Hugepages{PageSize: "2Mi", Size: resource.MustParse("128Mi")}},
	}}
	g.Expect(k8sClient.Create(ctx, fab)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(g, fab, func() []metav1.Condition { return fab.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(fab.Status.ReadyNodes).To(BeNumerically(">=", 1))
	}, timeout, interval).Should(Succeed())

	createChannels(t, ns, "x")
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{Components: []conflux.Component{
		{Name: "sim", Template: appTemplate(), Outputs: []string{"x"}, Fabric: fab.Name},
		{Name: "ana", Template: appTemplate(), Inputs: []string{"x"}, Fabric: conflux.AnyFastFabric,
			Placement: &conflux.Placement{Spread: true}},
		{Name: "log", Template: appTemplate(), Inputs: []string{"x"}, Workload: conflux.WorkloadStatefulSet},
	}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())

	g.Eventually(func(g Gomega) {
		for _, name := range []string{"wf-sim", "wf-ana"} {
			d := getDeployment(g, ns, name)
			tpl := d.Spec.Template
			terms := tpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			g.Expect(terms[0].MatchExpressions).To(ContainElement(corev1.NodeSelectorRequirement{
				Key: "conflux.dev/fabric-ib", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}))
			g.Expect(tpl.Annotations).To(HaveKeyWithValue(conflux.NetworksAnnotation, "ib-net"))
			sc := sidecar.Find(&tpl.Spec)
			g.Expect(sc).NotTo(BeNil())
			g.Expect(sc.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("rdma/hca_shared"), resource.MustParse("1")))
			g.Expect(sc.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("hugepages-2Mi"), resource.MustParse("128Mi")))
			g.Expect(sc.SecurityContext.Capabilities.Add).To(ContainElement(corev1.Capability("IPC_LOCK")))
			g.Expect(sc.Env).To(ContainElement(corev1.EnvVar{Name: "UCX_TLS", Value: "rc,sm,self"}))
			g.Expect(sc.Args).To(ContainElement("--transport=rdma"))
			// the network-status file and the device resource, accepted by the API server
			g.Expect(sc.Env).To(ContainElement(corev1.EnvVar{Name: placement.EnvDeviceResource, Value: "rdma/hca_shared"}))
			g.Expect(tpl.Spec.Volumes).To(ContainElement(HaveField("Name", placement.PodInfoVolume)))
		}
		ana := getDeployment(g, ns, "wf-ana")
		g.Expect(ana.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1))

		log := &appsv1.StatefulSet{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-log"}, log)).To(Succeed())
		g.Expect(log.Spec.Template.Spec.Affinity).To(BeNil(), "a TCP component is not pinned to the fabric")
		g.Expect(log.Spec.Template.Annotations).NotTo(HaveKey(conflux.NetworksAnnotation))
		g.Expect(sidecar.Find(&log.Spec.Template.Spec).Args).To(ContainElement("--transport=tcp"))

		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
		g.Expect(wf.Status.Components).To(ConsistOf(
			And(HaveField("Name", "sim"), HaveField("Fabric", fab.Name), HaveField("Link", conflux.LinkFast)),
			And(HaveField("Name", "ana"), HaveField("Fabric", fab.Name), HaveField("Link", conflux.LinkFast)),
			And(HaveField("Name", "log"), HaveField("Fabric", ""), HaveField("Link", conflux.LinkTCP),
				HaveField("Reason", placement.ReasonNoFabricRequested)),
		))
		placed := condition(g, wf, func() []metav1.Condition { return wf.Status.Conditions }, conflux.WorkflowPlacedCondition)
		g.Expect(placed.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
}

func TestWorkflowFallsBackToTCP(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createChannels(t, ns, "x")
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{Components: []conflux.Component{
		{Name: "sim", Template: appTemplate(), Outputs: []string{"x"}, Fabric: "no-such-fabric"},
	}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	g.Eventually(func(g Gomega) {
		placed := condition(g, wf, func() []metav1.Condition { return wf.Status.Conditions }, conflux.WorkflowPlacedCondition)
		g.Expect(placed).NotTo(BeNil())
		g.Expect(placed.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(placed.Reason).To(Equal(conflux.ReasonFallbackToTCP))
		g.Expect(placed.Message).To(ContainSubstring("sim (FabricNotFound)"))
		g.Expect(wf.Status.Components).To(ConsistOf(And(HaveField("Link", conflux.LinkTCP),
			HaveField("Reason", placement.ReasonFabricNotFound), HaveField("Message", ContainSubstring("no-such-fabric")))))
		d := getDeployment(g, ns, "wf-sim")
		g.Expect(d.Spec.Template.Spec.Affinity).To(BeNil())
		g.Expect(sidecar.Find(&d.Spec.Template.Spec).Args).To(ContainElement("--transport=tcp"))
	}, timeout, interval).Should(Succeed())
}

func TestWorkflowDependsOnAndReadiness(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{Components: []conflux.Component{
		{Name: "a", Template: appTemplate()},
		{Name: "b", Template: appTemplate(), DependsOn: []string{"a"}},
	}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	conds := func() []metav1.Condition { return wf.Status.Conditions }
	g.Eventually(func(g Gomega) {
		getDeployment(g, ns, "wf-a")
		c := condition(g, wf, conds, conflux.WorkflowComponentsReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(conflux.ReasonWaitingForDependencies))
		g.Expect(wf.Status.Components).To(ContainElement(And(HaveField("Name", "b"), HaveField("Reason", conflux.ReasonWaitingForDependencies))))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-b"}, &appsv1.Deployment{}))).To(BeTrue())

	markReady := func(g Gomega, name string) {
		d := getDeployment(g, ns, name)
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.ObservedGeneration = 1, 1, 1, d.Generation
		g.Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
	}
	g.Eventually(func(g Gomega) { markReady(g, "wf-a") }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) { getDeployment(g, ns, "wf-b") }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) { markReady(g, "wf-b") }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ready := condition(g, wf, conds, conflux.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(wf.Status.Phase).To(Equal(conflux.WorkflowRunning))
		g.Expect(wf.Status.ObservedGeneration).To(Equal(wf.Generation))
	}, timeout, interval).Should(Succeed())

	// Removing a component deletes its workload.
	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		wf.Spec.Components = wf.Spec.Components[:1]
		return k8sClient.Update(ctx, wf)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-b"}, &appsv1.Deployment{}))
	}, timeout, interval).Should(BeTrue())
}
