package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// The upgrade tests run their own API server: the suite's manager would reconcile their
// Workflows with its own image. No kubelet and no workload controllers: rollout is
// simulated by writing the Deployments' and StatefulSets' status as their controllers
// would, some time after each spec change.

const upgradeMaxInFlight = 2

func startUpgradeEnv(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	k, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, k
}

// startOperator runs a manager with image and policy until the returned stop is called
// (stop waits for it to end: the next manager never overlaps it).
func startOperator(t *testing.T, cfg *rest.Config, image string, up UpgradeConfig) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: testScheme, Cache: CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := SetupAll(ctx, mgr, Config{Image: image, Spaces: fakeSpaces, MaxConcurrentReconciles: 4, Upgrade: up}); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager (%s): %v", image, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// workloadView is one workload as the API server has it.
type workloadView struct {
	key       string
	image     string
	available bool
}

func listWorkloads(ctx context.Context, k client.Client, ns string) ([]workloadView, error) {
	var deps appsv1.DeploymentList
	if err := k.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var stss appsv1.StatefulSetList
	if err := k.List(ctx, &stss, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []workloadView
	for i := range deps.Items {
		o := &deps.Items[i]
		out = append(out, workloadView{workloadKey(o), *confluxdImage(o), workloadAvailable(o)})
	}
	for i := range stss.Items {
		o := &stss.Items[i]
		out = append(out, workloadView{workloadKey(o), *confluxdImage(o), workloadAvailable(o)})
	}
	return out, nil
}

// simulateRollouts marks each workload Available once its current generation has been seen
// for delay, as the Deployment and StatefulSet controllers would after the pods are up.
func simulateRollouts(ctx context.Context, t *testing.T, k client.Client, ns string, delay time.Duration) {
	seen := map[string]time.Time{}
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		var deps appsv1.DeploymentList
		var stss appsv1.StatefulSetList
		if k.List(ctx, &deps, client.InNamespace(ns)) != nil || k.List(ctx, &stss, client.InNamespace(ns)) != nil {
			continue
		}
		due := func(o client.Object) bool {
			id := fmt.Sprintf("%s/%d", workloadKey(o), o.GetGeneration())
			if _, ok := seen[id]; !ok {
				seen[id] = time.Now()
			}
			return !workloadAvailable(o) && time.Since(seen[id]) >= delay
		}
		for i := range deps.Items {
			d := &deps.Items[i]
			if !due(d) {
				continue
			}
			n := *d.Spec.Replicas
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n,
				ReadyReplicas: n, AvailableReplicas: n}
			_ = k.Status().Update(ctx, d) // a conflict: next round
		}
		for i := range stss.Items {
			s := &stss.Items[i]
			if !due(s) {
				continue
			}
			rev := fmt.Sprintf("%s-%d", s.Name, s.Generation)
			s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: *s.Spec.Replicas,
				ReadyReplicas: *s.Spec.Replicas, CurrentReplicas: *s.Spec.Replicas, UpdatedReplicas: *s.Spec.Replicas,
				CurrentRevision: rev, UpdateRevision: rev, AvailableReplicas: *s.Spec.Replicas}
			_ = k.Status().Update(ctx, s)
		}
	}
}

