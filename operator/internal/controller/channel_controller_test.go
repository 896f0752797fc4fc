package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/spaceclient"
)

func TestChannelWithMissingSpace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "frames", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "later"}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	conds := func() []metav1.Condition { return ch.Status.Conditions }

	g.Eventually(func(g Gomega) {
		c := condition(g, ch, conds, conflux.ChannelSpaceResolvedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(conflux.ReasonSpaceNotFound))
		g.Expect(c.Message).To(Equal(`Space "later" not found in namespace "` + ns + `"`))
		ready := condition(g, ch, conds, conflux.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(conflux.ReasonSpaceNotFound))
	}, timeout, interval).Should(Succeed())
	g.Expect(fakeSpaces.IsRegistered(ns + "/later/frames")).To(BeFalse())

	// The Space appears: the channel is registered and reports the space server's stats.
	fakeSpaces.SetStats(ns+"/later/frames", spaceclient.ChannelStats{Writers: 1, Readers: 2, Segments: 7, Bytes: 4096,
		Links: []spaceclient.Link{{Transport: "shm", Count: 1}, {Transport: "tcp", Count: 1}}})
	g.Expect(k8sClient.Create(ctx, newSpace(ns, "later"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := condition(g, ch, conds, conflux.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ch.Status.Readers).To(Equal(int32(2)))
		g.Expect(ch.Status.Segments).To(Equal(int64(7)))
		g.Expect(ch.Status.Links).To(ContainElement(conflux.LinkUsage{Transport: "shm", Count: 1}))
		g.Expect(ch.Status.Bytes).To(Equal(int64(4096)))
		g.Expect(ch.Status.ObservedGeneration).To(Equal(ch.Generation))
		stats := meta.FindStatusCondition(ch.Status.Conditions, conflux.ChannelStatsReportedCondition)
		g.Expect(stats).NotTo(BeNil())
		g.Expect(stats.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	g.Expect(fakeSpaces.IsRegistered(ns + "/later/frames")).To(BeTrue())

	// Nothing about the Channel changes, but the space's counters do: the status follows
	// within the stats interval.
	fakeSpaces.SetStats(ns+"/later/frames", spaceclient.ChannelStats{Writers: 0, Readers: 3, Segments: 9, Bytes: 8192,
		Links: []spaceclient.Link{{Transport: "tcp", Count: 3}}})
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), ch)).To(Succeed())
		g.Expect(ch.Status.Readers).To(Equal(int32(3)))
		g.Expect(ch.Status.Writers).To(Equal(int32(0)))
		g.Expect(ch.Status.Bytes).To(Equal(int64(8192)))
		g.Expect(ch.Status.Links).To(Equal([]conflux.LinkUsage{{Transport: "tcp", Count: 3}}))
	}, 5*testStatsInterval, interval).Should(Succeed())
	// the same numbers on the metrics endpoint
	g.Eventually(func() float64 { v, _ := metricValue(channelReaders, ns, "frames"); return v }, timeout, interval).Should(Equal(3.0))
	g.Eventually(func() float64 { v, _ := metricValue(channelBytes, ns, "frames"); return v }, timeout, interval).Should(Equal(8192.0))
}

