package conflux

/*
#include <stdlib.h>
#include "conflux.h"
int cxgo_sink(struct cx_chan *ch, const struct cx_chan_sink_opts *o, uintptr_t handle,
              struct cx_chan_sink **out);
*/
import "C"

import (
	"fmt"
	"os"
	"reflect"
	"runtime/cgo"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// ContextOptions configure a channel runtime (zero values: the library's defaults).
type ContextOptions struct {
	Listen    string // listener address ("tcp://0.0.0.0:0")
	Advertise string // the address other processes dial (this host's first IPv4)
}

// Context is the channel runtime of this process (cx_chan_ctx_create): a listener and a
// progress thread, on which every sink callback runs.
type Context struct {
	mu       sync.Mutex
	ctx      *C.struct_cx_chan_ctx
	channels []*Channel
}

// NewContext creates the runtime. o may be nil.
func NewContext(o *ContextOptions) (*Context, error) {
	var opts C.struct_cx_chan_ctx_opts
	if o != nil {
		if o.Listen != "" {
			opts.listen = C.CString(o.Listen)
			defer C.free(unsafe.Pointer(opts.listen))
		}
		if o.Advertise != "" {
			opts.advertise = C.CString(o.Advertise)
			defer C.free(unsafe.Pointer(opts.advertise))
		}
	}
	defer lock()()
	var ctx *C.struct_cx_chan_ctx
	if err := check(C.cx_chan_ctx_create(&opts, &ctx), "channel context"); err != nil {
		return nil, err
	}
	return &Context{ctx: ctx}, nil
}

// Address is the address other processes reach this runtime at.
func (c *Context) Address() string { return C.GoString(C.cx_chan_ctx_addr(c.ctx)) }

func (c *Context) live(op string) (*C.struct_cx_chan_ctx, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil, &Error{op, syscall.EBADF, "the channel context is closed"}
	}
	return c.ctx, nil
}

// ChannelOptions for Create.
type ChannelOptions struct {
	Format     *Format // declared format (nil: untyped)
	Reliable   bool    // back-pressure instead of dropping the oldest event of a full queue
	QueueLimit int     // events per sink queue (0: 1024)
}

// Create makes a channel whose contact point is this process; give its ID to the others.
func (c *Context) Create(o ChannelOptions) (*Channel, error) {
	ctx, err := c.live("create channel")
	if err != nil {
		return nil, err
	}
	var opts C.struct_cx_chan_opts
	if o.Format != nil {
		opts.format = o.Format.ptr
	}
	if o.Reliable {
		opts.mode = C.CX_CHAN_RELIABLE
	}
	opts.queue_limit = C.unsigned(o.QueueLimit)
	defer lock()()
	var ch *C.struct_cx_chan
	if err := check(C.cx_chan_create(ctx, &opts, &ch), "create channel"); err != nil {
		return nil, err
	}
	return c.add(ch), nil
}

// Open opens a channel created elsewhere by its id, waiting up to timeout for its contact.
func (c *Context) Open(id string, timeout time.Duration) (*Channel, error) {
	ctx, err := c.live("open channel")
	if err != nil {
		return nil, err
	}
	cid := C.CString(id)
	defer C.free(unsafe.Pointer(cid))
	defer lock()()
	var ch *C.struct_cx_chan
	if err := check(C.cx_chan_open(ctx, cid, ms(timeout), &ch), "open channel "+id); err != nil {
		return nil, err
	}
	return c.add(ch), nil
}

func (c *Context) add(ch *C.struct_cx_chan) *Channel {
	h := &Channel{c: c, ch: ch, ID: C.GoString(C.cx_chan_id(ch))}
	if f := C.cx_chan_format(ch); f != nil {
		h.Format = newFormat(f)
	}
	c.mu.Lock()
	c.channels = append(c.channels, h)
	c.mu.Unlock()
	return h
}

// Close closes every channel and stops the runtime (cx_chan_ctx_destroy). Not from a sink
// callback.
func (c *Context) Close() {
	c.mu.Lock()
	ctx, chans := c.ctx, c.channels
	c.ctx, c.channels = nil, nil
	c.mu.Unlock()
	if ctx == nil {
		return
	}
	C.cx_chan_ctx_destroy(ctx) // frees every channel, source and sink
	for _, ch := range chans {
		ch.forget()
	}
}

// Channel is a handle on an event channel.
type Channel struct {
	c      *Context
	mu     sync.Mutex
	ch     *C.struct_cx_chan
	sinks  []*Sink
	ID     string  // "cx1:tcp://10.0.0.5:4711/1"
	Format *Format // the declared format, or nil
}

func (h *Channel) live(op string) (*C.struct_cx_chan, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		return nil, &Error{op, syscall.EBADF, "channel " + h.ID + " is closed"}
	}
	return h.ch, nil
}

// forget drops the handles the runtime freed (its context was closed).
func (h *Channel) forget() {
	h.mu.Lock()
	h.ch = nil
	sinks := h.sinks
	h.sinks = nil
	h.mu.Unlock()
	for _, k := range sinks {
		k.release()
	}
}

