package chart

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cxwebhook "conflux.dev/operator/internal/webhook"
)

// While the operator runs, the webhook certificate is renewed when it gets close to expiry
// (the serving files are rewritten) and a caBundle that a `helm upgrade` wiped is restored.
func TestWebhookCertRefresher(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	none := admissionregistrationv1.SideEffectClassNone
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "refresh-mutating"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.refresh.conflux.dev", SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: namespace, Name: "refresh-webhook", Path: ptr.To("/x")}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}}}}}
	g.Expect(k8sClient.Create(ctx, mwc)).To(Succeed())
	opts := cxwebhook.CertOptions{Namespace: namespace, SecretName: "refresh-certs", ServiceName: "refresh-webhook",
		CertDir: dir, MutatingConfigs: []string{mwc.Name}}

	// a certificate valid for one hour: far less than a third of the default year
	short := opts
	short.Validity = time.Hour
	g.Expect(cxwebhook.EnsureCerts(ctx, k8sClient, short)).To(Succeed())
	first, err := os.ReadFile(filepath.Join(dir, cxwebhook.TLSCertKey))
	g.Expect(err).NotTo(HaveOccurred())

	r := &cxwebhook.CertRefresher{Client: k8sClient, Options: opts, Interval: 100 * time.Millisecond, Log: logf.Log}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	g.Eventually(func(g Gomega) {
		cur, err := os.ReadFile(filepath.Join(dir, cxwebhook.TLSCertKey))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(bytes.Equal(cur, first)).To(BeFalse(), "the serving certificate was not renewed")
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "refresh-certs"}, &s)).To(Succeed())
		g.Expect(s.Data[cxwebhook.TLSCertKey]).To(Equal(cur))
		g.Expect(cxwebhook.Verify(s.Data, "refresh-webhook."+namespace+".svc", time.Now().Add(24*time.Hour))).To(Succeed())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// a helm upgrade re-applies the configuration without caBundle: it comes back
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
	g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty())
	mwc.Webhooks[0].ClientConfig.CABundle = nil
	g.Expect(k8sClient.Update(ctx, mwc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
		g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	cancel()
	g.Expect(<-done).To(Succeed())
}
