package segment

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
)

// openCached opens a store with a data cache of cacheBytes on the real
// disk under base, its touches following clock.
func openCached(t testing.TB, base string, cacheBytes int64, clock *fakeClock) *testNode {
	t.Helper()
	return openNodeAt(t, vfs.Default, base, 0, func(o *Options) { o.Now, o.DataCache = clock.Now, cacheBytes })
}

// flipOnDisk damages one byte of h's record, at record offset at, on disk.
func flipOnDisk(t *testing.T, n *testNode, base string, h chunk.Hash, at int64) {
	t.Helper()
	loc, err := n.st.lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(base, "seg", segmentName(loc.seg)), os.O_RDWR|os.O_SYNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, loc.off+at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, loc.off+at); err != nil {
		t.Fatal(err)
	}
}

// TestViewCachesVerifiedChunks: a chunk read once (large ones with
// O_DIRECT) is served again from memory; damage done to the disk after
// that read is not seen, because the bytes served were verified when they
// left the disk; damage done before the first read (of a store reopened
// over the same files) is reported, and the damaged bytes are not cached.
func TestViewCachesVerifiedChunks(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	clock := &fakeClock{}
	n := openCached(t, base, 256<<20, clock)
	rng := rand.New(rand.NewPCG(31, 32))
	var hs []chunk.Hash
	data := map[chunk.Hash][]byte{}
	for _, size := range []int{1 << 20, 3<<20 + 17, 16 << 10, 700 << 10} {
		d, h := randomChunk(rng, size)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		hs, data[h] = append(hs, h), d
	}
	// Written: the large ones are cached (their records, rounded up to
	// 4 KiB), the small one is not.
	if b, _, _ := n.st.data.stats(); b != 1<<20+4<<10+3<<20+4<<10+700<<10+4<<10 {
		t.Fatalf("the cache holds %d bytes of chunks written", b)
	}
	n.close(t)
	n = openCached(t, base, 256<<20, clock)
	defer func() { n.close(t) }()
	for _, h := range hs[:3] {
		b, pin, err := n.st.View(ctx, h)
		if err != nil || !bytes.Equal(b, data[h]) {
			t.Fatalf("View %s: %d bytes, %v; want its %d bytes", h, len(b), err, len(data[h]))
		}
		again, pin2, err := n.st.View(ctx, h)
		if err != nil || &again[0] != &b[0] || pin == nil || pin2 != pin {
			t.Fatalf("second View %s: %v; want the cached bytes", h, err)
		}
		pin.Release()
		pin2.Release()
	}
	// Damage on disk after the reads: the verified bytes are served.
	flipOnDisk(t, n, base, hs[0], recordHeaderSize+4096)
	flipOnDisk(t, n, base, hs[2], recordHeaderSize+10)
	for _, h := range hs[:3] {
		mustGet(t, n.st, h, data[h])
	}
	// Damage before the first read: reported, and not cached.
	flipOnDisk(t, n, base, hs[3], recordHeaderSize+200<<10)
	for range 2 {
		if _, _, err := n.st.View(ctx, hs[3]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a damaged large record reads as %v, want ErrCorrupt", err)
		}
	}
	if bytes, hits, misses := n.st.data.stats(); hits != 3+3 || misses != 3+2 || bytes < int64(len(data[hs[0]])+len(data[hs[1]])) {
		t.Fatalf("cache: %d bytes, %d hits, %d misses; want 6 hits, 5 misses and the chunks read", bytes, hits, misses)
	}
	// A store without the cache reads the damage.
	n.close(t)
	n = openCached(t, base, 0, clock)
	if n.st.data != nil {
		t.Fatal("a store opened without a chunk cache has one")
	}
	for _, h := range []chunk.Hash{hs[0], hs[2], hs[3]} {
		if _, _, err := n.st.View(ctx, h); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("uncached: a damaged record reads as %v, want ErrCorrupt", err)
		}
	}
	mustGet(t, n.st, hs[1], data[hs[1]])
}

// TestDeleteDropsCachedChunk: a chunk the collector deletes is not served
// from the cache afterwards.
func TestDeleteDropsCachedChunk(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	clock.add(time.Hour)
	n := openCached(t, t.TempDir(), 64<<20, clock)
	defer n.close(t)
	d, h := randomChunk(rand.New(rand.NewPCG(5, 6)), 512<<10)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, h, d) // cached now
	clock.add(time.Second)
	if nd, _, err := n.st.Delete([]chunk.Hash{h}, clock.Now()); err != nil || nd != 1 {
		t.Fatalf("Delete: %d, %v; want 1 chunk", nd, err)
	}
	if _, _, err := n.st.View(ctx, h); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted chunk: View = %v, want ErrNotFound", err)
	}
}

