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
	// Written, not read yet: not cached.
	if b, _, _ := n.st.data.stats(); b != 0 {
		t.Fatalf("the cache holds %d bytes of chunks only written", b)
	}
	n.close(t)
	n = openCached(t, base, 256<<20, clock)
	defer func() { n.close(t) }()
	for _, h := range hs[:3] {
		b, err := n.st.View(ctx, h)
		if err != nil || !bytes.Equal(b, data[h]) {
			t.Fatalf("View %s: %d bytes, %v; want its %d bytes", h, len(b), err, len(data[h]))
		}
		again, err := n.st.View(ctx, h)
		if err != nil || &again[0] != &b[0] {
			t.Fatalf("second View %s: %v; want the cached bytes", h, err)
		}
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
		if _, err := n.st.View(ctx, hs[3]); !errors.Is(err, ErrCorrupt) {
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
		if _, err := n.st.View(ctx, h); !errors.Is(err, ErrCorrupt) {
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
	if _, err := n.st.View(ctx, h); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted chunk: View = %v, want ErrNotFound", err)
	}
}

// TestDataCacheBounds: the cache keeps at most its bytes per shard,
// evicting the least recently read; a fill that follows a drop of the same
// chunk, with an epoch taken before it, is ignored.
func TestDataCacheBounds(t *testing.T) {
	c := newDataCache(dataShards * 3000)
	var hs []chunk.Hash
	// Five chunks of 1000 bytes in one shard (byte 1 of the hash picks it).
	for i := range 5 {
		var h chunk.Hash
		h[0], h[1] = byte(i), 7
		hs = append(hs, h)
	}
	fill := func(h chunk.Hash) {
		_, e, ok := c.get(h)
		if ok {
			t.Fatalf("%x already cached", h[:2])
		}
		c.fill(h, make([]byte, 1000), e)
	}
	fill(hs[0])
	fill(hs[1])
	fill(hs[2])
	if _, _, ok := c.get(hs[0]); !ok { // hs[0] is now the newest
		t.Fatal("hs[0] evicted too early")
	}
	fill(hs[3]) // evicts hs[1], the least recently read
	if _, _, ok := c.get(hs[1]); ok {
		t.Fatal("hs[1] still cached past the bound")
	}
	for _, h := range []chunk.Hash{hs[0], hs[2], hs[3]} {
		if _, _, ok := c.get(h); !ok {
			t.Fatalf("%x evicted, want kept", h[:2])
		}
	}
	if b, _, _ := c.stats(); b != 3000 {
		t.Fatalf("cache holds %d bytes, want 3000", b)
	}
	// A read that began before a drop does not fill after it.
	_, e, _ := c.get(hs[4])
	c.drop(hs[4])
	c.fill(hs[4], make([]byte, 1000), e)
	if _, _, ok := c.get(hs[4]); ok {
		t.Fatal("a fill from before a drop was kept")
	}
	// Larger than a shard: not kept.
	var big chunk.Hash
	big[1] = 9
	_, e, _ = c.get(big)
	c.fill(big, make([]byte, 4000), e)
	if _, _, ok := c.get(big); ok {
		t.Fatal("a chunk larger than a shard was kept")
	}
}
