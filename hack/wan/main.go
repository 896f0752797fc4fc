// conflux-wanem: a user-space WAN emulator on a tun device, for kernels without sch_netem.
// It creates the tun device --dev, reads every packet the kernel routes into it, holds it
// for --delay, drops a share --loss at random, and writes the rest back into the same device
// in the order they came: the kernel then routes them on as packets received from it.
// hack/wan.sh runs one in every node of two joined kind clusters (hack/README.md).
//
//	conflux-wanem --dev cxwan0 --delay 20ms --loss 0.01 [--queue 10000] [--seed N]
//
// It prints one line when ready ("conflux-wanem: cxwan0 up, delay 20ms, loss 1.00%") and
// its counters every --stats period and on exit (SIGTERM, SIGINT); the device goes away
// with the process.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	dev := flag.String("dev", "cxwan0", "tun device to create")
	delay := flag.Duration("delay", 20*time.Millisecond, "how long every packet is held")
	loss := flag.Float64("loss", 0, "share of packets dropped at random, 0..1 (0.01 = 1%)")
	queue := flag.Int("queue", 10000, "packets held at most; more are dropped (overflow)")
	seed := flag.Int64("seed", 0, "seed of the loss draws (0: from the clock)")
	every := flag.Duration("stats", 10*time.Second, "how often to print the counters (0: only on exit)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	d, err := NewDelayLine(Config{Delay: *delay, Loss: *loss, Queue: *queue, Seed: *seed})
	if err != nil {
		fail(err)
	}
	tun, err := OpenTun(*dev)
	if err != nil {
		fail(err)
	}
	fmt.Printf("conflux-wanem: %s up, delay %v, loss %.2f%%\n", *dev, *delay, *loss*100)

	report := func() {
		fmt.Printf("conflux-wanem: %s read %d lost %d overflow %d written %d\n", *dev,
			d.Stats.Read.Load(), d.Stats.Lost.Load(), d.Stats.Overflow.Load(), d.Stats.Written.Load())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- d.Run(tun, tun) }()
	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			report()
		case s := <-sig:
			report()
			fmt.Printf("conflux-wanem: %v, removing %s\n", s, *dev)
			os.Exit(0)
		case err := <-done:
			report()
			if err != nil {
				fail(err)
			}
			return
		}
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "conflux-wanem: %v\n", err)
	os.Exit(2)
}
