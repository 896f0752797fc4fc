package conflux

/*
#include <stdlib.h>
#include "conflux.h"
*/
import "C"

import (
	"io"
	"reflect"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Forever is the timeout that waits as long as it takes.
const Forever time.Duration = -1

const maxSegment = 1 << 30 // CX_FRAME_MAX_MSG: no segment is larger

// SpaceOptions tune a Space (zero values: the library's defaults).
type SpaceOptions struct {
	Listen    string        // where writers reach this process's readers: tcp, shm, ucx or tls, bare or a full address ("tcp://0.0.0.0:0"; default $CONFLUX_PIPE_LISTEN, else tcp)
	ReaderMem int           // bytes a reader buffers in memory before spilling to /tmp (64 MiB)
	Window    int           // segments a writer may have unacknowledged by the space (1024)
	Timeout   time.Duration // how long calls wait for the space (10 s)
}

// Space is an open space (pi_space_open): the name table and cache of pipes kept by a
// space server (confluxd --role=space).
type Space struct {
	addr      string
	d         C.int
	mu        sync.Mutex
	published map[uint64]bool
	open      map[interface{ Close() error }]bool
}

// OpenSpace opens the space whose server listens at addr ("tcp://host:port"). o may be nil.
func OpenSpace(addr string, o *SpaceOptions) (*Space, error) {
	var opts C.struct_pi_options
	if o != nil {
		if o.Listen != "" {
			opts.listen = C.CString(o.Listen)
			defer C.free(unsafe.Pointer(opts.listen))
		}
		opts.reader_mem = C.size_t(o.ReaderMem)
		opts.window = C.uint32_t(o.Window)
		opts.timeout_ms = C.int(o.Timeout.Milliseconds())
	}
	ca := C.CString(addr)
	defer C.free(unsafe.Pointer(ca))
	defer lock()()
	d, err := C.pi_space_open(ca, &opts)
	if d < 0 {
		return nil, libError("space "+addr, errnoOf(err))
	}
	return &Space{addr: addr, d: d, published: map[uint64]bool{}, open: map[interface{ Close() error }]bool{}}, nil
}

// Address is the space server's address.
func (s *Space) Address() string { return s.addr }

func (s *Space) track(c interface{ Close() error }, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.open[c] = true
	} else {
		delete(s.open, c)
	}
}

