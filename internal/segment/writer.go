package segment

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/bufpool"
	"github.com/cairn-db/cairn/internal/chunk"
)

// Pending is the outcome of a PutAsync. Several callers may share one
// Pending (concurrent Puts of the same hash) and Wait on it concurrently.
type Pending struct {
	h   chunk.Hash
	rec *[]byte // the encoded record, from bufpool or cached's block; given back once written
	// cached is the data cache's entry whose block holds rec (a large
	// chunk a client writes): the cache takes the chunk once it is
	// committed (datacache.go).
	cached *dataEntry
	done   chan struct{}
	err    error
	// from is set for a compaction's copy (relocate): the chunk's place
	// when it was read; relocated says the copy took its place.
	from      *location
	relocated bool
	// seal asks the writer to seal segment from.seg if it is still the
	// open one (Compact).
	seal bool
	// copies is the copies the chunk's writers want (copies.go), recorded
	// with its index entry; 0: none. Guarded by Store.mu: RaiseCopies
	// raises it while the chunk is in flight.
	copies int
}

// Wait blocks until the chunk is durable (nil) or the write failed, or ctx
// ends (ctx.Err(); the write itself goes on).
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the outcome is known; Err then returns it.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Err returns the outcome once Done is closed (nil before).
func (p *Pending) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

func finished(err error) *Pending {
	p := &Pending{done: make(chan struct{}), err: err}
	close(p.done)
	return p
}

// Put stores data under its hash h and returns once it is durable: the
// segment holding it has been fsync'd and its index entry committed with a
// synced pebble batch. Storing a chunk the store already has is a no-op.
// data must hash to h (ErrHashMismatch otherwise). Put does not retain
// data.
func (s *Store) Put(ctx context.Context, h chunk.Hash, data []byte) error {
	return s.PutAsync(h, data).Wait(ctx)
}

// PutAsync starts storing data under h and returns at once; Wait on the
// result for durability. data is copied before PutAsync returns, so the
// caller may reuse it immediately (a streaming writer can hand over a
// chunker's buffer). Hashing and checksumming run in the caller's
// goroutine; the writer goroutine only appends and syncs. Callers bound
// their own number of outstanding Pendings: the queue is not limited.
func (s *Store) PutAsync(h chunk.Hash, data []byte) *Pending {
	return s.putAsync(h, data, true, 0)
}

// PutAsyncHashed is PutAsync for a caller that computed h as chunk.Sum(data)
// itself, from these very bytes: it does not hash data again, which is
// PutAsync's one pass over data besides the copy and the record CRC. Data
// that comes from elsewhere (another node, a client) must go through
// PutAsync, which checks it. Should h be wrong all the same, Get reports
// the chunk as corrupt rather than return it.
func (s *Store) PutAsyncHashed(h chunk.Hash, data []byte) *Pending {
	return s.putAsync(h, data, false, 0)
}

// PutCopies is PutAsyncHashed for a chunk that wants copies copies in
// the cluster (1 to 255, see RaiseCopies): a new chunk's record of them
// goes in the batch that indexes it, and the store does not look for the
// chunk before queueing it (the writer does, once): a chunk this node
// writes for a client is almost always new, and each lookup of a hash
// the index lacks goes through pebble's memtables.
func (s *Store) PutCopies(h chunk.Hash, data []byte, copies int) *Pending {
	if copies < 1 || copies > 255 {
		return finished(fmt.Errorf("segment: %d copies of chunk %s", copies, h))
	}
	return s.putAsync(h, data, false, copies)
}

func (s *Store) putAsync(h chunk.Hash, data []byte, verify bool, copies int) *Pending {
	if len(data) > MaxChunkSize {
		return finished(fmt.Errorf("%w: %d bytes", ErrTooLarge, len(data)))
	}
	if p, err := s.shared(h, copies); p != nil || err != nil {
		if err != nil {
			return finished(err)
		}
		return p
	}
	// Fast dedup path; the writer checks again before appending. Both
	// touch the chunk they find (gc.go).
	if copies == 0 {
		if ok, err := s.touchHeld(h); err != nil {
			return finished(err)
		} else if ok {
			return finished(nil)
		}
	}
	if verify {
		if got := chunk.Sum(data); got != h {
			return finished(fmt.Errorf("%w: data hashes to %s, not %s", ErrHashMismatch, got, h))
		}
	}
	// A large chunk's record goes into a block of the data cache's,
	// which keeps the chunk once it is durable: a client reading back
	// what it just wrote (a large object is read in order, soon, if at
	// all) is then served from memory, and the copy is the one the
	// record needs anyway.
	// (Not for a chunk the store may hold already: its record will not
	// be written, and the block would push out other chunks for nothing.)
	var e *dataEntry
	if s.data != nil && len(data) > cachedRecord && (copies == 0 || !s.maybeHeld(h)) {
		e = s.data.reserve(h, recordHeaderSize+len(data))
	}
	var rec *[]byte
	if e != nil {
		rec = &e.bl.b
	} else {
		rec = bufpool.Get(recordHeaderSize + len(data))
	}
	encodeRecord(*rec, h, data)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unusableLocked(); err != nil {
		putRecord(rec, e)
		return finished(err)
	}
	if p := s.mu.inflight[h]; p != nil {
		putRecord(rec, e)
		p.copies = max(p.copies, copies)
		return p
	}
	p := &Pending{h: h, rec: rec, cached: e, done: make(chan struct{}), copies: copies}
	s.mu.inflight[h] = p
	s.enqueueLocked(p)
	return p
}

