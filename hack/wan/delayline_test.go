package main

import (
	"encoding/binary"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// The delay line is tested over a real packet socket pair standing in for the tun device:
// the test writes packets into one end, the delay line reads them from the other end and
// writes them back there, and the test reads them from its end, as the kernel does with a
// tun device.
func packetPair(t *testing.T) (test, line *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "test-end"), os.NewFile(uintptr(fds[1]), "line-end")
}

type arrival struct {
	seq     uint64
	sent    time.Time
	arrived time.Time
}

// send writes n packets (8-byte sequence number, 8-byte send time, padding to size) from the
// test end, then ends its writing side so the delay line sees the end.
func send(t *testing.T, f *os.File, n, size int) {
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(buf, uint64(i))
		binary.BigEndian.PutUint64(buf[8:], uint64(time.Now().UnixNano()))
		if _, err := f.Write(buf); err != nil {
			t.Errorf("write packet %d: %v", i, err)
			return
		}
	}
	rc, _ := f.SyscallConn()
	rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_WR) })
}

// run sends n packets through a delay line with config c and returns what came back.
func run(t *testing.T, c Config, n int) ([]arrival, *DelayLine) {
	t.Helper()
	d, err := NewDelayLine(c)
	if err != nil {
		t.Fatal(err)
	}
	test, line := packetPair(t)
	defer test.Close()
	done := make(chan error, 1)
	go func() { done <- d.Run(line, line); line.Close() }()
	go send(t, test, n, 64)
	var got []arrival
	buf := make([]byte, maxPacket)
	for {
		k, err := test.Read(buf)
		if err == io.EOF || k == 0 {
			break
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if k != 64 {
			t.Fatalf("packet of %d bytes came back, 64 went in", k)
		}
		got = append(got, arrival{seq: binary.BigEndian.Uint64(buf), sent: time.Unix(0, int64(binary.BigEndian.Uint64(buf[8:]))), arrived: time.Now()})
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return got, d
}

func TestEveryPacketIsHeldForTheDelay(t *testing.T) {
	const delay = 40 * time.Millisecond
	got, d := run(t, Config{Delay: delay, Queue: 1000}, 200)
	if len(got) != 200 || d.Stats.Written.Load() != 200 {
		t.Fatalf("%d packets came back (written %d), 200 went in without loss", len(got), d.Stats.Written.Load())
	}
	var sum time.Duration
	for _, a := range got {
		held := a.arrived.Sub(a.sent)
		if held < delay {
			t.Fatalf("packet %d came back after %v, before the delay %v", a.seq, held, delay)
		}
		sum += held
	}
	t.Logf("200 packets held %v on average (delay %v)", sum/200, delay)
}

func TestLossDropsTheGivenShare(t *testing.T) {
	const n = 20000
	for _, loss := range []float64{0, 0.01, 0.1, 0.5, 1} {
		got, d := run(t, Config{Loss: loss, Queue: n, Seed: 42}, n)
		share := 1 - float64(len(got))/n
		t.Logf("loss %.2f: %d of %d came back (%.4f lost)", loss, len(got), n, share)
		if d.Stats.Read.Load() != n || d.Stats.Lost.Load()+d.Stats.Written.Load() != n || d.Stats.Overflow.Load() != 0 {
			t.Fatalf("counters read %d lost %d written %d overflow %d do not add up to %d",
				d.Stats.Read.Load(), d.Stats.Lost.Load(), d.Stats.Written.Load(), d.Stats.Overflow.Load(), n)
		}
		// a binomial share over 20000 draws is within 0.011 of loss far beyond 5 sigma
		if share < loss-0.011 || share > loss+0.011 {
			t.Fatalf("loss %.2f: %.4f of the packets were lost", loss, share)
		}
		if (loss == 0 && len(got) != n) || (loss == 1 && len(got) != 0) {
			t.Fatalf("loss %.0f: %d came back", loss, len(got))
		}
	}
}

func TestKeptPacketsComeBackInOrder(t *testing.T) {
	got, d := run(t, Config{Delay: 5 * time.Millisecond, Loss: 0.05, Queue: 5000}, 5000)
	if len(got) < 4500 || uint64(len(got)) != d.Stats.Written.Load() {
		t.Fatalf("%d packets came back, written %d", len(got), d.Stats.Written.Load())
	}
	for i := 1; i < len(got); i++ {
		if got[i].seq <= got[i-1].seq {
			t.Fatalf("packet %d came back after packet %d", got[i].seq, got[i-1].seq)
		}
	}
}

func TestAFullQueueDropsAsOverflow(t *testing.T) {
	// a queue of 10 and a long delay: a burst of 100 keeps at most what fits
	got, d := run(t, Config{Delay: 2 * time.Second, Queue: 10}, 100)
	if d.Stats.Overflow.Load() == 0 || uint64(len(got))+d.Stats.Overflow.Load() != 100 {
		t.Fatalf("%d came back, overflow %d, of 100", len(got), d.Stats.Overflow.Load())
	}
}

func TestBadConfigIsRefused(t *testing.T) {
	for _, c := range []Config{{Delay: -1, Queue: 1}, {Loss: 1.5, Queue: 1}, {Loss: -0.1, Queue: 1}, {}} {
		if _, err := NewDelayLine(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}
