package spaceclient

// The space protocol as the operator speaks it: the 48-byte frame header of
// dataplane/src/common/cx_frame.h (version 2: CRC-32C header check) and the requests and
// replies of dataplane/src/space/cx_space_proto.h (only the name-table operations the
// operator uses). Everything is little-endian. A change there must be made here too:
// tcp_test.go, run against the real confluxd, fails on any mismatch.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"syscall"
)

// Frame header constants (cx_frame.h).
const (
	frameMagic   = 0xC7
	frameVersion = 2
	frameHdrSize = 48

	frameData   = 1
	frameLookup = 5

	flagFrag  = 1 << 1
	flagReply = 1 << 4
)

// Space request ops (enum cx_space_op).
const (
	opLookup = 1
	opGet    = 2
	opPut    = 3
	opUnlink = 6
	opStats  = 11
)

// maxLinks is CX_SP_MAX_LINKS: the most transports a STATS reply lists.
const maxLinks = 8

// maxReply bounds a reply the operator accepts (a LIST of a large space stays far below).
const maxReply = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameHeader is struct cx_frame_hdr.
type frameHeader struct {
	Type, Flags uint8
	Channel     uint32
	Seq         uint64
	Format      uint64
	Ack         uint64
	Length      uint32
}

// encode writes the header (unfragmented: msg_length = length) with its CRC-32C check.
func (h frameHeader) encode() []byte {
	b := make([]byte, frameHdrSize)
	b[0], b[1], b[2], b[3] = frameMagic, frameVersion, h.Type, h.Flags
	le := binary.LittleEndian
	le.PutUint32(b[4:], h.Channel)
	le.PutUint64(b[8:], h.Seq)
	le.PutUint64(b[16:], h.Format)
	le.PutUint64(b[24:], h.Ack)
	le.PutUint32(b[32:], h.Length)
	le.PutUint32(b[36:], 0)
	le.PutUint32(b[40:], h.Length)
	le.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
	return b
}

// readFrame reads one frame (header and payload) from r.
func readFrame(r io.Reader) (frameHeader, []byte, error) {
	b := make([]byte, frameHdrSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return frameHeader{}, nil, err
	}
	le := binary.LittleEndian
	switch {
	case b[0] != frameMagic:
		return frameHeader{}, nil, fmt.Errorf("bad frame magic 0x%02x (not a Conflux space server?)", b[0])
	case b[1] != frameVersion:
		return frameHeader{}, nil, fmt.Errorf("frame version %d, this operator speaks %d", b[1], frameVersion)
	case le.Uint32(b[44:]) != crc32.Checksum(b[:44], castagnoli):
		return frameHeader{}, nil, errors.New("frame header checksum mismatch")
	}
	h := frameHeader{Type: b[2], Flags: b[3], Channel: le.Uint32(b[4:]), Seq: le.Uint64(b[8:]),
		Format: le.Uint64(b[16:]), Ack: le.Uint64(b[24:]), Length: le.Uint32(b[32:])}
	if h.Flags&flagFrag != 0 {
		return h, nil, errors.New("fragmented frame on a TCP link")
	}
	if h.Length > maxReply {
		return h, nil, fmt.Errorf("frame of %d bytes (over %d)", h.Length, maxReply)
	}
	payload := make([]byte, h.Length)
	if _, err := io.ReadFull(r, payload); err != nil {
		return h, nil, err
	}
	return h, payload, nil
}

// encoder builds a request payload.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) {
	e.b = binary.LittleEndian.AppendUint16(e.b, uint16(len(s)))
	e.b = append(e.b, s...)
}

// decoder reads a reply payload; the first short read sets err and every later read
// returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("reply truncated at %s", what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8(what string) uint8 {
	if v := d.take(1, what); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if v := d.take(2, what); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if v := d.take(4, what); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if v := d.take(8, what); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str(what string) string { return string(d.take(int(d.u16(what)), what)) }

// pipeInfo is the protocol's pipe result (struct cx_sp_pipe).
type pipeInfo struct {
	PipeID, Format, FirstID, LastID uint64
	Ended, WriterOpen               bool
	Addrs                           []string
}

// segments is how many segments the space holds for the pipe.
func (p pipeInfo) segments() int64 {
	if p.LastID == 0 || p.LastID < p.FirstID {
		return 0
	}
	return int64(p.LastID - p.FirstID + 1)
}

func (d *decoder) pipe() pipeInfo {
	p := pipeInfo{PipeID: d.u64("pipe id"), Format: d.u64("format"), FirstID: d.u64("first id"),
		LastID: d.u64("last id"), Ended: d.u8("ended") != 0, WriterOpen: d.u8("writer open") != 0}
	n := d.u16("address count")
	for i := 0; i < int(n) && d.err == nil; i++ {
		p.Addrs = append(p.Addrs, d.str("address"))
	}
	return p
}

// statsInfo is the STATS result after the pipe (struct cx_sp_stats).
type statsInfo struct {
	Readers         uint32
	Bytes, Segments uint64
	Links           []Link
}

func (d *decoder) stats() statsInfo {
	st := statsInfo{Readers: d.u32("readers"), Bytes: d.u64("bytes"), Segments: d.u64("segments")}
	n := d.u16("link count")
	if n > maxLinks && d.err == nil {
		d.err = fmt.Errorf("STATS reply with %d transports (at most %d)", n, maxLinks)
	}
	for i := 0; i < int(n) && d.err == nil; i++ {
		l := Link{Transport: d.str("link transport")}
		l.Count = int32(min(d.u32("link uses"), math.MaxInt32))
		st.Links = append(st.Links, l)
	}
	return st
}

// ServerError is a request the space server refused: its errno and its message.
type ServerError struct {
	Op      string
	Errno   syscall.Errno
	Message string
}

func (e *ServerError) Error() string { return fmt.Sprintf("%s: %s", e.Op, e.Message) }

// Is makes errors.Is(err, syscall.ENOENT) work on a refusal.
func (e *ServerError) Is(target error) bool { return e.Errno == target }

// decodeReplyHead reads op and status; a refusal becomes a *ServerError.
func decodeReplyHead(payload []byte, wantOp uint8, opName string) (*decoder, error) {
	d := &decoder{b: payload}
	op := d.u8("op")
	status := int32(d.u32("status"))
	if d.err != nil {
		return nil, d.err
	}
	if op != wantOp {
		return nil, fmt.Errorf("%s: reply for op %d", opName, op)
	}
	if status < 0 {
		msg := d.str("error text")
		if d.err != nil {
			return nil, d.err
		}
		return nil, &ServerError{Op: opName, Errno: syscall.Errno(-status), Message: msg}
	}
	return d, nil
}
