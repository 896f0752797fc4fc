package conflux_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	conflux "conflux.dev/sdk/go"
)

type reading struct {
	ID     int64      `conflux:"id"`
	Step   int64      `conflux:"step"`
	Energy float64    `conflux:"energy"`
	Pos    [3]float32 `conflux:"pos"`
}

type older struct { // a subset of reading, reordered and narrower
	Energy float32 `conflux:"energy"`
	Step   int32   `conflux:"step"`
}

func readings(first, n int) []reading {
	r := make([]reading, n)
	for i := range r {
		r[i] = reading{ID: 1, Step: int64(first + i), Energy: float64(first+i) * 0.25}
	}
	return r
}

func newContext(t *testing.T) *conflux.Context {
	c, err := conflux.NewContext(&conflux.ContextOptions{Listen: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// runHelper is a helper process of these tests (this binary, re-run): "reader" reads a
// pipe with the older struct and prints a summary; "sink" subscribes to a channel (typed
// with the older struct, or untyped) and prints what it got.
func runHelper(kind string, args []string) int {
	switch kind {
	case "transform":
		return runTransformHelper(args)
	case "reader":
		s, err := conflux.OpenSpace(args[0], nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer s.Close()
		f1, _ := conflux.FormatOf[sampleV1]("sample")
		r, err := s.Attach(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		n, sum := 0, 0
		for {
			seg, err := conflux.ReadEvents[sampleV1](r, f1, 5*time.Second)
			if err == io.EOF {
				break
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			for _, e := range seg {
				n, sum = n+1, sum+int(e.Step)
			}
		}
		fmt.Printf(`{"events":%d,"sum":%d}`+"\n", n, sum)
		return 0
	case "sink":
		id, mode := args[0], args[1]
		var count int
		fmt.Sscan(args[2], &count)
		c, err := conflux.NewContext(&conflux.ContextOptions{Listen: "tcp://127.0.0.1:0"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		ch, err := c.Open(id, 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		events := make(chan conflux.Event, count)
		var o conflux.SinkOptions
		if mode == "typed" {
			o.Format, _ = conflux.FormatOf[older]("reading")
		}
		if _, err := ch.Sink(o, func(ev conflux.Event) { events <- ev }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("ready")
		inOrder, n := true, 0
		for n < count {
			select {
			case ev := <-events:
				step := -1
				if mode == "typed" {
					e, _ := conflux.EventAs[older](ev)
					step = int(e.Step)
				} else {
					var m struct{ Step int }
					json.Unmarshal([]byte(ev.JSON), &m)
					step = m.Step
				}
				inOrder = inOrder && step == n && ev.Seq == uint64(n+1) && ev.Format == "reading"
				n++
			case <-time.After(20 * time.Second):
				count = n
			}
		}
		fmt.Printf(`{"count":%d,"in_order":%v}`+"\n", n, inOrder)
		return 0
	}
	return 2
}

func TestFanOutToSinksInTwoOtherProcessesAndALocalOne(t *testing.T) {
	const n = 3000
	c := newContext(t)
	fr, _ := conflux.FormatOf[reading]("reading")
	fo, _ := conflux.FormatOf[older]("reading")
	ch, err := c.Create(conflux.ChannelOptions{Format: fr, Reliable: true})
	if err != nil {
		t.Fatal(err)
	}
	var helpers []*bufio.Reader
	for _, mode := range []string{"typed", "untyped"} {
		cmd := helperCmd("sink", ch.ID, mode, fmt.Sprint(n))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		br := bufio.NewReader(out)
		if l, _ := br.ReadString('\n'); l != "ready\n" {
			t.Fatalf("helper %s said %q", mode, l)
		}
		helpers = append(helpers, br)
	}
	var mu sync.Mutex
	var local []older
	done := make(chan struct{})
	if _, err := ch.Sink(conflux.SinkOptions{Format: fo}, func(ev conflux.Event) {
		e, err := conflux.EventAs[older](ev)
		if err != nil {
			panic(err)
		}
		mu.Lock()
		local = append(local, e)
		if len(local) == n {
			close(done)
		}
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.WaitMembers(0, 3, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	src, err := ch.Source(nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < n; k += 500 {
		if err := conflux.Submit(src, 10*time.Second, readings(k, 500)...); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("local sink got %d of %d", len(local), n)
	}
	for i, e := range local {
		if e.Step != int32(i) || e.Energy != float32(i)*0.25 {
			t.Fatalf("local event %d: %+v", i, e)
		}
	}
	for i, br := range helpers {
		l, _ := br.ReadString('\n')
		if strings.TrimSpace(l) != fmt.Sprintf(`{"count":%d,"in_order":true}`, n) {
			t.Fatalf("helper %d said %q", i, l)
		}
	}
	st, _ := ch.Stats()
	// Sidecar mode: one sidecar serves the three processes, their events never touch a link.
	sidecar := os.Getenv("CONFLUX_SOCKET") != ""
	if st.Submitted != n || (!sidecar && st.Sent < 2*n) || (sidecar && st.Sent != 0) || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFilterAtTheSourceAndPanicsKept(t *testing.T) {
	c := newContext(t)
	fr, _ := conflux.FormatOf[reading]("reading")
	ch, _ := c.Create(conflux.ChannelOptions{Format: fr, Reliable: true})
	got := make(chan int64, 100)
	k, err := ch.Sink(conflux.SinkOptions{Format: fr, Filter: "step % 4 == 0"}, func(ev conflux.Event) {
		e, _ := conflux.EventAs[reading](ev)
		if e.Step == 8 {
			panic("step 8")
		}
		got <- e.Step
	})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := ch.Source(fr)
	conflux.Submit(src, 5*time.Second, readings(0, 20)...)
	var steps []int64
	for len(steps) < 4 {
		select {
		case s := <-got:
			steps = append(steps, s)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %v", steps)
		}
	}
	if fmt.Sprint(steps) != "[0 4 12 16]" || len(k.Panics()) != 1 {
		t.Fatalf("steps %v, panics %v", steps, k.Panics())
	}
	if st, _ := ch.Stats(); st.Filtered != 15 {
		t.Fatalf("filtered %d", st.Filtered)
	}
	k.Close()
	ch.Close()
	if _, err := ch.Source(fr); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("source on a closed channel: %v", err)
	}
}

func TestBadChannelCallsCarryTheLibraryMessage(t *testing.T) {
	c := newContext(t)
	if _, err := c.Open("not-a-channel-id", time.Second); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("malformed id: %v", err)
	}
	if _, err := c.Open("cx1:tcp://127.0.0.1:1/1", 2*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("nobody there: %v", err)
	}
	fr, _ := conflux.FormatOf[reading]("reading")
	ch, _ := c.Create(conflux.ChannelOptions{Format: fr})
	if _, err := ch.Sink(conflux.SinkOptions{Format: fr, Filter: "nosuch > 1"}, func(conflux.Event) {}); !errors.Is(err, syscall.EINVAL) ||
		!strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("bad filter: %v", err)
	}
	type wrong struct {
		Step struct{ A int32 } `conflux:"step"`
	}
	fw, _ := conflux.FormatOf[wrong]("reading")
	if _, err := ch.Source(fw); !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "field 'step'") {
		t.Fatalf("source that does not convert: %v", err)
	}
	src, _ := ch.Source(fr)
	if err := conflux.Submit(src, time.Second, older{}); err == nil || !strings.Contains(err.Error(), "does not describe") {
		t.Fatalf("submitting another type: %v", err)
	}
	if _, err := conflux.NewContext(&conflux.ContextOptions{Listen: "tcp://256.0.0.1:0"}); err == nil ||
		!strings.Contains(err.Error(), "256.0.0.1") {
		t.Fatalf("bad listen address: %v", err)
	}
	c.Close()
	if _, err := c.Create(conflux.ChannelOptions{}); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("closed context: %v", err)
	}
}