// Source adds a source of events in format f (nil: the channel's declared format).
func (h *Channel) Source(f *Format) (*Source, error) {
	ch, err := h.live("source")
	if err != nil {
		return nil, err
	}
	if f == nil {
		f = h.Format
	}
	if f == nil {
		return nil, usageError("source on "+h.ID, "the channel declares no format: give one")
	}
	defer lock()()
	var s *C.struct_cx_chan_source
	if err := check(C.cx_chan_source(ch, f.ptr, &s), ""); err != nil {
		return nil, err
	}
	return &Source{h: h, s: s, f: f}, nil
}

// SinkOptions for Sink.
//
// A derived sink gives Filter, a program every source runs on each event before sending
// it (docs/filter-language.md): a condition ("id % 4 == 0"), or `;`-separated statements
// with computed fields of the Projection format and state kept between events:
//
//	SinkOptions{Format: summary, Projection: summary,
//		Filter: "every(8); mean = wmean(x, 8); peak = max(energy)"}
//
// An invalid program fails Sink with EINVAL (E2BIG past the language's limits), naming the
// column; a source that cannot compile it for its own format reports it in Sink.Error.
type SinkOptions struct {
	Format     *Format // the events' format here (converted by field name); nil: untyped
	Filter     string  // derived sink: a filter or transform program every source runs
	Projection *Format // derived sink: the smaller format sources convert to, and a program's computed fields' format
}

// Event is one delivered event. Data is the event in the sink's format (a copy; nil for
// an untyped sink), JSON the event read by reflection in the sender's format (untyped
// sinks only), Format and Token the format it travelled in, Seq the source's event number
// (1, 2, ...), From the source's process address.
type Event struct {
	Data   []byte
	JSON   string
	Format string
	Token  uint64
	Seq    uint64
	From   string
}

// EventAs gives a typed sink's event as a T (the sink's format must describe T).
func EventAs[T any](ev Event) (T, error) {
	var v T
	if len(ev.Data) != int(unsafe.Sizeof(v)) {
		return v, usageError("event", "event of %d bytes is not a %T (%d bytes)", len(ev.Data), v, unsafe.Sizeof(v))
	}
	v = *(*T)(unsafe.Pointer(&ev.Data[0]))
	return v, nil
}

// Sink is a subscription; its callback runs on the runtime's progress thread.
type Sink struct {
	h      *Channel
	k      *C.struct_cx_chan_sink
	handle cgo.Handle
	size   int
	fn     func(Event)
	mu     sync.Mutex
	panics []any
}

// Sink subscribes fn. fn runs on the runtime's thread, one event at a time: keep it short
// (hand the event to a goroutine through a Go channel for long work). A panic in fn is
// recovered and kept (Panics).
func (h *Channel) Sink(o SinkOptions, fn func(Event)) (*Sink, error) {
	ch, err := h.live("sink")
	if err != nil {
		return nil, err
	}
	var opts C.struct_cx_chan_sink_opts
	k := &Sink{h: h, fn: fn}
	if o.Format != nil {
		opts.format = o.Format.ptr
		k.size = o.Format.Size
	}
	if o.Projection != nil {
		opts.projection = o.Projection.ptr
	}
	if o.Filter != "" {
		opts.filter = C.CString(o.Filter)
		defer C.free(unsafe.Pointer(opts.filter))
	}
	k.handle = cgo.NewHandle(k)
	defer lock()()
	if err := check(C.cxgo_sink(ch, &opts, C.uintptr_t(k.handle), &k.k), ""); err != nil {
		k.handle.Delete()
		return nil, err
	}
	h.mu.Lock()
	h.sinks = append(h.sinks, k)
	h.mu.Unlock()
	return k, nil
}

// Panics returns the values fn panicked with, if any.
func (k *Sink) Panics() []any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]any(nil), k.panics...)
}

// Error is the last error a source reported for this sink (a filter it could not compile,
// an event it could not convert), or "".
func (k *Sink) Error() string {
	if k.k == nil {
		return ""
	}
	var buf [512]C.char
	n := C.cx_chan_sink_error(k.k, &buf[0], C.size_t(len(buf)))
	return C.GoStringN(&buf[0], C.int(min(int(n), len(buf)-1)))
}

// Close unsubscribes; when it returns fn is not running and will not run again.
func (k *Sink) Close() {
	k.h.mu.Lock()
	p := k.k
	for i, s := range k.h.sinks {
		if s == k {
			k.h.sinks = append(k.h.sinks[:i], k.h.sinks[i+1:]...)
			break
		}
	}
	k.h.mu.Unlock()
	if p != nil {
		C.cx_chan_sink_close(p)
	}
	k.release()
}

func (k *Sink) release() {
	if k.k != nil {
		k.k = nil
		k.handle.Delete()
	}
}

