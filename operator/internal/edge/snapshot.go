// Package edge is the operator's xDS server for the WAN edge: an Envoy Deployment that
// takes TLS streams from other clusters and routes each, by its SNI server name, to the
// Space that exposes that name (spec.exposure). Build turns the Spaces into an xDS snapshot
// (pure, tested resource by resource); Server (server.go) serves it over gRPC (ADS).
//
// What Envoy gets:
//
//	listener "conflux-edge" on 0.0.0.0:<ListenPort>, a TLS inspector (reads the SNI of the
//	  ClientHello), one filter chain per exposed Space matching its sniHost, each a TCP
//	  proxy to the Space's cluster; a name no chain matches is closed. No listener at all
//	  while no Space is exposed (Envoy refuses a listener without filter chains).
//	cluster "conflux|<namespace>|<space>" per exposed Space: STRICT_DNS on the Space's
//	  headless Service <space>.<namespace>.svc.<ClusterDomain>, port 7400.
//
// TLS is passed through, not terminated: the space server (or the sidecar behind it) and
// the remote peer authenticate each other end to end (the data plane's tls driver).
package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// ListenerName is the one listener of the edge.
const ListenerName = "conflux-edge"

// Options of the generated configuration.
type Options struct {
	// ListenPort is where Envoy accepts TLS from remote clusters (its container port).
	ListenPort uint32
	// ClusterDomain of this cluster's DNS names ("cluster.local" when empty).
	ClusterDomain string
	// ConnectTimeout to a space server (5 s when zero).
	ConnectTimeout time.Duration
	// Holders: SNI host -> namespace/name of the Space that has it now (the last build's
	// Exposed). A holder keeps its host while it still claims it, whatever newcomers claim.
	Holders map[string]string
}

// Exposed is one Space the snapshot routes to.
type Exposed struct {
	Namespace, Name, SNIHost, Cluster, Address string
}

// Conflict is an exposed Space left out because another Space holds the same SNI host.
type Conflict struct {
	Namespace, Name, SNIHost string
	// Winner is namespace/name of the Space that keeps the host.
	Winner string
}

// Result is a built snapshot and what went into it.
type Result struct {
	Snapshot  *cachev3.Snapshot
	Exposed   []Exposed
	Conflicts []Conflict
}

// ClusterName is the Envoy cluster of a Space.
func ClusterName(namespace, name string) string { return "conflux|" + namespace + "|" + name }

// Build generates the edge's snapshot from the Spaces. Spaces being deleted and Spaces not
// exposed are skipped. Two Spaces with one sniHost (CEL cannot check across objects): its
// holder (Options.Holders) keeps it, else the oldest (creation time, then namespace/name);
// the other is a Conflict. The
// version is a hash of the resources, so the same Spaces give the same version and Envoy
// is not sent a change that is none.
func Build(spaces []conflux.Space, o Options) (Result, error) {
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.ListenPort == 0 || o.ListenPort > 65535 {
		return Result{}, fmt.Errorf("edge listen port %d out of range", o.ListenPort)
	}
	cands := make([]conflux.Space, 0, len(spaces))
	for _, sp := range spaces {
		if sp.DeletionTimestamp.IsZero() && sp.Spec.Exposure != nil && sp.Spec.Exposure.Enabled && sp.Spec.Exposure.SNIHost != "" {
			cands = append(cands, sp)
		}
	}
	holds := func(sp conflux.Space) bool {
		return o.Holders[sp.Spec.Exposure.SNIHost] == sp.Namespace+"/"+sp.Name
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if ha, hb := holds(a), holds(b); ha != hb {
			return ha
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	var res Result
	owner := map[string]string{}
	for _, sp := range cands {
		host := sp.Spec.Exposure.SNIHost
		if w, taken := owner[host]; taken {
			res.Conflicts = append(res.Conflicts, Conflict{Namespace: sp.Namespace, Name: sp.Name, SNIHost: host, Winner: w})
			continue
		}
		owner[host] = sp.Namespace + "/" + sp.Name
		res.Exposed = append(res.Exposed, Exposed{Namespace: sp.Namespace, Name: sp.Name, SNIHost: host,
			Cluster: ClusterName(sp.Namespace, sp.Name), Address: fmt.Sprintf("%s.%s.svc.%s", sp.Name, sp.Namespace, o.ClusterDomain)})
	}
	// Envoy's filter chains and clusters in a stable order: by SNI host.
	sort.Slice(res.Exposed, func(i, j int) bool { return res.Exposed[i].SNIHost < res.Exposed[j].SNIHost })

	var clusters, listeners []types.Resource
	var chains []*listenerv3.FilterChain
	for _, e := range res.Exposed {
		clusters = append(clusters, spaceCluster(e, o))
		chain, err := sniChain(e)
		if err != nil {
			return Result{}, err
		}
		chains = append(chains, chain)
	}
	if len(chains) > 0 {
		l, err := edgeListener(o.ListenPort, chains)
		if err != nil {
			return Result{}, err
		}
		listeners = append(listeners, l)
	}
	version, err := hashResources(append(append([]types.Resource{}, clusters...), listeners...))
	if err != nil {
		return Result{}, err
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ClusterType:  clusters,
		resource.ListenerType: listeners,
	})
	if err != nil {
		return Result{}, fmt.Errorf("edge snapshot: %w", err)
	}
	res.Snapshot = snap
	return res, nil
}

func spaceCluster(e Exposed, o Options) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 e.Cluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		ConnectTimeout:       durationpb.New(o.ConnectTimeout),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: e.Cluster,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: socketAddress(e.Address, conflux.SpacePort),
					}},
				}},
			}},
		},
	}
}

func sniChain(e Exposed) (*listenerv3.FilterChain, error) {
	proxy, err := anypb.New(&tcpproxyv3.TcpProxy{
		StatPrefix:       "conflux_" + e.Namespace + "_" + e.Name,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: e.Cluster},
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.FilterChain{
		Name:             e.Cluster,
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{e.SNIHost}},
		Filters: []*listenerv3.Filter{{
			Name:       wellknown.TCPProxy,
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: proxy},
		}},
	}, nil
}

func edgeListener(port uint32, chains []*listenerv3.FilterChain) (*listenerv3.Listener, error) {
	inspector, err := anypb.New(&tlsinspectorv3.TlsInspector{})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    ListenerName,
		Address: socketAddress("0.0.0.0", port),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       wellknown.TlsInspector,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
		}},
		FilterChains: chains,
	}, nil
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func hashResources(rs []types.Resource) (string, error) {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	for _, r := range rs {
		b, err := opts.Marshal(r)
		if err != nil {
			return "", fmt.Errorf("edge snapshot: %w", err)
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
