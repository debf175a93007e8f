package meta

import "github.com/cairn-db/cairn/internal/tstamp"

// maxBatch is the most timestamps one NextN call may take: one millisecond's
// worth of logical counters.
const maxBatch = tstamp.MaxLogical + 1

// window is the oracle's pure core: what was handed out and what is safely
// persisted. It takes the time as an input and does no I/O; the Oracle
// drives it and persists the limits it asks for.
//
// Invariant: every timestamp handed out is <= last < limit, and limit is at
// or below the high-water mark stored under /cairn/tso.
type window struct {
	last  uint64 // the last timestamp handed out (or the floor - 1 after load)
	limit uint64 // exclusive bound persisted for this term; 0: nothing yet
	span  int64  // milliseconds of timestamps persisted ahead of the clock
}

// load starts a term from the persisted high-water mark high: every
// timestamp ever handed out (by anyone) is below it, so the next is >= high.
func (w *window) load(high uint64) {
	if high > 0 && high-1 > w.last {
		w.last = high - 1
	}
	w.limit = 0
}

// next returns the first timestamp the next alloc would hand out at nowMs.
// last+1 carries into the next millisecond when the logical counter of the
// current one is used up, and max() ignores a clock that went backwards.
func (w *window) next(nowMs int64) uint64 {
	return max(w.last+1, tstamp.Make(nowMs, 0))
}

// alloc hands out n consecutive timestamps at nowMs, or reports that the
// persisted window does not cover them.
func (w *window) alloc(nowMs int64, n int) (first uint64, ok bool) {
	first = w.next(nowMs)
	end := first + uint64(n) - 1
	if end >= w.limit {
		return 0, false
	}
	w.last = end
	return first, true
}

// needRenew reports whether a third of the window is used: less than two
// thirds of span lies between the current position and the limit.
func (w *window) needRenew(nowMs int64) bool {
	pos := max(nowMs, tstamp.Physical(w.last))
	return tstamp.Physical(w.limit)-pos < w.span*2/3
}

// target is the limit to persist so that n timestamps can be handed out at
// nowMs with a whole span to spare. It never goes below the current limit.
func (w *window) target(nowMs int64, n int) uint64 {
	end := w.next(nowMs) + uint64(max(n, 1)) - 1
	return max(w.limit, tstamp.Make(tstamp.Physical(end)+w.span, 0))
}

// persisted records that limit is durably stored.
func (w *window) persisted(limit uint64) {
	w.limit = max(w.limit, limit)
}
