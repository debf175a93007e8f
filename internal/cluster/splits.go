package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// Range splits.
//
// The leaseholder of a range checks it every second (repairRanges, after
// any membership step): a range splits when its versions and locks take
// more than Config.SplitSize on disk (pebble's estimate), at the object
// key that halves its bytes, or when it served more than Config.SplitLoad
// requests per second for splitLoadChecks checks in a row, at the median
// of a sample of the keys it served. The split itself is an entry in the
// range's raft log (replica.Split); the new range lives on the same nodes
// and its lease starts where the old one was, so a split moves no data
// and costs one raft round. The rebalancer then places the new range by
// its own id (meta.PlaceReplicas), which spreads a hot key span over the
// cluster.
//
// The range table follows: the leaseholder records the split in the meta
// service as soon as it applied (Catalog.SplitRange), and a leaseholder
// that finds its replica's bounds narrower than the table records it
// later (a leaseholder that stopped half-way). Every node that holds a
// replica updates its own routing at once when the split applies here
// (onSplit); the others read the table every 500ms. A request that
// reaches a range its key has left gets CodeRangeMoved, with nothing
// done, and is routed again (onRange).

// splitLoadChecks is how many consecutive checks a range must be over
// Config.SplitLoad before it splits by load.
const splitLoadChecks = 5

// splitLoad is the split and merge decisions' view of a range's load
// (its counting is the range entry's: rangeclient.Load).
type splitLoad struct {
	hot  int       // consecutive checks over the load threshold (repairRanges only)
	last time.Time // when the count was last taken (repairRanges only)
	// noKeyAt is the applied index at which the range, over the size
	// threshold, had no key to split at (one object); the search waits
	// for new writes (repairRanges only).
	noKeyAt uint64
	// quietSince is when the range, measured as leaseholder, last went
	// under a quarter of the load threshold (unix ns; 0: it is not).
	quietSince atomic.Int64
}

// quietFor returns how long the range has been quiet (see quietSince).
func (l *splitLoad) quietFor(now time.Time) time.Duration {
	if q := l.quietSince.Load(); q != 0 {
		return now.Sub(time.Unix(0, q))
	}
	return 0
}

// noteRate records a measured request rate against the merge threshold.
func (l *splitLoad) noteRate(now time.Time, rate float64, splitLoad int) {
	if splitLoad > 0 && rate >= float64(splitLoad)/4 {
		l.quietSince.Store(0)
	} else if l.quietSince.Load() == 0 {
		l.quietSince.Store(now.UnixNano())
	}
}

// take returns r's requests per second since the last call and the
// sampled keys, sorted, and starts counting again; ok is false on the
// first call (nothing measured).
func (l *splitLoad) take(r *rng, now time.Time) (rate float64, sample [][]byte, ok bool) {
	ops, sample := r.Load.Take()
	last := l.last
	l.last = now
	if last.IsZero() || !now.After(last) {
		return 0, nil, false
	}
	return float64(ops) / now.Sub(last).Seconds(), sample, true
}

// maybeSplit splits range r (whose lease is here, with no membership
// change under way) if it is over the size or load threshold.
func (n *Node) maybeSplit(ctx context.Context, s *space, r *rng, rep *replica.Replica) error {
	d := rep.Descriptor()
	now := n.cfg.Clock()
	l := &ext(r).load
	rate, sample, measured := l.take(r, now)
	if measured {
		l.noteRate(now, rate, n.cfg.SplitLoad)
	}
	var key []byte
	why := ""
	if n.cfg.SplitLoad > 0 && rate > float64(n.cfg.SplitLoad) {
		l.hot++
	} else {
		l.hot = 0
	}
	if l.hot >= splitLoadChecks && len(sample) > 0 {
		if k := sample[len(sample)/2]; bytes.Compare(k, d.Start) > 0 && rep.Contains(k) {
			key, why = k, fmt.Sprintf("load %.0f requests/s", rate)
		}
	}
	if key == nil && n.cfg.SplitSize > 0 {
		size, err := n.rangeBytes(d)
		if err != nil {
			return err
		}
		if applied := rep.Status().Applied; size > uint64(n.cfg.SplitSize) && applied != l.noKeyAt {
			if key, err = n.splitKey(d); err != nil {
				return err
			}
			if key == nil {
				l.noKeyAt = applied
			}
			why = fmt.Sprintf("size %d bytes", size)
		}
	}
	if key == nil {
		return nil
	}
	l.hot = 0
	l.quietSince.Store(0) // both halves wait MergeAfter before a merge
	return n.splitRange(ctx, s, r, rep, key, why)
}

// rangeBytes is pebble's estimate of the disk space of a range's state.
func (n *Node) rangeBytes(d rangedesc.Range) (uint64, error) {
	var total uint64
	for _, sp := range kv.Spans(d) {
		b, err := n.eng.DB().EstimateDiskUsage(sp.Start, sp.End)
		if err != nil {
			return 0, err
		}
		total += b
	}
	return total, nil
}

