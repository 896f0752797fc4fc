package edge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conflux "conflux.dev/operator/api/v1alpha1"
)

// ReasonSNIConflict is the Event reason on a Space whose sniHost another Space holds.
const ReasonSNIConflict = conflux.ReasonSNIConflict

// Server serves the edge's snapshot over xDS (ADS, and CDS/LDS on their own) on Addr, to
// Envoys whose bootstrap names NodeID. It runs on every operator replica (Envoy may reach
// any of them through the operator's Service), not only on the leader, and rebuilds the
// snapshot from the manager's cache whenever a Space changes.
type Server struct {
	// Cache is the manager's cache (Spaces are read and watched from it).
	Cache ctrlcache.Cache
	// Addr of the gRPC listener, e.g. ":18000".
	Addr string
	// NodeID the Envoys use (node.id in their bootstrap).
	NodeID  string
	Options Options
	// Recorder, when set, gets an Event on each Space left out by an SNI conflict.
	Recorder record.EventRecorder
	Log      logr.Logger
	// Notify, when set, is called (from the server's goroutine; it must not block) for
	// each Space whose Exposure changed with a rebuild, so that its status follows.
	Notify func(namespace, name string)

	snapshots cachev3.SnapshotCache
	mu        sync.Mutex
	bound     string
	last      Result
	built     bool
	reported  map[Conflict]bool
	kick      chan struct{}
}

// NeedLeaderElection: every replica serves (manager.LeaderElectionRunnable).
func (s *Server) NeedLeaderElection() bool { return false }

// BoundAddr is the listener's address once Start has bound it ("" before).
func (s *Server) BoundAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bound
}

// Current is the last snapshot built and what went into it.
func (s *Server) Current() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Start serves until ctx ends (manager.Runnable).
func (s *Server) Start(ctx context.Context) error {
	if s.NodeID == "" {
		return errors.New("edge xDS: a node id is required")
	}
	s.snapshots = cachev3.NewSnapshotCache(true, cachev3.IDHash{}, logAdapter{s.Log})
	s.kick = make(chan struct{}, 1)
	s.reported = map[Conflict]bool{}
	inf, err := s.Cache.GetInformer(ctx, &conflux.Space{})
	if err != nil {
		return fmt.Errorf("edge xDS: watching Spaces: %w", err)
	}
	poke := func(any) { s.poke() }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { s.poke() },
	}); err != nil {
		return fmt.Errorf("edge xDS: watching Spaces: %w", err)
	}
	if !s.Cache.WaitForCacheSync(ctx) {
		return errors.New("edge xDS: the cache did not sync")
	}
	if err := s.rebuild(ctx); err != nil {
		return err
	}

	lis, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("edge xDS: %w", err)
	}
	gs := grpc.NewServer(grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}))
	xds := serverv3.NewServer(ctx, s.snapshots, nil)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(gs, xds)
	s.mu.Lock()
	s.bound = lis.Addr().String()
	s.mu.Unlock()
	s.Log.Info("serving xDS for the edge", "address", s.bound, "node", s.NodeID)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	for {
		select {
		case <-ctx.Done():
			gs.GracefulStop()
			<-served
			return nil
		case err := <-served:
			return fmt.Errorf("edge xDS: %w", err)
		case <-s.kick:
			if err := s.rebuild(ctx); err != nil {
				// a snapshot that cannot be built keeps the previous one in service
				snapshotFails.Inc()
				s.Log.Error(err, "edge snapshot not updated")
			}
		}
	}
}

func (s *Server) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// rebuild builds the snapshot from the cached Spaces, checks it and serves it.
func (s *Server) rebuild(ctx context.Context) error {
	var list conflux.SpaceList
	if err := s.Cache.List(ctx, &list); err != nil {
		return fmt.Errorf("edge xDS: listing Spaces: %w", err)
	}
	o := s.Options
	o.Holders = map[string]string{}
	s.mu.Lock()
	for _, e := range s.last.Exposed {
		o.Holders[e.SNIHost] = e.Namespace + "/" + e.Name
	}
	s.mu.Unlock()
	res, err := Build(list.Items, o)
	if err != nil {
		return err
	}
	if err := Check(res); err != nil {
		return err
	}
	if err := s.snapshots.SetSnapshot(ctx, s.NodeID, res.Snapshot); err != nil {
		return fmt.Errorf("edge xDS: %w", err)
	}
	s.mu.Lock()
	prev, wasBuilt := s.last, s.built
	s.last, s.built = res, true
	s.mu.Unlock()
	s.notifyChanges(prev, res, wasBuilt)
	exposedSpaces.Set(float64(len(res.Exposed)))
	sniConflicts.Set(float64(len(res.Conflicts)))
	s.reportConflicts(ctx, res.Conflicts)
	return nil
}

