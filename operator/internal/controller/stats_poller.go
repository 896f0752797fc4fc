package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	conflux "conflux.dev/operator/api/v1alpha1"
	"conflux.dev/operator/internal/spaceclient"
)

// StatsPoller reads the stats of every Channel from the space servers, one StatsBatch per
// Space per interval (the Spaces spread evenly over it), and queues a Channel for
// reconcile only when its stats changed. The Channel reconciler takes the stats it keeps,
// so an idle operator reads the space servers but writes nothing to the API server.
type StatsPoller struct {
	Reader   client.Reader
	Spaces   spaceclient.SpaceClient
	Interval time.Duration
	Log      logr.Logger

	changes chan event.GenericEvent
	mu      sync.Mutex
	last    map[string]spaceclient.StatsResult // by namespace/channel
}

// NewStatsPoller returns a poller; add it to the manager and give it to the Channel
// reconciler.
func NewStatsPoller(r client.Reader, spaces spaceclient.SpaceClient, interval time.Duration, log logr.Logger) *StatsPoller {
	return &StatsPoller{Reader: r, Spaces: spaces, Interval: interval, Log: log,
		changes: make(chan event.GenericEvent, 4096), last: map[string]spaceclient.StatsResult{}}
}

// Changes carries the Channels whose stats changed.
func (p *StatsPoller) Changes() <-chan event.GenericEvent { return p.changes }

// Get returns the last stats read for a channel without error; ok is false when there are none.
func (p *StatsPoller) Get(namespace, channel string) (spaceclient.ChannelStats, error, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.last[namespace+"/"+channel]
	if !ok || (r.Err != nil && !isStatsUnsupported(r.Err)) {
		return spaceclient.ChannelStats{}, nil, false
	}
	return r.Stats, r.Err, true
}

// Put records stats the reconciler read itself, so that the next poll compares with them.
func (p *StatsPoller) Put(namespace, channel string, st spaceclient.ChannelStats, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[namespace+"/"+channel] = spaceclient.StatsResult{Stats: st, Err: err}
}

// Forget drops a deleted channel.
func (p *StatsPoller) Forget(namespace, channel string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, namespace+"/"+channel)
}

// Start polls until ctx ends (a manager Runnable; it runs on the leader only).
func (p *StatsPoller) Start(ctx context.Context) error {
	for {
		start := time.Now()
		p.poll(ctx, start)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(p.Interval))):
		}
	}
}

// poll reads every Space once, the i-th of n at start + i*Interval/n.
func (p *StatsPoller) poll(ctx context.Context, start time.Time) {
	var spaces conflux.SpaceList
	if err := p.Reader.List(ctx, &spaces, client.UnsafeDisableDeepCopy); err != nil {
		p.Log.Error(err, "listing spaces")
		return
	}
	n := len(spaces.Items)
	for i := range spaces.Items {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(i) * p.Interval / time.Duration(n)))):
		}
		p.pollSpace(ctx, &spaces.Items[i])
	}
}

func (p *StatsPoller) pollSpace(ctx context.Context, sp *conflux.Space) {
	if sp.Status.Endpoint == "" || !sp.DeletionTimestamp.IsZero() {
		return
	}
	var channels conflux.ChannelList
	if err := p.Reader.List(ctx, &channels, client.InNamespace(sp.Namespace),
		client.MatchingFields{channelSpaceIndex: sp.Name}, client.UnsafeDisableDeepCopy); err != nil {
		p.Log.Error(err, "listing channels", "space", sp.Name)
		return
	}
	refs := make([]spaceclient.ChannelRef, 0, len(channels.Items))
	for i := range channels.Items {
		ch := &channels.Items[i]
		if ch.DeletionTimestamp.IsZero() {
			refs = append(refs, spaceclient.ChannelRef{Endpoint: sp.Status.Endpoint, Namespace: ch.Namespace,
				Space: sp.Name, Channel: ch.Name, Kind: string(ch.Spec.Kind)})
		}
	}
	if len(refs) == 0 {
		return
	}
	for i, r := range p.Spaces.StatsBatch(ctx, sp.Status.Endpoint, refs) {
		if p.record(refs[i].Namespace, refs[i].Channel, r) {
			obj := &conflux.Channel{ObjectMeta: metav1.ObjectMeta{Namespace: refs[i].Namespace, Name: refs[i].Channel}}
			select {
			case p.changes <- event.GenericEvent{Object: obj}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// record keeps r and reports whether it differs from what was kept.
func (p *StatsPoller) record(namespace, channel string, r spaceclient.StatsResult) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := namespace + "/" + channel
	old, ok := p.last[key]
	p.last[key] = r
	return !ok || !sameStats(old, r)
}

func sameStats(a, b spaceclient.StatsResult) bool {
	if (a.Err == nil) != (b.Err == nil) || (a.Err != nil && a.Err.Error() != b.Err.Error()) {
		return false
	}
	x, y := a.Stats, b.Stats
	if x.Writers != y.Writers || x.Readers != y.Readers || x.Segments != y.Segments || x.Bytes != y.Bytes || len(x.Links) != len(y.Links) {
		return false
	}
	for i := range x.Links {
		if x.Links[i] != y.Links[i] {
			return false
		}
	}
	return true
}

func isStatsUnsupported(err error) bool { return errors.Is(err, spaceclient.ErrStatsUnsupported) }
