package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// Deletes always finish: a Channel's finalizer never waits for ever on a space server that
// does not answer (the suite's Fake is told the server is unreachable, and fails as a dial
// to a server that never came up does).

func pipeChannel(ns, name, space string) *conflux.Channel {
	return &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: conflux.ChannelSpec{Kind: conflux.ChannelKindPipe, Space: space}}
}

// warnings returns the messages of the Warning events with reason about object name in ns.
func warnings(g Gomega, ns, name, reason string) []string {
	var evs corev1.EventList
	g.Expect(k8sClient.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

func gone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}

// waitFinalized waits until the operator has put its finalizer on every object.
func waitFinalized(g *WithT, objs ...client.Object) {
	g.Eventually(func(g Gomega) {
		for _, o := range objs {
			g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.GetFinalizers()).To(ContainElement(conflux.FinalizerName), o.GetName())
		}
	}, timeout, interval).Should(Succeed())
}

func TestDeletedChannelOfAServerThatNeverCameUpGoesWithinTheBound(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fakeSpaces.SetUnreachable(ns+"/never", true)
	sp := newSpace(ns, "never")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	ch := pipeChannel(ns, "p", "never")
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	waitFinalized(g, ch, sp)
	g.Eventually(func(g Gomega) {
		c := condition(g, ch, func() []metav1.Condition { return ch.Status.Conditions }, conflux.ChannelRegisteredCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(conflux.ReasonRegistrationFailed))
		g.Expect(c.Message).To(ContainSubstring("no such host"))
	}, timeout, interval).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
	// deletionTimestamp is at most 1 s older than this call, so the finalizer may not give
	// up during the first testUnlinkTimeout-1s: it retries meanwhile
	g.Consistently(func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(ch), &conflux.Channel{})
	}, testUnlinkTimeout-2*time.Second, interval).Should(Succeed(), "the finalizer retries before giving up")
	g.Eventually(gone(ch), timeout, interval).Should(BeTrue(), "the finalizer gives up and the Channel goes")
	g.Expect(fakeSpaces.FailedUnlinkCount(ns + "/never/p")).To(BeNumerically(">=", 1))
	g.Expect(fakeSpaces.UnlinkCount(ns + "/never/p")).To(Equal(0))
	g.Eventually(func(g Gomega) {
		g.Expect(warnings(g, ns, "p", conflux.ReasonUnlinkFailed)).To(ContainElement(ContainSubstring("retrying")))
		g.Expect(warnings(g, ns, "p", conflux.ReasonUnlinkAbandoned)).To(ContainElement(And(
			ContainSubstring(`gave up unlinking from space "never"`),
			ContainSubstring("still failing "+testUnlinkTimeout.String()+" after the deletion"),
			ContainSubstring("no such host"))))
	}, timeout, interval).Should(Succeed())

	// its Space has no Channel left: it goes too
	g.Expect(k8sClient.Delete(ctx, sp)).To(Succeed())
	g.Eventually(gone(sp), timeout, interval).Should(BeTrue())
}

// A Space being deleted takes its server and store with it: its Channels' finalizers try
// the unlink once and do not wait for the bound.
func TestChannelOfADeletingSpaceDoesNotWaitForItsServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fakeSpaces.SetUnreachable(ns+"/s", true)
	sp := newSpace(ns, "s")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	ch := pipeChannel(ns, "p", "s")
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	waitFinalized(g, ch, sp)

	g.Expect(k8sClient.Delete(ctx, sp)).To(Succeed())
	g.Eventually(func(g Gomega) { // the operator has seen the Space's deletion
		ready := condition(g, sp, func() []metav1.Condition { return sp.Status.Conditions }, conflux.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(conflux.ReasonDeleting))
	}, timeout, interval).Should(Succeed())
	g.Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
	g.Eventually(gone(ch), timeout, interval).Should(BeTrue())
	g.Eventually(gone(sp), timeout, interval).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(warnings(g, ns, "p", conflux.ReasonUnlinkAbandoned)).To(ContainElement(
			ContainSubstring(`(Space "s" is being deleted, with its server and store)`)))
	}, timeout, interval).Should(Succeed())
	// tried (once; a reconcile queued before the release may try again), never retried
	g.Expect(fakeSpaces.FailedUnlinkCount(ns + "/s/p")).To(BeNumerically(">=", 1))
	g.Expect(warnings(g, ns, "p", conflux.ReasonUnlinkFailed)).To(BeEmpty())
}

func TestSpaceAndItsChannelsDeletedTogetherAllGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fakeSpaces.SetUnreachable(ns+"/s", true)
	sp := newSpace(ns, "s")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	chs := []*conflux.Channel{pipeChannel(ns, "a", "s"), pipeChannel(ns, "b", "s")}
	for _, ch := range chs {
		g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	}
	waitFinalized(g, sp, chs[0], chs[1])

	g.Expect(k8sClient.Delete(ctx, sp)).To(Succeed())
	for _, ch := range chs {
		g.Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
	}
	for _, o := range []client.Object{chs[0], chs[1], sp} {
		g.Eventually(gone(o), timeout, interval).Should(BeTrue(), o.GetName())
	}
	for _, ch := range chs {
		g.Eventually(func(g Gomega) {
			g.Expect(warnings(g, ns, ch.Name, conflux.ReasonUnlinkAbandoned)).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed(), ch.Name)
	}
}

