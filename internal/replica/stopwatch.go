package replica

import "time"

// stopwatch measures how long a piece of the loop's work took, for the
// store's timing stats. It reads the wall clock on purpose: the stats are
// durations of real work, not decisions, so they stay apart from
// Options.Clock (which a test may stop).
type stopwatch time.Time

func startWatch() stopwatch { return stopwatch(time.Now()) }

// ns is the time since the watch started, in nanoseconds.
func (w stopwatch) ns() int64 { return int64(time.Since(time.Time(w))) }
