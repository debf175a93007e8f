package segment

import (
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/internal/chunk"
)

// dataCache keeps chunks this store verified — read from its disk and
// checked against their hashes, or written by a client (checked by the
// first read, see dataEntry) — so that reading one again costs neither a
// disk read nor a hash: a large GET of a hot object was half BLAKE3 and half the kernel's
// copies out of the page cache (docs/benchmarks.md). What it holds keeps
// the store's promise that every byte Get returns was verified against
// its hash at least once since it last left the disk: an entry is made
// only from bytes just read and verified, or just written and verified
// before they are first served, and the page cache, which the kernel may refill from the disk behind our back, is
// not trusted for it. Large chunks are written and read with O_DIRECT
// (append.go, readDirect), so this cache is where they live in memory,
// not a second copy beside the page cache.
//
// Its memory is an arena (arena.go) the cache recycles: a read lands in a
// block reserved for it, a large write's record is encoded into one (the
// copy PutAsync makes anyway), and the block of an entry pushed out goes
// to the next. Views of an entry are handed out with a chunk.Pin; the
// block returns to the arena once the cache has let the entry go and
// every view is released. Each shard is an LRU list; when the arena has
// no block for a reservation, the oldest entries go, those of the
// reservation's own shard first. Delete drops a chunk (gc.go) under the
// same epoch rule as the index cache (loccache.go): a read that looked
// the chunk up before the drop does not put it back after it.
type dataCache struct {
	arena  *arena
	shards [dataShards]dataShard
	next   atomic.Uint32 // the shard evictions turn to when the own is empty
	closed atomic.Bool   // set by close: fill lists nothing more
}

const dataShards = 16

// maxEvictions bounds the entries one reservation pushes out looking
// for a block (the arena's free space may be in blocks too small): past
// it, the chunk is read or written without the cache.
const maxEvictions = 64

type dataShard struct {
	mu    sync.Mutex
	m     map[chunk.Hash]*dataEntry
	head  dataEntry // sentinel of the LRU ring: head.next is the newest
	bytes int64     // of the listed entries' blocks
	epoch uint64    // bumped by every drop
	hits  int64
	miss  int64
}

// dataEntry is a chunk's bytes in a block of the arena. pin holds the
// cache's reference while the entry is listed (or reserved and not yet
// listed), and one per view handed out; the last release frees the block.
//
// An entry made from a read holds bytes verified as they were read. One
// made from a write holds a copy of bytes its writer hashed (or said it
// had: PutAsyncHashed, PutCopies); it is verified once, by the first read
// that takes it (verified), so that a writer's wrong hash is reported as
// corrupt, as the disk's copy would be, rather than served.
type dataEntry struct {
	h          chunk.Hash
	b          []byte
	bl         block
	pin        *chunk.Pin
	prev, next *dataEntry
	check      sync.Once // verifies b against h, for an entry made from a write
	bad        bool      // b does not hash to h (set by check)
}

// verified reports whether e's bytes hash to its chunk's, hashing them
// the first time for an entry made from a write.
func (e *dataEntry) verified() bool {
	e.check.Do(func() { e.bad = chunk.Sum(e.b) != e.h })
	return !e.bad
}

// markVerified records that e's bytes were verified as they were read:
// no read hashes them again.
func (e *dataEntry) markVerified() { e.check.Do(func() {}) }

// newDataCache returns a cache of bytes of memory, or nil when they are
// too few for a block.
func newDataCache(bytes int64, populate bool) (*dataCache, error) {
	a, err := newArena(bytes, populate)
	if a == nil || err != nil {
		return nil, err
	}
	c := &dataCache{arena: a}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.m = make(map[chunk.Hash]*dataEntry)
		sh.head.prev, sh.head.next = &sh.head, &sh.head
	}
	return c, nil
}

func (c *dataCache) shard(h chunk.Hash) *dataShard {
	// h is a BLAKE3 hash: any byte of it is uniform. Byte 1, not byte 0,
	// so that the shards do not line up with the index cache's.
	return &c.shards[int(h[1])%dataShards]
}

