package conflux_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	conflux "conflux.dev/sdk/go"
)

// energyReading is what the source sends: 16 energies per step.
type energyReading struct {
	Step   int64       `conflux:"step"`
	X      float64     `conflux:"x"`
	Energy [16]float32 `conflux:"energy"`
}

// summary is the projection the transform computes into.
type summary struct {
	Step int64   `conflux:"step"`
	Mean float64 `conflux:"mean"`
	Peak float64 `conflux:"peak"`
}

// step k: energy[i] = k + i, so mean k + 7.5 and max k + 15.
func energyReadings(first, n int) []energyReading {
	r := make([]energyReading, n)
	for i := range r {
		k := int64(first + i)
		r[i].Step, r[i].X = k, float64(k)
		for j := range r[i].Energy {
			r[i].Energy[j] = float32(k) + float32(j)
		}
	}
	return r
}

const (
	meanPeak = "mean = mean(energy); peak = max(energy)"
	window   = "every(8); mean = wmean(step, 8); peak = wmax(step, 8)"
)

// checkSummary says what is wrong with a summary the program produced for event number seq
// (steps are 1..n, so step == seq), or "".
func checkSummary(program string, seq uint64, s summary) string {
	q := float64(seq)
	ok := s.Step == int64(seq)
	switch program {
	case meanPeak:
		ok = ok && s.Mean == q+7.5 && s.Peak == q+15
	case window: // one per window of 8: the mean and max of its steps
		ok = ok && seq%8 == 0 && s.Mean == q-3.5 && s.Peak == q
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("program %q, event %d: %+v", program, seq, s)
}

// transformSink subscribes a derived sink whose program computes a summary at the
// source; it hands each event's complaint (or "") to the returned Go channel.
func transformSink(ch *conflux.Channel, program string) (*conflux.Sink, chan string, error) {
	fs, err := conflux.FormatOf[summary]("summary")
	if err != nil {
		return nil, nil, err
	}
	got := make(chan string, 1000)
	k, err := ch.Sink(conflux.SinkOptions{Format: fs, Projection: fs, Filter: program},
		func(ev conflux.Event) {
			s, err := conflux.EventAs[summary](ev)
			if err != nil {
				got <- err.Error()
				return
			}
			if ev.Format != "summary" {
				got <- "format " + ev.Format
				return
			}
			got <- checkSummary(program, ev.Seq, s)
		})
	return k, got, err
}

// collect takes n events' complaints, failing on the first.
func collect(got chan string, n int) error {
	for i := 0; i < n; i++ {
		select {
		case c := <-got:
			if c != "" {
				return fmt.Errorf("event %d: %s", i, c)
			}
		case <-time.After(20 * time.Second):
			return fmt.Errorf("got %d of %d events", i, n)
		}
	}
	select { // nothing beyond what the program lets through
	case c := <-got:
		return fmt.Errorf("one event too many (%q)", c)
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

// runTransformHelper is the "transform" helper process: it opens channel args[0],
// subscribes with program args[1], says "ready", and prints "ok N" once its N = args[2]
// events came, all as computed, or what was wrong.
func runTransformHelper(args []string) int {
	var n int
	fmt.Sscan(args[2], &n)
	c, err := conflux.NewContext(&conflux.ContextOptions{Listen: "tcp://127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	ch, err := c.Open(args[0], 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, _, err = transformSink(ch, "nosuch = 1"); err == nil {
		fmt.Println("a program writing no field of the projection was accepted")
		return 1
	}
	_, got, err := transformSink(ch, args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	if err := collect(got, n); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ok", n)
	return 0
}

// A transform program travels as the sink's Filter, its output format as Projection: the
// source computes the fields before sending. Checked with a sink in another process (over
// a link, or its sidecar under tests/with_sidecar.sh) and a local one: the mean and max of
// 16 energies per event, and a window program keeping state between events.
func TestTransformComputesFieldsAtTheSource(t *testing.T) {
	const n = 400
	c := newContext(t)
	fr, _ := conflux.FormatOf[energyReading]("energy_reading")
	ch, err := c.Create(conflux.ChannelOptions{Format: fr, Reliable: true})
	if err != nil {
		t.Fatal(err)
	}
	var helpers []*bufio.Reader
	for _, program := range []string{meanPeak, window} {
		expect := n
		if program == window {
			expect = n / 8
		}
		cmd := helperCmd("transform", ch.ID, program, fmt.Sprint(expect))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		br := bufio.NewReader(out)
		if l, _ := br.ReadString('\n'); l != "ready\n" {
			t.Fatalf("helper %q said %q", program, l)
		}
		helpers = append(helpers, br)
	}
	_, local, err := transformSink(ch, window)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.WaitMembers(0, 3, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	src, err := ch.Source(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := conflux.Submit(src, 10*time.Second, energyReadings(1, n)...); err != nil {
		t.Fatal(err)
	}
	if err := collect(local, n/8); err != nil {
		t.Fatalf("local sink: %v", err)
	}
	for i, br := range helpers {
		l, _ := br.ReadString('\n')
		if want := fmt.Sprintf("ok %d", []int{n, n / 8}[i]); strings.TrimSpace(l) != want {
			t.Fatalf("helper %d said %q, not %q", i, l, want)
		}
	}
	st, _ := ch.Stats()
	// every(8) lets one event in 8 through, for the local sink and the remote one
	if st.Submitted != n || st.Filtered != 2*(n-n/8) || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	sidecar := os.Getenv("CONFLUX_SOCKET") != ""
	if !sidecar && (st.Sent < n+n/8 || st.ProjectedBytesSaved == 0) {
		t.Fatalf("the remote sinks' events did not go out projected: %+v", st)
	}
}
