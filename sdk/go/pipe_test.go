package conflux_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	conflux "conflux.dev/sdk/go"
)

// The writer's events and a reader's older, reordered, narrower view of them.
type sampleV2 struct {
	Tag    uint64     `conflux:"tag"`
	Step   int64      `conflux:"step"`
	Energy float64    `conflux:"energy"`
	Pos    [3]float32 `conflux:"pos"`
}

type sampleV1 struct {
	Energy float32 `conflux:"energy"`
	Step   int32   `conflux:"step"`
}

func samples(first, n int) []sampleV2 {
	s := make([]sampleV2, n)
	for i := range s {
		k := first + i
		s[i] = sampleV2{Tag: 7, Step: int64(k), Energy: float64(k) * 0.5, Pos: [3]float32{float32(k), 0, 1}}
	}
	return s
}

var pipeSeq atomic.Int64

// pipeName is unique per test run (go test -count=N reuses the space).
func pipeName(t *testing.T) string {
	return fmt.Sprintf("go-%s-%d-%d", t.Name(), os.Getpid(), pipeSeq.Add(1))
}

func create(t *testing.T, s *conflux.Space, name string) *conflux.Writer {
	t.Helper()
	w, err := s.Create(name, false)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func openSpace(t *testing.T) *conflux.Space {
	s, err := conflux.OpenSpace(needSpace(t), &conflux.SpaceOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBytesSegmentsThenTheEnd(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	w, err := s.Create(name, false)
	if err != nil {
		t.Fatal(err)
	}
	payloads := [][]byte{[]byte("first"), bytes.Repeat([]byte{1, 2, 3}, 30000), []byte("last")}
	for _, p := range payloads {
		if n, err := w.Write(p); err != nil || n != len(p) {
			t.Fatal(n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Attach(name) // a late reader: the writer is gone
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range payloads {
		got, err := r.Next(5 * time.Second)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("segment %d: %d bytes, %v", i, len(got), err)
		}
	}
	if _, err := r.Next(conflux.Forever); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
	if err := r.Seek(1); err != nil {
		t.Fatal(err)
	}
	if pos, _ := r.Tell(); pos != 1 {
		t.Fatalf("tell %d after seek 1", pos)
	}
	if got, _ := r.Next(time.Second); !bytes.Equal(got, payloads[1]) {
		t.Fatal("seek 1 did not read segment 1")
	}
}

func TestAbandonLeavesThePipeOpenForAppend(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	w := create(t, s, name)
	seg := func(k int) []byte { return []byte(fmt.Sprintf("seg%d", k)) }
	for k := 0; k < 3; k++ {
		if _, err := w.Write(seg(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abandon(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(seg(3)); err == nil {
		t.Fatal("a write after Abandon succeeded")
	}
	r, err := s.Attach(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for k := 0; k < 3; k++ {
		if got, err := r.Next(5 * time.Second); err != nil || !bytes.Equal(got, seg(k)) {
			t.Fatalf("segment %d: %q, %v", k, got, err)
		}
	}
	var cerr *conflux.Error
	if _, err := r.Next(300 * time.Millisecond); !errors.As(err, &cerr) || cerr.Errno != syscall.ETIMEDOUT {
		t.Fatalf("after the abandoned writer's segments: %v, want a timeout (no end)", err)
	}
	w2, err := s.Create(name, true) // the restarted writer replays 0..4; the space has 0..2
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 5; k++ {
		if _, err := w2.Write(seg(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	for k := 3; k < 5; k++ {
		if got, err := r.Next(5 * time.Second); err != nil || !bytes.Equal(got, seg(k)) {
			t.Fatalf("segment %d after the append: %q, %v", k, got, err)
		}
	}
	if _, err := r.Next(5 * time.Second); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}

func TestTypedSegmentsConvertAtTheReader(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	f2, _ := conflux.FormatOf[sampleV2]("sample")
	f1, _ := conflux.FormatOf[sampleV1]("sample")
	r, err := s.Attach(name) // attached first: the writer streams to it directly
	if err != nil {
		t.Fatal(err)
	}
	w := create(t, s, name)
	for k := 0; k < 4; k++ {
		if n, err := conflux.WriteEvents(w, f2, samples(k*100, 100)); err != nil || n != 100 {
			t.Fatal(n, err)
		}
	}
	conflux.WriteEvents(w, f2, samples(400, 200000)) // 9.6 MB: more than a first read buffer
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []sampleV1
	for {
		seg, err := conflux.ReadEvents[sampleV1](r, f1, 5*time.Second)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seg...)
	}
	if len(got) != 200400 {
		t.Fatalf("%d events", len(got))
	}
	for i, e := range got {
		if e.Step != int32(i) || e.Energy != float32(i)*0.5 {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if st, _ := r.Stats(); st.FromWriter == 0 {
		t.Fatalf("nothing came from the writer directly: %+v", st)
	}
	if _, err := conflux.ReadEvents[sampleV2](r, f1, time.Second); err == nil ||
		!strings.Contains(err.Error(), "does not describe") {
		t.Fatalf("reading into a type the format does not describe: %v", err)
	}
}

// ReadEvents reads into the reader's own buffer: a small segment costs what it returns, not
// a fresh buffer of the largest segment size (1 MiB) per call.
func TestReadEventsAllocatesWhatItReturns(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	f1, _ := conflux.FormatOf[sampleV1]("sample")
	f2, _ := conflux.FormatOf[sampleV2]("sample")
	w := create(t, s, name)
	const segs = 200
	for k := 0; k < segs; k++ {
		if n, err := conflux.WriteEvents(w, f2, samples(k*10, 10)); err != nil || n != 10 {
			t.Fatal(n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Attach(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if seg, err := conflux.ReadEvents[sampleV1](r, f1, 5*time.Second); err != nil || len(seg) != 10 {
		t.Fatal(len(seg), err) // the first read allocates the reader's buffer
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for k := 1; k < segs; k++ {
		seg, err := conflux.ReadEvents[sampleV1](r, f1, 5*time.Second)
		if err != nil || len(seg) != 10 || seg[0].Step != int32(k*10) {
			t.Fatalf("segment %d: %d events, %v", k, len(seg), err)
		}
	}
	runtime.ReadMemStats(&after)
	perRead := (after.TotalAlloc - before.TotalAlloc) / (segs - 1)
	t.Logf("ReadEvents of 10-event segments: %d bytes allocated per call", perRead)
	if perRead > 64<<10 { // a 1 MiB buffer per call before
		t.Fatalf("%d bytes allocated per ReadEvents of 10 events", perRead)
	}
}

func TestAReaderProcessThatNeverSawTheWritersFormat(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	f2, _ := conflux.FormatOf[sampleV2]("sample")
	w := create(t, s, name)
	for k := 0; k < 3; k++ {
		conflux.WriteEvents(w, f2, samples(k*50, 50))
	}
	w.Close()
	out, err := helperCmd("reader", needSpace(t), name, "-").Output()
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Events, Sum int }
	if err := json.Unmarshal(out, &res); err != nil || res.Events != 150 || res.Sum != 149*150/2 {
		t.Fatalf("helper said %s (%v)", out, err)
	}
}

func TestBadPipeCallsCarryTheLibraryMessage(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	w, err := s.Create(name, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(name, false); !errors.Is(err, syscall.EBUSY) || !strings.Contains(err.Error(), name) {
		t.Fatalf("second writer: %v", err)
	}
	if err := s.Unlink(name); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("unlink while writing: %v", err)
	}
	r, err := s.Attach(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(200 * time.Millisecond); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("quiet writer: %v", err)
	}
	w.Write([]byte("raw"))
	w.Close()
	if _, err := w.Write([]byte("more")); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("write after close: %v", err)
	}
	f1, _ := conflux.FormatOf[sampleV1]("sample")
	if _, err := conflux.ReadEvents[sampleV1](r, f1, 5*time.Second); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("raw bytes read as events: %v", err)
	}
	if _, err := s.Create(name, false); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("create over a closed pipe: %v", err)
	}
	r.Close()
	if err := s.Unlink(name); err != nil {
		t.Fatal(err)
	}
	if _, err := conflux.OpenSpace("tcp://127.0.0.1:1", nil); !errors.Is(err, syscall.ECONNREFUSED) ||
		!strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("nobody there: %v", err)
	}
}
