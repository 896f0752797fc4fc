package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

func pdbGone(ctx context.Context, ns, name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &policyv1.PodDisruptionBudget{}))
	}
}

// A Space has no PodDisruptionBudget unless spec.disruptionBudget asks; the one it gets is
// owned by the Space, follows maxUnavailable and goes once no longer asked.
func TestSpaceDisruptionBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sp := newSpace(ns, "db")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
		g.Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation))
	}, timeout, interval).Should(Succeed())
	g.Expect(pdbGone(ctx, ns, "db")()).To(BeTrue(), "no budget by default")

	sp.Spec.DisruptionBudget = &conflux.SpaceDisruptionBudget{MaxUnavailable: 0}
	g.Expect(k8sClient.Update(ctx, sp)).To(Succeed())
	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(0))))
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(pdb, sp)).To(BeTrue())
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(spaceLabels(sp)))

	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
	sp.Spec.DisruptionBudget.MaxUnavailable = 1
	g.Expect(k8sClient.Update(ctx, sp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
	}, timeout, interval).Should(Succeed())

	bad := sp.DeepCopy()
	bad.Spec.DisruptionBudget.MaxUnavailable = 2
	g.Expect(k8sClient.Update(ctx, bad)).NotTo(Succeed(), "maxUnavailable is 0 or 1")

	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
	sp.Spec.DisruptionBudget = nil
	g.Expect(k8sClient.Update(ctx, sp)).To(Succeed())
	g.Eventually(pdbGone(ctx, ns, "db"), timeout, interval).Should(BeTrue(), "removed once no longer asked")
}

// A component that asks gets a PodDisruptionBudget over its pods, owned by the Workflow;
// it follows the spec and goes when the component stops asking. A Job component cannot ask.
func TestWorkflowComponentDisruptionBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	one, half := intstr.FromInt32(1), intstr.FromString("50%")
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{
			{Name: "web", Template: appTemplate(), Replicas: ptr(int32(3)),
				DisruptionBudget: &conflux.ComponentDisruptionBudget{MinAvailable: &one}},
			{Name: "db", Workload: conflux.WorkloadStatefulSet, Template: appTemplate()}}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-web"}, pdb)
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(pdb, wf)).To(BeTrue())
	g.Expect(pdb.Spec.MinAvailable).To(HaveValue(Equal(one)))
	g.Expect(pdb.Spec.MaxUnavailable).To(BeNil())
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(map[string]string{conflux.WorkflowLabel: "wf", conflux.ComponentLabel: "web"}))
	g.Expect(pdbGone(ctx, ns, "wf-db")()).To(BeTrue(), "a component that does not ask has none")

	// both, or neither, of minAvailable and maxUnavailable: refused
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
	bad := wf.DeepCopy()
	bad.Spec.Components[0].DisruptionBudget.MaxUnavailable = &half
	g.Expect(k8sClient.Update(ctx, bad)).NotTo(Succeed())
	bad.Spec.Components[0].DisruptionBudget = &conflux.ComponentDisruptionBudget{}
	g.Expect(k8sClient.Update(ctx, bad)).NotTo(Succeed())
	job := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "step", Workload: conflux.WorkloadJob, Template: appTemplate(),
			DisruptionBudget: &conflux.ComponentDisruptionBudget{MinAvailable: &one}}}}}
	err := k8sClient.Create(ctx, job)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("a Job component has no disruptionBudget"))

	// move the budget from web (maxUnavailable now) to db as well, then drop web's
	wf.Spec.Components[0].DisruptionBudget = &conflux.ComponentDisruptionBudget{MaxUnavailable: &half}
	wf.Spec.Components[1].DisruptionBudget = &conflux.ComponentDisruptionBudget{MaxUnavailable: &one}
	g.Expect(k8sClient.Update(ctx, wf)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-web"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MinAvailable).To(BeNil())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(half)))
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-db"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(one)))
	}, timeout, interval).Should(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
	wf.Spec.Components[0].DisruptionBudget = nil
	g.Expect(k8sClient.Update(ctx, wf)).To(Succeed())
	g.Eventually(pdbGone(ctx, ns, "wf-web"), timeout, interval).Should(BeTrue(), "removed once no longer asked")
	g.Expect(pdbGone(ctx, ns, "wf-db")()).To(BeFalse(), "the other component keeps its budget")

	// a component removed from the spec loses its budget too
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
	wf.Spec.Components = wf.Spec.Components[:1]
	g.Expect(k8sClient.Update(ctx, wf)).To(Succeed())
	g.Eventually(pdbGone(ctx, ns, "wf-db"), timeout, interval).Should(BeTrue())
}