// Create opens pipe name for writing (pi_create). appendMode: PI_APPEND, a restarted
// writer replaying its writes from the first (the space drops what it holds).
func (s *Space) Create(name string, appendMode bool) (*Writer, error) {
	mode := C.int(C.PI_CREATE)
	if appendMode {
		mode = C.PI_APPEND
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	defer lock()()
	d, err := C.pi_create(cn, s.d, mode)
	if d < 0 {
		return nil, libError("create '"+name+"'", errnoOf(err))
	}
	w := &Writer{s: s, name: name, d: d}
	s.track(w, true)
	return w, nil
}

// Attach opens pipe name for reading (pi_attach), from segment 0.
func (s *Space) Attach(name string) (*Reader, error) {
	return s.attach(name, "attach '"+name+"'", false, func(cn *C.char) (C.int, error) {
		d, err := C.pi_attach(cn, s.d)
		return d, err
	})
}

// AttachNamed opens pipe name for reading under the durable cursor named cursor
// (pi_attach_named): the reader starts at the cursor's acknowledged position (segment 0 for a
// new cursor), which the space keeps beside the pipe across restarts of the reader and of the
// space. Reader.Ack stores the reader's position. Delivery is at least once: segments read
// and not acknowledged are read again by the cursor's next reader. A cursor name is 1..64
// bytes of [A-Za-z0-9._-] starting with a letter or digit (EINVAL). Two readers under one
// cursor at the same time read independently (the last Ack wins): to share the work, use
// AttachGroup.
func (s *Space) AttachNamed(name, cursor string) (*Reader, error) {
	cc := C.CString(cursor)
	defer C.free(unsafe.Pointer(cc))
	return s.attach(name, "attach '"+name+"' as cursor '"+cursor+"'", false, func(cn *C.char) (C.int, error) {
		d, err := C.pi_attach_named(cn, s.d, cc)
		return d, err
	})
}

// AttachGroup makes a reader of pipe name a member of the reader group named group
// (pi_attach_group): the space hands each segment to one live member at a time (members may
// be in any process), so the members together read the pipe once. Reader.Ack acknowledges
// the segments this member read since its last Ack; an acknowledged segment is never handed
// out again while the space runs. What a member read and did not acknowledge goes back to the
// group when it closes, dies, or holds it for the group's ack wait (30 s) with no Ack or read:
// its next Ack then fails with ESRCH and its next read joins the group again. A member holds
// at most 64 segments read and not acknowledged (reads fail with ENOBUFS beyond: Ack first).
// Reads give io.EOF once the pipe ended and every segment was handed out and none is held by
// another member. Seek of a member fails with EINVAL. Group names follow cursor names' rules.
func (s *Space) AttachGroup(name, group string) (*Reader, error) {
	cg := C.CString(group)
	defer C.free(unsafe.Pointer(cg))
	return s.attach(name, "attach '"+name+"' to group '"+group+"'", true, func(cn *C.char) (C.int, error) {
		d, err := C.pi_attach_group(cn, s.d, cg)
		return d, err
	})
}

// attach runs one of the pi_attach calls (call, on the locked thread) and tracks its reader.
func (s *Space) attach(name, op string, group bool, call func(cn *C.char) (C.int, error)) (*Reader, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	defer lock()()
	d, err := call(cn)
	if d < 0 {
		return nil, libError(op, errnoOf(err))
	}
	r := &Reader{s: s, name: name, d: d, group: group, raw: make([]byte, 64<<10)}
	s.track(r, true)
	return r, nil
}

// Unlink removes the name (pi_unlink); EBUSY while a writer has the pipe open.
func (s *Space) Unlink(name string) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	defer lock()()
	if rc, err := C.pi_unlink(cn, s.d); rc < 0 {
		return libError("unlink '"+name+"'", errnoOf(err))
	}
	return nil
}

// Publish stores f's description in the space's format service, so readers in other
// processes can convert from it (once per format; WriteEvents calls it).
func (s *Space) Publish(f *Format) error {
	s.mu.Lock()
	done := s.published[f.Token]
	s.mu.Unlock()
	if done {
		return nil
	}
	ca := C.CString(s.addr)
	defer C.free(unsafe.Pointer(ca))
	defer lock()()
	if err := check(C.conflux_format_publish(ca, f.ptr), ""); err != nil {
		return err
	}
	s.mu.Lock()
	s.published[f.Token] = true
	s.mu.Unlock()
	return nil
}

