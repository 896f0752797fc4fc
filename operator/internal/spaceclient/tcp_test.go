package spaceclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// confluxd is the space server built by `make -C dataplane bin`.
var confluxd = filepath.Join("..", "..", "..", "dataplane", "build", "bin", "confluxd")

// startSpace runs a real confluxd --role=space on a free loopback port with its store in a
// temp dir, and returns its host:port; it is stopped (SIGTERM) when the test ends.
func startSpace(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(confluxd); err != nil {
		t.Skipf("confluxd is not built (make -C dataplane bin): %v", err)
	}
	cmd := exec.Command(confluxd, "--role=space", "--dir="+filepath.Join(t.TempDir(), "space"),
		"--listen=tcp://127.0.0.1:0", "--fsync=none", "--quiet")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting confluxd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	// "listening tcp://IP:PORT udp IP:PORT" once it serves
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) < 2 || f[0] != "listening" {
		t.Fatalf("confluxd printed %q (%v)", line, err)
	}
	return strings.TrimPrefix(f[1], "tcp://")
}

func TestTCPRegisterStatsUnlink(t *testing.T) {
	addr := startSpace(t)
	ctx := context.Background()
	c := NewTCP()
	ref := ChannelRef{Endpoint: addr, Namespace: "ns", Space: "s", Channel: "results", Kind: "pipe"}

	if err := c.RegisterChannel(ctx, ref); err != nil {
		t.Fatalf("register: %v", err)
	}
	if err := c.RegisterChannel(ctx, ref); err != nil {
		t.Fatalf("register again (must be idempotent): %v", err)
	}
	st, err := c.Stats(ctx, ref)
	if err != nil || st.Writers != 0 || st.Segments != 0 {
		t.Fatalf("stats of a new channel: %+v, %v", st, err)
	}

	if st.Readers != 0 || st.Bytes != 0 || len(st.Links) != 0 {
		t.Fatalf("stats of a new channel: %+v", st)
	}

	// a writer appends 5 segments and stays connected: the stats must show both
	w := writePipe(t, addr, "results", 5)
	defer w.Close()
	st, err = c.Stats(ctx, ref)
	if err != nil || st.Writers != 1 || st.Segments != 5 {
		t.Fatalf("stats with a writer of 5 segments: %+v, %v", st, err)
	}
	// 5 one-byte segments, each a 40-byte record header + 1 byte on disk
	if st.Bytes != 5*41 || st.Readers != 0 || !equalLinks(st.Links, []Link{{"tcp", 1}}) {
		t.Fatalf("stats with a writer: bytes %d (want 205), readers %d, links %+v (want tcp 1)", st.Bytes, st.Readers, st.Links)
	}

	// a reader registers an shm address (the writer's direct link) and streams from the
	// space over TCP
	r := readPipe(t, addr, "results", "shm://node-a/reader")
	st, err = c.Stats(ctx, ref)
	if err != nil || st.Readers != 1 || !equalLinks(st.Links, []Link{{"tcp", 2}, {"shm", 1}}) {
		t.Fatalf("stats with a writer and a reader: %+v, %v (want 1 reader, tcp 2, shm 1)", st, err)
	}
	r.Close()
	if err := eventually(func() error {
		st, err := c.Stats(ctx, ref)
		if err == nil && (st.Readers != 0 || !equalLinks(st.Links, []Link{{"tcp", 1}})) {
			err = fmt.Errorf("after the reader left: %+v", st)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var se *ServerError
	if err := c.UnlinkChannel(ctx, ref); !errors.As(err, &se) || se.Errno != syscall.EBUSY ||
		!strings.Contains(err.Error(), "open for writing") {
		t.Fatalf("unlink with an open writer: want the server's EBUSY, got %v", err)
	}
	w.Close()
	if err := eventually(func() error { return c.UnlinkChannel(ctx, ref) }); err != nil {
		t.Fatalf("unlink after the writer left: %v", err)
	}
	if _, err := c.Stats(ctx, ref); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stats after unlink: want ENOENT, got %v", err)
	}
	if err := c.UnlinkChannel(ctx, ref); err != nil {
		t.Fatalf("unlink of an unknown channel must succeed: %v", err)
	}
}

func TestTCPErrors(t *testing.T) {
	addr := startSpace(t)
	ctx := context.Background()
	c := NewTCP()

	err := c.RegisterChannel(ctx, ChannelRef{Endpoint: addr, Channel: "../escape"})
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("a name the space refuses: want EINVAL naming the space, got %v", err)
	}
	t.Logf("refused: %v", err)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	err = c.RegisterChannel(ctx, ChannelRef{Endpoint: dead, Channel: "x"})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), dead) {
		t.Fatalf("no server: want connection refused naming %s, got %v", dead, err)
	}
	if err := c.RegisterChannel(ctx, ChannelRef{Channel: "x"}); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Fatalf("no endpoint: got %v", err)
	}

	// a server that never answers: the call ends at the timeout
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		if conn, err := silent.Accept(); err == nil {
			defer conn.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	start := time.Now()
	_, err = (&TCP{Timeout: 300 * time.Millisecond}).Stats(ctx, ChannelRef{Endpoint: silent.Addr().String(), Channel: "x"})
	if err == nil || time.Since(start) > time.Second {
		t.Fatalf("silent server: want a timeout after 300 ms, got %v after %s", err, time.Since(start))
	}
}