// TestWrittenChunksServedFromCache: a large chunk just written is read
// from the cache, not the disk (damage done to the disk after the write
// is not seen: the bytes were hashed on their way in); a view stays
// intact while it is pinned, though the chunk is pushed out and its
// memory wanted for others, and the memory is reused once released.
func TestWrittenChunksServedFromCache(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	n := openCached(t, base, 8<<20, &fakeClock{})
	defer func() { n.close(t) }()
	rng := rand.New(rand.NewPCG(9, 10))
	d, h := randomChunk(rng, 900<<10)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatal(err)
	}
	flipOnDisk(t, n, base, h, recordHeaderSize+10)
	b, pin, err := n.st.View(ctx, h)
	if err != nil || !bytes.Equal(b, d) || pin == nil {
		t.Fatalf("View of a chunk just written: %v", err)
	}
	if _, hits, misses := n.st.data.stats(); hits != 1 || misses != 0 {
		t.Fatalf("%d hits, %d misses; want the one read a hit", hits, misses)
	}
	// Chunks of h's shard push it out of the 8 MiB cache (each takes a
	// 1 MiB block: 904 KiB, and the rest too small for the next): h goes
	// first, but it is pinned, so the next oldest goes too.
	var others [][]byte
	for len(others) < 8 {
		d2, h2 := randomChunk(rng, 900<<10)
		if h2[1]%dataShards != h[1]%dataShards {
			continue
		}
		if err := n.st.Put(ctx, h2, d2); err != nil {
			t.Fatal(err)
		}
		others = append(others, d2)
	}
	if !bytes.Equal(b, d) {
		t.Fatal("a pinned view changed when its chunk was pushed out")
	}
	before := n.st.data.arena.used()
	pin.Release()
	if after := n.st.data.arena.used(); before-after != 904<<10 {
		t.Fatalf("arena: %d bytes used before the release, %d after; want its 904 KiB given back", before, after)
	}
	// Pushed out, it is read from the disk again: damaged there.
	if _, _, err := n.st.View(ctx, h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("View of the damaged chunk once pushed out: %v, want ErrCorrupt", err)
	}
}

