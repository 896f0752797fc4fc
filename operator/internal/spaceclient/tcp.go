package spaceclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"syscall"
	"time"
)

// TCP is the SpaceClient that talks to confluxd --role=space over its protocol
// (protocol.go): one short TCP connection per call, one request, one reply. A channel is
// the name <channel> in its space's name table (a Space lives in one namespace, so channel
// names are unique in it):
//
//	RegisterChannel  GET name (binds the name to a new pipe when unbound; no reader address)
//	UnlinkChannel    UNLINK name (an unknown name is not an error; a pipe open for writing is)
//	Stats            STATS name: writers (0 or 1, the pipe's single writer), readers (the
//	                 server's READ streams), bytes of log on disk, segments stored, links
//	                 per transport (dataplane/src/space/cx_space_proto.h says exactly what
//	                 each counts). A server older than STATS refuses it as an unknown op:
//	                 then LOOKUP gives writers and segments, and the error wraps
//	                 ErrStatsUnsupported.
type TCP struct {
	// Timeout of one call (dial, request, reply) when ctx has no earlier deadline.
	Timeout time.Duration
}

// NewTCP returns a TCP client with a 5 s timeout per call.
func NewTCP() *TCP { return &TCP{Timeout: 5 * time.Second} }

func (c *TCP) RegisterChannel(ctx context.Context, ref ChannelRef) error {
	e := &encoder{}
	e.u8(opGet)
	e.str(ref.Channel)
	e.u64(0) // format: none declared at registration; a writer's PUT brings its own
	e.str("")
	_, err := c.pipeCall(ctx, ref, opGet, "register", e.b)
	return err
}

