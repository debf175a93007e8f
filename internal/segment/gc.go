package segment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/bufpool"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// Collection. The store does not know which chunks are garbage: the node's
// collector finds out by asking every range which of a batch of chunks its
// versions still name. What the store keeps is each chunk's last touch, so
// that a chunk someone may be about to reference is never deleted:
//
//   - A chunk is touched when it is written, when a Put finds it already
//     stored (dedup: the writer will reference it), and when Touch names
//     it (a clone or copy that will reference it without writing it).
//   - Touches since Open are kept in memory; every chunk counts as touched
//     at Open at the latest (those of an earlier run are lost), and a
//     chunk written since Open counts as touched when its segment last
//     took a write (an overestimate, which only keeps garbage longer).
//   - Delete removes a chunk only if its last touch is before the cutoff
//     the collector passes (its mark's start less the grace period), and
//     decides that under the same lock as a Put's dedup check: a Put
//     either finds the chunk (and touches it first) or writes it again.
//
// Deleting a chunk removes its index entry (synced); its bytes stay in the
// segment until Compact rewrites the segment's live chunks into the open
// segment and removes the file.

type gcState struct {
	mu       sync.Mutex
	openedAt int64
	touched  map[chunk.Hash]int64
	written  map[uint64]int64
}

func (s *Store) now() int64 { return s.o.Now().UnixNano() }

// touchHeld reports whether the index holds h and, if it does, records a
// touch now. A new chunk (the common case) costs one index lookup and no
// lock. A held one is touched under the lock Delete decides under, then
// looked up again: a Delete decided before the touch has committed by
// then, and dropped the chunk from the index cache (it does both under
// the lock), so the chunk reads as absent; one decided after sees the
// touch and keeps it. Both lookups go through the index cache (see
// locCache for why the second is exact).
func (s *Store) touchHeld(h chunk.Hash) (bool, error) {
	if ok, err := s.cachedHas(h); !ok || err != nil {
		return ok, err
	}
	s.gc.mu.Lock()
	s.gc.touched[h] = s.now()
	s.gc.mu.Unlock()
	return s.cachedHas(h)
}

// lastTouch is h's last touch as the collector counts it; gc.mu is held.
func (s *Store) lastTouch(h chunk.Hash, seg uint64) int64 {
	return max(s.gc.openedAt, s.gc.touched[h], s.gc.written[seg])
}

// Touch records that the caller is about to reference the chunks hs
// without writing them, so that no collection whose cutoff is before now
// deletes them. It returns the ones the store does not hold (touching
// those means nothing).
func (s *Store) Touch(hs []chunk.Hash) (missing []chunk.Hash, err error) {
	for _, h := range hs {
		ok, err := s.touchHeld(h)
		if err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, h)
		}
	}
	return missing, nil
}

// ForgetTouches drops the touches recorded before t, which no collection
// with a cutoff after t needs: it bounds the memory touches take.
func (s *Store) ForgetTouches(t time.Time) {
	before := t.UnixNano()
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	for h, at := range s.gc.touched {
		if at < before {
			delete(s.gc.touched, h)
		}
	}
}

// Collectable calls fn with every chunk, in hash order from after (nil:
// the first), whose last touch is before cutoff, with its stored length,
// until fn returns false or ctx ends. Chunks touched later are skipped:
// they may be about to be referenced.
func (s *Store) Collectable(ctx context.Context, after *chunk.Hash, cutoff time.Time, fn func(h chunk.Hash, length uint32) bool) error {
	c := cutoff.UnixNano()
	return s.entries(ctx, after, func(h chunk.Hash, loc location) bool {
		s.gc.mu.Lock()
		old := s.lastTouch(h, loc.seg) < c
		s.gc.mu.Unlock()
		return !old || fn(h, loc.length)
	})
}

// Delete removes the chunks of hs whose last touch is before cutoff (the
// others stay: something touched them since the caller decided they were
// garbage) and returns how many it removed and the bytes of their records.
// It works in slices of deleteSlice chunks, each decided and committed
// (synced: compaction removes files on the strength of it) under the lock
// a write's dedup check takes, so writes wait for one slice at most.
func (s *Store) Delete(hs []chunk.Hash, cutoff time.Time) (n int, bytes int64, err error) {
	for len(hs) > 0 {
		k := min(len(hs), deleteSlice)
		dn, db, err := s.deleteSlice(hs[:k], cutoff.UnixNano())
		n, bytes = n+dn, bytes+db
		if err != nil {
			return n, bytes, err
		}
		hs = hs[k:]
	}
	return n, bytes, nil
}

// deleteSlice bounds the chunks one Delete step decides under the lock.
const deleteSlice = 1024

