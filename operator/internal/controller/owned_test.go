package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// A workload carries the hash of what the operator wrote: a hand edit persists while the
// Workflow is unchanged, and a change of the Workflow rewrites the workload.
func TestWorkloadSpecHash(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createChannels(t, ns, "in")
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "app", Template: appTemplate(), Inputs: []string{"in"}}}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	var hash string
	g.Eventually(func(g Gomega) {
		hash = getDeployment(g, ns, "wf-app").Annotations[SpecHashAnnotation]
		g.Expect(hash).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())

	// the hand edit queues the Workflow (it owns the Deployment); the operator leaves it
	g.Eventually(func(g Gomega) {
		d := getDeployment(g, ns, "wf-app")
		d.Spec.Template.Annotations = map[string]string{"by": "hand"}
		g.Expect(k8sClient.Update(ctx, d)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		d := getDeployment(g, ns, "wf-app")
		g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("by", "hand"))
		g.Expect(d.Annotations[SpecHashAnnotation]).To(Equal(hash))
	}, 2*time.Second, interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), wf)).To(Succeed())
		wf.Spec.Components[0].Replicas = ptr(int32(3))
		g.Expect(k8sClient.Update(ctx, wf)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		d := getDeployment(g, ns, "wf-app")
		g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(3))))
		g.Expect(d.Spec.Template.Annotations).NotTo(HaveKey("by"))
		g.Expect(d.Annotations[SpecHashAnnotation]).NotTo(Equal(hash))
	}, timeout, interval).Should(Succeed())
}
