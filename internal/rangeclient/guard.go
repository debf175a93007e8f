package rangeclient

import (
	"context"
	"sync"
)

// tsGuard keeps one promise for one range on its leaseholder: a read at
// timestamp T, once served, never misses a version at or below T that
// appears later. Versions committed through locks keep it by themselves
// (the lock is in place before the commit timestamp is taken, so a reader
// at a later timestamp meets it). A write that takes its timestamp before
// it is ordered — a plain write, a one-phase commit — does not, and
// passes this guard instead, as CockroachDB's timestamp cache and TiKV's
// max_ts do:
//
//   - a read at T raises the low-water mark to T, then waits for the
//     guarded writes in flight at or below T to settle (apply or fail);
//   - a guarded write at or below the mark is refused (ErrConflict: the
//     writer takes a new timestamp) and is otherwise in flight until its
//     proposal settles.
//
// The mark is kept per range, not per key: refusals are rare (the write's
// timestamp must fall below a read's timestamp while the write is on its
// way) and cost the writer one new timestamp. Reads served by an earlier
// leaseholder are covered by a timestamp taken when this node's term
// begins: every one of them was taken before it.
type tsGuard struct {
	mu      sync.Mutex
	term    uint64
	low     uint64
	fresh   bool           // low includes a timestamp taken in this term
	pending map[uint64]int // guarded writes in flight, by timestamp
	changed chan struct{}  // closed when one settles; nil while no read waits
}

func (c *Client) guard(rangeID uint64) *tsGuard {
	if g, ok := c.guards.Load(rangeID); ok {
		return g.(*tsGuard)
	}
	g, _ := c.guards.LoadOrStore(rangeID, &tsGuard{pending: map[uint64]int{}})
	return g.(*tsGuard)
}

// enterTermLocked starts the state of a new lease term.
func (g *tsGuard) enterTermLocked(term uint64) {
	if term > g.term {
		g.term, g.low, g.fresh = term, 0, false
	}
}

// admit lets a guarded write at ts in term through, or refuses it with
// ErrConflict; once admitted the caller must call settle(ts) when its
// proposal settles.
func (g *tsGuard) admit(ctx context.Context, term, ts uint64, now func(context.Context) (uint64, error)) error {
	g.mu.Lock()
	g.enterTermLocked(term)
	for !g.fresh || g.term != term {
		if g.term > term {
			g.mu.Unlock()
			return errorf(CodeNotLeader, "the range's lease moved on (term %d, now %d)", term, g.term)
		}
		g.mu.Unlock()
		f, err := now(ctx)
		if err != nil {
			return errorf(CodeUnavailable, "timestamp oracle: %v", err)
		}
		g.mu.Lock()
		g.enterTermLocked(term)
		if g.term == term {
			g.low, g.fresh = max(g.low, f), true
		}
	}
	if ts <= g.low {
		g.mu.Unlock()
		return errorf(codeConflict, "a read at a later timestamp was served first")
	}
	g.pending[ts]++
	g.mu.Unlock()
	return nil
}

// settle ends a write admitted at ts.
func (g *tsGuard) settle(ts uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[ts]--; g.pending[ts] <= 0 {
		delete(g.pending, ts)
	}
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// read marks a read at ts in term and waits until no guarded write at or
// below ts is in flight.
func (g *tsGuard) read(ctx context.Context, term, ts uint64) error {
	g.mu.Lock()
	g.enterTermLocked(term)
	g.low = max(g.low, ts)
	for {
		blocked := false
		for p := range g.pending {
			if p <= ts {
				blocked = true
				break
			}
		}
		if !blocked {
			g.mu.Unlock()
			return nil
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
}
