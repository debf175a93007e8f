package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// The chunk collector. Every node collects its own chunks, mark and sweep,
// every GCInterval:
//
//  1. It takes the cutoff: now less GCGrace. Only chunks last touched
//     before it are candidates (segment.Store: a chunk is touched when
//     written, when a write finds it stored, and when a clone, a copy, a
//     multipart completion or a transaction's byte-range writes are about
//     to share it — object.Store.touchShared).
//  2. For a batch of candidates (at most rangeclient.RefsMax, in hash
//     order) it asks every range of every space which of them its
//     versions and locks reference (rangeclient.Refs: each range answers
//     from one point-in-time view on its leaseholder).
//  3. It deletes the candidates no range named, each only if still
//     untouched since the cutoff (decided under the lock a write's dedup
//     check takes).
//  4. It compacts the segments that are mostly garbage.
//
// Why a referenced chunk is never deleted: a version that references it
// either was committed before the mark read its range (the mark sees it,
// or sees the lock it was committed from), or was committed after. One
// committed after wrote the chunk (touched then: an upload finishes
// within GCGrace of writing its chunks), or shares it with a version that
// existed when it was built and touched it before committing (so a
// deletion already decided finds the touch, and one already done makes
// the touch find the chunk missing and the new version fail), or shares
// it with the version it replaces in the same key and commits only over
// it (a plain byte-range write: the range's view holds one or the other).
// A node that restarts counts every chunk as touched at its start, so
// touches lost with it lose nothing.
//
// Before the chunks, each collection applies every space's retention to
// the keys of the ranges the node leads (pruneVersions): a key no one
// writes again still loses the versions its retention no longer keeps.
//
// What the collector does not do yet: delete copies on nodes the ranking
// no longer wants (the repairer's leftovers).

// gcCompactBelow: a sealed segment whose live chunks take less than this
// share of it is compacted.
const gcCompactBelow = 0.5

// gcState is the collector's progress and totals (admin.GCNode).
type gcState struct {
	mu  sync.Mutex
	st  admin.GCNode
	run sync.Mutex // one collection at a time
}

func (n *Node) gcUpdate(f func(st *admin.GCNode)) {
	n.gc.mu.Lock()
	defer n.gc.mu.Unlock()
	f(&n.gc.st)
}

// GCStatus returns the collector's state on this node.
func (n *Node) GCStatus() admin.GCNode {
	n.gc.mu.Lock()
	st := n.gc.st
	n.gc.mu.Unlock()
	st.Node = n.id.NodeID
	if st.Phase == "" {
		st.Phase = "idle"
	}
	st.Grace = n.cfg.GCGrace.String()
	if n.cfg.GCInterval > 0 {
		st.Interval = n.cfg.GCInterval.String()
	}
	s := n.chunks.Stats()
	st.SegmentBytes, st.Segments = s.Bytes, s.Segments
	return st
}

func (n *Node) handleGCStatus(context.Context, []byte) ([]byte, error) {
	return json.Marshal(n.GCStatus())
}

// forgetTouches drops the chunk touches no collection needs when none is
// running (a node that does not collect on its own, or whose collections
// fail, keeps them from growing without bound).
func (n *Node) forgetTouches(context.Context) {
	if !n.gc.run.TryLock() {
		return // a collection forgets its own
	}
	defer n.gc.run.Unlock()
	n.chunks.ForgetTouches(n.cfg.Clock().Add(-n.cfg.GCGrace))
}

// gcStep is the background collection, every GCInterval.
func (n *Node) gcStep(ctx context.Context) {
	if err := n.CollectGarbage(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("chunk collection stopped; it runs again", "err", err)
	}
}

