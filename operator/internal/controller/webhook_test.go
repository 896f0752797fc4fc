package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/sidecar"
	cxwebhook "conflux.dev/operator/internal/webhook"
)

// TestWebhookInjectsSidecar sends pods through the real API server, which calls the
// operator's mutating webhook (installed by envtest's WebhookInstallOptions).
func TestWebhookInjectsSidecar(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: ns,
		Annotations: map[string]string{conflux.ChannelsAnnotation: "a, b"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
	g.Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	g.Expect(pod.Annotations).To(HaveKeyWithValue(conflux.InjectedAnnotation, "true"))
	sc := sidecar.Find(&pod.Spec)
	g.Expect(sc).NotTo(BeNil(), "the sidecar is injected")
	g.Expect(sc.Image).To(Equal(testImage))
	g.Expect(sc.Args).To(ContainElement("--channels=a,b"))
	g.Expect(sc.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
	// the app starts only once the sidecar's socket listens (startup probe on /readyz)
	g.Expect(sc.Ports).To(ContainElement(HaveField("ContainerPort", int32(sidecar.MetricsPort))))
	g.Expect(sc.StartupProbe).NotTo(BeNil())
	g.Expect(sc.StartupProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(sc.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(pod.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", sidecar.SocketEnv)))
	g.Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Name", sidecar.RunVolume)))
	g.Expect(pod.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: testPullSecret}), "to pull the sidecar's image")
	g.Expect(sc.Resources.Limits).To(Equal(testPods.SidecarResources.Limits), "the configured sidecar resources")

	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
	g.Expect(k8sClient.Create(ctx, plain)).To(Succeed())
	g.Expect(plain.Spec.InitContainers).To(BeEmpty())
	g.Expect(plain.Annotations).NotTo(HaveKey(conflux.InjectedAnnotation))
}

// TestEnsureCerts generates the webhook CA and serving certificate, stores them in a Secret,
// writes them to disk and patches the caBundle of the webhook configurations; a second run
// keeps the same certificate.
func TestEnsureCerts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	none := admissionregistrationv1.SideEffectClassNone
	path := "/x"
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "certs-test-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.conflux.dev", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:   admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "svc", Path: &path}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}}}}}
	g.Expect(k8sClient.Create(ctx, mwc)).To(Succeed())
	dir := t.TempDir()
	opts := cxwebhook.CertOptions{Namespace: ns, SecretName: "certs", ServiceName: "conflux-webhook", CertDir: dir,
		MutatingConfigs: []string{mwc.Name}, ValidatingConfigs: []string{"absent-is-skipped"}}
	g.Expect(cxwebhook.EnsureCerts(ctx, k8sClient, opts)).To(Succeed())

	secret := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "certs"}, secret)).To(Succeed())
	g.Expect(cxwebhook.Verify(secret.Data, "conflux-webhook."+ns+".svc", time.Now())).To(Succeed())
	g.Expect(cxwebhook.Verify(secret.Data, "other."+ns+".svc", time.Now())).NotTo(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
	g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data[cxwebhook.CACertKey]))
	g.Expect(dir + "/tls.crt").To(BeARegularFile())

	first := string(secret.Data[cxwebhook.TLSCertKey])
	g.Expect(cxwebhook.EnsureCerts(ctx, k8sClient, opts)).To(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(string(secret.Data[cxwebhook.TLSCertKey])).To(Equal(first), "a valid certificate is kept")

	// A certificate for another service name is renewed.
	opts.ServiceName = "renamed"
	g.Expect(cxwebhook.EnsureCerts(ctx, k8sClient, opts)).To(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(cxwebhook.Verify(secret.Data, "renamed."+ns+".svc", time.Now())).To(Succeed())
}
