package segment

import (
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

// TestLocCacheFillAfterDrop: a lookup that read the index before a drop
// does not put the dropped entry back; one that read it after does.
func TestLocCacheFillAfterDrop(t *testing.T) {
	c := newLocCache(64)
	h := chunk.Sum([]byte("x"))
	loc := location{seg: 1, off: 4096, length: 1}
	e := c.epoch(h) // a lookup starts
	c.drop(h)       // a Delete commits and drops
	c.fill(h, loc, e)
	if _, ok := c.get(h); ok {
		t.Fatal("a fill from before the drop put the entry back")
	}
	c.fill(h, loc, c.epoch(h))
	if got, ok := c.get(h); !ok || got != loc {
		t.Fatalf("a fill after the drop: %v %v", got, ok)
	}
	// Full shards make room.
	for i := range 1000 {
		h := chunk.Sum([]byte{byte(i), byte(i >> 8)})
		c.fill(h, loc, c.epoch(h))
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	if n > 64 {
		t.Fatalf("the cache holds %d entries, over its 64", n)
	}
}

// TestCachedIndexAfterDeleteAndCompaction: chunks read (so cached) and
// then deleted read as absent, are touched as absent, and are written
// again by a Put; chunks compaction moves still read through the cache.
func TestCachedIndexAfterDeleteAndCompaction(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	clock.add(time.Hour)
	n := openClocked(t, vfs.NewMem(), 64<<10, clock)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var hs []chunk.Hash
	data := map[chunk.Hash][]byte{}
	for range 60 {
		d, h := randomChunk(rng, 4000)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		hs, data[h] = append(hs, h), d
	}
	for _, h := range hs {
		mustGet(t, n.st, h, data[h]) // cached
	}
	clock.add(time.Minute)
	dead := hs[:40]
	if nd, _, err := n.st.Delete(dead, clock.Now()); err != nil || nd != len(dead) {
		t.Fatalf("Delete: %d, %v", nd, err)
	}
	for _, h := range dead {
		if ok, err := n.st.touchHeld(h); err != nil || ok {
			t.Fatalf("a deleted chunk is touched as held (%v)", err)
		}
	}
	// Compaction moves the live chunks out of the mostly dead segments
	// and removes those files: the cached locations go stale.
	if cs, err := n.st.Compact(ctx, 0.5); err != nil || cs.Segments == 0 || cs.Moved == 0 {
		t.Fatalf("Compact: %+v, %v; want segments removed and chunks moved", cs, err)
	}
	for _, h := range hs[40:] {
		mustGet(t, n.st, h, data[h])
	}
	for _, h := range dead[:5] {
		if err := n.st.Put(ctx, h, data[h]); err != nil {
			t.Fatal(err)
		}
		mustGet(t, n.st, h, data[h])
	}
}

// TestDiskReadsVerify: on the real disk a record is read in one call
// (header and data); damage to either is still reported, and good
// chunks read back.
func TestDiskReadsVerify(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	n := openNodeAt(t, vfs.Default, base, 0)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(21, 22))
	var hs []chunk.Hash
	data := map[chunk.Hash][]byte{}
	for range 4 {
		d, h := randomChunk(rng, 16<<10)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		hs, data[h] = append(hs, h), d
	}
	for _, h := range hs {
		mustGet(t, n.st, h, data[h])
	}
	flip := func(h chunk.Hash, at int64) {
		loc, err := n.st.lookup(h)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(base, "seg", segmentName(loc.seg)), os.O_RDWR, 0)
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
	flip(hs[0], recordHeaderSize+100) // data
	flip(hs[1], 20)                   // header: inside the hash
	for _, h := range hs[:2] {
		if _, err := n.st.Get(ctx, h, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a damaged record reads as %v, want ErrCorrupt", err)
		}
	}
	for _, h := range hs[2:] {
		mustGet(t, n.st, h, data[h])
	}
}
