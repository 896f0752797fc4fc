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
	e := &encoder{}
	e.u8(opStats)
	e.str(ref.Channel)
	var st statsInfo
	p, err := c.pipeCallThen(ctx, ref, opStats, "stats", e.b, func(d *decoder) { st = d.stats() })
	if isUnknownOp(err) {
		return c.lookupStats(ctx, ref, err)
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
func (c *TCP) lookupStats(ctx context.Context, ref ChannelRef, statsErr error) (ChannelStats, error) {
	e := &encoder{}
	e.u8(opLookup)
	e.str(ref.Channel)
	p, err := c.pipeCall(ctx, ref, opLookup, "lookup", e.b)
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

// pipeCall sends one request whose reply is a pipe result and decodes it. Errors name the
// space endpoint and the channel.
func (c *TCP) pipeCall(ctx context.Context, ref ChannelRef, op uint8, opName string, req []byte) (pipeInfo, error) {
	return c.pipeCallThen(ctx, ref, op, opName, req, nil)
}

// pipeCallThen is pipeCall for a reply with more after the pipe: rest decodes it.
func (c *TCP) pipeCallThen(ctx context.Context, ref ChannelRef, op uint8, opName string, req []byte, rest func(*decoder)) (pipeInfo, error) {
	payload, err := c.call(ctx, ref.Endpoint, req)
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

// call dials endpoint, sends req as a LOOKUP frame with request id 1 and returns the
// payload of its reply (frames that are not that reply are skipped).
func (c *TCP) call(ctx context.Context, endpoint string, req []byte) ([]byte, error) {
	if endpoint == "" {
		return nil, errors.New("the space has no endpoint yet")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	const seq = 1
	h := frameHeader{Type: frameLookup, Seq: seq, Length: uint32(len(req))}
	if _, err := conn.Write(append(h.encode(), req...)); err != nil {
		return nil, err
	}
	for {
		rh, payload, err := readFrame(conn)
		if err != nil {
			return nil, fmt.Errorf("reading the reply: %w", err)
		}
		if rh.Type == frameLookup && rh.Flags&flagReply != 0 && rh.Seq == seq {
			return payload, nil
		}
	}
}