// CollectGarbage runs one collection of this node's chunks now (see the
// comment at the top of this file).
func (n *Node) CollectGarbage(ctx context.Context) (err error) {
	n.gc.run.Lock()
	defer n.gc.run.Unlock()
	start := n.cfg.Clock()
	cutoff := start.Add(-n.cfg.GCGrace)
	n.gcUpdate(func(st *admin.GCNode) {
		st.Phase, st.Started, st.Cutoff = "pruning", start, cutoff
		st.Examined, st.Garbage, st.RangesRead, st.Error = 0, 0, 0, ""
	})
	defer func() {
		// Touches before the cutoff matter to no later collection (their
		// cutoffs are later still), whether this one finished or not.
		n.chunks.ForgetTouches(cutoff)
		n.gcUpdate(func(st *admin.GCNode) {
			st.Phase, st.Finished = "idle", n.cfg.Clock()
			if err != nil {
				st.Error = err.Error()
			} else {
				st.Runs++
			}
		})
	}()
	// Versions first: what they drop, a later collection takes.
	if err := n.pruneVersions(ctx); err != nil {
		return err
	}
	n.gcUpdate(func(st *admin.GCNode) { st.Phase = "marking" })
	var after *chunk.Hash
	for {
		var batch []chunk.Hash
		if err := n.chunks.Collectable(ctx, after, cutoff, func(h chunk.Hash, _ uint32) bool {
			batch = append(batch, h)
			return len(batch) < rangeclient.RefsMax
		}); err != nil {
			return err
		}
		if len(batch) == 0 {
			break
		}
		after = &batch[len(batch)-1]
		n.gcUpdate(func(st *admin.GCNode) { st.Phase = "marking"; st.Examined += len(batch) })
		refs, err := n.markRefs(ctx, batch)
		if err != nil {
			return err
		}
		var garbage []chunk.Hash
		for _, h := range batch {
			if !refs[h] {
				garbage = append(garbage, h)
			}
		}
		n.gcUpdate(func(st *admin.GCNode) { st.Phase = "sweeping"; st.Garbage += len(garbage) })
		deleted, bytes, err := n.chunks.Delete(garbage, cutoff)
		if err != nil {
			return err
		}
		n.gcUpdate(func(st *admin.GCNode) { st.DeletedChunks += int64(deleted); st.DeletedBytes += bytes })
		if len(batch) < rangeclient.RefsMax {
			break
		}
	}
	n.gcUpdate(func(st *admin.GCNode) { st.Phase = "compacting" })
	cs, err := n.chunks.Compact(ctx, gcCompactBelow)
	n.gcUpdate(func(st *admin.GCNode) {
		st.CompactedSegments += int64(cs.Segments)
		st.MovedBytes += cs.MovedBytes
		st.ReclaimedBytes += cs.Freed
		if err == nil {
			st.LiveBytes = cs.Live
			st.Reclaimable = max(0, n.chunks.Stats().Bytes-cs.Live)
		}
	})
	if err != nil {
		return err
	}
	if cs.Segments > 0 || cs.Moved > 0 {
		n.log.Info("chunk collection", "segments_removed", cs.Segments, "freed", cs.Freed, "moved", cs.Moved,
			"took", n.cfg.Clock().Sub(start).Round(time.Millisecond))
	}
	return nil
}