func (c *TCP) UnlinkChannel(ctx context.Context, ref ChannelRef) error {
	e := &encoder{}
	e.u8(opUnlink)
	e.str(ref.Channel)
	_, err := c.pipeCall(ctx, ref, opUnlink, "unlink", e.b)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

func (c *TCP) Stats(ctx context.Context, ref ChannelRef) (ChannelStats, error) {
	return stats(ref, c.dialing(ctx, ref.Endpoint))
}

// StatsBatch reads the stats of every ref over one connection to endpoint: one STATS
// request after the other, not one connection per channel.
func (c *TCP) StatsBatch(ctx context.Context, endpoint string, refs []ChannelRef) []StatsResult {
	out := make([]StatsResult, len(refs))
	ctx, cancel := c.withTimeout(ctx, time.Duration(len(refs)))
	defer cancel()
	conn, err := dial(ctx, endpoint)
	if err != nil {
		for i := range out {
			out[i].Err = fmt.Errorf("space %s: stats %q: %w", endpoint, refs[i].Channel, err)
		}
		return out
	}
	defer conn.Close()
	for i, ref := range refs {
		out[i].Stats, out[i].Err = stats(ref, conn.call)
	}
	return out
}

// stats is one STATS call (LOOKUP for an older server) through do.
func stats(ref ChannelRef, do callFunc) (ChannelStats, error) {
	e := &encoder{}
	e.u8(opStats)
	e.str(ref.Channel)
	var st statsInfo
	p, err := pipeCallThen(ref, opStats, "stats", e.b, func(d *decoder) { st = d.stats() }, do)
	if isUnknownOp(err) {
		return lookupStats(ref, err, do)
	}
	if err != nil {
		return ChannelStats{}, err
	}
	out := ChannelStats{Readers: int32(min(st.Readers, math.MaxInt32)), Segments: clampInt64(st.Segments),
		Bytes: clampInt64(st.Bytes), Links: st.Links}
	if p.WriterOpen {
		out.Writers = 1
	}
	return out, nil
}

// lookupStats is Stats for a server that does not know STATS: writers and segments from
// LOOKUP, and an error wrapping ErrStatsUnsupported that says what is missing.
func lookupStats(ref ChannelRef, statsErr error, do callFunc) (ChannelStats, error) {
	e := &encoder{}
	e.u8(opLookup)
	e.str(ref.Channel)
	p, err := pipeCallThen(ref, opLookup, "lookup", e.b, nil, do)
	if err != nil {
		return ChannelStats{}, err
	}
	st := ChannelStats{Segments: p.segments()}
	if p.WriterOpen {
		st.Writers = 1
	}
	return st, fmt.Errorf("space %s: %w (%v)", ref.Endpoint, ErrStatsUnsupported, unwrapServer(statsErr))
}

// isUnknownOp reports a refusal of an op the server does not know (cx_sp_decode_request:
// -EPROTO "unknown space request op N").
func isUnknownOp(err error) bool {
	var se *ServerError
	return errors.As(err, &se) && se.Errno == syscall.EPROTO && strings.Contains(se.Message, "unknown space request op")
}

func unwrapServer(err error) error {
	var se *ServerError
	if errors.As(err, &se) {
		return se
	}
	return err
}

func clampInt64(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

// callFunc sends one request and returns the payload of its reply.
type callFunc func(req []byte) ([]byte, error)

// pipeCall sends one request whose reply is a pipe result (on a connection of its own)
// and decodes it. Errors name the space endpoint and the channel.
func (c *TCP) pipeCall(ctx context.Context, ref ChannelRef, op uint8, opName string, req []byte) (pipeInfo, error) {
	return pipeCallThen(ref, op, opName, req, nil, c.dialing(ctx, ref.Endpoint))
}

// pipeCallThen is pipeCall through do, for a reply with more after the pipe: rest decodes it.
func pipeCallThen(ref ChannelRef, op uint8, opName string, req []byte, rest func(*decoder), do callFunc) (pipeInfo, error) {
	payload, err := do(req)
	if err != nil {
		return pipeInfo{}, fmt.Errorf("space %s: %s %q: %w", ref.Endpoint, opName, ref.Channel, err)
	}
	d, err := decodeReplyHead(payload, op, opName)
	if err != nil {
		return pipeInfo{}, fmt.Errorf("space %s: %w", ref.Endpoint, err)
	}
	p := d.pipe()
	if rest != nil && d.err == nil {
		rest(d)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the reply", len(d.b))
	}
	if d.err != nil {
		return pipeInfo{}, fmt.Errorf("space %s: %s %q: %w", ref.Endpoint, opName, ref.Channel, d.err)
	}
	return p, nil
}

// withTimeout bounds ctx by calls times the per-call timeout.
func (c *TCP) withTimeout(ctx context.Context, calls time.Duration) (context.Context, context.CancelFunc) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return context.WithTimeout(ctx, max(calls, 1)*timeout)
}

// dialing is a callFunc that sends each request on a connection of its own.
func (c *TCP) dialing(ctx context.Context, endpoint string) callFunc {
	return func(req []byte) ([]byte, error) {
		ctx, cancel := c.withTimeout(ctx, 1)
		defer cancel()
		conn, err := dial(ctx, endpoint)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.call(req)
	}
}

// spaceConn is one connection to a space server; its calls are sequential, each a LOOKUP
// frame with the next request id.
type spaceConn struct {
	net.Conn
	seq uint64
}

func dial(ctx context.Context, endpoint string) (*spaceConn, error) {
	if endpoint == "" {
		return nil, errors.New("the space has no endpoint yet")
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	return &spaceConn{Conn: conn}, nil
}

// call sends req and returns the payload of its reply (frames that are not that reply are
// skipped).
func (c *spaceConn) call(req []byte) ([]byte, error) {
	c.seq++
	seq := c.seq
	h := frameHeader{Type: frameLookup, Seq: seq, Length: uint32(len(req))}
	if _, err := c.Write(append(h.encode(), req...)); err != nil {
		return nil, err
	}
	for {
		rh, payload, err := readFrame(c)
		if err != nil {
			return nil, fmt.Errorf("reading the reply: %w", err)
		}
		if rh.Type == frameLookup && rh.Flags&flagReply != 0 && rh.Seq == seq {
			return payload, nil
		}
	}
}
