package kv

import (
	"hash/maphash"
	"sync"

	"github.com/cairn-db/cairn/internal/mvcc"
)

// Cache holds the latest version record of recently read or written
// objects, so that reading the latest version of a hot key needs no pebble
// iterator. It is shared by every range of a node and kept coherent with
// the applied state by the StateMachine:
//
//   - Apply marks each key it writes as pending; a pending key is never
//     served from the cache and never filled by a reader.
//   - After the apply batch has committed (Committed, before any proposer is
//     answered), the new latest record is installed, or the entry dropped
//     when the latest version was removed, and the shard's sequence number
//     advances.
//   - A reader that missed fills the entry with what it read from pebble
//     only if the shard's sequence is unchanged since its miss and the key
//     is not pending: a read that raced with a commit never installs what
//     the commit replaced.
//
// So a cached record is always the latest committed version: the cache is
// exactly as fresh as a pebble read on the same node. Records handed out are
// shared and must not be modified.
type Cache struct {
	seed     maphash.Seed
	shardCap int64
	shards   [cacheShards]cacheShard
}

const cacheShards = 64

type cacheShard struct {
	mu           sync.Mutex
	seq          uint64
	bytes        int64
	hits, misses uint64 // Get's answers (Stats)
	m            map[string]*cacheEntry
}

type cacheEntry struct {
	rec     *mvcc.Record // nil: not known (only while pending)
	pending int32
	size    int64
}

// CacheToken is what a miss returns, to be passed to Fill.
type CacheToken struct {
	seq uint64
	ok  bool
}

// NewCache returns a cache holding about capacity bytes of records.
// capacity <= 0 returns nil, a valid cache that holds nothing.
func NewCache(capacity int64) *Cache {
	if capacity <= 0 {
		return nil
	}
	c := &Cache{seed: maphash.MakeSeed()}
	c.shardCap = capacity / cacheShards
	for i := range c.shards {
		c.shards[i].m = make(map[string]*cacheEntry)
	}
	return c
}

func (c *Cache) shard(obj []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, obj)%cacheShards]
}

// Get returns the latest record of obj if it is cached. On a miss the token
// allows one Fill with what the caller then reads from pebble.
func (c *Cache) Get(obj []byte) (*mvcc.Record, CacheToken) {
	if c == nil {
		return nil, CacheToken{}
	}
	s := c.shard(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[string(obj)]
	if e != nil && e.pending == 0 && e.rec != nil {
		s.hits++
		return e.rec, CacheToken{}
	}
	s.misses++
	if e != nil && e.pending > 0 {
		return nil, CacheToken{} // a write is being applied: read pebble, do not fill
	}
	return nil, CacheToken{seq: s.seq, ok: true}
}

// Fill installs rec, read from pebble after a Get miss that returned tok,
// as obj's latest record, unless something changed in between.
func (c *Cache) Fill(obj []byte, rec *mvcc.Record, tok CacheToken) {
	if c == nil || !tok.ok {
		return
	}
	s := c.shard(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq != tok.seq {
		return
	}
	if e := s.m[string(obj)]; e != nil {
		return // pending, or filled by another reader meanwhile
	}
	size := recordSize(obj, rec)
	s.m[string(obj)] = &cacheEntry{rec: rec, size: size}
	s.bytes += size
	c.evictLocked(s)
}

// begin marks obj as being written by an apply batch.
func (c *Cache) begin(obj []byte) {
	s := c.shard(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[string(obj)]
	if e == nil {
		e = &cacheEntry{}
		s.m[string(obj)] = e
	}
	e.pending++
}

// end records that the write begun on obj has committed; latest is obj's
// new latest record, or nil if it is not known (a version was removed).
func (c *Cache) end(obj []byte, latest *mvcc.Record) {
	s := c.shard(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e := s.m[string(obj)]
	if e == nil {
		return // cannot happen: begin created it and only end removes it
	}
	e.pending--
	s.bytes -= e.size
	e.rec, e.size = nil, 0
	if latest != nil {
		e.rec, e.size = latest, recordSize(obj, latest)
		s.bytes += e.size
	}
	if e.rec == nil && e.pending == 0 {
		delete(s.m, string(obj))
	}
	c.evictLocked(s)
}

// evictLocked drops unpending entries until the shard is within its share.
// Map iteration order is random, which makes this random eviction: cheap,
// and for a cache of whole records good enough against a scan.
func (c *Cache) evictLocked(s *cacheShard) {
	if s.bytes <= c.shardCap {
		return
	}
	for k, e := range s.m {
		if e.pending > 0 {
			continue
		}
		delete(s.m, k)
		s.bytes -= e.size
		if s.bytes <= c.shardCap {
			return
		}
	}
}

// ClearRange drops every entry of an object key in [start, end) (a nil end:
// no upper bound) that no apply batch is writing, and makes every
// outstanding miss token stale: for when a range's state was replaced
// wholesale (a snapshot installed, a replica removed). Entries of other
// ranges stay.
func (c *Cache) ClearRange(start, end []byte) {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.seq++
		for k, e := range s.m {
			if e.pending == 0 && k >= string(start) && (end == nil || k < string(end)) {
				delete(s.m, k)
				s.bytes -= e.size
			}
		}
		s.mu.Unlock()
	}
}

// Len returns the number of cached records (tests and metrics).
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if e.rec != nil {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// Stats returns how many Gets the cache answered (hits) and how many it
// did not (misses: the caller read pebble), since it was made.
func (c *Cache) Stats() (hits, misses uint64) {
	if c == nil {
		return 0, 0
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		hits, misses = hits+s.hits, misses+s.misses
		s.mu.Unlock()
	}
	return hits, misses
}

// recordSize estimates the memory a cached record holds.
func recordSize(obj []byte, r *mvcc.Record) int64 {
	n := 256 + len(obj) + len(r.Inline) + len(r.Manifest) + len(r.ETag) + len(r.ContentType)
	for k, v := range r.Meta {
		n += len(k) + len(v) + 32
	}
	for k, v := range r.Tags {
		n += len(k) + len(v) + 32
	}
	return int64(n)
}