// TestDataCacheBounds: the cache holds what its arena does, pushing out
// the least recently read entries of the reservation's shard first, then
// of the others; a fill that follows a drop of the same chunk, with an
// epoch taken before it, is ignored; a chunk larger than the arena is not
// reserved for; an entry pushed out while pinned keeps its block until
// the pin goes.
func TestDataCacheBounds(t *testing.T) {
	c, err := newDataCache(64<<10, false) // four blocks of 16 KiB
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.close() }()
	hash := func(i, shard int) chunk.Hash {
		var h chunk.Hash
		h[0], h[1] = byte(i), byte(shard)
		return h
	}
	fill := func(h chunk.Hash) {
		t.Helper()
		if _, _, _, ok := c.get(h); ok {
			t.Fatalf("%x already cached", h[:2])
		}
		ep := c.epoch(h)
		e := c.reserve(h, 16<<10)
		if e == nil {
			t.Fatalf("no block for %x", h[:2])
		}
		e.b = e.bl.b
		for i := range e.b {
			e.b[i] = h[0]
		}
		e.markVerified() // (the bytes are not h's: taken as verified all the same)
		c.fill(e, ep)
	}
	cached := func(h chunk.Hash) bool { // (without making it the newest)
		sh := c.shard(h)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		_, ok := sh.m[h]
		return ok
	}
	hs := []chunk.Hash{hash(0, 7), hash(1, 7), hash(2, 7), hash(3, 7), hash(4, 7)}
	for _, h := range hs[:4] {
		fill(h)
	}
	if _, pin, _, ok := c.get(hs[0]); !ok { // hs[0] is now the newest
		t.Fatal("hs[0] evicted too early")
	} else {
		pin.Release()
	}
	fill(hs[4]) // pushes out hs[1], the least recently read
	if cached(hs[1]) {
		t.Fatal("hs[1] still cached past the bound")
	}
	for _, h := range []chunk.Hash{hs[0], hs[2], hs[3], hs[4]} {
		if !cached(h) {
			t.Fatalf("%x evicted, want kept", h[:2])
		}
	}
	if b, _, _ := c.stats(); b != 64<<10 {
		t.Fatalf("cache holds %d bytes, want %d", b, 64<<10)
	}
	// Another shard's chunk, its own shard empty: the oldest of shard 7
	// (hs[2]: newest first, shard 7 is hs[4], hs[0], hs[3], hs[2]) goes.
	other := hash(9, 3)
	fill(other)
	if cached(hs[2]) || !cached(other) {
		t.Fatal("a reservation in an empty shard did not push out another shard's oldest")
	}
	// A read that began before a drop does not fill after it.
	late := hash(5, 7)
	ep := c.epoch(late)
	c.drop(late)
	e := c.reserve(late, 1000)
	e.b = e.bl.b
	c.fill(e, ep)
	if cached(late) {
		t.Fatal("a fill from before a drop was kept")
	}
	// Larger than the arena: no block.
	if c.reserve(hash(6, 7), 65<<10) != nil {
		t.Fatal("a block reserved for a chunk larger than the cache")
	}
	// Pinned, pushed out: its block is not reused until released. A
	// fresh cache of four: 40 is read (the newest), then four fills
	// push out 41, 42, 43, then 40 (pinned: nothing freed) and 20.
	c.close()
	if c, err = newDataCache(64<<10, true); err != nil { // (populated: as a server's)
		t.Fatal(err)
	}
	for i := range 4 {
		fill(hash(40+i, 7))
	}
	view, pin, _, _ := c.get(hash(40, 7))
	for i := range 4 {
		fill(hash(20+i, 7))
	}
	if b, _, _ := c.stats(); cached(hash(40, 7)) || cached(hash(20, 7)) || b != 48<<10 {
		t.Fatalf("cache holds %d bytes, want 48 KiB (the fourth block pinned)", b)
	}
	for _, v := range view {
		if v != 40 {
			t.Fatal("a pinned view's block was reused")
		}
	}
	pin.Release()
	fill(hash(30, 3))
	if b, _, _ := c.stats(); b != 64<<10 || !cached(hash(23, 7)) {
		t.Fatalf("cache holds %d bytes after the release, want 64 KiB without a push", b)
	}
}

// TestWrittenChunkVerifiedOnFirstRead: a chunk written with a hash its
// bytes do not have (a writer's mistake PutAsyncHashed trusts) is not
// served from the cache: the first read hashes the cached copy, drops it
// and reads the disk's, which it reports corrupt, as it did before the
// cache took written chunks.
func TestWrittenChunkVerifiedOnFirstRead(t *testing.T) {
	ctx := context.Background()
	n := openCached(t, t.TempDir(), 8<<20, &fakeClock{})
	defer n.close(t)
	rng := rand.New(rand.NewPCG(11, 12))
	d, _ := randomChunk(rng, 600<<10)
	_, wrong := randomChunk(rng, 10)
	if err := n.st.PutAsyncHashed(wrong, d).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := n.st.data.stats(); b == 0 {
		t.Fatal("the chunk written was not cached")
	}
	for range 2 {
		if _, _, err := n.st.View(ctx, wrong); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("View of a chunk written under a wrong hash: %v, want ErrCorrupt", err)
		}
	}
	if b, _, _ := n.st.data.stats(); b != 0 {
		t.Fatalf("the cache still holds %d bytes", b)
	}
}

// TestRewriteOfHeldChunkKeepsCache: writing again a chunk the store holds
// (PutCopies, which does not look before queueing) pushes nothing out of
// the cache.
func TestRewriteOfHeldChunkKeepsCache(t *testing.T) {
	ctx := context.Background()
	n := openCached(t, t.TempDir(), 8<<20, &fakeClock{})
	defer n.close(t)
	rng := rand.New(rand.NewPCG(13, 14))
	var first []byte
	var h0 chunk.Hash
	for i := range 8 { // (the cache is full: a block for another chunk pushes one out)
		d, h := randomChunk(rng, 1000<<10)
		if err := n.st.PutCopies(h, d, 1).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, h0 = d, h
		}
	}
	before, _, _ := n.st.data.stats()
	for range 7 {
		if err := n.st.PutCopies(h0, first, 1).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if after, _, _ := n.st.data.stats(); after != before {
		t.Fatalf("the cache held %d bytes, then %d after rewrites of a held chunk", before, after)
	}
}