// metricValue reads the series of collector c for namespace/channel (false when absent).
func metricValue(c prometheus.Collector, ns, name string) (float64, bool) {
	ch := make(chan prometheus.Metric, 1024)
	c.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["namespace"] == ns && labels["channel"] == name {
			if d.GetCounter() != nil {
				return d.GetCounter().GetValue(), true
			}
			return d.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// A space server older than the STATS request: the channel is Ready with the writers and
// segments it reports, and StatsReported says what is missing and why.
func TestChannelOnAnOlderSpaceServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	key := ns + "/old/p"
	fakeSpaces.SetStats(key, spaceclient.ChannelStats{Writers: 1, Segments: 12})
	fakeSpaces.SetStatsErr(key, fmt.Errorf("space old.%s.svc:7400: %w (stats: unknown space request op 11)", ns, spaceclient.ErrStatsUnsupported))
	g.Expect(k8sClient.Create(ctx, newSpace(ns, "old"))).To(Succeed())
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "old"}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	conds := func() []metav1.Condition { return ch.Status.Conditions }
	g.Eventually(func(g Gomega) {
		c := condition(g, ch, conds, conflux.ChannelStatsReportedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(conflux.ReasonStatsUnsupported))
		g.Expect(c.Message).To(ContainSubstring("predates the STATS request"))
		ready := meta.FindStatusCondition(ch.Status.Conditions, conflux.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ch.Status.Writers).To(Equal(int32(1)))
		g.Expect(ch.Status.Segments).To(Equal(int64(12)))
	}, timeout, interval).Should(Succeed())

	// The space server is upgraded: the condition clears by itself.
	fakeSpaces.SetStatsErr(key, nil)
	fakeSpaces.SetStats(key, spaceclient.ChannelStats{Writers: 1, Readers: 1, Segments: 12, Bytes: 900})
	g.Eventually(func(g Gomega) {
		c := condition(g, ch, conds, conflux.ChannelStatsReportedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ch.Status.Readers).To(Equal(int32(1)))
	}, 5*testStatsInterval, interval).Should(Succeed())
}

// A space server that cannot be read: the reconcile fails (Ready=False, an Event), and
// StatsReported carries the reason.
func TestChannelStatsUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	key := ns + "/down/p"
	fakeSpaces.SetStatsErr(key, errors.New("dial tcp: connection refused"))
	g.Expect(k8sClient.Create(ctx, newSpace(ns, "down"))).To(Succeed())
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "down"}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	conds := func() []metav1.Condition { return ch.Status.Conditions }
	g.Eventually(func(g Gomega) {
		c := condition(g, ch, conds, conflux.ChannelStatsReportedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(conflux.ReasonStatsUnavailable))
		g.Expect(c.Message).To(ContainSubstring("connection refused"))
		ready := meta.FindStatusCondition(ch.Status.Conditions, conflux.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(conflux.ReasonReconcileError))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var evs corev1.EventList
		g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		found := false
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "p" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "connection refused") {
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "a Warning Event naming the failure")
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() float64 { v, _ := metricValue(channelStatsErr, ns, "p"); return v }, timeout, interval).Should(BeNumerically(">=", 1))
}

func TestEventsChannelWithoutSpaceIsReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "ticks", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindEvents}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(g, ch, func() []metav1.Condition { return ch.Status.Conditions }, conflux.ChannelSpaceResolvedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(conflux.ReasonNoSpace))
		ready := condition(g, ch, func() []metav1.Condition { return ch.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	// Defaults from the CRD schema.
	g.Expect(ch.Spec.Delivery).To(Equal(conflux.Delivery("reliable")))
	g.Expect(ch.Spec.Transport).To(Equal(conflux.TransportPreference("auto")))
}

func TestChannelFinalizerUnlinksFromSpace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8sClient.Create(ctx, newSpace(ns, "s"))).To(Succeed())
	ch := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: "s"}}
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	key := ns + "/s/p"
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), ch)).To(Succeed())
		g.Expect(ch.Finalizers).To(ContainElement(conflux.FinalizerName))
		g.Expect(fakeSpaces.IsRegistered(key)).To(BeTrue())
		_, ok := metricValue(channelSegments, ns, "p")
		g.Expect(ok).To(BeTrue(), "the channel's metrics series")
	}, timeout, interval).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), ch))
	}, timeout, interval).Should(BeTrue())
	// once, or twice when a reconcile queued just before the release (the stats poller's)
	// still saw the finalizer in the cache: unlinks are idempotent
	g.Expect(fakeSpaces.UnlinkCount(key)).To(BeNumerically(">=", 1))
	g.Expect(fakeSpaces.IsRegistered(key)).To(BeFalse())
	// its metrics series go with it
	g.Eventually(func() bool { _, ok := metricValue(channelSegments, ns, "p"); return ok }, timeout, interval).Should(BeFalse())
}
