package controller

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// DefaultMetricsAddr is where the manager serves /metrics: HTTPS with authentication and
// authorization (DefaultMetricsSecure), or plain HTTP on :8080 when that is turned off.
const (
	DefaultMetricsAddr     = ":8443"
	DefaultMetricsAddrHTTP = ":8080"
)

// MetricsOptions is the manager's metrics endpoint. secure: HTTPS (a self-signed certificate
// controller-runtime makes, or certDir's tls.crt/tls.key when given) where each request's
// bearer token is checked with a TokenReview and its right to GET the non-resource URL
// /metrics with a SubjectAccessReview (the chart's metrics-reader ClusterRole grants it);
// otherwise plain HTTP, open to whoever reaches the port. HTTP/2 is off (CVE-2023-44487).
func MetricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	disableHTTP2 := func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} }
	o := metricsserver.Options{BindAddress: addr, SecureServing: secure, CertDir: certDir,
		TLSOpts: []func(*tls.Config){disableHTTP2}}
	if secure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// tokenreviews and subjectaccessreviews: the metrics endpoint's authentication and
// authorization (MetricsOptions).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
