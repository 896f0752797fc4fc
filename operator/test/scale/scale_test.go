// Package scale runs the operator against a real kube-apiserver + etcd (envtest) with N
// Spaces, 4N pipe Channels and N three-component Workflows in one namespace, and measures
// convergence, an idle period, one change and deletion. SCALE_N sets N (default 10, the
// size `make test` runs); `make bench-operator` runs N=1000 and writes
// bench/operator/RESULTS.md from SCALE_REPORT.
package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/controller"
	"conflux.dev/operator/internal/spaceclient"
)

const (
	namespace = "scale"
	// statsInterval is short so that the idle window sees several stats rounds.
	statsInterval = 2 * time.Second
	// creators: goroutines creating the objects.
	creators = 8
)

// Report is what one run measured (SCALE_REPORT gets it as JSON).
type Report struct {
	N, Objects, Workers                   int
	CreateSeconds, ConvergeSeconds        float64
	DeleteSeconds                         float64
	ManagerWrites, ManagerRequests        int64
	APIServerRequests                     float64
	CPUSeconds, PeakHeapMiB               float64
	IdleWrites, ChangeWrites, StatsWrites int64
	IdleSeconds                           float64
}

func TestScale(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test` (it builds or finds the envtest binaries)")
	}
	n, err := envInt("SCALE_N", 10)
	if err != nil {
		t.Fatal(err)
	}
	workers, err := envInt("SCALE_WORKERS", controller.DefaultMaxConcurrentReconciles)
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(logr.Discard()) // conflicts at this size are expected and retried
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, conflux.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	// the test's own client: fast, so that creation measures the operator, not this client
	tcfg := rest.CopyConfig(cfg)
	tcfg.QPS, tcfg.Burst = 2000, 4000
	k, err := client.New(tcfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// the manager as main runs it
	mcfg := rest.CopyConfig(cfg)
	mcfg.QPS, mcfg.Burst = controller.DefaultAPIQPS, controller.DefaultAPIBurst
	if q, err := envInt("SCALE_QPS", 0); err == nil && q > 0 { // to explore other limits
		mcfg.QPS, mcfg.Burst = float32(q), 2*q
	}
	counter := countWrites(mcfg)
	mgr, err := ctrl.NewManager(mcfg, ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	spaces := spaceclient.NewFake()
	if err := controller.SetupAll(ctx, mgr, controller.Config{Image: "conflux/confluxd:scale", Spaces: spaces,
		StatsInterval: statsInterval, MaxConcurrentReconciles: workers}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	heap := sampleHeap(ctx)
	// Convergence and deletion are watched in the manager's cache: listing 6N objects from
	// the API server twice a second would load it more than the operator does.
	view := mgr.GetCache()

	r := Report{N: n, Objects: 6 * n, Workers: workers}
	if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	cpu0, req0 := cpuSeconds(), apiserverRequests(t, cfg)
	start := time.Now()
	createAll(t, k, n)
	r.CreateSeconds = time.Since(start).Seconds()
	waitFor(t, "convergence", time.Duration(n)*time.Second+2*time.Minute, func() (bool, string) { return converged(ctx, view, n) })
	r.ConvergeSeconds = time.Since(start).Seconds()
	r.CPUSeconds = cpuSeconds() - cpu0
	r.ManagerWrites, r.ManagerRequests = counter.writes.Load(), counter.all.Load()
	r.APIServerRequests = apiserverRequests(t, cfg) - req0
	t.Logf("N=%d: created %d objects in %.1f s, converged in %.1f s; manager %d writes, %d requests; CPU %.1f s",
		n, r.Objects, r.CreateSeconds, r.ConvergeSeconds, r.ManagerWrites, r.ManagerRequests, r.CPUSeconds)
	t.Logf("writes to converge: %s", counter.breakdown())

	// idle: after the last trailing writes, whole stats rounds pass without a write
	settle(t, counter)
	idle := 2*statsInterval + time.Second
	w0 := counter.writes.Load()
	time.Sleep(idle)
	r.IdleWrites, r.IdleSeconds = counter.writes.Load()-w0, idle.Seconds()
	if r.IdleWrites != 0 {
		t.Errorf("an idle operator wrote %d times in %s", r.IdleWrites, idle)
	}

	// one Workflow changed: its workload and its status, whatever N is
	r.ChangeWrites = measureChange(t, ctx, k, counter)
	if r.ChangeWrites > 4 {
		t.Errorf("changing one Workflow cost %d writes (want at most 4: its Deployment, its status)", r.ChangeWrites)
	}
	// one Channel's stats changed: its status patch only
	r.StatsWrites = measureStats(t, ctx, k, counter, spaces)
	if r.StatsWrites != 1 {
		t.Errorf("one Channel's new stats cost %d writes (want 1: its status)", r.StatsWrites)
	}

	start = time.Now()
	deleteAll(t, ctx, k)
	waitFor(t, "deletion", time.Duration(n)*time.Second+2*time.Minute, func() (bool, string) { return deleted(ctx, view) })
	r.DeleteSeconds = time.Since(start).Seconds()
	r.PeakHeapMiB = heap()
	t.Logf("all writes: %s", counter.breakdown())
	t.Logf("deleted in %.1f s; peak heap %.0f MiB; idle writes %d; one-workflow change %d writes; one stats change %d writes",
		r.DeleteSeconds, r.PeakHeapMiB, r.IdleWrites, r.ChangeWrites, r.StatsWrites)
	if path := os.Getenv("SCALE_REPORT"); path != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newSpace(i int) *conflux.Space {
	return &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: namespace},
		Spec: conflux.SpaceSpec{Storage: conflux.SpaceStorage{Size: resource.MustParse("1Gi")}}}
}

func channelName(i, j int) string { return fmt.Sprintf("s%d-c%d", i, j) }

func newChannel(i, j int) *conflux.Channel {
	return &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: channelName(i, j), Namespace: namespace},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: fmt.Sprintf("s%d", i)}}
}

// newWorkflow: a source, a filter and a sink over the space's four channels.
func newWorkflow(i int) *conflux.Workflow {
	tpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}}}
	c := func(j int) string { return channelName(i, j) }
	return &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i), Namespace: namespace},
		Spec: conflux.WorkflowSpec{Components: []conflux.Component{
			{Name: "source", Template: tpl, Outputs: []string{c(0)}},
			{Name: "filter", Template: tpl, Inputs: []string{c(0)}, Outputs: []string{c(1), c(2)}},
			{Name: "sink", Template: tpl, Inputs: []string{c(1), c(2)}, Outputs: []string{c(3)}},
		}}}
}

// createAll creates, for each i, the Space, its four Channels and the Workflow.
func createAll(t *testing.T, k client.Client, n int) {
	t.Helper()
	inParallel(t, n, func(i int) error {
		objs := []client.Object{newSpace(i)}
		for j := range 4 {
			objs = append(objs, newChannel(i, j))
		}
		for _, o := range append(objs, newWorkflow(i)) {
			if err := k.Create(context.Background(), o); err != nil {
				return fmt.Errorf("creating %s: %w", o.GetName(), err)
			}
		}
		return nil
	})
}

// inParallel runs job(0..n-1) on the creators' goroutines; the first error fails the test.
func inParallel(t *testing.T, n int, job func(i int) error) {
	t.Helper()
	jobs := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := job(i); err != nil {
					errs <- err
					for range jobs { // drain
					}
					return
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// converged: every Space serves its four Channels, every Channel is Ready with stats, every
// Workflow has its three workloads. The second result says what is missing.
func converged(ctx context.Context, k client.Reader, n int) (bool, string) {
	var sp conflux.SpaceList
	var ch conflux.ChannelList
	var wf conflux.WorkflowList
	for _, l := range []client.ObjectList{&sp, &ch, &wf} {
		if err := k.List(ctx, l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return false, err.Error()
		}
	}
	spaces, channels, workflows := 0, 0, 0
	for _, s := range sp.Items {
		if s.Status.ObservedGeneration == s.Generation && s.Status.ChannelCount == 4 && s.Status.Endpoint != "" &&
			meta.IsStatusConditionTrue(s.Status.Conditions, conflux.SpaceServiceReadyCondition) {
			spaces++
		}
	}
	for _, c := range ch.Items {
		if c.Status.ObservedGeneration == c.Generation && meta.IsStatusConditionTrue(c.Status.Conditions, conflux.ReadyCondition) &&
			meta.IsStatusConditionTrue(c.Status.Conditions, conflux.ChannelStatsReportedCondition) {
			channels++
		}
	}
	for _, w := range wf.Items {
		if w.Status.ObservedGeneration == w.Generation && w.Status.Phase == conflux.WorkflowProgressing && len(w.Status.Components) == 3 {
			workflows++
		}
	}
	return spaces == n && channels == 4*n && workflows == n,
		fmt.Sprintf("%d/%d spaces, %d/%d channels, %d/%d workflows", spaces, n, channels, 4*n, workflows, n)
}

// deleteAll deletes every Workflow, Channel and Space, one request each from the creators
// (the API server's deletecollection works through a collection one object at a time).
func deleteAll(t *testing.T, ctx context.Context, k client.Client) {
	t.Helper()
	var objs []client.Object
	var wf conflux.WorkflowList
	var ch conflux.ChannelList
	var sp conflux.SpaceList
	for _, l := range []client.ObjectList{&wf, &ch, &sp} {
		if err := k.List(ctx, l, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range wf.Items {
		objs = append(objs, &wf.Items[i])
	}
	for i := range ch.Items {
		objs = append(objs, &ch.Items[i])
	}
	for i := range sp.Items {
		objs = append(objs, &sp.Items[i])
	}
	inParallel(t, len(objs), func(i int) error { return client.IgnoreNotFound(k.Delete(ctx, objs[i])) })
}

func deleted(ctx context.Context, k client.Reader) (bool, string) {
	var sp conflux.SpaceList
	var ch conflux.ChannelList
	for _, l := range []client.ObjectList{&sp, &ch} {
		if err := k.List(ctx, l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return false, err.Error()
		}
	}
	return len(sp.Items)+len(ch.Items) == 0, fmt.Sprintf("%d spaces, %d channels left", len(sp.Items), len(ch.Items))
}

// waitFor polls ok until it holds; past limit the test fails with ok's last word.
func waitFor(t *testing.T, what string, limit time.Duration, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		done, state := ok()
		if done {
			return
		}
		if os.Getenv("SCALE_VERBOSE") != "" {
			t.Logf("%s: %s", what, state)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s: %s", what, limit, state)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settle waits until the manager has not written for a stats round and a second.
func settle(t *testing.T, c *writeCounter) {
	t.Helper()
	quiet := statsInterval + time.Second
	deadline := time.Now().Add(2 * time.Minute)
	for last := c.writes.Load(); ; {
		time.Sleep(quiet)
		now := c.writes.Load()
		if now == last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manager still writes after 2 minutes (%d writes)", now)
		}
		last = now
	}
}

// measureChange scales one Workflow's component and counts the writes until the workload
// and the status follow.
func measureChange(t *testing.T, ctx context.Context, k client.Client, c *writeCounter) int64 {
	t.Helper()
	w0 := c.writes.Load()
	wf := &conflux.Workflow{}
	if err := k.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "w0"}, wf); err != nil {
		t.Fatal(err)
	}
	two := int32(2)
	wf.Spec.Components[2].Replicas = &two
	if err := k.Update(ctx, wf); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the scaled workload", time.Minute, func() (bool, string) {
		got := &conflux.Workflow{}
		if err := k.Get(ctx, client.ObjectKeyFromObject(wf), got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == got.Generation && len(got.Status.Components) == 3 &&
			got.Status.Components[2].Replicas == 2, fmt.Sprintf("status %+v", got.Status.Components)
	})
	settle(t, c)
	return c.writes.Load() - w0
}

// measureStats changes one Channel's stats at its (fake) space server and counts the
// writes until its status shows them.
func measureStats(t *testing.T, ctx context.Context, k client.Client, c *writeCounter, spaces *spaceclient.Fake) int64 {
	t.Helper()
	w0 := c.writes.Load()
	spaces.SetStats(namespace+"/s0/"+channelName(0, 1), spaceclient.ChannelStats{Writers: 1, Segments: 7, Bytes: 4096})
	waitFor(t, "the new stats", time.Minute, func() (bool, string) {
		got := &conflux.Channel{}
		if err := k.Get(ctx, client.ObjectKey{Namespace: namespace, Name: channelName(0, 1)}, got); err != nil {
			return false, err.Error()
		}
		return got.Status.Bytes == 4096, fmt.Sprintf("bytes %d", got.Status.Bytes)
	})
	settle(t, c)
	return c.writes.Load() - w0
}

// cpuSeconds is this process's CPU time (the manager, and the test's client).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// sampleHeap samples the heap in use every 200 ms until ctx ends; the returned function
// gives the peak so far in MiB.
func sampleHeap(ctx context.Context) func() float64 {
	var mu sync.Mutex
	var peak uint64
	go func() {
		var ms goruntime.MemStats
		for {
			goruntime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return float64(peak) / (1 << 20)
	}
}