// pruneVersions applies each space's retention, at a timestamp from the
// oracle, to the keys of the ranges this node leads, as a write to each
// key would (kv.PruneCmd): a key no one writes again still loses the
// versions its space's retention no longer keeps (a keep-for duration
// passed, or a stricter policy set since). A space with snapshots keeps
// every version (its retention reads keep-all meanwhile), and each key is
// pruned holding the space as a write does, so a snapshot made meanwhile
// either waits or is seen.
func (n *Node) pruneVersions(ctx context.Context) error {
	n.mu.RLock()
	spaces := make([]*space, 0, len(n.mu.spaces))
	for _, s := range n.mu.spaces {
		spaces = append(spaces, s)
	}
	n.mu.RUnlock()
	var now uint64
	known := false
spaces:
	for _, s := range spaces {
		pol := s.Retention()
		if pol.Mode == mvcc.KeepAll {
			continue
		}
		if !known {
			safe, by, err := n.safePoint(ctx)
			n.gcUpdate(func(st *admin.GCNode) { st.SafePoint, st.SafePointBy = time.UnixMilli(tstamp.Physical(safe)).UTC(), by })
			if err != nil {
				// Nothing is pruned without it: a transaction there may
				// read any version.
				n.gcUpdate(func(st *admin.GCNode) { st.SafePoint, st.SafePointBy = time.Time{}, err.Error() })
				n.log.Warn("versions not pruned: the safe point is unknown", "err", err)
				return nil
			}
			now, known = safe, true
		}
		for _, r := range s.tab.Ranges() {
			if !r.LeaseHere(ctx) {
				continue
			}
			objs, err := n.prunable(s, *r.Desc(), pol, now)
			if err != nil {
				return err
			}
			for _, obj := range objs {
				if err := n.pruneKey(ctx, s.meta.Name, obj, now); err != nil {
					if going(s) || n.notActive(ctx, s) {
						continue spaces // being deleted: its versions go with it, or wait for the next run
					}
					return fmt.Errorf("space %q: %w", s.meta.Name, err)
				}
			}
		}
	}
	return nil
}

// safePoint is the timestamp the collector prunes versions at: the
// oldest snapshot the open transactions of every node read (each node's
// txn.Manager.Floor), or a fresh timestamp when there is none older. by
// says what holds it. Every node not removed from the cluster must answer
// (one the map marks down may still serve a transaction): one that does
// not leaves the safe point unknown, and nothing is pruned.
func (n *Node) safePoint(ctx context.Context) (safe uint64, by string, err error) {
	safe, held, err := n.txns.Floor(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("this node's transactions: %w", err)
	}
	holder := n.id.NodeID
	for _, nd := range n.peers.view() {
		if nd.State == meta.NodeRemoved || nd.ID == n.id.NodeID {
			continue
		}
		b, err := n.callNode(ctx, nd.ID, adminService, "TxnFloor", nil, 5*time.Second)
		if err == nil && len(b) != 9 {
			err = fmt.Errorf("an answer of %d bytes", len(b))
		}
		if err != nil {
			return 0, "", fmt.Errorf("node %d (%s) did not say how old its transactions are: %w; bring it back, or remove it (cairn node remove %d)", nd.ID, nd.State, err, nd.ID)
		}
		if f := binary.BigEndian.Uint64(b); f < safe {
			safe, held, holder = f, b[8] == 1, nd.ID
		}
	}
	by = "now"
	if held {
		by = fmt.Sprintf("a transaction on node %d", holder)
	}
	return safe, by, nil
}

