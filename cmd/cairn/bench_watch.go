package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
)

// watchBenchResult is what `cairn bench --op watch` reports: how long a
// committed change takes to reach another client's watch.
type watchBenchResult struct {
	Op        string  `json:"op"`
	Writers   int     `json:"writers"`
	Seconds   float64 `json:"seconds"`
	Changes   int     `json:"changes"`
	Missing   int     `json:"missing"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	PerSecond float64 `json:"changes_per_sec"`
}

// runWatchBenchCmd runs --concurrency writers, each putting a small
// object every --pause, on one connection, and a watcher on another: the
// latency of a change is from its writer's acknowledgement to its arrival
// in the watch.
func runWatchBenchCmd(cmd *cobra.Command, space string, conc int, dur time.Duration, asJSON bool) error {
	f := cmd.Flags()
	pause, _ := f.GetDuration("pause")
	if !f.Changed("space") {
		space = "bench-watch"
	}
	if conc < 1 || dur <= 0 || pause < 0 {
		return usageError{errors.New("--concurrency and --duration positive, --pause not negative")}
	}
	o, err := clientOptions(cmd)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	writer, err := client.DialOptions(ctx, o)
	if err != nil {
		return err
	}
	defer writer.Close()
	watcher, err := client.DialOptions(ctx, o)
	if err != nil {
		return err
	}
	defer watcher.Close()
	if _, err := writer.CreateSpace(ctx, space, client.SpaceSettings{}); err != nil && !errors.Is(err, client.ErrSpaceExists) {
		return err
	}
	first, err := watcher.WatchPage(ctx, client.WatchRequest{Space: space})
	if err != nil {
		return err
	}
	type key struct {
		k string
		v uint64
	}
	var mu sync.Mutex
	acked := map[key]time.Time{}
	arrived := map[key]time.Time{}
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- watcher.Watch(wctx, space, first.Next, func(ev client.WatchEvent, _ string) error {
			now := time.Now()
			mu.Lock()
			arrived[key{ev.Key, ev.Version}] = now
			mu.Unlock()
			return nil
		})
	}()
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	for w := range conc {
		wg.Go(func() {
			for i := 0; rctx.Err() == nil; i++ {
				k := fmt.Sprintf("w%03d-%06d", w, i)
				info, err := writer.Put(rctx, space, k, []byte("x"))
				if rctx.Err() != nil {
					return
				}
				if err != nil {
					errc <- err
					return
				}
				now := time.Now()
				mu.Lock()
				acked[key{k, info.Version}] = now
				mu.Unlock()
				select {
				case <-rctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errc:
		stopWatch()
		return err
	default:
	}
	// Let the last changes arrive, then stop the watch.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := len(arrived) >= len(acked)
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopWatch()
	if err := <-watchDone; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	var lat latencies
	res := watchBenchResult{Op: "watch", Writers: conc, Seconds: elapsed.Seconds()}
	for k, at := range acked {
		got, ok := arrived[k]
		if !ok {
			res.Missing++
			continue
		}
		lat = append(lat, max(got.Sub(at), 0))
	}
	lat = lat.sorted()
	res.Changes = len(lat)
	if len(lat) > 0 {
		res.P50Ms, res.P99Ms = ms(lat.pct(0.50)), ms(lat.pct(0.99))
		res.MaxMs = ms(lat[len(lat)-1])
	}
	res.PerSecond = float64(res.Changes) / elapsed.Seconds()
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "watch: %d writers for %.1fs: %d changes (%.0f/s) reached the other client's watch after p50 %.3f ms, p99 %.3f ms, max %.3f ms; %d missing\n",
		conc, res.Seconds, res.Changes, res.PerSecond, res.P50Ms, res.P99Ms, res.MaxMs, res.Missing)
	if res.Missing > 0 {
		return fmt.Errorf("%d acknowledged changes never reached the watch", res.Missing)
	}
	return nil
}
