package chart

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"conflux.dev/operator/internal/controller"
)

// The operator's /metrics, served as main serves it (controller.MetricsOptions, secure) by a
// manager running as the chart's ServiceAccount with the chart's RBAC: a request without a
// token is refused (401), a ServiceAccount token not bound to the chart's metrics-reader
// ClusterRole too (403), and one bound to it through metricsReader.subjects is answered
// (200). The tokens are real: the TokenRequest API of envtest's API server, checked by the
// operator with TokenReview and SubjectAccessReview.
func TestMetricsNeedAReaderToken(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objs, err := render(t, "--set", "metricsReader.subjects[0].kind=ServiceAccount",
		"--set", "metricsReader.subjects[0].name=scraper", "--set", "metricsReader.subjects[0].namespace="+namespace)
	g.Expect(err).NotTo(HaveOccurred())
	reader := false
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			g.Expect(k8sClient.Patch(ctx, o, client.Apply, client.FieldOwner("metrics-test"), client.ForceOwnership)).To(Succeed(), o.GetName())
			reader = reader || o.GetName() == "conflux-metrics-reader"
		case "Deployment":
			args := fmt.Sprint(o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
			g.Expect(args).To(ContainSubstring("--metrics-bind-address=:8443"))
			g.Expect(args).To(ContainSubstring("--metrics-secure=true"))
		}
	}
	g.Expect(reader).To(BeTrue(), "the chart renders the metrics-reader ClusterRole and its binding")
	for _, name := range []string{"scraper", "stranger"} {
		err := k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})
		g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	g.Expect(err).NotTo(HaveOccurred())
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "TokenRequest for %s (envtest's API server must issue service account tokens)", sa)
		return tr.Status.Token
	}

	// the manager as the chart's ServiceAccount: its RBAC must allow the reviews
	sa := rest.CopyConfig(restCfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":conflux",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	addr := freeAddr(t)
	mgr, err := ctrl.NewManager(sa, ctrl.Options{Scheme: scheme, HealthProbeBindAddress: "0",
		Metrics: controller.MetricsOptions(addr, true, "")})
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed certificate
	get := func(token string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	g.Eventually(func() error { _, err := get(""); return err }, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "metrics served over https")
	g.Expect(get("")).To(Equal(http.StatusUnauthorized), "no token")
	// a token the API server does not know: controller-runtime's filter answers 500
	// ("Authentication failed") or 401, depending on how the TokenReview failed
	g.Expect(get("not-a-token")).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a token the API server does not know")
	g.Expect(get(token("stranger"))).To(Equal(http.StatusForbidden), "a ServiceAccount not bound to metrics-reader")
	g.Expect(get(token("scraper"))).To(Equal(http.StatusOK), "a ServiceAccount bound to metrics-reader")
	// metrics-reader grants /metrics and nothing else
	scraper := rest.CopyConfig(restCfg)
	scraper.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":scraper",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	sc, err := client.New(scraper, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	err = sc.List(ctx, &corev1.PodList{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a metrics reader listing pods must be forbidden, got %v", err)

	// the ServiceMonitor scrapes over https with its pod's token
	objs, err = render(t, "--set", "serviceMonitor.enabled=true")
	g.Expect(err).NotTo(HaveOccurred())
	monitors := 0
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" {
			monitors++
			ep := o.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
			g.Expect(ep).To(HaveKeyWithValue("scheme", "https"))
			g.Expect(ep).To(HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"))
		}
	}
	g.Expect(monitors).To(Equal(1))

	// plain HTTP when metricsSecure is off: the chart passes it on
	objs, err = render(t, "--set", "operator.metricsSecure=false", "--set", "operator.metricsPort=8080", "--set", "serviceMonitor.enabled=true")
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			args := fmt.Sprint(o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
			g.Expect(args).To(ContainSubstring("--metrics-secure=false"))
			g.Expect(args).To(ContainSubstring("--metrics-bind-address=:8080"))
		case "ServiceMonitor":
			ep := o.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
			g.Expect(ep).To(HaveKeyWithValue("scheme", "http"))
			g.Expect(ep).NotTo(HaveKey("bearerTokenFile"))
		}
	}
}

// freeAddr is a loopback address with a port nothing listens on (the metrics server takes
// an address, not a listener).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
