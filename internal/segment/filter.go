package segment

import (
	"context"
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
)

// heldFilter is a Bloom filter over the chunk index's hashes: has(h)
// false means the index does not hold h, without reading it. A write of
// new bytes asks the index about a chunk it does not hold (the dedup
// check), and that answer is the dearest lookup there is: a seek through
// every memtable (which hold the raft log and the versions too) and the
// tables' filters — 9% of the server's CPU in VOSD's workload, on the
// writer goroutine every Put waits for (docs/benchmarks.md).
//
// Hashes are only added: a deleted chunk stays in the filter (has says
// "perhaps", and the index answers) until the next build, which starts
// from the index as it is. Bits are set atomically, so lookups take no
// lock.
type heldFilter struct {
	words []atomic.Uint64
	nbits uint64
	max   int64 // the entries it was sized for
	n     atomic.Int64
}

const (
	filterBitsPerEntry = 10
	filterProbes       = 7
	// filterMinEntries is the least a filter is sized for (1.25 MiB): a
	// new store's filter need not grow for a while.
	filterMinEntries = 1 << 20
	// filterRetry is how long after a failed build the next may start.
	filterRetry = time.Minute
)

// newHeldFilter returns a filter of 10 bits per entry for entries: at
// 100 million chunks (~100 TB in 1 MiB chunks), 125 MB, and during a
// rebuild the new one's too.
func newHeldFilter(entries int64) *heldFilter {
	entries = max(entries, 1)
	words := (entries*filterBitsPerEntry + 63) / 64
	return &heldFilter{words: make([]atomic.Uint64, words), nbits: uint64(words) * 64, max: entries}
}

// probe is h's i-th bit position: double hashing over two words of h, a
// BLAKE3 hash (uniform already), mapped onto the bits by multiplying
// (Lemire's reduction: no division, any size).
func (f *heldFilter) probe(h chunk.Hash, i uint64) uint64 {
	a := binary.LittleEndian.Uint64(h[8:16])
	b := binary.LittleEndian.Uint64(h[16:24]) | 1
	hi, _ := bits.Mul64(a+i*b, f.nbits)
	return hi
}

func (f *heldFilter) add(h chunk.Hash) {
	for i := range uint64(filterProbes) {
		p := f.probe(h, i)
		f.words[p/64].Or(1 << (p % 64))
	}
	f.n.Add(1)
}

func (f *heldFilter) has(h chunk.Hash) bool {
	for i := range uint64(filterProbes) {
		p := f.probe(h, i)
		if f.words[p/64].Load()&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// full reports whether f holds more entries than it was sized for (its
// false positives then climb): time for a larger one.
func (f *heldFilter) full() bool { return f.n.Load() > f.max }

// filters are the store's Bloom filters: cur answers lookups once built
// (nil before: every lookup reads the index); next is being built from
// the index, and every chunk the writer indexes meanwhile goes into both.
//
// Why a built filter holds every hash the index holds: the writer adds a
// batch's hashes to the filters it sees before committing the batch, all
// under mu; a build installs next under mu, so a batch that did not see
// next has committed before the build's scan of the index opens its
// iterator, and the scan finds its entries; recovery's entries are in the
// index before the first build starts; a compaction's copy moves an entry
// the index already holds.
type filters struct {
	mu       sync.Mutex
	cur      atomic.Pointer[heldFilter]
	next     atomic.Pointer[heldFilter]
	building bool
	builds   int       // filters built, for the tests
	retry    time.Time // after a failed build: no other before it
	min      int64     // filterMinEntries; smaller in tests
	wg       sync.WaitGroup
}

// maybeHeld reports whether the index may hold h: false only when the
// filter is built and says no.
func (s *Store) maybeHeld(h chunk.Hash) bool {
	f := s.filter.cur.Load()
	return f == nil || f.has(h)
}

// filterAdd adds the hashes of a batch the writer is about to commit to
// the filters; s.filter.mu is held.
func (s *Store) filterAdd(wrote []written) {
	for _, f := range []*heldFilter{s.filter.cur.Load(), s.filter.next.Load()} {
		if f == nil {
			continue
		}
		for _, w := range wrote {
			f.add(w.h)
		}
	}
}

// buildFilter starts building a filter from the index in the background,
// unless one is being built or the last failed within filterRetry: at
// Open, and after an index commit when there is none or the current one
// is full. The new one is sized for half again the chunks the store
// holds.
func (s *Store) buildFilter() {
	s.filter.mu.Lock()
	defer s.filter.mu.Unlock()
	if s.filter.building || time.Now().Before(s.filter.retry) {
		return
	}
	min := s.filter.min
	if min == 0 {
		min = filterMinEntries
	}
	n := s.stats.chunks.Load()
	nf := newHeldFilter(max(n+n/2, min))
	s.filter.next.Store(nf)
	s.filter.building = true
	s.filter.wg.Add(1)
	go func() {
		defer s.filter.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		// The iterator opens after next was installed (above, under mu).
		err := s.entries(ctx, nil, func(h chunk.Hash, _ location) bool {
			nf.add(h)
			return true
		})
		s.filter.mu.Lock()
		defer s.filter.mu.Unlock()
		s.filter.next.Store(nil)
		s.filter.building = false
		if err != nil {
			if ctx.Err() == nil {
				s.filter.retry = time.Now().Add(filterRetry)
				s.log.Warn("could not build the chunk index filter; lookups read the index until a build succeeds", "err", err, "retry", filterRetry)
			}
			return
		}
		s.filter.cur.Store(nf)
		s.filter.builds++
	}()
}