// handleTxnFloor answers the node's Floor: u64, then 1 if an open
// transaction holds it (else 0).
func (n *Node) handleTxnFloor(ctx context.Context, _ []byte) ([]byte, error) {
	f, held, err := n.txns.Floor(ctx)
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint64(nil, f)
	if held {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

// prunable lists the keys of range d (of space s) with versions pol drops
// at now, from the local replica.
func (n *Node) prunable(s *space, d rangedesc.Range, pol mvcc.Retention, now uint64) ([][]byte, error) {
	start, end := d.Start, d.End
	if start == nil {
		start = keys.SpaceStart(s.meta.ID)
	}
	if end == nil {
		end = keys.SpaceEnd(s.meta.ID)
	}
	lo, hi := keys.VersionSpan(start, end)
	it, err := n.eng.DB().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var (
		out  [][]byte
		cur  []byte
		vers []uint64
	)
	flush := func() {
		if len(vers) > 1 && slices.Contains(pol.PruneAt(vers, now), true) {
			out = append(out, cur)
		}
	}
	for ok := it.First(); ok; ok = it.Next() {
		obj, ts, err := keys.DecodeVersion(it.Key())
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(obj, cur) {
			flush()
			cur, vers = slices.Clone(obj), vers[:0]
		}
		vers = append(vers, ts)
	}
	flush()
	return out, it.Error()
}

// notActive reports whether the catalog no longer has s as an active
// space (it is being deleted, or gone).
func (n *Node) notActive(ctx context.Context, s *space) bool {
	sp, err := n.catalog.GetSpace(ctx, s.meta.Name)
	return errors.Is(err, meta.ErrSpaceNotFound) || err == nil && (sp.ID != s.meta.ID || sp.State != meta.SpaceActive)
}

// going reports whether s is being deleted (fenced) or is gone.
func going(s *space) bool {
	s.gate.RLock()
	defer s.gate.RUnlock()
	return s.fenced || s.deleted
}

// pruneKey prunes obj holding its space, with the retention read under it.
func (n *Node) pruneKey(ctx context.Context, name string, obj []byte, now uint64) error {
	s, release, err := n.acquire(ctx, name)
	if err != nil {
		return err
	}
	defer release()
	pol := s.Retention()
	if pol.Mode == mvcc.KeepAll {
		return nil // a snapshot came meanwhile
	}
	res, err := n.rc.Propose(ctx, s.Table(), obj, (&kv.PruneCmd{Obj: obj, Retention: pol, Now: now, SafePoint: true}).Encode())
	if err != nil {
		return err
	}
	n.gcUpdate(func(st *admin.GCNode) { st.PrunedVersions += int64(len(res.Pruned)) })
	return nil
}

// markRefs asks every range of every space which of cands it references.
func (n *Node) markRefs(ctx context.Context, cands []chunk.Hash) (map[chunk.Hash]bool, error) {
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return nil, object.Unreachable("space catalog", err)
	}
	refs := map[chunk.Hash]bool{}
	read := 0 // ranges read in the spaces before this one
	for _, sp := range spaces {
		if sp.State == meta.SpaceDeleting {
			continue // its ranges are going, and nothing can read them
		}
		t, err := n.tableOf(ctx, sp.ID)
		if object.KindOf(err) == object.SpaceNotFound {
			continue // deleted since the list: nothing reads it
		}
		if err != nil {
			return nil, fmt.Errorf("space %q: %w", sp.Name, err)
		}
		if len(t.Ranges()) == 0 {
			continue // its ranges are gone (a delete went through): nothing reads it
		}
		here := 0
		found, err := n.rc.Refs(ctx, t, sp.ID, cands, func(r int) {
			here = r
			n.gcUpdate(func(st *admin.GCNode) { st.RangesRead = read + r })
		})
		if err != nil {
			return nil, fmt.Errorf("space %q: %w", sp.Name, err)
		}
		read += here
		for h := range found {
			refs[h] = true
		}
	}
	return refs, nil
}

// gcReport gathers every node's collector state for the cluster report:
// this node's at once, the others' by asking them (a node that does not
// answer is listed with the error).
func (n *Node) gcReport(ctx context.Context, nodes []meta.NodeInfo) []admin.GCNode {
	out := make([]admin.GCNode, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		if nd.ID == n.id.NodeID {
			out[i] = n.GCStatus()
			continue
		}
		if nd.State == meta.NodeRemoved || nd.State == meta.NodeDown {
			out[i] = admin.GCNode{Node: nd.ID, Error: nd.State}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := n.callNode(ctx, nd.ID, adminService, "GCStatus", nil, time.Second)
			if err == nil {
				err = json.Unmarshal(b, &out[i])
			}
			if err != nil {
				out[i] = admin.GCNode{Node: nd.ID, Error: err.Error()}
			}
		}()
	}
	wg.Wait()
	return out
}

// gcCollector exports the collector's state as Prometheus series.
type gcCollector struct{ n *Node }

var (
	gcDeletedChunks = prometheus.NewDesc("cairn_gc_deleted_chunks_total", "Chunks the collector deleted (no version referenced them).", nil, nil)
	gcDeletedBytes  = prometheus.NewDesc("cairn_gc_deleted_bytes_total", "Bytes of the chunk records the collector deleted.", nil, nil)
	gcReclaimed     = prometheus.NewDesc("cairn_gc_reclaimed_bytes_total", "Bytes of segment files compaction removed.", nil, nil)
	gcMoved         = prometheus.NewDesc("cairn_gc_moved_bytes_total", "Bytes of live chunks compaction rewrote.", nil, nil)
	gcReclaimable   = prometheus.NewDesc("cairn_gc_reclaimable_bytes", "Bytes of segment files no live chunk uses, as of the last collection (deleted chunks in segments not yet compacted, and padding).", nil, nil)
	gcRuns          = prometheus.NewDesc("cairn_gc_runs_total", "Chunk collections completed.", nil, nil)
	gcLastRun       = prometheus.NewDesc("cairn_gc_last_run_timestamp_seconds", "When the last chunk collection ended.", nil, nil)
	gcExamined      = prometheus.NewDesc("cairn_gc_examined_chunks", "Chunks old enough to be examined by the current or last collection.", nil, nil)
	gcPruned        = prometheus.NewDesc("cairn_gc_pruned_versions_total", "Versions the collector removed by their space's retention (keys not written again).", nil, nil)
	gcSafePoint     = prometheus.NewDesc("cairn_gc_safe_point_timestamp_seconds", "The safe point the last collection pruned versions at: the oldest snapshot an open transaction reads, or a fresh timestamp when none is older (0: unknown, nothing pruned).", nil, nil)
)

func (c gcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gcDeletedChunks, gcDeletedBytes, gcReclaimed, gcMoved, gcReclaimable, gcRuns, gcLastRun, gcExamined, gcPruned, gcSafePoint} {
		ch <- d
	}
}

