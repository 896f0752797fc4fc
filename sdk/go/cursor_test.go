package conflux_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	conflux "conflux.dev/sdk/go"
)

// writeSegments writes n segments "seg<k>" to a new pipe and ends it.
func writeSegments(t *testing.T, s *conflux.Space, name string, n int) {
	t.Helper()
	w := create(t, s, name)
	for k := 0; k < n; k++ {
		if _, err := w.Write([]byte(fmt.Sprintf("seg%d", k))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// readSeg reads one segment and returns its number k ("seg<k>").
func readSeg(t *testing.T, r *conflux.Reader) int {
	t.Helper()
	b, err := r.Next(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var k int
	if _, err := fmt.Sscanf(string(b), "seg%d", &k); err != nil {
		t.Fatalf("segment %q: %v", b, err)
	}
	return k
}

func TestNamedReaderResumesAfterItsLastAck(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	writeSegments(t, s, name, 20)
	r1, err := s.AttachNamed(name, "stage-a")
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 10; k++ {
		if got := readSeg(t, r1); got != k {
			t.Fatalf("read %d, want %d", got, k)
		}
	}
	if err := r1.Ack(); err != nil {
		t.Fatal(err)
	}
	for k := 10; k < 12; k++ { // read, not acknowledged: the next reader reads them again
		if got := readSeg(t, r1); got != k {
			t.Fatalf("read %d, want %d", got, k)
		}
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r1.Ack(); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("ack after close: %v", err)
	}

	r2, err := s.AttachNamed(name, "stage-a")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if pos, err := r2.Tell(); err != nil || pos != 10 {
		t.Fatalf("the cursor's next reader starts at %d (%v), want 10", pos, err)
	}
	for k := 10; k < 20; k++ {
		if got := readSeg(t, r2); got != k {
			t.Fatalf("read %d, want %d", got, k)
		}
	}
	if _, err := r2.Next(10 * time.Second); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
	if err := r2.Ack(); err != nil {
		t.Fatal(err)
	}

	other, err := s.AttachNamed(name, "stage-b") // another cursor: its own position
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := readSeg(t, other); got != 0 {
		t.Fatalf("a new cursor read %d first, want 0", got)
	}
	done, err := s.AttachNamed(name, "stage-a") // everything acknowledged
	if err != nil {
		t.Fatal(err)
	}
	defer done.Close()
	if _, err := done.Next(10 * time.Second); err != io.EOF {
		t.Fatalf("a fully acknowledged cursor: %v, want the end", err)
	}
}

func TestBadCursorsAndAckOfAPlainReader(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	writeSegments(t, s, name, 1)
	for _, bad := range []string{"", "-lead", "has space", strings.Repeat("a", 65)} {
		if _, err := s.AttachNamed(name, bad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("cursor %q: %v, want EINVAL", bad, err)
		}
		if _, err := s.AttachGroup(name, bad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("group %q: %v, want EINVAL", bad, err)
		}
	}
	r, err := s.Attach(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readSeg(t, r)
	var cerr *conflux.Error
	if err := r.Ack(); !errors.As(err, &cerr) || cerr.Errno != syscall.EINVAL || cerr.Msg == "" {
		t.Fatalf("ack of a reader without a cursor: %v, want EINVAL with the library's message", err)
	}
}

func TestGroupMembersReadEverySegmentOnce(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	const n = 20
	writeSegments(t, s, name, n)
	var members [2]*conflux.Reader
	for i := range members {
		r, err := s.AttachGroup(name, "workers")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		members[i] = r
	}
	seen := map[int]int{}
	var share [2]int
	ended := [2]bool{}
	for !ended[0] || !ended[1] { // the members take turns, each acknowledging what it read
		for i, r := range members {
			if ended[i] {
				continue
			}
			b, err := r.Next(10 * time.Second)
			if err == io.EOF {
				ended[i] = true
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			var k int
			fmt.Sscanf(string(b), "seg%d", &k)
			if prev, dup := seen[k]; dup {
				t.Fatalf("segment %d read by member %d and member %d", k, prev, i)
			}
			seen[k] = i
			share[i]++
			if err := r.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != n || share[0] == 0 || share[1] == 0 {
		t.Fatalf("read %d distinct segments of %d; shares %v", len(seen), n, share)
	}
	if err := members[0].Seek(0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("seek of a group member: %v, want EINVAL", err)
	}
	late, err := s.AttachGroup(name, "workers") // everything acknowledged: nothing left
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if _, err := late.Next(10 * time.Second); err != io.EOF {
		t.Fatalf("a member joining after all was acknowledged: %v, want the end", err)
	}
}

func TestGroupHandsBackWhatALeavingMemberDidNotAck(t *testing.T) {
	s := openSpace(t)
	name := pipeName(t)
	const n = 70
	writeSegments(t, s, name, n)
	a, err := s.AttachGroup(name, "workers")
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 64; k++ { // the most a member may hold unacknowledged
		if got := readSeg(t, a); got != k {
			t.Fatalf("read %d, want %d", got, k)
		}
	}
	if _, err := a.Next(10 * time.Second); !errors.Is(err, syscall.ENOBUFS) {
		t.Fatalf("a 65th unacknowledged read: %v, want ENOBUFS", err)
	}
	if err := a.Ack(); err != nil {
		t.Fatal(err)
	}
	for k := 64; k < 67; k++ { // read, not acknowledged, then the member leaves
		if got := readSeg(t, a); got != k {
			t.Fatalf("read %d, want %d", got, k)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := s.AttachGroup(name, "workers")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got []int
	for {
		seg, err := b.Next(10 * time.Second)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var k int
		fmt.Sscanf(string(seg), "seg%d", &k)
		got = append(got, k)
	}
	if fmt.Sprint(got) != fmt.Sprint([]int{64, 65, 66, 67, 68, 69}) {
		t.Fatalf("the next member read %v, want the handed-back 64..66, then 67..69", got)
	}
	if err := b.Ack(); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Stats(); err != nil || st.Duplicates != 3 {
		t.Fatalf("stats %+v (%v): want 3 duplicates (handed out before)", st, err)
	}
}