// get returns h's bytes, which the caller must not modify, with a pin the
// caller releases when done with them, and makes h the shard's newest
// entry; or the shard's epoch, for fill. Bytes a writer put in that do
// not hash to h are dropped (and counted a miss): the caller reads the
// chunk from the disk, which reports it corrupt.
func (c *dataCache) get(h chunk.Hash) ([]byte, *chunk.Pin, uint64, bool) {
	sh := c.shard(h)
	sh.mu.Lock()
	e, ok := sh.m[h]
	if !ok {
		sh.miss++
		defer sh.mu.Unlock()
		return nil, nil, sh.epoch, false
	}
	sh.unlink(e)
	sh.pushFront(e)
	e.pin.Retain()
	sh.mu.Unlock()
	if e.verified() { // (hashes outside the lock, once)
		sh.mu.Lock()
		sh.hits++
		sh.mu.Unlock()
		return e.b, e.pin, 0, true
	}
	e.pin.Release()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[h] == e {
		sh.remove(e)
	}
	sh.miss++
	sh.epoch++ // (a read that began before this does not fill)
	return nil, nil, sh.epoch, false
}

// epoch returns h's shard's epoch, for fill.
func (c *dataCache) epoch(h chunk.Hash) uint64 {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.epoch
}

// reserve returns an unlisted entry for h whose block holds n bytes
// (e.bl.b), pushing out the oldest entries to make room; nil when none
// could be had. The caller fills the block, sets e.b to the chunk's
// bytes in it (capacity capped), marks it verified if it verified them
// (markVerified), and hands the entry to fill, or
// releases e.pin.
func (c *dataCache) reserve(h chunk.Hash, n int) *dataEntry {
	if !c.arena.fits(n) {
		return nil
	}
	own := c.shard(h)
	for range maxEvictions + 1 {
		if bl, ok := c.arena.alloc(n); ok {
			e := &dataEntry{h: h, bl: bl}
			e.pin = chunk.NewPin(func() { c.arena.release(bl) })
			return e
		}
		if !c.evictOne(own) {
			return nil
		}
	}
	return nil
}

// evictOne lets the oldest entry of sh go, or, when sh has none, that of
// another shard; it reports false when every shard is empty.
func (c *dataCache) evictOne(sh *dataShard) bool {
	if sh.evictOldest() {
		return true
	}
	start := c.next.Add(1)
	for i := range uint32(dataShards) {
		if c.shards[(start+i)%dataShards].evictOldest() {
			return true
		}
	}
	return false
}

func (sh *dataShard) evictOldest() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.head.prev == &sh.head {
		return false
	}
	sh.remove(sh.head.prev)
	return true
}

// fill lists e, reserved for its chunk and holding its verified bytes,
// unless a drop came since the caller read epoch ep or another entry for
// the chunk came first; the cache then lets e go.
func (c *dataCache) fill(e *dataEntry, ep uint64) {
	sh := c.shard(e.h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[e.h]; ok || sh.epoch != ep || c.closed.Load() {
		e.pin.Release()
		return
	}
	sh.m[e.h] = e
	sh.pushFront(e)
	sh.bytes += int64(cap(e.bl.b))
}

// drop forgets h and bumps its shard's epoch.
func (c *dataCache) drop(h chunk.Hash) {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[h]; ok {
		sh.remove(e)
	}
	sh.epoch++
}

// stats sums the shards' counters.
func (c *dataCache) stats() (bytes, hits, misses int64) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		bytes, hits, misses = bytes+sh.bytes, hits+sh.hits, misses+sh.miss
		sh.mu.Unlock()
	}
	return bytes, hits, misses
}

// close lets every entry go and unmaps the arena once no view of it is
// held.
func (c *dataCache) close() {
	c.closed.Store(true) // (before each shard's lock: a fill under it sees it, or is emptied)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for sh.head.prev != &sh.head {
			sh.remove(sh.head.prev)
		}
		sh.mu.Unlock()
	}
	c.arena.close()
}

// remove unlists e and releases the cache's reference to it.
func (sh *dataShard) remove(e *dataEntry) {
	sh.unlink(e)
	delete(sh.m, e.h)
	sh.bytes -= int64(cap(e.bl.b))
	e.pin.Release()
}

func (sh *dataShard) unlink(e *dataEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (sh *dataShard) pushFront(e *dataEntry) {
	e.prev, e.next = &sh.head, sh.head.next
	sh.head.next.prev = e
	sh.head.next = e
}