// A Channel whose Space object is gone (its finalizer removed by hand) has nothing left to
// unlink from: its finalizer does not try.
func TestChannelWhoseSpaceIsGoneIsReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sp := newSpace(ns, "s")
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	ch := pipeChannel(ns, "p", "s")
	g.Expect(k8sClient.Create(ctx, ch)).To(Succeed())
	waitFinalized(g, ch, sp)
	g.Eventually(func() bool { return fakeSpaces.IsRegistered(ns + "/s/p") }, timeout, interval).Should(BeTrue())

	fakeSpaces.SetUnreachable(ns+"/s", true)
	g.Expect(k8sClient.Delete(ctx, sp)).To(Succeed())
	g.Eventually(func() error { // the Space waits for its Channel: take its finalizer off
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return err
		}
		sp.Finalizers = nil
		return k8sClient.Update(ctx, sp)
	}, timeout, interval).Should(Succeed())
	g.Eventually(gone(sp), timeout, interval).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		c := condition(g, ch, func() []metav1.Condition { return ch.Status.Conditions }, conflux.ChannelSpaceResolvedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(conflux.ReasonSpaceNotFound))
	}, timeout, interval).Should(Succeed())

	g.Expect(k8sClient.Delete(ctx, ch)).To(Succeed())
	g.Eventually(gone(ch), timeout, interval).Should(BeTrue())
	g.Expect(fakeSpaces.FailedUnlinkCount(ns + "/s/p")).To(Equal(0))
	g.Expect(fakeSpaces.UnlinkCount(ns + "/s/p")).To(Equal(0))
}

// What the namespace controller does when a namespace is deleted: every object of every
// kind in it deleted at once. With a space server that never came up, all still go.
func TestEverythingInANamespaceDeletedAtOnceGoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fakeSpaces.SetUnreachable(ns+"/s", true)
	g.Expect(k8sClient.Create(ctx, newSpace(ns, "s"))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, pipeChannel(ns, "frames", "s"))).To(Succeed())
	createChannels(t, ns, "ticks")
	wf := &conflux.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: ns}, Spec: conflux.WorkflowSpec{
		Components: []conflux.Component{{Name: "ana", Template: appTemplate(), Inputs: []string{"frames", "ticks"}}}}}
	g.Expect(k8sClient.Create(ctx, wf)).To(Succeed())
	g.Eventually(func(g Gomega) {
		getDeployment(g, ns, "wf-ana")
	}, timeout, interval).Should(Succeed())
	waitFinalized(g, &conflux.Space{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}},
		&conflux.Channel{ObjectMeta: metav1.ObjectMeta{Name: "frames", Namespace: ns}})

	for _, o := range []client.Object{&conflux.Workflow{}, &conflux.Channel{}, &conflux.Space{}} {
		g.Expect(k8sClient.DeleteAllOf(ctx, o, client.InNamespace(ns))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		var sps conflux.SpaceList
		var chs conflux.ChannelList
		var wfs conflux.WorkflowList
		for _, l := range []client.ObjectList{&sps, &chs, &wfs} {
			g.Expect(k8sClient.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		}
		g.Expect(sps.Items).To(BeEmpty())
		g.Expect(chs.Items).To(BeEmpty())
		g.Expect(wfs.Items).To(BeEmpty())
	}, timeout, interval).Should(Succeed(), "every Space, Channel and Workflow of the namespace goes")
}

func TestUnlinkRetry(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ch := pipeChannel("ns", "p", "s")
	ch.DeletionTimestamp = &metav1.Time{Time: start}
	sp := newSpace("ns", "s")
	for _, c := range []struct {
		after time.Duration
		retry time.Duration
		why   string
	}{
		{0, unlinkRetryInterval, ""},
		{29 * time.Second, time.Second, ""}, // never past the bound
		{30 * time.Second, 0, "still failing 30s after the deletion"},
		{time.Hour, 0, "still failing 30s after the deletion"},
	} {
		retry, why := unlinkRetry(ch, sp, 30*time.Second, start.Add(c.after))
		g.Expect(retry).To(Equal(c.retry), c.after.String())
		g.Expect(why).To(Equal(c.why), c.after.String())
	}
	sp.DeletionTimestamp = &metav1.Time{Time: start}
	retry, why := unlinkRetry(ch, sp, 30*time.Second, start)
	g.Expect(retry).To(BeZero())
	g.Expect(why).To(Equal(`Space "s" is being deleted, with its server and store`))

	// while it retries, Ready says why
	s := &channelScope{channel: ch, unlinkErr: errors.New("dial tcp: lookup s.ns.svc: no such host")}
	updateChannelStatus(s)
	ready := meta.FindStatusCondition(ch.Status.Conditions, conflux.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(conflux.ReasonDeleting))
	g.Expect(ready.Message).To(Equal("unlinking from space: dial tcp: lookup s.ns.svc: no such host (retrying)"))
}
