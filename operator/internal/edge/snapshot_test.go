package edge

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conflux "conflux.dev/operator/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func space(ns, name, sni string, enabled bool, age time.Duration) conflux.Space {
	sp := conflux.Space{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(age))}}
	if sni != "" || enabled {
		sp.Spec.Exposure = &conflux.SpaceExposure{Enabled: enabled, SNIHost: sni}
	}
	return sp
}

// build builds and checks (Consistent + every resource's ValidateAll): every snapshot the
// tests make is one Envoy would accept as far as its schema says.
func build(t *testing.T, spaces []conflux.Space, o Options) Result {
	t.Helper()
	res, err := Build(spaces, o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := Check(res); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		for name, r := range res.Snapshot.GetResources(typ) {
			if err := r.(interface{ Validate() error }).Validate(); err != nil {
				t.Fatalf("%s %q: Validate: %v", typ, name, err)
			}
		}
	}
	return res
}

func TestBuildRoutesEachExposedSpaceBySNI(t *testing.T) {
	deleting := space("b", "gone", "gone.example.org", true, 0)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{conflux.FinalizerName}
	res := build(t, []conflux.Space{
		space("sim", "results", "results.sim.example.org", true, 2*time.Second),
		space("sim", "private", "", false, 0),                               // not exposed
		space("sim", "off", "off.example.org", false, 0),                    // exposure disabled
		space("ana", "frames", "frames.ana.example.org", true, time.Second), // another namespace
		deleting,
	}, Options{ListenPort: 10000, ClusterDomain: "cl.test"})

	if len(res.Exposed) != 2 || len(res.Conflicts) != 0 {
		t.Fatalf("exposed %+v, conflicts %+v", res.Exposed, res.Conflicts)
	}
	clusters := res.Snapshot.GetResources(resource.ClusterType)
	if len(clusters) != 2 {
		t.Fatalf("clusters: %v", keys(clusters))
	}
	c, ok := clusters[ClusterName("sim", "results")].(*clusterv3.Cluster)
	if !ok {
		t.Fatalf("no cluster for sim/results: %v", keys(clusters))
	}
	if c.GetType() != clusterv3.Cluster_STRICT_DNS {
		t.Errorf("cluster type %v, want STRICT_DNS (the headless Service)", c.GetType())
	}
	sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "results.sim.svc.cl.test" || sa.GetPortValue() != conflux.SpacePort {
		t.Errorf("cluster endpoint %s:%d, want results.sim.svc.cl.test:%d", sa.GetAddress(), sa.GetPortValue(), conflux.SpacePort)
	}

	listeners := res.Snapshot.GetResources(resource.ListenerType)
	l, ok := listeners[ListenerName].(*listenerv3.Listener)
	if !ok || len(listeners) != 1 {
		t.Fatalf("listeners: %v", keys(listeners))
	}
	if got := l.GetAddress().GetSocketAddress().GetPortValue(); got != 10000 {
		t.Errorf("listener port %d", got)
	}
	if len(l.GetListenerFilters()) != 1 || l.GetListenerFilters()[0].GetName() != wellknown.TlsInspector {
		t.Errorf("listener filters %v: want the TLS inspector (SNI)", l.GetListenerFilters())
	}
	// one chain per Space, sorted by SNI host, each a TCP proxy to its own cluster
	want := [][2]string{{"frames.ana.example.org", ClusterName("ana", "frames")}, {"results.sim.example.org", ClusterName("sim", "results")}}
	if len(l.GetFilterChains()) != len(want) {
		t.Fatalf("%d filter chains, want %d", len(l.GetFilterChains()), len(want))
	}
	for i, fc := range l.GetFilterChains() {
		if sn := fc.GetFilterChainMatch().GetServerNames(); len(sn) != 1 || sn[0] != want[i][0] {
			t.Errorf("chain %d matches %v, want %s", i, sn, want[i][0])
		}
		var tp tcpproxyv3.TcpProxy
		if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			t.Fatalf("chain %d: %v", i, err)
		}
		if tp.GetCluster() != want[i][1] {
			t.Errorf("chain %d proxies to %q, want %q", i, tp.GetCluster(), want[i][1])
		}
		if fc.GetTransportSocket() != nil {
			t.Errorf("chain %d terminates TLS; the edge passes it through", i)
		}
	}
}