// Exposure says what the edge does with a Space: served (exposed), left out because
// holder has its sniHost, or neither; built is false until the first snapshot.
func (s *Server) Exposure(namespace, name string) (exposed bool, holder string, built bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return exposureIn(s.last, namespace, name) == "exposed", conflictHolder(s.last, namespace, name), s.built
}

func exposureIn(r Result, namespace, name string) string {
	for _, e := range r.Exposed {
		if e.Namespace == namespace && e.Name == name {
			return "exposed"
		}
	}
	if h := conflictHolder(r, namespace, name); h != "" {
		return "conflict " + h
	}
	return ""
}

func conflictHolder(r Result, namespace, name string) string {
	for _, c := range r.Conflicts {
		if c.Namespace == namespace && c.Name == name {
			return c.Winner
		}
	}
	return ""
}

// notifyChanges calls Notify for every Space whose exposure differs between two builds
// (every Space of the first build).
func (s *Server) notifyChanges(prev, cur Result, wasBuilt bool) {
	if s.Notify == nil {
		return
	}
	seen := map[[2]string]bool{}
	for _, r := range []Result{prev, cur} {
		for _, e := range r.Exposed {
			seen[[2]string{e.Namespace, e.Name}] = true
		}
		for _, c := range r.Conflicts {
			seen[[2]string{c.Namespace, c.Name}] = true
		}
	}
	for k := range seen {
		if !wasBuilt || exposureIn(prev, k[0], k[1]) != exposureIn(cur, k[0], k[1]) {
			s.Notify(k[0], k[1])
		}
	}
}

// reportConflicts sends one Event per new conflict to the Space left out.
func (s *Server) reportConflicts(ctx context.Context, cs []Conflict) {
	now := map[Conflict]bool{}
	for _, c := range cs {
		now[c] = true
		if s.reported[c] {
			continue
		}
		s.Log.Info("Space not exposed: its sniHost is taken", "space", c.Namespace+"/"+c.Name, "sniHost", c.SNIHost, "holder", c.Winner)
		if s.Recorder != nil {
			var sp conflux.Space
			if err := s.Cache.Get(ctx, keyOf(c), &sp); err == nil {
				s.Recorder.Eventf(&sp, corev1.EventTypeWarning, ReasonSNIConflict,
					"not exposed through the edge: sniHost %q is held by Space %s (the Space that held it first keeps it)", c.SNIHost, c.Winner)
			}
		}
	}
	s.reported = now
}

// Check validates a built snapshot as Envoy would need it: every resource's own rules
// (ValidateAll) and the references between them (Consistent).
func Check(res Result) error {
	if err := res.Snapshot.Consistent(); err != nil {
		return fmt.Errorf("edge snapshot inconsistent: %w", err)
	}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		for name, r := range res.Snapshot.GetResources(typ) {
			v, ok := r.(interface{ ValidateAll() error })
			if !ok {
				return fmt.Errorf("edge snapshot: %s %q cannot be validated", typ, name)
			}
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("edge snapshot: %s %q: %w", typ, name, err)
			}
		}
	}
	return nil
}

// logAdapter gives go-control-plane's logger interface to a logr.Logger.
type logAdapter struct{ l logr.Logger }

func (a logAdapter) Debugf(f string, args ...any) { a.l.V(1).Info(fmt.Sprintf(f, args...)) }
func (a logAdapter) Infof(f string, args ...any)  { a.l.V(1).Info(fmt.Sprintf(f, args...)) }
func (a logAdapter) Warnf(f string, args ...any)  { a.l.Info(fmt.Sprintf(f, args...)) }
func (a logAdapter) Errorf(f string, args ...any) { a.l.Error(nil, fmt.Sprintf(f, args...)) }

func keyOf(c Conflict) client.ObjectKey {
	return client.ObjectKey{Namespace: c.Namespace, Name: c.Name}
}
