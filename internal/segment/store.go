package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// MaxChunkSize is the largest chunk Put accepts.
const MaxChunkSize = chunk.MaxChunkSize

var (
	// ErrNotFound is returned by Get when the store holds no chunk with the
	// hash.
	ErrNotFound = errors.New("segment: chunk not found")
	// ErrCorrupt is returned (wrapped, with detail) when stored bytes fail
	// their checksum or hash, or a format field is invalid. Get never
	// returns wrong bytes: it returns ErrCorrupt instead.
	ErrCorrupt = errors.New("segment: corrupt")
	// ErrHashMismatch is returned by Put when data does not hash to h.
	ErrHashMismatch = errors.New("segment: data does not match its hash")
	// ErrTooLarge is returned by Put for data over MaxChunkSize.
	ErrTooLarge = errors.New("segment: chunk too large")
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("segment: store closed")

	errSegmentGone = errors.New("segment: segment file removed")
)

// Options configures Open. The zero value of every field but Dir and DB
// means its default.
type Options struct {
	// Dir is the directory of the segment files. Required.
	Dir string
	// FS is the disk seam. Default: vfs.Default (the real disk).
	FS vfs.FS
	// DB holds the chunk index and segment bookkeeping (under
	// storage.PrefixChunkIndex and storage.PrefixSegment). Required; owned
	// by the caller, who must close it after the Store.
	DB *pebble.DB
	// SegmentSize is the size at which the open segment is sealed and a new
	// one started. A chunk larger than it gets a segment of its own.
	// Default: 256 MiB.
	SegmentSize int64
	// Logger receives recovery and failure reports. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock chunk touches are taken by (gc.go). Default:
	// time.Now.
	Now func() time.Time
	// IndexCache is how many chunk index entries the store keeps in
	// memory (loccache.go); negative: none. Default: DefaultIndexCache.
	IndexCache int
	// DataCache is the memory, in bytes, of the cache of chunks read and
	// verified (datacache.go); zero or negative: none.
	DataCache int64
	// PopulateCache faults all of the cache's memory in from the start,
	// at low priority (see populate): a server's choice, not that of
	// tests running many stores in one process.
	PopulateCache bool

	// filterMin overrides filterMinEntries (tests).
	filterMin int64
}

// DefaultSegmentSize is the default Options.SegmentSize.
const DefaultSegmentSize = 256 << 20

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IndexCache == 0 {
		o.IndexCache = DefaultIndexCache
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("segment: Dir is required"))
	}
	if o.DB == nil {
		errs = append(errs, errors.New("segment: DB is required"))
	}
	if o.SegmentSize < 4096 {
		errs = append(errs, fmt.Errorf("segment: SegmentSize %d is below 4096", o.SegmentSize))
	}
	return errors.Join(errs...)
}

// Stats are approximate counters for metrics.
type Stats struct {
	// Segments is the number of segment files, the open one included.
	Segments int
	// Bytes is the total size of the segment files.
	Bytes int64
	// Chunks is the number of chunk records in the segment files, live
	// or not (garbage is counted until compaction removes its segment).
	Chunks int64
}