// putRecord gives back a record's memory: to the data cache, when it is
// the block of entry e, or to bufpool.
func putRecord(rec *[]byte, e *dataEntry) {
	if e != nil {
		e.pin.Release()
		return
	}
	bufpool.Put(rec)
}

// enqueueLocked hands p to the writer goroutine; s.mu is held.
func (s *Store) enqueueLocked(p *Pending) {
	s.mu.queue = append(s.mu.queue, p)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// shared returns the in-flight Pending for h, if any, which now also asks
// for copies copies, or the reason the store cannot take writes.
func (s *Store) shared(h chunk.Hash, copies int) (*Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unusableLocked(); err != nil {
		return nil, err
	}
	p := s.mu.inflight[h]
	if p != nil {
		p.copies = max(p.copies, copies)
	}
	return p, nil
}

func (s *Store) unusableLocked() error {
	if s.mu.closed {
		return ErrClosed
	}
	if s.mu.failed != nil {
		return fmt.Errorf("segment: store failed earlier: %w", s.mu.failed)
	}
	return nil
}

// run is the writer goroutine: it takes every queued chunk, appends them
// and syncs once (group commit), then hands the batch's index entries to
// the committer goroutine, which commits them in one synced batch and
// releases the batch's waiters. The two overlap: a batch's data is
// written and synced while the one before it commits its index (each an
// fsync, ~4–5 ms apiece under VOSD's load here, docs/benchmarks.md), and
// the index batches commit in the order their data was written.
func (s *Store) run() {
	commits := make(chan *indexCommit, 1)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		var failed error // an index commit's failure: every later batch's
		for ic := range commits {
			if ic.err == nil {
				ic.err = failed
			}
			if err := s.finishCommit(ic); err != nil && failed == nil {
				failed = err
			}
		}
	}()
	defer func() {
		close(commits)
		<-committed
		close(s.done)
	}()
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			// Writes queued before Close still complete.
			for s.commitQueued(commits) {
			}
			return
		}
		s.commitQueued(commits)
	}
}

// commitQueued writes one batch and passes it on to the committer; it
// reports whether there was one.
func (s *Store) commitQueued(commits chan<- *indexCommit) bool {
	s.mu.Lock()
	batch := s.mu.queue
	s.mu.queue = nil
	failed := s.mu.failed
	s.mu.Unlock()
	if len(batch) == 0 {
		return false
	}
	ic := &indexCommit{err: failed}
	if failed == nil {
		var err error
		if ic, err = s.commit(batch); err != nil {
			s.fail(err)
			ic = &indexCommit{err: err}
		}
	}
	ic.batch = batch
	commits <- ic
	return true
}

// fail records err, a write's failure, as the store's: every later write
// fails with it.
func (s *Store) fail(err error) {
	s.log.Error("segment write failed; refusing further writes", "err", err)
	s.mu.Lock()
	if s.mu.failed == nil {
		s.mu.failed = err
	}
	s.mu.Unlock()
}

// indexCommit is a written batch on its way to the committer: its index
// entries (b; nil when it wrote nothing), what to do once they are
// committed, and its waiters.
type indexCommit struct {
	b       *pebble.Batch
	wrote   []written // the index entries, for the cache once committed
	held    []written // chunks held already whose writers want copies
	records int64
	bytes   int64 // the records' bytes and the padding written
	batch   []*Pending
	err     error // the batch's failure, or the store's before it
}

