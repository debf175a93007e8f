package segment

import (
	"sync"

	"github.com/cairn-db/cairn/internal/chunk"
)

// dataCache keeps chunks this store read from its disk and verified
// against their hashes, so that reading one again costs neither a disk
// read nor a hash: a large GET of a hot object was half BLAKE3 and half
// the kernel's copies out of the page cache (docs/benchmarks.md). What it
// holds keeps the store's promise that every byte Get returns was verified
// against its hash at least once since it last left the disk: an entry is
// made only from bytes just read and verified, and the page cache, which
// the kernel may refill from the disk behind our back, is not trusted for
// it. Large chunks are written and read with O_DIRECT (append.go,
// readDirect), so this cache is where they live in memory, not a second
// copy beside the page cache.
//
// Chunks a client writes are not put in it: copying them into fresh heap
// memory doubled the server's CPU per 16 MiB PUT (99 against ~50 ms on
// this VM kind, where touching new pages is dear; docs/benchmarks.md).
//
// Entries are immutable slices the cache does not own alone: View hands
// them to readers, who may hold them after an eviction (the garbage
// collector frees them). Each shard is an LRU list bounded by the bytes of
// its entries. Delete drops a chunk (gc.go) under the same epoch rule as
// the index cache (loccache.go): a read that looked the chunk up before
// the drop does not put it back after it.
type dataCache struct {
	shards [dataShards]dataShard
	max    int64 // bytes per shard
}

const dataShards = 16

type dataShard struct {
	mu    sync.Mutex
	m     map[chunk.Hash]*dataEntry
	head  dataEntry // sentinel of the LRU ring: head.next is the newest
	bytes int64
	epoch uint64 // bumped by every drop
	hits  int64
	miss  int64
}

type dataEntry struct {
	h          chunk.Hash
	b          []byte
	prev, next *dataEntry
}

func newDataCache(bytes int64) *dataCache {
	c := &dataCache{max: max(bytes/dataShards, 1)}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.m = make(map[chunk.Hash]*dataEntry)
		sh.head.prev, sh.head.next = &sh.head, &sh.head
	}
	return c
}

func (c *dataCache) shard(h chunk.Hash) *dataShard {
	// h is a BLAKE3 hash: any byte of it is uniform. Byte 1, not byte 0,
	// so that the shards do not line up with the index cache's.
	return &c.shards[int(h[1])%dataShards]
}

// get returns h's bytes, which the caller must not modify, and makes h
// the shard's newest entry; or the shard's epoch, for fill.
func (c *dataCache) get(h chunk.Hash) ([]byte, uint64, bool) {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.m[h]
	if !ok {
		sh.miss++
		return nil, sh.epoch, false
	}
	sh.hits++
	sh.unlink(e)
	sh.pushFront(e)
	return e.b, 0, true
}

// fill records b, just read and verified as h's bytes after get returned
// epoch e, unless a drop came since; it evicts the oldest entries to make
// room. A chunk larger than a shard is not kept.
func (c *dataCache) fill(h chunk.Hash, b []byte, e uint64) {
	size := int64(cap(b))
	if size > c.max {
		return
	}
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.epoch != e {
		return
	}
	if _, ok := sh.m[h]; ok {
		return // another reader filled it first
	}
	for sh.bytes+size > c.max && sh.head.prev != &sh.head {
		old := sh.head.prev
		sh.unlink(old)
		delete(sh.m, old.h)
		sh.bytes -= int64(cap(old.b))
	}
	en := &dataEntry{h: h, b: b}
	sh.m[h] = en
	sh.pushFront(en)
	sh.bytes += size
}

// drop forgets h and bumps its shard's epoch.
func (c *dataCache) drop(h chunk.Hash) {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[h]; ok {
		sh.unlink(e)
		delete(sh.m, h)
		sh.bytes -= int64(cap(e.b))
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

func (sh *dataShard) unlink(e *dataEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (sh *dataShard) pushFront(e *dataEntry) {
	e.prev, e.next = &sh.head, sh.head.next
	sh.head.next.prev = e
	sh.head.next = e
}