func (s *Store) deleteSlice(hs []chunk.Hash, cutoff int64) (n int, bytes int64, err error) {
	b := s.db.NewBatch()
	defer b.Close()
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	var deleted []chunk.Hash
	for _, h := range hs {
		loc, err := s.lookup(h)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		if s.lastTouch(h, loc.seg) >= cutoff {
			continue
		}
		if err := errors.Join(b.Delete(indexKey(h), nil), b.Delete(copiesKey(h), nil)); err != nil {
			return 0, 0, err
		}
		deleted = append(deleted, h)
		n++
		bytes += recordHeaderSize + int64(loc.length)
	}
	if n == 0 {
		return 0, 0, nil
	}
	// Committed before the lock is released: a Put that waited for it
	// finds the chunk gone and writes it again.
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, 0, fmt.Errorf("segment: delete chunks: %w", err)
	}
	for _, h := range deleted {
		if s.locs != nil {
			s.locs.drop(h)
		}
		if s.data != nil {
			s.data.drop(h)
		}
	}
	return n, bytes, nil
}

// entries calls fn with every index entry from after, in hash order.
func (s *Store) entries(ctx context.Context, after *chunk.Hash, fn func(h chunk.Hash, loc location) bool) error {
	lower := []byte(storage.PrefixChunkIndex)
	if after != nil {
		lower = append(indexKey(*after), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: indexEnd})
	if err != nil {
		return fmt.Errorf("segment: iterate the chunk index: %w", err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := it.Key()
		if len(k) != len(storage.PrefixChunkIndex)+chunk.HashSize {
			return fmt.Errorf("%w: chunk index key of %d bytes", ErrCorrupt, len(k))
		}
		loc, err := decodeLocation(it.Value())
		if err != nil {
			return err
		}
		var h chunk.Hash
		copy(h[:], k[len(storage.PrefixChunkIndex):])
		if !fn(h, loc) {
			return nil
		}
	}
	return it.Error()
}

// CompactStats reports one Compact.
type CompactStats struct {
	// Segments is the number of segment files removed; Moved and MovedBytes
	// the live chunks rewritten out of them; Freed the bytes of the files
	// removed.
	Segments   int
	Moved      int
	MovedBytes int64
	Freed      int64
	// Live is the bytes of the records of indexed chunks (headers
	// included) Compact found; the rest of the segment files is garbage
	// (and block padding) that compaction gives back.
	Live int64
}

// compactBatch bounds the bytes of chunks Compact holds in memory at once.
const compactBatch = 64 << 20

// Compact rewrites the live chunks of every sealed segment whose live
// records take less than maxLive of its size (0 < maxLive <= 1) into the
// open segment and removes the segment file. Readers never miss a chunk:
// a chunk's index entry moves to its new copy, durable, before the old
// file goes, and a read that looked the chunk up in the old file looks it
// up again. Only one Compact runs at a time (the caller's collector).
func (s *Store) Compact(ctx context.Context, maxLive float64) (CompactStats, error) {
	var st CompactStats
	if maxLive <= 0 || maxLive > 1 {
		return st, fmt.Errorf("segment: compact threshold %v is not in (0, 1]", maxLive)
	}
	metas, err := s.loadMetas()
	if err != nil {
		return st, err
	}
	live := map[uint64]int64{}
	if err := s.entries(ctx, nil, func(_ chunk.Hash, loc location) bool {
		live[loc.seg] += recordHeaderSize + int64(loc.length)
		return true
	}); err != nil {
		return st, err
	}
	for _, v := range live {
		st.Live += v
	}
	open := s.openSeg.Load()
	if m, ok := metas[open]; ok && m.size >= s.o.SegmentSize/4 && float64(live[open]) < maxLive*float64(m.size) {
		// The open segment is mostly garbage too (a large delete right
		// after the writes): seal it, so that it can go as well.
		if err := s.sealOpen(ctx, open); err != nil {
			return st, err
		}
		if metas, err = s.loadMetas(); err != nil {
			return st, err
		}
		open = s.openSeg.Load()
	}
	var victims []uint64
	for seg, m := range metas {
		if m.state == stateSealed && seg < open && float64(live[seg]) < maxLive*float64(m.size) {
			victims = append(victims, seg)
		}
	}
	if len(victims) == 0 {
		return st, nil
	}
	slices.Sort(victims)
	// One more pass over the index finds the victims' chunks.
	ents := map[uint64][]moved{}
	for _, seg := range victims {
		ents[seg] = nil
	}
	if err := s.entries(ctx, nil, func(h chunk.Hash, loc location) bool {
		if e, ok := ents[loc.seg]; ok {
			ents[loc.seg] = append(e, moved{h, loc})
		}
		return true
	}); err != nil {
		return st, err
	}
	for _, seg := range victims {
		if err := s.compactSegment(ctx, seg, metas[seg], ents[seg], &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

type moved struct {
	h   chunk.Hash
	loc location
}

// compactSegment moves ents, the chunks of segment seg, into the open
// segment and removes seg.
func (s *Store) compactSegment(ctx context.Context, seg uint64, m segMeta, ents []moved, st *CompactStats) error {
	all := ents
	slices.SortFunc(ents, func(a, b moved) int { return int(a.loc.off - b.loc.off) })
	for len(ents) > 0 {
		var (
			batch []*Pending
			size  int
		)
		for len(ents) > 0 && (size == 0 || size+int(ents[0].loc.length) <= compactBatch) {
			e := ents[0]
			ents = ents[1:]
			data := make([]byte, e.loc.length)
			var hdr [recordHeaderSize]byte
			if err := s.readAt(seg, hdr[:], data, e.loc.off); err != nil {
				return fmt.Errorf("segment: compact %s: %w", segmentName(seg), err)
			}
			if err := verifyRead(hdr[:], e.h, e.loc.length, data); err != nil {
				// A damaged copy is not moved: the chunk stays where it
				// is, and so does its segment, for the repairer.
				s.log.Error("chunk failed its checksum during compaction; segment kept", "chunk", e.h, "segment", segmentName(seg), "err", err)
				return nil
			}
			p, err := s.relocate(e.h, e.loc, data)
			if err != nil {
				return err
			}
			batch = append(batch, p)
			size += len(data)
		}
		for _, p := range batch {
			if err := p.Wait(ctx); err != nil {
				return fmt.Errorf("segment: compact %s: %w", segmentName(seg), err)
			}
			if p.relocated {
				st.Moved++
				st.MovedBytes += recordHeaderSize + int64(p.from.length)
			}
		}
	}
	if err := s.removeSegment(seg, m, all); err != nil {
		return err
	}
	st.Segments++
	st.Freed += m.size
	return nil
}

// relocate queues a copy of chunk h, now at from, for the writer, which
// writes it to the open segment and points the index at it unless the
// entry has changed (deleted) meanwhile.
func (s *Store) relocate(h chunk.Hash, from location, data []byte) (*Pending, error) {
	rec := bufpool.Get(recordHeaderSize + len(data))
	encodeRecord(*rec, h, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unusableLocked(); err != nil {
		bufpool.Put(rec)
		return nil, err
	}
	p := &Pending{h: h, rec: rec, from: &from, done: make(chan struct{})}
	s.enqueueLocked(p)
	return p, nil
}

// sealOpen has the writer seal segment seg if it is still the open one.
func (s *Store) sealOpen(ctx context.Context, seg uint64) error {
	s.mu.Lock()
	if err := s.unusableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	p := &Pending{from: &location{seg: seg}, seal: true, done: make(chan struct{})}
	s.enqueueLocked(p)
	s.mu.Unlock()
	return p.Wait(ctx)
}

// removeSegment removes segment seg once none of ents, the chunks it held,
// is indexed there any more: the file first, then its bookkeeping (a
// crash between leaves a record of a missing file, which recovery drops).
func (s *Store) removeSegment(seg uint64, m segMeta, ents []moved) error {
	left := 0
	for _, e := range ents {
		switch cur, err := s.lookup(e.h); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		case cur.seg == seg:
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("segment: %s still holds %d indexed chunks after compaction", segmentName(seg), left)
	}
	s.files.Lock()
	f, df := s.files.m[seg], s.files.direct[seg]
	delete(s.files.m, seg)
	delete(s.files.direct, seg)
	s.files.Unlock()
	if f != nil {
		f.Close()
	}
	if df != nil {
		df.Close()
	}
	name := s.fs.PathJoin(s.o.Dir, segmentName(seg))
	if err := s.fs.Remove(name); err != nil {
		return fmt.Errorf("segment: remove %s: %w", name, err)
	}
	if err := syncDir(s.fs, s.o.Dir); err != nil {
		return fmt.Errorf("segment: sync %s: %w", s.o.Dir, err)
	}
	if err := s.db.Delete(segKey(seg), pebble.Sync); err != nil {
		return fmt.Errorf("segment: drop the bookkeeping of %s: %w", name, err)
	}
	s.gc.mu.Lock()
	delete(s.gc.written, seg)
	s.gc.mu.Unlock()
	s.stats.segments.Add(-1)
	s.stats.bytes.Add(-m.size)
	s.stats.chunks.Add(-m.records)
	s.log.Info("segment compacted away", "segment", name, "bytes", m.size)
	return nil
}