// finishCommit commits ic's index entries (unless the batch failed, or an
// index commit before it: a later batch's failure, on the writer, does
// not fail this one, whose data is durable) and releases its waiters. It
// returns the index commit's failure.
func (s *Store) finishCommit(ic *indexCommit) (cerr error) {
	err := ic.err
	if err == nil && ic.b != nil {
		if err = s.commitIndex(ic); err != nil {
			s.fail(err)
			cerr = err
		}
	} else if err == nil {
		s.raiseHeld(ic.held)
	}
	if ic.b != nil {
		ic.b.Close()
	}
	s.mu.Lock()
	for _, p := range ic.batch {
		if s.mu.inflight[p.h] == p { // (a compaction's copy is not in it)
			delete(s.mu.inflight, p.h)
		}
	}
	s.mu.Unlock()
	// Waiters are released only after the inflight entries are gone, so a
	// later Put of the same hash finds it in the index.
	for _, p := range ic.batch {
		p.err = err
		putRecord(p.rec, p.cached) // (both nil if the cache took it)
		p.rec, p.cached = nil, nil
		close(p.done)
	}
	return cerr
}

// written is an index entry a group commit makes, or a chunk it found
// held already whose writers want copies (p nil).
type written struct {
	h      chunk.Hash
	loc    location
	epoch  uint64   // of h's cache shard, for the fill
	depoch uint64   // of h's data cache shard, for p.cached's fill
	p      *Pending // the write
	copies int      // the copies recorded
}

// raiseHeld records the copies wanted of chunks held already (as
// RaiseCopies does). A failure fails no write (as in package object's
// PutChunk): the repairer uses its default.
func (s *Store) raiseHeld(held []written) {
	for _, w := range held {
		if err := s.RaiseCopies(w.h, w.copies); err != nil {
			s.log.Warn("could not record the copies wanted of a chunk; the repairer will use its default", "chunk", w.h, "err", err)
		}
	}
}

// pendingCopies reads p.copies.
func (s *Store) pendingCopies(p *Pending) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.copies
}

// commit appends batch to the open segment (rotating as needed) and syncs
// it, and returns the index entries to commit (commitIndex). Chunks
// already indexed are skipped.
func (s *Store) commit(batch []*Pending) (_ *indexCommit, err error) {
	b := s.db.NewBatch()
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	var records, bytes int64
	a := &s.w.app
	pads := a.pads
	segs := []uint64{s.w.seg}
	sealed := false
	var wrote []written // the index entries, for the cache once committed
	var held []written  // chunks held already whose writers want copies
	for _, p := range batch {
		if p.seal {
			// Compact asks for the open segment to be sealed, to compact it.
			if s.w.seg == p.from.seg && s.w.records > 0 {
				if err := s.rotate(b); err != nil {
					return nil, err
				}
				segs = append(segs, s.w.seg)
				sealed = true
			}
			continue
		}
		if p.from != nil {
			// A compaction's copy goes in only if the chunk is still
			// where compaction read it.
			switch cur, err := s.lookup(p.h); {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return nil, err
			case cur != *p.from:
				continue
			}
			p.relocated = true
		} else if ok, err := s.touchHeld(p.h); err != nil {
			return nil, err
		} else if ok {
			if c := s.pendingCopies(p); c > 0 {
				held = append(held, written{h: p.h, copies: c})
			}
			continue
		}
		rec := *p.rec
		// Rotate if the record and the padding after it would pass the
		// segment size (a segment's first record goes in whatever its
		// size).
		if padTo(a.tail()+int64(len(rec))) > s.o.SegmentSize && s.w.records > 0 {
			if err := s.rotate(b); err != nil {
				return nil, err
			}
			segs = append(segs, s.w.seg)
		}
		loc := location{seg: s.w.seg, off: a.tail(), length: uint32(len(rec) - recordHeaderSize)}
		if err := a.add(rec); err != nil {
			return nil, err
		}
		s.w.records++
		records++
		bytes += int64(len(rec))
		if err := b.Set(indexKey(p.h), loc.encode(), nil); err != nil {
			return nil, err
		}
		w := written{h: p.h, loc: loc, p: p}
		if p.from == nil {
			if w.copies = s.pendingCopies(p); w.copies > 0 {
				if err := b.Set(copiesKey(p.h), []byte{copiesVersion, byte(w.copies)}, nil); err != nil {
					return nil, err
				}
			}
		}
		wrote = append(wrote, w)
	}
	if records == 0 && !sealed {
		b.Close()
		return &indexCommit{held: held}, nil
	}
	if err := a.finish(); err != nil {
		return nil, err
	}
	// The data must be durable before the index entries that point at it.
	if err := a.f.SyncData(); err != nil {
		return nil, fmt.Errorf("segment: sync %s: %w", segmentName(s.w.seg), err)
	}
	meta := segMeta{state: stateOpen, size: a.tail(), records: s.w.records}
	if err := b.Set(segKey(s.w.seg), meta.encode(), nil); err != nil {
		return nil, err
	}
	// The chunks count as touched now (gc.go) before the index shows them.
	// The cache learns the entries as a lookup does (locCache): with the
	// epochs read under the collector's lock, before the commit, so that
	// a Delete that decides on one of these chunks after that (a
	// compaction's copy whose old place was garbage) and commits after
	// this batch keeps the cache from showing it.
	s.gc.mu.Lock()
	now := s.now()
	for _, seg := range segs {
		s.gc.written[seg] = now
	}
	for i := range wrote {
		if s.locs != nil {
			wrote[i].epoch = s.locs.epoch(wrote[i].h)
		}
		if wrote[i].p.cached != nil {
			wrote[i].depoch = s.data.epoch(wrote[i].h)
		}
	}
	s.gc.mu.Unlock()
	// The padding of every segment this batch wrote to, a sealed one too.
	return &indexCommit{b: b, wrote: wrote, held: held, records: records, bytes: bytes + a.pads - pads}, nil
}

