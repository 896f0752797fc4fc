package main

import (
	"errors"
	"io"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config of a delay line: every packet is held for Delay, a share Loss (0..1) of them is
// dropped at random, and at most Queue packets wait at once (more are dropped as overflow,
// as a full router queue would).
type Config struct {
	Delay time.Duration
	Loss  float64
	Queue int
	Seed  int64 // of the loss draws; 0 = from the clock
}

// Stats counts what went through a delay line.
type Stats struct {
	Read, Lost, Overflow, Written atomic.Uint64
}

// DelayLine moves packets read from a device back to the same device after the delay, in
// the order they came (the delay is the same for every packet, so a FIFO keeps the order).
type DelayLine struct {
	cfg   Config
	rng   *rand.Rand
	Stats Stats
}

type held struct {
	data []byte
	due  time.Time
}

// maxPacket is the largest packet a tun device hands out (its MTU is far below).
const maxPacket = 65536

// NewDelayLine checks the configuration.
func NewDelayLine(c Config) (*DelayLine, error) {
	switch {
	case c.Delay < 0:
		return nil, errors.New("delay must not be negative")
	case c.Loss < 0 || c.Loss > 1:
		return nil, errors.New("loss must be a share between 0 and 1 (1% is 0.01)")
	case c.Queue <= 0:
		return nil, errors.New("queue must hold at least one packet")
	}
	seed := c.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	return &DelayLine{cfg: c, rng: rand.New(rand.NewSource(seed))}, nil
}

// lose draws whether the next packet is dropped.
func (d *DelayLine) lose() bool { return d.cfg.Loss > 0 && d.rng.Float64() < d.cfg.Loss }

// Run reads packets from in (one per Read, as a tun device or a packet socket gives them)
// and writes the kept ones to out after the delay. It returns when in fails (io.EOF or a
// closed device or file: nil) or a write to out fails, once the packets already held are written.
func (d *DelayLine) Run(in io.Reader, out io.Writer) error {
	q := make(chan held, d.cfg.Queue)
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range q {
			if wait := time.Until(p.due); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := out.Write(p.data); err != nil {
				if werr == nil {
					werr = err
				}
				continue // drain the queue so the reader never blocks
			}
			d.Stats.Written.Add(1)
		}
	}()
	buf := make([]byte, maxPacket)
	var rerr error
	for {
		n, err := in.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, os.ErrClosed) {
				rerr = err
			}
			break
		}
		if n == 0 {
			continue
		}
		d.Stats.Read.Add(1)
		if d.lose() {
			d.Stats.Lost.Add(1)
			continue
		}
		p := held{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(d.cfg.Delay)}
		select {
		case q <- p:
		default:
			d.Stats.Overflow.Add(1)
		}
	}
	close(q)
	wg.Wait()
	if werr != nil {
		return werr
	}
	return rerr
}
