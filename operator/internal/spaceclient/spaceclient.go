// Package spaceclient is the operator's view of a space server (confluxd --role=space).
// TCP (tcp.go) speaks the space protocol (protocol.go); Noop stands in where no space
// server is reachable (the operator run outside the cluster); the envtest suites use Fake.
package spaceclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// ErrStatsUnsupported is wrapped by Stats when the space server predates the STATS
// request: the stats returned with it have writers and segments only.
var ErrStatsUnsupported = errors.New("the space server does not report readers, bytes or links (it predates the STATS request)")

// ChannelRef identifies a channel in a space server.
type ChannelRef struct {
	// Endpoint of the space server, host:port.
	Endpoint string
	// Namespace, Space and Channel names.
	Namespace, Space, Channel string
	// Kind: events or pipe.
	Kind string
}

// Key is namespace/space/channel.
func (r ChannelRef) Key() string { return r.Namespace + "/" + r.Space + "/" + r.Channel }

// Link counts links of one transport.
type Link struct {
	Transport string
	Count     int32
}

// ChannelStats is what a space server reports about a channel.
type ChannelStats struct {
	Writers, Readers int32
	Segments, Bytes  int64
	Links            []Link
}

// SpaceClient talks to space servers. Every call must be idempotent: the operator repeats
// them on every reconcile.
type SpaceClient interface {
	// RegisterChannel creates the channel in its space, or does nothing if it exists.
	RegisterChannel(ctx context.Context, ref ChannelRef) error
	// UnlinkChannel removes the channel and its stored segments; nil if it does not exist.
	UnlinkChannel(ctx context.Context, ref ChannelRef) error
	// Stats reports the channel's writers, readers, segments, bytes and links. An error
	// wrapping ErrStatsUnsupported comes with the stats the server could give.
	Stats(ctx context.Context, ref ChannelRef) (ChannelStats, error)
	// StatsBatch is Stats for many channels of the space server at endpoint in one
	// exchange (one connection); the results are in the order of refs.
	StatsBatch(ctx context.Context, endpoint string, refs []ChannelRef) []StatsResult
}

// StatsResult is one channel's answer in a StatsBatch.
type StatsResult struct {
	Stats ChannelStats
	Err   error
}

// statsEach is StatsBatch made of single Stats calls (the in-memory clients).
func statsEach(ctx context.Context, c SpaceClient, refs []ChannelRef) []StatsResult {
	out := make([]StatsResult, len(refs))
	for i, ref := range refs {
		out[i].Stats, out[i].Err = c.Stats(ctx, ref)
	}
	return out
}

// Noop accepts everything and reports zero stats (--space-client=none).
type Noop struct{}

func (Noop) RegisterChannel(context.Context, ChannelRef) error { return nil }
func (Noop) UnlinkChannel(context.Context, ChannelRef) error   { return nil }
func (Noop) Stats(context.Context, ChannelRef) (ChannelStats, error) {
	return ChannelStats{}, nil
}
func (n Noop) StatsBatch(ctx context.Context, _ string, refs []ChannelRef) []StatsResult {
	return statsEach(ctx, n, refs)
}

// Fake records registrations and unlinks in memory; safe for concurrent use.
type Fake struct {
	mu         sync.Mutex
	Registered map[string]bool
	Unlinked   map[string]int
	StatsByKey map[string]ChannelStats
	// RegisterErr, when set, is returned by RegisterChannel.
	RegisterErr error
	// StatsErrByKey: the error Stats returns for a key (with the key's stats).
	StatsErrByKey map[string]error
	batches       int
	// down: the spaces (namespace/space) whose server does not answer (SetUnreachable).
	down          map[string]bool
	failedUnlinks map[string]int
}

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{Registered: map[string]bool{}, Unlinked: map[string]int{}, StatsByKey: map[string]ChannelStats{},
		StatsErrByKey: map[string]error{}, down: map[string]bool{}, failedUnlinks: map[string]int{}}
}

// SetUnreachable makes every call for the channels of space (namespace/space) fail as a
// call to a server that never came up does, or lets them through again.
func (f *Fake) SetUnreachable(space string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[space] = down
}

// unreachable is the error of a call to a space set unreachable, else nil; f.mu is held.
func (f *Fake) unreachable(ref ChannelRef) error {
	switch {
	case !f.down[ref.Namespace+"/"+ref.Space]:
		return nil
	case ref.Endpoint == "":
		return errors.New("the space has no endpoint yet")
	}
	host, _, _ := net.SplitHostPort(ref.Endpoint)
	return fmt.Errorf("space %s: dial tcp: lookup %s: no such host", ref.Endpoint, host)
}

func (f *Fake) RegisterChannel(_ context.Context, ref ChannelRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.RegisterErr != nil {
		return f.RegisterErr
	}
	if err := f.unreachable(ref); err != nil {
		return err
	}
	f.Registered[ref.Key()] = true
	return nil
}

func (f *Fake) UnlinkChannel(_ context.Context, ref ChannelRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unreachable(ref); err != nil {
		f.failedUnlinks[ref.Key()]++
		return err
	}
	delete(f.Registered, ref.Key())
	f.Unlinked[ref.Key()]++
	return nil
}

func (f *Fake) Stats(_ context.Context, ref ChannelRef) (ChannelStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unreachable(ref); err != nil {
		return ChannelStats{}, err
	}
	return f.StatsByKey[ref.Key()], f.StatsErrByKey[ref.Key()]
}

// StatsBatch counts one batch (BatchCount) and answers each ref as Stats does.
func (f *Fake) StatsBatch(ctx context.Context, _ string, refs []ChannelRef) []StatsResult {
	f.mu.Lock()
	f.batches++
	f.mu.Unlock()
	return statsEach(ctx, f, refs)
}

// BatchCount reports how many StatsBatch calls were made.
func (f *Fake) BatchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches
}

// SetStatsErr sets the error Stats returns for key (nil: none).
func (f *Fake) SetStatsErr(key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.StatsErrByKey[key] = err
}

// IsRegistered reports whether key (namespace/space/channel) is registered.
func (f *Fake) IsRegistered(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Registered[key]
}

// UnlinkCount reports how many times key was unlinked.
func (f *Fake) UnlinkCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Unlinked[key]
}

// FailedUnlinkCount reports how many unlinks of key failed (its space unreachable).
func (f *Fake) FailedUnlinkCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failedUnlinks[key]
}

// SetStats sets the stats reported for key.
func (f *Fake) SetStats(key string, s ChannelStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.StatsByKey[key] = s
}