// commitIndex commits a written batch's index entries, on the committer
// goroutine, and then fills the cache, raises the copies asked for
// meanwhile and counts the batch.
func (s *Store) commitIndex(ic *indexCommit) error {
	// The filters learn the hashes before the index shows them (filter.go).
	s.filter.mu.Lock()
	s.filterAdd(ic.wrote)
	err := ic.b.Commit(pebble.Sync)
	s.filter.mu.Unlock()
	if err != nil {
		return fmt.Errorf("segment: commit index: %w", err)
	}
	if f := s.filter.cur.Load(); f == nil || f.full() {
		s.buildFilter() // (nil: the first build is under way, or failed)
	}
	if s.locs != nil {
		for _, w := range ic.wrote {
			s.locs.fill(w.h, w.loc, w.epoch)
		}
	}
	// The data cache takes the large chunks just written, whose records
	// are in its blocks already.
	for _, w := range ic.wrote {
		if e := w.p.cached; e != nil {
			rec := *w.p.rec
			e.b = rec[recordHeaderSize:len(rec):len(rec)]
			w.p.rec, w.p.cached = nil, nil
			s.data.fill(e, w.depoch)
		}
	}
	// Copies asked for while the batch was built (RaiseCopies of a chunk
	// in flight), and by writes of chunks already held, go in as
	// RaiseCopies does.
	held := ic.held
	for _, w := range ic.wrote {
		if w.copies > 0 {
			if c := s.pendingCopies(w.p); c > w.copies {
				held = append(held, written{h: w.h, copies: c})
			}
		}
	}
	s.raiseHeld(held)
	s.stats.chunks.Add(ic.records)
	s.stats.bytes.Add(ic.bytes)
	return nil
}

// rotate seals the open segment and starts the next one. The seal is
// recorded in b, which the caller commits after the new segment's records;
// until then recovery treats the old segment as unsealed and rescans it.
func (s *Store) rotate(b *pebble.Batch) error {
	a := &s.w.app
	if err := a.finish(); err != nil {
		return err
	}
	if err := a.f.SyncData(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", segmentName(s.w.seg), err)
	}
	meta := segMeta{state: stateSealed, size: a.tail(), records: s.w.records}
	if err := b.Set(segKey(s.w.seg), meta.encode(), nil); err != nil {
		return err
	}
	return s.startSegment(s.w.seg + 1)
}

// startSegment creates segment seg with its header (padded to a block),
// syncs it and the directory, and makes it the open segment.
func (s *Store) startSegment(seg uint64) error {
	name := s.fs.PathJoin(s.o.Dir, segmentName(seg))
	f, err := s.fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("segment: create %s: %w", name, err)
	}
	a := &s.w.app
	err = func() error {
		a.reset(f, s.openDirect(name), name, 0)
		if err := a.add(headerBlock(seg)); err != nil {
			return err
		}
		if err := a.finish(); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return syncDir(s.fs, s.o.Dir)
	}()
	if err != nil {
		a.reset(nil, nil, "", 0)
		f.Close()
		return fmt.Errorf("segment: create %s: %w", name, err)
	}
	s.files.Lock()
	s.files.m[seg] = f
	s.files.Unlock()
	s.w.seg, s.w.records = seg, 0
	s.openSeg.Store(seg)
	s.stats.segments.Add(1)
	s.stats.bytes.Add(a.tail())
	return nil
}

// openDirect opens the segment file name for O_DIRECT appends when it is on
// the real disk and the file system allows it; nil means "write through
// the page cache". Appending this way spares a copy of every byte into the
// page cache (and the memory to hold it) for data a node rarely reads back
// soon; reads still go through the page cache.
func (s *Store) openDirect(name string) *os.File {
	if s.fs != vfs.Default || s.w.app.noDirect {
		return nil
	}
	f, err := openDirect(name)
	if err != nil {
		s.w.app.noDirect = true
		s.log.Info("segment files are written through the page cache: O_DIRECT refused", "dir", s.o.Dir, "err", err)
		return nil
	}
	return f
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
