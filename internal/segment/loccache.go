package segment

import (
	"sync"

	"github.com/cairn-db/cairn/internal/chunk"
)

// locCache keeps recent chunk index entries (hash -> location) in
// memory, so that reading a chunk, or finding that a write's chunk is
// held, costs no pebble lookup. Such lookups go through the memtables,
// which hold the raft log and the versions too: a random hash's seek
// through them cost more than reading and verifying a 16 KiB chunk from
// the page cache (docs/benchmarks.md, VOSD).
//
// An entry is filled when the writer commits the chunk's index entry (or
// a compaction moves it) and when a lookup reads it, and dropped when a
// Delete removes the chunk: after its commit, under the lock Delete
// decides under (gc.go). A lookup that read the index before such a drop
// must not put the entry back after it: every drop bumps its shard's
// epoch, and a lookup fills the cache only if the epoch it saw before
// reading the index is still current. So an entry names a chunk the
// index holds, except for the moments between a Delete's commit and its
// drop — which touchHeld's confirmation, taken after that lock, never
// sees — and an old location of a chunk compaction moved: Get verifies
// whatever it reads against the hash, and a removed segment reads as
// errSegmentGone, after which Get looks in the index itself. Delete and a
// compaction's copy read the index.
type locCache struct {
	shards [locShards]locShard
	max    int // entries per shard
}

const locShards = 32

type locShard struct {
	mu    sync.Mutex
	m     map[chunk.Hash]location
	epoch uint64 // bumped by every drop
}

// DefaultIndexCache is the default Options.IndexCache: 128 MiB of heap
// (Go's maps take ~128 bytes an entry; a table of our own could take
// half), the last million chunks written or read — 16 GiB
// of a byte-range workload's 16 KiB pieces, 1 TiB of uploads' ~1 MiB
// chunks. At a quarter of that, VOSD's reads of versions older than the
// last ~35 rounds, and the hash of each new version (which reads the
// pieces beside its writes, of any age), looked most chunks up in pebble
// (a fifth of the CPU of their chunk reads).
const DefaultIndexCache = 1 << 20

func newLocCache(entries int) *locCache {
	c := &locCache{max: max(entries/locShards, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[chunk.Hash]location)
	}
	return c
}

func (c *locCache) shard(h chunk.Hash) *locShard {
	// h is a BLAKE3 hash: any byte of it is uniform.
	return &c.shards[int(h[0])%locShards]
}

func (c *locCache) get(h chunk.Hash) (location, bool) {
	sh := c.shard(h)
	sh.mu.Lock()
	loc, ok := sh.m[h]
	sh.mu.Unlock()
	return loc, ok
}

// epoch returns h's shard's epoch, for fill.
func (c *locCache) epoch(h chunk.Hash) uint64 {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.epoch
}

// fill records h at loc, read from the index after epoch(h) returned e,
// unless a drop came since.
func (c *locCache) fill(h chunk.Hash, loc location, e uint64) {
	sh := c.shard(h)
	sh.mu.Lock()
	if sh.epoch == e {
		c.put(sh, h, loc)
	}
	sh.mu.Unlock()
}

// put records h at loc in sh, which is locked, making room by dropping
// an arbitrary entry (Go's map iteration starts at a random place) when
// the shard is full.
func (c *locCache) put(sh *locShard, h chunk.Hash, loc location) {
	if _, ok := sh.m[h]; !ok && len(sh.m) >= c.max {
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[h] = loc
}

func (c *locCache) drop(h chunk.Hash) {
	sh := c.shard(h)
	sh.mu.Lock()
	delete(sh.m, h)
	sh.epoch++
	sh.mu.Unlock()
}