//export confluxGoOnEvent
func confluxGoOnEvent(handle C.uintptr_t, ev *C.struct_cx_chan_event) {
	k := cgo.Handle(handle).Value().(*Sink)
	e := Event{Token: uint64(ev.token), Seq: uint64(ev.seq), Format: C.GoString(C.cx_format_name(ev.format)),
		From: C.GoString(ev.from)}
	if ev.data != nil && k.size > 0 {
		e.Data = C.GoBytes(ev.data, C.int(k.size))
	} else if ev.wire != nil {
		e.JSON = reflectJSON(ev)
	}
	defer func() {
		if p := recover(); p != nil {
			k.mu.Lock()
			k.panics = append(k.panics, p)
			first := len(k.panics) == 1
			k.mu.Unlock()
			if first {
				fmt.Fprintf(os.Stderr, "conflux: sink callback panicked: %v (kept in Sink.Panics)\n", p)
			}
		}
	}()
	k.fn(e)
}

// reflectJSON prints an event in its sender's format (cx_reflect_json).
func reflectJSON(ev *C.struct_cx_chan_event) string {
	var v C.struct_cx_view
	if C.cx_reflect_open_format(ev.format, ev.wire, ev.wire_len, &v) < 0 {
		return ""
	}
	buf := make([]byte, 4096)
	for {
		n := int(C.cx_reflect_json(&v, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, n+1)
	}
}

// WaitMembers waits up to timeout until this process knows at least that many sources
// and sinks on the channel.
func (h *Channel) WaitMembers(sources, sinks int, timeout time.Duration) error {
	ch, err := h.live("wait")
	if err != nil {
		return err
	}
	defer lock()()
	return check(C.cx_chan_wait_members(ch, C.unsigned(sources), C.unsigned(sinks), ms(timeout)),
		"wait for members of "+h.ID)
}

// Stats are a channel's counters (cx_chan_stats).
type Stats struct {
	Submitted, Sent, SentBytes, Queued, Dropped, Blocked, Filtered, FilteredBytes uint64
	ProjectedBytesSaved, Delivered, ReceivedBytes, Errors                         uint64
	Sources, Sinks, Removed                                                       uint32
}

// Stats returns the channel's counters.
func (h *Channel) Stats() (Stats, error) {
	ch, err := h.live("stats")
	if err != nil {
		return Stats{}, err
	}
	var s C.struct_cx_chan_stats
	C.cx_chan_stats(ch, &s)
	return Stats{uint64(s.submitted), uint64(s.sent), uint64(s.sent_bytes), uint64(s.queued),
		uint64(s.dropped), uint64(s.blocked), uint64(s.filtered), uint64(s.filtered_bytes),
		uint64(s.projected_bytes_saved), uint64(s.delivered), uint64(s.received_bytes),
		uint64(s.errors), uint32(s.sources), uint32(s.sinks), uint32(s.removed)}, nil
}

// Close closes this handle: its sources and sinks leave.
func (h *Channel) Close() {
	h.mu.Lock()
	sinks := append([]*Sink(nil), h.sinks...)
	h.mu.Unlock()
	for _, k := range sinks { // each returns once its callback cannot run any more
		k.Close()
	}
	h.mu.Lock()
	ch := h.ch
	h.ch = nil
	h.mu.Unlock()
	if ch != nil {
		C.cx_chan_close(ch)
	}
}

// Source submits events into a channel.
type Source struct {
	h *Channel
	s *C.struct_cx_chan_source
	f *Format
}

// Submit submits events of T (the source's format must describe T), in order. On a
// reliable channel each waits up to timeout for room (Forever: no limit; an error wrapping
// ETIMEDOUT after); on a best-effort one it never waits.
func Submit[T any](s *Source, timeout time.Duration, events ...T) error {
	if err := s.f.fits(reflect.TypeOf((*T)(nil)).Elem()); err != nil {
		return err
	}
	for i := range events {
		if err := s.submit(unsafe.Pointer(&events[i]), timeout); err != nil {
			return err
		}
	}
	return nil
}

// SubmitBytes submits one event given as the bytes of the source's struct.
func (s *Source) SubmitBytes(ev []byte, timeout time.Duration) error {
	if len(ev) != s.f.Size {
		return usageError("submit on "+s.h.ID, "event of %d bytes, the format's struct has %d", len(ev), s.f.Size)
	}
	return s.submit(unsafe.Pointer(&ev[0]), timeout)
}

func (s *Source) submit(p unsafe.Pointer, timeout time.Duration) error {
	if _, err := s.h.live("submit"); err != nil || s.s == nil {
		return &Error{"submit", syscall.EBADF, "the source or its channel is closed"}
	}
	defer lock()()
	return check(C.cx_chan_submit_wait(s.s, p, ms(timeout)), "submit on "+s.h.ID)
}

// Close removes the source (queued events still go out).
func (s *Source) Close() {
	if _, err := s.h.live("close"); err == nil && s.s != nil {
		C.cx_chan_source_close(s.s)
	}
	s.s = nil
}