// Close closes the space's open writers (flushing them) and readers, then the space.
func (s *Space) Close() error {
	s.mu.Lock()
	var open []interface{ Close() error }
	for c := range s.open {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	defer lock()()
	if rc, err := C.pi_space_close(s.d); rc < 0 {
		return libError("space close", errnoOf(err))
	}
	return nil
}

// Writer is the one writer of a pipe.
type Writer struct {
	s      *Space
	name   string
	d      C.int
	closed bool
}

// Write appends one segment of raw bytes. It returns len(b).
func (w *Writer) Write(b []byte) (int, error) {
	if w.closed {
		return 0, &Error{"write '" + w.name + "'", syscall.EBADF, "the writer is closed"}
	}
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	defer lock()()
	n, err := C.pi_write(w.d, p, C.size_t(len(b)), nil)
	if n < 0 {
		return 0, libError("write '"+w.name+"'", errnoOf(err))
	}
	return int(n), nil
}

// WriteEvents appends one segment of events, in T's layout described by f (made by
// FormatOf[T], or any format with T's exact layout). The format is published to the space
// first. It returns len(events).
func WriteEvents[T any](w *Writer, f *Format, events []T) (int, error) {
	if w.closed {
		return 0, &Error{"write '" + w.name + "'", syscall.EBADF, "the writer is closed"}
	}
	if err := f.fits(reflect.TypeOf((*T)(nil)).Elem()); err != nil {
		return 0, err
	}
	if err := w.s.Publish(f); err != nil {
		return 0, err
	}
	var p unsafe.Pointer
	if len(events) > 0 {
		p = unsafe.Pointer(&events[0])
	}
	defer lock()()
	n, err := C.pi_write(w.d, p, C.size_t(len(events)), f.ptr)
	if n < 0 {
		return 0, libError("write '"+w.name+"'", errnoOf(err))
	}
	return int(n), nil
}

// Close ends the pipe (pi_close): it returns once the space acknowledged the end.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.s.track(w, false)
	defer lock()()
	if rc, err := C.pi_close(w.d); rc < 0 {
		return libError("close '"+w.name+"'", errnoOf(err))
	}
	return nil
}

// Abandon lets go of the writer WITHOUT ending the pipe (pi_abandon): readers see no end,
// and a writer created later with appendMode replays its writes (those the space holds are
// dropped) and continues. Close after Abandon does nothing.
func (w *Writer) Abandon() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.s.track(w, false)
	defer lock()()
	if rc, err := C.pi_abandon(w.d); rc < 0 {
		return libError("abandon '"+w.name+"'", errnoOf(err))
	}
	return nil
}

// Reader reads a pipe's segments in order; segments the writer streams before they are
// read buffer in the background.
type Reader struct {
	s        *Space
	name     string
	d        C.int
	group    bool // a member of a reader group (AttachGroup): no Seek
	raw      []byte
	typedCap int
	typed    []uint64 // ReadEvents' landing buffer (8-byte aligned), reused by every call
	closed   bool
}

// ReaderStats are a reader's counters.
type ReaderStats struct{ FromSpace, FromWriter, Duplicates, Spilled, Reconnects uint64 }

func ms(timeout time.Duration) C.int {
	if timeout < 0 {
		return -1
	}
	return C.int(timeout.Milliseconds())
}

// readInto is one pi_read_timeout into b (cap units: bytes, or events of t): the count,
// or io.EOF at the end, or an error (ETIMEDOUT, EMSGSIZE with the position before the read).
func (r *Reader) readInto(b unsafe.Pointer, n int, t *C.struct_cx_format, timeout time.Duration) (int, int64, error) {
	if r.closed {
		return 0, 0, &Error{"read '" + r.name + "'", syscall.EBADF, "the reader is detached"}
	}
	defer lock()()
	pos := int64(C.pi_tell(r.d))
	got, err := C.pi_read_timeout(r.d, b, C.size_t(n), t, ms(timeout))
	if got >= 0 {
		return int(got), pos, nil
	}
	if e := errnoOf(err); e == syscall.EPIPE {
		return 0, pos, io.EOF
	} else {
		return 0, pos, libError("read '"+r.name+"'", e)
	}
}

// Next returns the next segment's bytes; io.EOF at the end of the pipe (its writer closed
// it and every segment was read); an error wrapping ETIMEDOUT when nothing came in time
// (timeout Forever waits).
func (r *Reader) Next(timeout time.Duration) ([]byte, error) {
	for {
		n, _, err := r.readInto(unsafe.Pointer(&r.raw[0]), len(r.raw), nil, timeout)
		if isErrno(err, syscall.EMSGSIZE) && len(r.raw) < maxSegment { // the segment stays
			r.raw = make([]byte, min(len(r.raw)*8, maxSegment))
			continue
		}
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), r.raw[:n]...), nil
	}
}