func (c gcCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.GCStatus()
	ch <- prometheus.MustNewConstMetric(gcDeletedChunks, prometheus.CounterValue, float64(st.DeletedChunks))
	ch <- prometheus.MustNewConstMetric(gcDeletedBytes, prometheus.CounterValue, float64(st.DeletedBytes))
	ch <- prometheus.MustNewConstMetric(gcReclaimed, prometheus.CounterValue, float64(st.ReclaimedBytes))
	ch <- prometheus.MustNewConstMetric(gcMoved, prometheus.CounterValue, float64(st.MovedBytes))
	ch <- prometheus.MustNewConstMetric(gcReclaimable, prometheus.GaugeValue, float64(st.Reclaimable))
	ch <- prometheus.MustNewConstMetric(gcRuns, prometheus.CounterValue, float64(st.Runs))
	var last float64
	if !st.Finished.IsZero() {
		last = float64(st.Finished.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(gcLastRun, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(gcExamined, prometheus.GaugeValue, float64(st.Examined))
	ch <- prometheus.MustNewConstMetric(gcPruned, prometheus.CounterValue, float64(st.PrunedVersions))
	var safe float64
	if !st.SafePoint.IsZero() {
		safe = float64(st.SafePoint.UnixMilli()) / 1e3
	}
	ch <- prometheus.MustNewConstMetric(gcSafePoint, prometheus.GaugeValue, safe)
}

// trimFeeds drops, on each range this node leads, the change feed
// entries older than WatchRetention (kv.TrimFeedCmd): the feed keeps what
// a watch that far behind needs, and no more.
func (n *Node) trimFeeds(ctx context.Context) {
	before := tstamp.FromTime(n.cfg.Clock().Add(-n.cfg.WatchRetention))
	n.mu.RLock()
	spaces := make([]*space, 0, len(n.mu.spaces))
	for _, s := range n.mu.spaces {
		spaces = append(spaces, s)
	}
	n.mu.RUnlock()
	for _, s := range spaces {
		for _, r := range s.tab.Ranges() {
			if !r.LeaseHere(ctx) {
				continue
			}
			obj := r.Desc().Start
			if _, err := n.rc.Propose(ctx, s.Table(), obj, (&kv.TrimFeedCmd{Obj: obj, Before: before}).Encode()); err != nil && ctx.Err() == nil {
				n.log.Debug("trimming a range's change feed failed; the next minute tries again", "range", r.Desc().ID, "err", err)
			}
		}
	}
}
