package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// updateSpec re-reads obj, applies change and updates it, again on a conflict (the
// operator writes the status meanwhile); it returns the last error.
func updateSpec[T client.Object](ctx context.Context, obj T, change func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return k8sClient.Update(ctx, obj)
	})
}

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

	g.Expect(updateSpec(ctx, sp, func(sp *conflux.Space) {
		sp.Spec.DisruptionBudget = &conflux.SpaceDisruptionBudget{MaxUnavailable: 0}
	})).To(Succeed())
	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(0))))
	}, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(pdb, sp)).To(BeTrue())
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(spaceLabels(sp)))

	g.Expect(updateSpec(ctx, sp, func(sp *conflux.Space) { sp.Spec.DisruptionBudget.MaxUnavailable = 1 })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
	}, timeout, interval).Should(Succeed())

	err := updateSpec(ctx, sp.DeepCopy(), func(sp *conflux.Space) { sp.Spec.DisruptionBudget.MaxUnavailable = 2 })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "maxUnavailable is 0 or 1; got %v", err)

	g.Expect(updateSpec(ctx, sp, func(sp *conflux.Space) { sp.Spec.DisruptionBudget = nil })).To(Succeed())
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
	err := updateSpec(ctx, wf.DeepCopy(), func(wf *conflux.Workflow) { wf.Spec.Components[0].DisruptionBudget.MaxUnavailable = &half })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "both: got %v", err)
	err = updateSpec(ctx, wf.DeepCopy(), func(wf *conflux.Workflow) {
		wf.Spec.Components[0].DisruptionBudget = &conflux.ComponentDisruptionBudget{}
	})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "neither: got %v", err)
	job := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "step", Workload: conflux.WorkloadJob, Template: appTemplate(),
			DisruptionBudget: &conflux.ComponentDisruptionBudget{MinAvailable: &one}}}}}
	err = k8sClient.Create(ctx, job)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("a Job component has no disruptionBudget"))

	// move the budget from web (maxUnavailable now) to db as well, then drop web's
	g.Expect(updateSpec(ctx, wf, func(wf *conflux.Workflow) {
		wf.Spec.Components[0].DisruptionBudget = &conflux.ComponentDisruptionBudget{MaxUnavailable: &half}
		wf.Spec.Components[1].DisruptionBudget = &conflux.ComponentDisruptionBudget{MaxUnavailable: &one}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-web"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MinAvailable).To(BeNil())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(half)))
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wf-db"}, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(one)))
	}, timeout, interval).Should(Succeed())
	g.Expect(updateSpec(ctx, wf, func(wf *conflux.Workflow) { wf.Spec.Components[0].DisruptionBudget = nil })).To(Succeed())
	g.Eventually(pdbGone(ctx, ns, "wf-web"), timeout, interval).Should(BeTrue(), "removed once no longer asked")
	g.Expect(pdbGone(ctx, ns, "wf-db")()).To(BeFalse(), "the other component keeps its budget")

	// a component removed from the spec loses its budget too
	g.Expect(updateSpec(ctx, wf, func(wf *conflux.Workflow) { wf.Spec.Components = wf.Spec.Components[:1] })).To(Succeed())
	g.Eventually(pdbGone(ctx, ns, "wf-db"), timeout, interval).Should(BeTrue())
}
