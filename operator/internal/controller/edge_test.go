package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/edge"
)

// xdsView is what an ADS client has been sent so far: clusters and listeners by name.
type xdsView struct {
	clusters  map[string]*clusterv3.Cluster
	listeners map[string]*listenerv3.Listener
}

// watchXDS opens an ADS stream to the test's edge server as Envoy would (node id, wildcard
// CDS and LDS requests, each response ACKed) and sends every state it is pushed on the
// returned channel until the test ends.
func watchXDS(t *testing.T) <-chan xdsView {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(testEdge.BoundAddr, timeout, interval).ShouldNot(BeEmpty())
	conn, err := grpc.NewClient(testEdge.BoundAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = conn.Close() })
	stream, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	node := &corev3.Node{Id: testEdgeNode, Cluster: "conflux-edge"}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		g.Expect(stream.Send(&discoverygrpc.DiscoveryRequest{Node: node, TypeUrl: typ})).To(Succeed())
	}
	out := make(chan xdsView, 16)
	go func() {
		view := xdsView{clusters: map[string]*clusterv3.Cluster{}, listeners: map[string]*listenerv3.Listener{}}
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			switch resp.GetTypeUrl() {
			case resource.ClusterType:
				view.clusters = map[string]*clusterv3.Cluster{}
				for _, a := range resp.GetResources() {
					var c clusterv3.Cluster
					if a.UnmarshalTo(&c) == nil {
						view.clusters[c.GetName()] = &c
					}
				}
			case resource.ListenerType:
				view.listeners = map[string]*listenerv3.Listener{}
				for _, a := range resp.GetResources() {
					var l listenerv3.Listener
					if a.UnmarshalTo(&l) == nil {
						view.listeners[l.GetName()] = &l
					}
				}
			}
			// ACK, which also asks for the next version
			_ = stream.Send(&discoverygrpc.DiscoveryRequest{Node: node, TypeUrl: resp.GetTypeUrl(),
				VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
			cp := xdsView{clusters: map[string]*clusterv3.Cluster{}, listeners: map[string]*listenerv3.Listener{}}
			for k, v := range view.clusters {
				cp.clusters[k] = v
			}
			for k, v := range view.listeners {
				cp.listeners[k] = v
			}
			select {
			case out <- cp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// waitView reads pushed states until ok accepts one, or fails after the timeout.
func waitView(t *testing.T, views <-chan xdsView, what string, ok func(xdsView) bool) xdsView {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case v := <-views:
			if ok(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("the edge's xDS server never served %s", what)
		}
	}
}

// gauge reads a metric without labels from the manager's registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func sniRoutes(v xdsView) map[string]bool {
	out := map[string]bool{}
	for _, fc := range v.listeners[edge.ListenerName].GetFilterChains() {
		for _, sn := range fc.GetFilterChainMatch().GetServerNames() {
			out[sn] = true
		}
	}
	return out
}

func exposedSpace(ns, name, sni string) *conflux.Space {
	sp := newSpace(ns, name)
	sp.Spec.Exposure = &conflux.SpaceExposure{Enabled: true, SNIHost: sni}
	return sp
}

func TestEdgeServesExposedSpaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	views := watchXDS(t)
	host := fmt.Sprintf("frames.%s.edge.test", ns)
	cluster := edge.ClusterName(ns, "frames")

	sp := exposedSpace(ns, "frames", host)
	g.Expect(k8sClient.Create(ctx, sp)).To(Succeed())
	v := waitView(t, views, "the exposed Space", func(v xdsView) bool { return v.clusters[cluster] != nil && sniRoutes(v)[host] })
	sa := v.clusters[cluster].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	g.Expect(sa.GetAddress()).To(Equal(fmt.Sprintf("frames.%s.svc.cluster.local", ns)))
	g.Expect(sa.GetPortValue()).To(Equal(uint32(conflux.SpacePort)))
	spaceExposed := func(g Gomega, name string) *metav1.Condition {
		var sp conflux.Space
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sp)).To(Succeed())
		return meta.FindStatusCondition(sp.Status.Conditions, conflux.SpaceExposedCondition)
	}
	g.Eventually(func(g Gomega) {
		c := spaceExposed(g, "frames")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring(host))
	}, timeout, interval).Should(Succeed())
	g.Expect(v.listeners[edge.ListenerName].GetAddress().GetSocketAddress().GetPortValue()).To(Equal(uint32(10000)))

	// A second Space claiming the same host is left out, with a Warning Event saying who holds it.
	dup := exposedSpace(ns, "copy", host)
	g.Expect(k8sClient.Create(ctx, dup)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var evs corev1.EventList
		g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		found := false
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "copy" && e.Reason == edge.ReasonSNIConflict {
				g.Expect(e.Message).To(ContainSubstring(ns + "/frames"))
				found = true
			}
		}
		g.Expect(found).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(testEdge.Current().Snapshot.GetResources(resource.ClusterType)).NotTo(HaveKey(edge.ClusterName(ns, "copy")))
	g.Expect(gauge(t, "conflux_edge_sni_conflicts")).To(BeNumerically(">=", 1))
	g.Eventually(func(g Gomega) {
		c := spaceExposed(g, "copy")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(conflux.ReasonSNIConflict))
		g.Expect(c.Message).To(ContainSubstring(ns + "/frames"))
	}, timeout, interval).Should(Succeed())
	g.Expect(gauge(t, "conflux_edge_exposed_spaces")).To(BeNumerically(">=", 1))

	// Exposure switched off: the route and the cluster go.
	g.Expect(k8sClient.Delete(ctx, dup)).To(Succeed())
	g.Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return err
		}
		sp.Spec.Exposure.Enabled = false
		return k8sClient.Update(ctx, sp)
	}, timeout, interval).Should(Succeed())
	waitView(t, views, "the Space's removal", func(v xdsView) bool { return v.clusters[cluster] == nil && !sniRoutes(v)[host] })
	g.Eventually(func(g Gomega) { g.Expect(spaceExposed(g, "frames")).To(BeNil()) }, timeout, interval).Should(Succeed())
}