// writePipe opens name for writing (PUT CREATE) and sends n one-byte segments, then waits
// for the server's cumulative ack of the last one. It returns the open connection.
func writePipe(t *testing.T, addr, name string, n int) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	const handle = 7
	e := &encoder{}
	e.u8(opPut)
	e.u8(1) // CX_SP_CREATE
	e.u32(handle)
	e.str(name)
	e.u64(0)
	e.str("")
	h := frameHeader{Type: frameLookup, Seq: 1, Length: uint32(len(e.b))}
	if _, err := conn.Write(append(h.encode(), e.b...)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		d := frameHeader{Type: frameData, Channel: handle, Seq: uint64(i), Length: 1}
		if _, err := conn.Write(append(d.encode(), byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(conn)
	for {
		fh, payload, err := readFrame(r)
		if err != nil {
			t.Fatalf("writer waiting for its ack: %v", err)
		}
		if fh.Type == frameLookup && fh.Seq == 1 {
			if _, err := decodeReplyHead(payload, opPut, "put"); err != nil {
				t.Fatalf("PUT refused: %v", err)
			}
		}
		if fh.Type == 2 /* ACK */ && fh.Channel == handle && fh.Ack == uint64(n) {
			return conn
		}
	}
}

// eventually retries f for up to 5 s (the server notices a closed writer asynchronously).
func eventually(f func() error) error {
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}

// readPipe registers readerAddr for name (GET) and opens a READ stream of it from the
// first segment, on one connection; it returns once both replies came.
func readPipe(t *testing.T, addr, name, readerAddr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	get := &encoder{}
	get.u8(opGet)
	get.str(name)
	get.u64(0)
	get.str(readerAddr)
	read := &encoder{}
	read.u8(4) // CX_SP_READ
	read.u32(9)
	read.str(name)
	read.u64(0)
	for i, req := range [][]byte{get.b, read.b} {
		h := frameHeader{Type: frameLookup, Seq: uint64(i + 1), Length: uint32(len(req))}
		if _, err := conn.Write(append(h.encode(), req...)); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(conn)
	for replies := 0; replies < 2; {
		fh, payload, err := readFrame(br)
		if err != nil {
			t.Fatalf("reader waiting for its replies: %v", err)
		}
		if fh.Type == frameLookup && fh.Flags&flagReply != 0 && (fh.Seq == 1 || fh.Seq == 2) {
			op := uint8(opGet)
			if fh.Seq == 2 {
				op = 4
			}
			if _, err := decodeReplyHead(payload, op, "reader"); err != nil {
				t.Fatalf("reader refused: %v", err)
			}
			replies++
		}
	}
	_ = conn.SetDeadline(time.Time{})
	return conn
}

// equalLinks compares link counts regardless of order.
func equalLinks(got, want []Link) bool {
	if len(got) != len(want) {
		return false
	}
	m := map[string]int32{}
	for _, l := range got {
		m[l.Transport] = l.Count
	}
	for _, l := range want {
		if c, ok := m[l.Transport]; !ok || c != l.Count {
			return false
		}
	}
	return true
}

// An older space server refuses STATS as an unknown op. The real server's refusal of an op
// it does not know must be recognised, and the LOOKUP fallback must give writers and
// segments with an error wrapping ErrStatsUnsupported.
func TestTCPStatsFromAServerWithoutStats(t *testing.T) {
	addr := startSpace(t)
	ctx := context.Background()
	c := NewTCP()
	payload, err := c.dialing(ctx, addr)([]byte{200})
	if err != nil {
		t.Fatal(err)
	}
	_, err = decodeReplyHead(payload, 200, "op 200")
	if !isUnknownOp(err) {
		t.Fatalf("the server's answer to an unknown op is not recognised as one: %v", err)
	}
	ref := ChannelRef{Endpoint: addr, Channel: "old"}
	if err := c.RegisterChannel(ctx, ref); err != nil {
		t.Fatal(err)
	}
	w := writePipe(t, addr, "old", 3)
	defer w.Close()
	st, err := lookupStats(ref, err, c.dialing(ctx, addr))
	if !errors.Is(err, ErrStatsUnsupported) || !strings.Contains(err.Error(), "unknown space request op 200") {
		t.Fatalf("fallback error: %v", err)
	}
	if st.Writers != 1 || st.Segments != 3 || st.Readers != 0 || st.Bytes != 0 {
		t.Fatalf("fallback stats: %+v (want 1 writer, 3 segments, nothing else)", st)
	}
}

// A reply with a link count over CX_SP_MAX_LINKS is refused, not trusted.
func TestStatsDecoderRefusesTooManyLinks(t *testing.T) {
	e := &encoder{}
	e.u32(1)
	e.u64(2)
	e.u64(3)
	e.b = append(e.b, maxLinks+1, 0)
	d := &decoder{b: e.b}
	d.stats()
	if d.err == nil || !strings.Contains(d.err.Error(), "transports") {
		t.Fatalf("want a refusal, got %v", d.err)
	}
}

// StatsBatch reads many channels over one connection: the server answers each request on
// it in turn, and an unknown channel fails alone.
func TestTCPStatsBatch(t *testing.T) {
	addr := startSpace(t)
	ctx := context.Background()
	c := NewTCP()
	var refs []ChannelRef
	for i := range 5 {
		ref := ChannelRef{Endpoint: addr, Channel: fmt.Sprintf("b%d", i)}
		if err := c.RegisterChannel(ctx, ref); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	w := writePipe(t, addr, "b2", 2)
	defer w.Close()
	refs = append(refs, ChannelRef{Endpoint: addr, Channel: "missing"})
	res := c.StatsBatch(ctx, addr, refs)
	for i, r := range res[:5] {
		want, werr := c.Stats(ctx, refs[i])
		if r.Err != nil || werr != nil || r.Stats.Writers != want.Writers || r.Stats.Segments != want.Segments {
			t.Fatalf("%s: batch %+v %v, single %+v %v", refs[i].Channel, r.Stats, r.Err, want, werr)
		}
	}
	if res[2].Stats.Writers != 1 || res[2].Stats.Segments != 2 {
		t.Fatalf("b2: %+v", res[2].Stats)
	}
	if res[5].Err == nil {
		t.Fatal("an unknown channel gave no error")
	}
}
