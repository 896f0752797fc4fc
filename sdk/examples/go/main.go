// summary: a Go component that reads the per-segment summaries of a pipe (written by the
// Python energy_mean component) and prints the overall result.
//
//	summary SPACE PIPE
//
// It declares its own struct with only the fields it uses; Conflux converts from the
// writer's format by field name.
package main

import (
	"fmt"
	"io"
	"os"

	conflux "conflux.dev/sdk/go"
)

type summary struct {
	MeanEnergy float64 `conflux:"mean_energy"`
	Count      int64   `conflux:"count"` // an int32 in the writer: widened here
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: summary SPACE PIPE")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
}

func run(addr, pipe string) error {
	space, err := conflux.OpenSpace(addr, nil)
	if err != nil {
		return err
	}
	defer space.Close()
	f, err := conflux.FormatOf[summary]("summary")
	if err != nil {
		return err
	}
	r, err := space.Attach(pipe)
	if err != nil {
		return err
	}
	var segments, samples int64
	var energy float64
	for {
		events, err := conflux.ReadEvents[summary](r, f, conflux.Forever)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		for _, e := range events {
			segments++
			samples += e.Count
			energy += e.MeanEnergy * float64(e.Count)
		}
	}
	fmt.Printf("summary: %d segments, %d samples, mean energy %.2f\n", segments, samples, energy/float64(samples))
	return nil
}