// Store is a node's chunk store: append-only segment files plus a chunk
// index in pebble. All methods are safe for concurrent use; reads run
// concurrently with the writer.
type Store struct {
	o   Options
	db  *pebble.DB
	fs  vfs.FS
	log *slog.Logger

	// copiesMu serializes RaiseCopies' read and write (copies.go).
	copiesMu sync.Mutex

	// files holds an open handle for every segment, for ReadAt. The writer
	// adds to it on rotation; Close empties it.
	files struct {
		sync.RWMutex
		m map[uint64]vfs.File
		// direct holds the segments opened for O_DIRECT reads
		// (readDirect), opened on a segment's first large read.
		direct map[uint64]*os.File
		// noDirect is set once a direct open or read was refused: from
		// then on every read goes through the page cache.
		noDirect atomic.Bool
	}

	mu struct {
		sync.Mutex
		queue    []*Pending
		inflight map[chunk.Hash]*Pending
		closed   bool
		// failed is the first write error; once set every Put fails with
		// it (after a failed fsync the file's state is unknown).
		failed error
	}
	wake      chan struct{} // capacity 1: "the queue is not empty"
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// w is owned by the writer goroutine (by Open before it starts).
	w struct {
		seg     uint64
		records int64
		app     appender
	}

	// locs caches index entries (loccache.go); nil: none.
	locs *locCache
	// data caches verified chunks (datacache.go); nil: none.
	data *dataCache
	// filter answers lookups of chunks the index does not hold
	// (filter.go).
	filter filters

	// gc holds the chunks' touches (gc.go); openSeg is the open segment's
	// number, for Compact.
	gc      gcState
	openSeg atomic.Uint64

	stats struct {
		segments atomic.Int64
		bytes    atomic.Int64
		chunks   atomic.Int64
		lookups  atomic.Int64
		skips    atomic.Int64
	}
}

// Open opens the store in o.Dir, creating it if needed, and recovers the
// open segment (see the package doc). It starts the writer goroutine, which
// Close stops.
func Open(o Options) (*Store, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		o:    o,
		db:   o.DB,
		fs:   o.FS,
		log:  o.Logger.With("component", "segment"),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.files.m = map[uint64]vfs.File{}
	s.files.direct = map[uint64]*os.File{}
	s.mu.inflight = map[chunk.Hash]*Pending{}
	if o.IndexCache > 0 {
		s.locs = newLocCache(o.IndexCache)
	}
	if o.DataCache > 0 {
		var err error
		if s.data, err = newDataCache(o.DataCache, o.PopulateCache); err != nil {
			// (A system that commits no more memory than it has, say.)
			s.log.Warn("no chunk cache: its memory could not be mapped; set a smaller --chunk-cache", "bytes", o.DataCache, "err", err)
		} else if s.data != nil && s.data.arena.size != o.DataCache {
			s.log.Info("chunk cache memory rounded down to whole blocks", "asked", o.DataCache, "bytes", s.data.arena.size)
		}
	}
	s.gc.openedAt = s.now()
	s.gc.touched = map[chunk.Hash]int64{}
	s.gc.written = map[uint64]int64{}
	s.w.app = newAppender(s.log)
	if err := s.recover(); err != nil {
		s.w.app.closeDirect()
		s.closeFiles()
		if s.data != nil {
			s.data.close()
		}
		return nil, err
	}
	s.filter.min = o.filterMin
	s.buildFilter()
	go s.run()
	return s, nil
}

// Close stops accepting writes, waits for queued writes to become durable
// and the writer goroutine to exit, and closes the segment files. It is
// idempotent. It does not close the DB.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.done
		s.filter.wg.Wait()
		s.w.app.closeDirect()
		err = s.closeFiles()
		if s.data != nil {
			s.data.close()
		}
	})
	return err
}

func (s *Store) closeFiles() error {
	s.files.Lock()
	defer s.files.Unlock()
	var errs []error
	for seg, f := range s.files.m {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("segment: close %s: %w", segmentName(seg), err))
		}
	}
	s.files.m = map[uint64]vfs.File{}
	for _, f := range s.files.direct {
		f.Close() // read-only: nothing to lose
	}
	s.files.direct = map[uint64]*os.File{}
	return errors.Join(errs...)
}

