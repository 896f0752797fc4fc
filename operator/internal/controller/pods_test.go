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

// podFromTemplate is the pod the StatefulSet controller would create from sts (ordinal 0):
// the template plus the volume of its claim template.
func podFromTemplate(sts *appsv1.StatefulSet, ns string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = sts.Name+"-0", ns
	for _, c := range sts.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + pod.Name}}})
	}
	return pod
}

// The Space server's pod passes the "restricted" Pod Security level: the API server's own
// PodSecurity admission, enforcing restricted in the namespace, admits a pod made from the
// StatefulSet's template, and refuses one that breaks the level (so the check is real).
// The pod carries the operator's image pull secret.
func TestSpacePodIsRestrictedAndPullsWithTheSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newPSANamespace(t, g, "restricted")

	g.Expect(k8sClient.Create(ctx, newSpace(ns, "sec"))).To(Succeed())
	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sec"}, sts) }, timeout, interval).Should(Succeed())
	g.Expect(sts.Spec.Template.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: testPullSecret}))

	// a pod that breaks the level is refused: PodSecurity admission is on in this API server
	bad := podFromTemplate(sts, ns)
	bad.Name = "not-restricted"
	bad.Spec.SecurityContext.SeccompProfile = nil
	bad.Spec.Containers[0].SecurityContext.SeccompProfile = nil
	err := k8sClient.Create(ctx, bad)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "PodSecurity admission must refuse a pod without a seccomp profile in a restricted namespace; got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("restricted"))

	// the space server's pod is admitted (not a dry run: it is stored as it would be)
	pod := podFromTemplate(sts, ns)
	g.Expect(k8sClient.Create(ctx, pod)).To(Succeed(), "the space server's pod passes the restricted level")
	g.Expect(pod.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(pod.Spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	c := pod.Spec.Containers[0].SecurityContext
	g.Expect(c.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(c.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
}

// The image pull secret is added to workflow pods after the template's own, once; the
// sidecar keeps a Guaranteed pod Guaranteed (requests == limits) and uses the configured
// requests and limits in a Burstable one.
func TestWorkflowPodsPullSecretsAndSidecarQoS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	q := resource.MustParse
	guaranteed := appTemplate()
	guaranteed.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "app-pull"}, {Name: testPullSecret}}
	guaranteed.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")}} // requests default to limits
	burstable := appTemplate()
	burstable.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")}}
	g.Expect(sidecar.QOSClass(&guaranteed.Spec)).To(Equal(corev1.PodQOSGuaranteed))
	g.Expect(sidecar.QOSClass(&burstable.Spec)).To(Equal(corev1.PodQOSBurstable))
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "g", Template: guaranteed}, {Name: "b", Template: burstable}}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())

	var gd, bd *appsv1.Deployment
	g.Eventually(func(g Gomega) {
		gd, bd = getDeployment(g, ns, "wf-g"), getDeployment(g, ns, "wf-b")
	}, timeout, interval).Should(Succeed())
	g.Expect(gd.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "app-pull"}, {Name: testPullSecret}}),
		"the template's own first, no duplicate")
	g.Expect(bd.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: testPullSecret}}))

	// the stored (defaulted) templates: the API server's view, as the kubelet will see it
	gs := sidecar.Find(&gd.Spec.Template.Spec)
	g.Expect(gs).NotTo(BeNil())
	g.Expect(gs.Resources.Requests).To(Equal(gs.Resources.Limits))
	g.Expect(gs.Resources.Limits.Cpu().String()).To(Equal("200m"), "the configured limit")
	g.Expect(gs.Resources.Limits.Memory().String()).To(Equal("128Mi"))
	g.Expect(sidecar.QOSClass(&gd.Spec.Template.Spec)).To(Equal(corev1.PodQOSGuaranteed), "still Guaranteed with the sidecar")
	bs := sidecar.Find(&bd.Spec.Template.Spec)
	g.Expect(bs.Resources.Requests.Cpu().String()).To(Equal("50m"))
	g.Expect(bs.Resources.Limits.Cpu().String()).To(Equal("200m"))
	g.Expect(sidecar.QOSClass(&bd.Spec.Template.Spec)).To(Equal(corev1.PodQOSBurstable))

	// a pod made from the Guaranteed template is Guaranteed for the API server too
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "g-0", Namespace: ns}, Spec: *gd.Spec.Template.Spec.DeepCopy()}
	g.Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	g.Expect(pod.Status.QOSClass).To(Equal(corev1.PodQOSGuaranteed), "status.qosClass set by the API server")
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b-0", Namespace: ns}, Spec: *bd.Spec.Template.Spec.DeepCopy()}
	g.Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	g.Expect(pod.Status.QOSClass).To(Equal(corev1.PodQOSBurstable))
}

// newPSANamespace is a fresh namespace whose pods PodSecurity admission holds to level.
func newPSANamespace(t *testing.T, g Gomega, level string) string {
	ns := newNamespace(t)
	var obj corev1.Namespace
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: ns}, &obj)).To(Succeed())
	obj.Labels["pod-security.kubernetes.io/enforce"] = level
	g.Expect(k8sClient.Update(context.Background(), &obj)).To(Succeed())
	return ns
}

// The Pod Security level the sidecar needs: with the TCP transport it passes "restricted"
// (next to an app that does); a fast link adds IPC_LOCK, which not even "baseline"
// allows: fabric pods need a "privileged" namespace.
func TestSidecarPodSecurityLevels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restrictedApp := func() corev1.PodTemplateSpec {
		tpl := appTemplate()
		tpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		tpl.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		sidecar.Inject(&tpl.Spec, sidecar.Config{Image: testImage, Inputs: []string{"in"}})
		return tpl
	}
	pod := func(name, ns string, tpl corev1.PodTemplateSpec) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: tpl.Annotations}, Spec: tpl.Spec}
	}
	restricted := newPSANamespace(t, g, "restricted")
	g.Expect(k8sClient.Create(ctx, pod("tcp", restricted, restrictedApp()))).To(Succeed(), "the TCP sidecar is restricted")

	fast := restrictedApp()
	placement.ApplyFabric(&fast, &conflux.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "ib"},
		Spec: conflux.FabricSpec{Kind: conflux.FabricRDMA}})
	g.Expect(sidecar.Find(&fast.Spec).SecurityContext.Capabilities.Add).To(ContainElement(corev1.Capability("IPC_LOCK")))
	baseline := newPSANamespace(t, g, "baseline")
	err := k8sClient.Create(ctx, pod("fast", baseline, fast))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("IPC_LOCK"))
	privileged := newPSANamespace(t, g, "privileged")
	g.Expect(k8sClient.Create(ctx, pod("fast", privileged, fast))).To(Succeed())
}
