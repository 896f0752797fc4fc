package main

import (
	"flag"
	"fmt"
	"net"
	"sort"
	"time"
)

// rtt measures the round trip to a TCP server as the time a connect takes (SYN out, SYN-ACK
// back) and prints one line: "rtt ADDR min=1.234ms median=1.456ms max=9.876ms n=10".
// It waits (up to -timeout) for a first connect to succeed, then makes -count connects;
// one that fails is retried, so a lost SYN only shows in max.
func rtt(args []string) error {
	fs := flag.NewFlagSet("rtt", flag.ExitOnError)
	addr := fs.String("addr", "", "server address, IP:port")
	count := fs.Int("count", 10, "connects to time")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	_ = fs.Parse(args)
	if *addr == "" || *count < 1 {
		return fmt.Errorf("rtt: -addr and a -count of at least 1 are required")
	}
	deadline := time.Now().Add(*timeout)
	var times []time.Duration
	for len(times) < *count {
		t0 := time.Now()
		c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
		if err != nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("connect %s: %w (%d of %d timed)", *addr, err, len(times), *count)
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		times = append(times, time.Since(t0))
		c.Close()
		time.Sleep(100 * time.Millisecond)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d.Microseconds())/1000) }
	fmt.Printf("rtt %s min=%s median=%s max=%s n=%d\n", *addr, ms(times[0]), ms(times[len(times)/2]), ms(times[len(times)-1]), len(times))
	return nil
}