func TestBuildOlderSpaceKeepsASharedSNIHost(t *testing.T) {
	res := build(t, []conflux.Space{
		space("b", "newer", "shared.example.org", true, time.Minute),
		space("a", "older", "shared.example.org", true, 0),
	}, Options{ListenPort: 443})
	if len(res.Exposed) != 1 || res.Exposed[0].Name != "older" {
		t.Fatalf("exposed %+v: want only a/older", res.Exposed)
	}
	if len(res.Conflicts) != 1 || res.Conflicts[0] != (Conflict{Namespace: "b", Name: "newer", SNIHost: "shared.example.org", Winner: "a/older"}) {
		t.Fatalf("conflicts %+v", res.Conflicts)
	}
	if n := len(res.Snapshot.GetResources(resource.ClusterType)); n != 1 {
		t.Fatalf("%d clusters, want 1", n)
	}
	// the Space that holds a host keeps it, even against an older claimant
	res = build(t, []conflux.Space{
		space("b", "holder", "shared.example.org", true, time.Minute),
		space("a", "older", "shared.example.org", true, 0),
	}, Options{ListenPort: 443, Holders: map[string]string{"shared.example.org": "b/holder"}})
	if len(res.Exposed) != 1 || res.Exposed[0].Name != "holder" || len(res.Conflicts) != 1 || res.Conflicts[0].Winner != "b/holder" {
		t.Fatalf("with a holder: exposed %+v, conflicts %+v", res.Exposed, res.Conflicts)
	}
}

func TestBuildWithNothingExposedHasNoListener(t *testing.T) {
	res := build(t, []conflux.Space{space("a", "s", "", false, 0)}, Options{ListenPort: 10000})
	if n := len(res.Snapshot.GetResources(resource.ListenerType)) + len(res.Snapshot.GetResources(resource.ClusterType)); n != 0 {
		t.Fatalf("%d resources for no exposed Space", n)
	}
	if res.Snapshot.GetVersion(resource.ListenerType) == "" {
		t.Fatal("an empty snapshot still needs a version")
	}
}

func TestBuildVersionFollowsContent(t *testing.T) {
	o := Options{ListenPort: 10000}
	a := []conflux.Space{space("a", "s", "s.example.org", true, 0), space("a", "t", "t.example.org", true, time.Second)}
	v1 := build(t, a, o).Snapshot.GetVersion(resource.ClusterType)
	v2 := build(t, []conflux.Space{a[1], a[0]}, o).Snapshot.GetVersion(resource.ClusterType)
	if v1 != v2 {
		t.Fatalf("same Spaces in another order: version %s then %s", v1, v2)
	}
	a[1].Spec.Exposure.SNIHost = "t2.example.org"
	if v3 := build(t, a, o).Snapshot.GetVersion(resource.ClusterType); v3 == v1 {
		t.Fatalf("a changed SNI host kept version %s", v1)
	}
}

func TestBuildRefusesBadOptionsAndCheckCatchesInvalidResources(t *testing.T) {
	if _, err := Build(nil, Options{}); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("no listen port: %v", err)
	}
	// Check must fail on what Envoy would refuse: a cluster without a name
	res := build(t, []conflux.Space{space("a", "s", "s.example.org", true, 0)}, Options{ListenPort: 10000})
	for _, r := range res.Snapshot.GetResources(resource.ClusterType) {
		r.(*clusterv3.Cluster).ConnectTimeout.Seconds = -1
	}
	if err := Check(res); err == nil || !strings.Contains(err.Error(), "ConnectTimeout") {
		t.Fatalf("Check of a negative connect timeout: %v", err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