// Has reports whether the store's index holds h.
func (s *Store) Has(h chunk.Hash) (bool, error) {
	_, err := s.lookup(h)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// cachedHas is Has through the index cache (see locCache for when it
// may answer true for a chunk just deleted).
func (s *Store) cachedHas(h chunk.Hash) (bool, error) {
	_, err := s.cachedLookup(h)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// cachedLookup is lookup through the index cache, filling it, and the
// filter (filter.go).
func (s *Store) cachedLookup(h chunk.Hash) (location, error) {
	if s.locs != nil {
		if loc, ok := s.locs.get(h); ok {
			return loc, nil
		}
	}
	if !s.maybeHeld(h) {
		s.stats.skips.Add(1)
		return location{}, ErrNotFound
	}
	if s.locs == nil {
		return s.lookup(h)
	}
	e := s.locs.epoch(h)
	loc, err := s.lookup(h)
	if err == nil {
		s.locs.fill(h, loc, e)
	}
	return loc, err
}

// lookup reads h's entry in the index itself.
func (s *Store) lookup(h chunk.Hash) (location, error) {
	s.stats.lookups.Add(1)
	v, c, err := s.db.Get(indexKey(h))
	if errors.Is(err, pebble.ErrNotFound) {
		return location{}, ErrNotFound
	}
	if err != nil {
		return location{}, fmt.Errorf("segment: index lookup %s: %w", h, err)
	}
	defer c.Close()
	return decodeLocation(v)
}

// Get returns the chunk with hash h, verified: its record header against
// the format and the index, its data against h (see verifyRead), or taken
// from the cache of chunks verified before (datacache.go), which it does
// not fill (View does). It returns ErrNotFound if the store does not hold
// it and an error wrapping ErrCorrupt if the stored bytes are damaged. The
// result uses dst's storage when cap(dst) suffices and is owned by the
// caller.
func (s *Store) Get(ctx context.Context, h chunk.Hash, dst []byte) ([]byte, error) {
	if s.data != nil {
		if b, pin, _, ok := s.data.get(h); ok {
			defer pin.Release()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return append(dst[:0], b...), nil
		}
	}
	// Not put in the cache: Get's readers (the repairer, other nodes'
	// reads of their copies) are not this node's clients, and would push
	// out what they read.
	return s.read(ctx, h, dst, nil)
}

// View is Get without a copy: the bytes it returns may be shared with the
// cache and other readers, and must not be modified. They stay valid
// until the caller releases the pin returned with them (see chunk.Pin;
// nil for memory that is not the cache's); it must, once, whatever it
// holds them for.
func (s *Store) View(ctx context.Context, h chunk.Hash) ([]byte, *chunk.Pin, error) {
	if s.data == nil {
		b, err := s.read(ctx, h, nil, nil)
		return b, nil, err
	}
	b, pin, ep, ok := s.data.get(h)
	if ok {
		if err := ctx.Err(); err != nil {
			pin.Release()
			return nil, nil, err
		}
		return b, pin, nil
	}
	// Read into a block of the cache's, reserved for it.
	var e *dataEntry
	into := func(n int) []byte {
		if e != nil { // read again (the chunk moved, or not directly)
			e.pin.Release()
		}
		if e = s.data.reserve(h, n); e == nil {
			return nil
		}
		return e.bl.b
	}
	b, err := s.read(ctx, h, nil, into)
	if e == nil {
		return b, nil, err
	}
	if err != nil {
		e.pin.Release()
		return nil, nil, err
	}
	// (read's bytes lie in the memory its last request got: e's block.)
	e.b = b[:len(b):len(b)]
	e.markVerified()
	e.pin.Retain() // the caller's
	s.data.fill(e, ep)
	return e.b, e.pin, nil
}

// read reads the chunk with hash h from its segment and verifies it (see
// Get), into dst's storage when cap(dst) suffices, else into memory from
// into (n bytes, block-aligned; nil from it, or no into, means memory of
// read's own). A large record with no dst is read with O_DIRECT where the
// disk allows it (readDirect).
func (s *Store) read(ctx context.Context, h chunk.Hash, dst []byte, into func(n int) []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	loc, err := s.cachedLookup(h)
	if err != nil {
		return nil, err
	}
	alloc := func(n int, aligned bool) []byte {
		if into != nil {
			if b := into(n); b != nil {
				return b
			}
		}
		if aligned {
			return alignedBuf(n)
		}
		return make([]byte, n)
	}
	var hdr [recordHeaderSize]byte
	notDirect := false
	for {
		n := int(loc.length)
		direct := dst == nil && n > cachedRecord && s.fs == vfs.Default && !notDirect && !s.files.noDirect.Load()
		buf := dst
		if !direct {
			if cap(buf) >= n {
				buf = buf[:n]
			} else {
				buf = alloc(n, false)
			}
		}
		var err error
		if direct {
			var data []byte
			if data, err = s.readDirect(loc.seg, hdr[:], n, loc.off, alloc); err == nil && data == nil {
				// Not read directly (see readDirect): through the page
				// cache.
				notDirect = true
				continue
			}
			buf = data
		} else {
			err = s.readAt(loc.seg, hdr[:], buf, loc.off)
		}
		if err == nil {
			if err := verifyRead(hdr[:], h, loc.length, buf); err != nil {
				return nil, fmt.Errorf("segment: get %s at %s:%d: %w", h, segmentName(loc.seg), loc.off, err)
			}
			return buf, nil
		}
		if errors.Is(err, errSegmentGone) {
			// Compaction moved the chunk and removed the file since the
			// lookup (or since the cache learnt where it was): look again
			// in the index.
			if s.locs != nil {
				s.locs.drop(h)
			}
			now, lerr := s.cachedLookup(h)
			if lerr == nil && now != loc {
				loc = now
				continue
			}
			if errors.Is(lerr, ErrNotFound) {
				return nil, lerr // deleted, then its segment compacted away
			}
			err = fmt.Errorf("%w: index names missing segment %s", ErrCorrupt, segmentName(loc.seg))
		}
		return nil, fmt.Errorf("segment: get %s: %w", h, err)
	}
}

// readAt reads a record's header and data at off in segment seg.
func (s *Store) readAt(seg uint64, hdr, data []byte, off int64) error {
	s.files.RLock()
	defer s.files.RUnlock()
	f, ok := s.files.m[seg]
	if !ok {
		if s.isClosed() {
			return ErrClosed
		}
		return errSegmentGone
	}
	if len(data) > 0 && readRecord(f, hdr, data, off) {
		return nil
	}
	if _, err := f.ReadAt(hdr, off); err != nil {
		return readErr(err)
	}
	if len(data) > 0 {
		if _, err := f.ReadAt(data, off+recordHeaderSize); err != nil {
			return readErr(err)
		}
	}
	return nil
}

// readDirect reads the record of n data bytes at off in segment seg with
// O_DIRECT: the blocks around it, in one read, into block-aligned memory
// from alloc, without a copy into (or out of) the page cache. It copies
// the header into hdr and returns the data, which lies in that memory (a
// block or two more than the record). Large chunks
// are written with O_DIRECT too (append.go), so they are not in the page
// cache to begin with; the data cache keeps the hot ones. It returns nil
// and no error when the segment could not be read directly
// (openDirectFile; a read the file system refuses stops all further
// tries).
func (s *Store) readDirect(seg uint64, hdr []byte, n int, off int64, alloc func(n int, aligned bool) []byte) ([]byte, error) {
	// Read under the lock, as readAt does, so compaction does not close
	// the file during the read.
	s.files.RLock()
	f, ok := s.files.direct[seg]
	if !ok {
		s.files.RUnlock()
		if opened, err := s.openDirectFile(seg); !opened || err != nil {
			return nil, err
		}
		s.files.RLock()
		f, ok = s.files.direct[seg]
	}
	defer s.files.RUnlock()
	if !ok { // compacted away, or the store closed, since it was opened
		if s.isClosed() {
			return nil, ErrClosed
		}
		return nil, errSegmentGone
	}
	start := off &^ (blockSize - 1)
	end := off + recordHeaderSize + int64(n)
	buf := alloc(int((end-start+blockSize-1)&^(blockSize-1)), true)
	got, err := f.ReadAt(buf, start)
	if int64(got) < end-start {
		if errors.Is(err, io.EOF) {
			return nil, readErr(io.ErrUnexpectedEOF)
		}
		if errors.Is(err, syscall.EINVAL) {
			s.files.noDirect.Store(true)
			s.log.Info("chunks are read through the page cache: O_DIRECT reads refused", "dir", s.o.Dir, "err", err)
			return nil, nil
		}
		return nil, readErr(err)
	}
	rec := buf[off-start : end-start : end-start]
	copy(hdr, rec)
	return rec[recordHeaderSize:], nil
}

// openDirectFile opens segment seg for O_DIRECT reads, if no reader has
// yet. It reports false and no error when the open failed: refused by the
// file system (then no read tries again), or for a reason of the moment
// (out of descriptors, say: this read goes through the page cache).
func (s *Store) openDirectFile(seg uint64) (bool, error) {
	s.files.Lock()
	defer s.files.Unlock()
	if _, ok := s.files.direct[seg]; ok {
		return true, nil
	}
	if _, held := s.files.m[seg]; !held {
		if s.isClosed() {
			return false, ErrClosed
		}
		return false, errSegmentGone
	}
	f, err := openDirectRead(s.fs.PathJoin(s.o.Dir, segmentName(seg)))
	if err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, errors.ErrUnsupported) {
			if !s.files.noDirect.Swap(true) {
				s.log.Info("chunks are read through the page cache: O_DIRECT refused", "dir", s.o.Dir, "err", err)
			}
		}
		return false, nil
	}
	s.files.direct[seg] = f
	return true, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

// Err returns the error that stopped the store taking writes (a failed
// append or fsync), or nil. Reads go on; writes resume only after the
// store is reopened (and recovery has looked at the file).
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

// Stats returns approximate counters.
func (s *Store) Stats() Stats {
	return Stats{
		Segments: int(s.stats.segments.Load()),
		Bytes:    s.stats.bytes.Load(),
		Chunks:   s.stats.chunks.Load(),
	}
}

// CacheStats are the chunk cache's counters (Options.DataCache): Bytes
// of the chunks it holds, Used of its memory in use (those chunks, and
// the blocks of chunks it let go that readers still hold, of reads under
// way and of writes in flight), Hits and Misses of reads.
type CacheStats struct {
	Bytes, Used, Hits, Misses int64
}

// DataCacheStats returns the chunk cache's counters; zero without one.
func (s *Store) DataCacheStats() CacheStats {
	if s.data == nil {
		return CacheStats{}
	}
	b, h, m := s.data.stats()
	return CacheStats{Bytes: b, Used: s.data.arena.used(), Hits: h, Misses: m}
}

// Lookups returns how many lookups read the chunk index itself, and how
// many of chunks it does not hold the filter answered without it
// (filter.go).
func (s *Store) Lookups() (index, skipped int64) {
	return s.stats.lookups.Load(), s.stats.skips.Load()
}

// readErr classifies a failed ReadAt: a record cut short is corruption;
// anything else is an I/O error, passed on.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: record cut short: %v", ErrCorrupt, err)
	}
	return fmt.Errorf("segment: read: %w", err)
}

// Chunks calls fn with the hash and length of every chunk in the index, in
// hash order, starting after the hash after (nil: from the first), until fn
// returns false or ctx ends. It reads one consistent view of the index.
func (s *Store) Chunks(ctx context.Context, after *chunk.Hash, fn func(h chunk.Hash, length uint32) bool) error {
	return s.entries(ctx, after, func(h chunk.Hash, loc location) bool { return fn(h, loc.length) })
}

// indexEnd bounds the chunk index from above.
var indexEnd = func() []byte {
	b := []byte(storage.PrefixChunkIndex)
	b[len(b)-1]++
	return b
}()