// ReadEvents returns the next segment's events converted into T's layout (f describes T;
// fields are matched by name with the writer's format). io.EOF at the end.
func ReadEvents[T any](r *Reader, f *Format, timeout time.Duration) ([]T, error) {
	if err := f.fits(reflect.TypeOf((*T)(nil)).Elem()); err != nil {
		return nil, err
	}
	if r.typedCap == 0 {
		r.typedCap = max(1, (1<<20)/max(1, f.Size))
	}
	esz := max(1, int(unsafe.Sizeof(*new(T))))
	for {
		// The segment lands in the reader's own buffer (allocated once, grown for a larger
		// segment) and only its n events are copied out: a read allocates what it returns,
		// not a buffer of the largest segment size each time.
		if words := (r.typedCap*esz + 7) / 8; len(r.typed) < words {
			r.typed = make([]uint64, words)
		}
		base := unsafe.Pointer(&r.typed[0])
		n, pos, err := r.readInto(base, r.typedCap, f.ptr, timeout)
		if isErrno(err, syscall.EMSGSIZE) && r.typedCap < maxSegment {
			// A typed read has consumed the too-large segment (sdk/README.md): go back to it.
			// A group member cannot seek; the data plane leaves the segment to it.
			if !r.group {
				if err := r.Seek(uint64(pos)); err != nil {
					return nil, err
				}
			}
			r.typedCap *= 8
			continue
		}
		if err != nil {
			return nil, err
		}
		out := make([]T, n)
		copy(out, unsafe.Slice((*T)(base), n))
		return out, nil
	}
}

func isErrno(err error, e syscall.Errno) bool {
	le, ok := err.(*Error)
	return ok && le.Errno == e
}

// Seek makes the next read return segment seg (0 = the first).
func (r *Reader) Seek(seg uint64) error {
	defer lock()()
	if rc, err := C.pi_seek(r.d, C.uint64_t(seg)); rc < 0 {
		return libError("seek '"+r.name+"'", errnoOf(err))
	}
	return nil
}

// Tell is the index of the segment the next read returns.
func (r *Reader) Tell() (int64, error) {
	defer lock()()
	pos, err := C.pi_tell(r.d)
	if pos < 0 {
		return 0, libError("tell '"+r.name+"'", errnoOf(err))
	}
	return int64(pos), nil
}

// Stats are the reader's counters: segments from the space and from the writer directly.
func (r *Reader) Stats() (ReaderStats, error) {
	var st C.struct_pi_reader_stats
	defer lock()()
	if rc, err := C.pi_reader_stats(r.d, &st); rc < 0 {
		return ReaderStats{}, libError("stats '"+r.name+"'", errnoOf(err))
	}
	return ReaderStats{uint64(st.from_space), uint64(st.from_writer), uint64(st.duplicates),
		uint64(st.spilled), uint64(st.reconnects)}, nil
}

// Ack acknowledges what the reader read (pi_ack), once the space stored it. A reader of
// AttachNamed: every segment read so far (cumulative: the cursor's position becomes Tell,
// even backwards after a Seek). A member of AttachGroup: exactly the segments read since its
// last Ack; ESRCH when the group had taken them back (they went to other members). EINVAL
// for a reader of Attach; on another error (the space unreachable) nothing was stored: call
// again.
func (r *Reader) Ack() error {
	if r.closed {
		return &Error{"ack '" + r.name + "'", syscall.EBADF, "the reader is detached"}
	}
	defer lock()()
	if rc, err := C.pi_ack(r.d); rc < 0 {
		return libError("ack '"+r.name+"'", errnoOf(err))
	}
	return nil
}

// Close detaches the reader (pi_detach); a group member's unacknowledged segments go back to
// the group at once.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.typed = nil
	r.s.track(r, false)
	defer lock()()
	if rc, err := C.pi_detach(r.d); rc < 0 {
		return libError("detach '"+r.name+"'", errnoOf(err))
	}
	return nil
}