// splitKey returns the object key that halves the bytes of the range's
// versions (keys and values), so that every version of an object stays
// on one side; nil if the range holds fewer than two objects.
func (n *Node) splitKey(d rangedesc.Range) ([]byte, error) {
	vlo, vhi := keys.VersionSpan(d.Start, d.End)
	snap := n.eng.DB().NewSnapshot()
	defer snap.Close()
	total, err := spanBytes(snap, vlo, vhi, math.MaxUint64)
	if err != nil || total == 0 {
		return nil, err
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: vlo, UpperBound: vhi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var sum uint64
	var first []byte
	for ok := it.First(); ok; ok = it.Next() {
		obj, _, err := keys.DecodeVersion(it.Key())
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = slices.Clone(obj)
		} else if sum >= total/2 && !bytes.Equal(obj, first) {
			return slices.Clone(obj), nil
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		sum += uint64(len(it.Key()) + len(v))
	}
	return nil, it.Error()
}

// spanBytes sums the sizes of the keys and values in [lo, hi), stopping
// once the sum reaches limit.
func spanBytes(rd pebble.Reader, lo, hi []byte, limit uint64) (uint64, error) {
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	var sum uint64
	for ok := it.First(); ok && sum < limit; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		sum += uint64(len(it.Key()) + len(v))
	}
	return sum, it.Close()
}

// splitRange splits r at key: a new range id, the split in raft, then the
// range table.
func (n *Node) splitRange(ctx context.Context, s *space, r *rng, rep *replica.Replica, key []byte, why string) error {
	rightID, err := n.catalog.NewRangeID(ctx)
	if err != nil {
		return err
	}
	rd, err := rep.Split(ctx, key, rightID)
	if err != nil {
		return fmt.Errorf("split range %d: %w", rep.Descriptor().ID, err)
	}
	n.metrics.rangeOps.WithLabelValues("split").Inc()
	n.log.Info("split a range", "range", r.Desc().ID, "new", rightID, "why", why)
	return n.recordSplit(ctx, s, r, rd)
}

// recordSplit writes a split that applied here into the range table.
func (n *Node) recordSplit(ctx context.Context, s *space, r *rng, right rangedesc.Range) error {
	left, nr, err := n.catalog.SplitRange(ctx, s.meta.ID, r.Desc().ID, right.Start, right.End, right.ID, right.Replicas)
	if err != nil {
		return err
	}
	n.adoptSplit(s, &left, nr)
	return nil
}

// rangeEvent is a split or a merge that applied here.
type rangeEvent struct {
	merge       bool
	left, right rangedesc.Range
}

// onSplit is called on the replica loop when a split applied here: the
// node's routing follows at once (off the loop).
func (n *Node) onSplit(left, right rangedesc.Range) {
	select {
	case n.rangec <- rangeEvent{left: left, right: right}:
	default: // the table sync catches up
	}
}

// followRanges updates the node's tables for the splits and merges
// applied here.
func (n *Node) followRanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-n.rangec:
			left, right := ev.left, ev.right
			s, _ := n.tableEntry(left.ID)
			if s == nil {
				continue
			}
			if ev.merge {
				n.adoptMerge(s, nil, right.ID)
				continue
			}
			rd := rangedesc.Range{ID: right.ID, SpaceID: s.meta.ID, Start: right.Start, End: right.End,
				Replicas: right.Replicas, Parent: left.ID}
			n.adoptSplit(s, nil, rd)
		}
	}
}

// adoptSplit puts the new range of a split into s's table, if not there
// yet, and, when the split is recorded (left not nil), the left range's
// recorded descriptor. Until then the left range's entry keeps the
// table's (wider) bounds, which is how the repairer sees the split is not
// recorded; routing needs only the new range's start.
func (n *Node) adoptSplit(s *space, left *rangedesc.Range, right rangedesc.Range) {
	n.openMu.Lock()
	defer n.openMu.Unlock()
	if left != nil {
		if l := s.tab.ByID(left.ID); l != nil {
			l.AdoptDesc(*left)
		}
	}
	if r := s.tab.ByID(right.ID); r != nil {
		r.AdoptDesc(right)
		return
	}
	nr := newRng(right, n.ranges.Replica(right.ID))
	ext(nr).unlisted = true
	s.tab.Set(append(slices.Clone(s.tab.Ranges()), nr))
}

// tableEntry returns the open space holding range id and its entry in
// the space's table, or nils.
func (n *Node) tableEntry(id uint64) (*space, *rng) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, s := range n.mu.spaces {
		if r := s.tab.ByID(id); r != nil {
			return s, r
		}
	}
	return nil, nil
}

// rangeByID returns s's range id, or nil.
func (s *space) rangeByID(id uint64) *rng {
	for _, r := range s.tab.Ranges() {
		if r.Desc().ID == id {
			return r
		}
	}
	return nil
}

// kickSync asks the table sync to run now.
func (n *Node) kickSync() {
	select {
	case n.syncKick <- struct{}{}:
	default:
	}
}