func upgradePendingGauge(t *testing.T) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "conflux_operator_upgrade_pending" {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func TestUpgradeWavesAndOnChange(t *testing.T) {
	g := NewWithT(t)
	cfg, k := startUpgradeEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "upgrades"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	simDone := make(chan struct{})
	go func() { defer close(simDone); simulateRollouts(ctx, t, k, ns, 300*time.Millisecond) }()
	defer func() { cancel(); <-simDone }()

	waves := UpgradeConfig{Policy: UpgradeWaves, MaxInFlight: intstr.FromInt32(upgradeMaxInFlight), Recheck: 200 * time.Millisecond}
	stop := startOperator(t, cfg, "conflux/confluxd:v1", waves)
	for i := range 2 {
		g.Expect(k.Create(ctx, &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: ns},
			Spec: conflux.SpaceSpec{Storage: conflux.SpaceStorage{Size: resource.MustParse("1Gi")}}})).To(Succeed())
	}
	for i := range 5 {
		g.Expect(k.Create(ctx, &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i), Namespace: ns},
			Spec: conflux.WorkflowSpec{Components: []conflux.Component{{Name: "app", Template: appTemplate()}}}})).To(Succeed())
	}
	allOn := func(image string) func(g Gomega) {
		return func(g Gomega) {
			ws, err := listWorkloads(ctx, k, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ws).To(HaveLen(7))
			for _, w := range ws {
				g.Expect(w.image).To(Equal(image), w.key)
				g.Expect(w.available).To(BeTrue(), w.key)
			}
		}
	}
	g.Eventually(allOn("conflux/confluxd:v1"), 60*time.Second, 100*time.Millisecond).Should(Succeed())
	stop()

	// Waves: the new image reaches every workload, never more than maxInFlight of them
	// rolling at once.
	stop = startOperator(t, cfg, "conflux/confluxd:v2", waves)
	maxRolling, sawPending := 0, false
	deadline := time.Now().Add(120 * time.Second)
	for {
		ws, err := listWorkloads(ctx, k, ns)
		g.Expect(err).NotTo(HaveOccurred())
		rolling, done := 0, 0
		for _, w := range ws {
			if w.image == "conflux/confluxd:v2" {
				if w.available {
					done++
				} else {
					rolling++
				}
			}
		}
		maxRolling = max(maxRolling, rolling)
		g.Expect(rolling).To(BeNumerically("<=", upgradeMaxInFlight), "workloads rolling to v2 at once")
		if !sawPending && upgradePendingGauge(t) > 0 {
			sawPending = true
		}
		if done == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 120 s, %d of 7 workloads run v2 and are Available: %+v", done, ws)
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.Expect(maxRolling).To(BeNumerically(">=", 1))
	g.Expect(sawPending).To(BeTrue(), "conflux_operator_upgrade_pending was never above 0")
	g.Eventually(func() float64 { return upgradePendingGauge(t) }, 10*time.Second).Should(BeZero())
	g.Eventually(func(g Gomega) int {
		var events corev1.EventList
		g.Expect(k.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		upgrading := 0
		for _, e := range events.Items {
			if e.Reason == ReasonUpgrading {
				upgrading++
			}
		}
		return upgrading
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(7), "one Upgrading event per workload")
	stop()

	// OnChange: v3 is configured, nothing rolls until a Workflow's own spec changes; then
	// only that Workflow's workload takes v3.
	stop = startOperator(t, cfg, "conflux/confluxd:v3", UpgradeConfig{Policy: UpgradeOnChange})
	defer stop()
	g.Eventually(func(g Gomega) { // every workload was looked at and left alone
		var events corev1.EventList
		g.Expect(k.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		pending := map[string]bool{}
		for _, e := range events.Items {
			if e.Reason == ReasonUpgradePending && containsAll(e.Message, "conflux/confluxd:v3", "OnChange") {
				pending[e.InvolvedObject.Name] = true
			}
		}
		g.Expect(pending).To(HaveLen(7))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func() float64 { return upgradePendingGauge(t) }, 10*time.Second).Should(Equal(7.0))
	g.Consistently(allOn("conflux/confluxd:v2"), 2*time.Second, 100*time.Millisecond).Should(Succeed())

	wf := &conflux.Workflow{}
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w0"}, wf)).To(Succeed())
	wf.Spec.Components[0].Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CHANGED", Value: "1"}}
	g.Expect(k.Update(ctx, wf)).To(Succeed())
	imageOf := func(name string) func(g Gomega) string {
		return func(g Gomega) string {
			d := &appsv1.Deployment{}
			g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
			return *confluxdImage(d) + " " + d.Annotations[ImageAnnotation]
		}
	}
	g.Eventually(imageOf("w0-app"), 30*time.Second, 100*time.Millisecond).Should(Equal("conflux/confluxd:v3 conflux/confluxd:v3"))
	for _, other := range []string{"w1-app", "w2-app", "w3-app", "w4-app"} {
		g.Consistently(imageOf(other), time.Second, 100*time.Millisecond).Should(Equal("conflux/confluxd:v2 conflux/confluxd:v2"), other)
	}
	for _, s := range []string{"s0", "s1"} {
		sts := &appsv1.StatefulSet{}
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: s}, sts)).To(Succeed())
		g.Expect(*confluxdImage(sts)).To(Equal("conflux/confluxd:v2"), s)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
