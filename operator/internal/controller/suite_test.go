package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/edge"
	"conflux.dev/operator/internal/spaceclient"
)

// The suite runs one real kube-apiserver + etcd (envtest), the manager with every reconciler
// and the webhook server, and a Fake SpaceClient. Each test works in its own namespace.
var (
	testEnv    *envtest.Environment
	k8sClient  client.Client
	fakeSpaces = spaceclient.NewFake()
	// testEdge serves the edge's xDS on a free loopback port (edge_test.go is its client).
	testEdge   = &edge.Server{Addr: "127.0.0.1:0", NodeID: testEdgeNode, Options: edge.Options{ListenPort: 10000, ClusterDomain: "cluster.local"}}
	testScheme = runtime.NewScheme()
	nsCounter  atomic.Int32
	// testPods: the pull secret and sidecar resources the suite's operator adds to pods.
	testPods = PodOptions{ImagePullSecrets: []string{testPullSecret}, SidecarResources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}
)

const (
	testImage = "conflux/confluxd:test"
	// testPullSecret is the image pull secret of confluxd in the suite.
	testPullSecret = "confluxd-pull"
	// testEdgeNode is the node id the test's xDS client presents.
	testEdgeNode = "test-edge"
	// testStatsInterval: how often registered Channels re-read their stats in the suite.
	testStatsInterval = time.Second
	// testUnlinkTimeout: how long a deleted Channel's finalizer retries a failing unlink.
	testUnlinkTimeout = 5 * time.Second
	timeout           = 20 * time.Second
	interval          = 100 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test` (it builds or finds the envtest binaries)")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	if err := clientgoscheme.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	if err := conflux.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() { _ = testEnv.Stop() }()

	k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		panic(err)
	}
	wio := testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  testScheme,
		Cache:   CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir}),
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := SetupAll(ctx, mgr, Config{Image: testImage, Spaces: fakeSpaces, Webhooks: true,
		StatsInterval: testStatsInterval, Edge: testEdge, MaxConcurrentReconciles: DefaultMaxConcurrentReconciles,
		UnlinkTimeout: testUnlinkTimeout, Pods: testPods}); err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	// The webhook server binds its port after the caches may have synced: tests that
	// create Workflows or Pods would race it, so wait until it answers.
	if err := waitForWebhookServer(mgr, done, 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	<-done
	return code
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.Level(-2)
	}
	return zapcore.ErrorLevel
}

// newNamespace creates a fresh namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d-%d", nsCounter.Add(1), time.Now().UnixNano()%100000)}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// condition returns the condition of type t of obj after re-reading it, or nil.
func condition(g Gomega, obj client.Object, conds func() []metav1.Condition, t string) *metav1.Condition {
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return meta.FindStatusCondition(conds(), t)
}

// waitForWebhookServer polls the manager's webhook server until it accepts TLS connections.
// A manager that stopped (done) ends the wait with its error.
func waitForWebhookServer(mgr ctrl.Manager, done <-chan error, limit time.Duration) error {
	check := mgr.GetWebhookServer().StartedChecker()
	deadline := time.Now().Add(limit)
	for {
		err := check(nil)
		if err == nil {
			return nil
		}
		select {
		case startErr := <-done:
			return fmt.Errorf("manager stopped before its webhook server served: %v", startErr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server not serving after %s: %w", limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
