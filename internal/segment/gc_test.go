package segment

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time               { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration)          { c.ns.Add(int64(d)) }
func (c *fakeClock) at(d time.Duration) time.Time { return time.Unix(0, int64(d)) }

// openClocked opens a store on fs whose touches follow clock.
func openClocked(t testing.TB, fs vfs.FS, segSize int64, clock *fakeClock) *testNode {
	t.Helper()
	return openNodeAt(t, fs, "", segSize, func(o *Options) { o.Now = clock.Now })
}

func collectable(t *testing.T, st *Store, cutoff time.Time) map[chunk.Hash]bool {
	t.Helper()
	out := map[chunk.Hash]bool{}
	if err := st.Collectable(context.Background(), nil, cutoff, func(h chunk.Hash, _ uint32) bool {
		out[h] = true
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeleteRespectsTouches(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	clock.add(time.Hour) // the store opens at 1h
	n := openClocked(t, vfs.NewMem(), 1<<20, clock)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(1, 2))
	clock.add(time.Second)
	da, a := randomChunk(rng, 1000)
	db, b := randomChunk(rng, 1000)
	dc, c := randomChunk(rng, 1000)
	for i, d := range [][]byte{da, db, dc} {
		if err := n.st.Put(ctx, []chunk.Hash{a, b, c}[i], d); err != nil {
			t.Fatal(err)
		}
	}
	if got := collectable(t, n.st, clock.at(time.Hour+time.Second)); len(got) != 0 {
		t.Fatalf("chunks written at the cutoff are collectable: %v", got)
	}
	clock.add(time.Second) // 1h2s
	if got := collectable(t, n.st, clock.Now()); len(got) != 3 {
		t.Fatalf("collectable after their write: %d chunks, want 3", len(got))
	}
	cutoff := clock.Now()
	clock.add(time.Second) // 1h3s: b touched by a clone, c stored again by a Put
	if missing, err := n.st.Touch([]chunk.Hash{b, chunk.Sum([]byte("absent"))}); err != nil || len(missing) != 1 {
		t.Fatalf("Touch: missing %v, %v; want the absent hash only", missing, err)
	}
	if err := n.st.Put(ctx, c, dc); err != nil {
		t.Fatal(err)
	}
	if got := collectable(t, n.st, cutoff); len(got) != 1 || !got[a] {
		t.Fatalf("collectable after touches: %v, want only a", got)
	}
	nd, bytes, err := n.st.Delete([]chunk.Hash{a, b, c}, cutoff)
	if err != nil || nd != 1 || bytes != recordHeaderSize+1000 {
		t.Fatalf("Delete: %d chunks, %d bytes, %v; want 1 chunk of %d bytes", nd, bytes, err, recordHeaderSize+1000)
	}
	if _, err := n.st.Get(ctx, a, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted chunk: Get = %v, want ErrNotFound", err)
	}
	mustGet(t, n.st, b, db)
	mustGet(t, n.st, c, dc)
	// A Put after the delete stores the chunk again.
	if err := n.st.Put(ctx, a, da); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, a, da)

	// Touches are lost with a restart: every chunk counts as touched at
	// the reopen.
	n.close(t)
	clock.add(time.Minute)
	reopened := clock.Now()
	n2 := openClocked(t, n.fs, 1<<20, clock)
	defer n2.close(t)
	clock.add(time.Minute)
	if got := collectable(t, n2.st, reopened); len(got) != 0 {
		t.Fatalf("collectable before the reopen: %v", got)
	}
	if got := collectable(t, n2.st, clock.Now()); len(got) != 3 {
		t.Fatalf("collectable a minute after the reopen: %d, want 3", len(got))
	}
	n2.st.ForgetTouches(clock.Now())
	if len(n2.st.gc.touched) != 0 {
		t.Fatalf("ForgetTouches left %d touches", len(n2.st.gc.touched))
	}
}

func TestCompactGivesSpaceBack(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	fs := vfs.NewMem()
	n := openClocked(t, fs, 64<<10, clock)
	rng := rand.New(rand.NewPCG(3, 4))
	data := map[chunk.Hash][]byte{}
	var order []chunk.Hash
	for range 200 {
		d, h := randomChunk(rng, 4000)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		data[h] = d
		order = append(order, h)
	}
	before := n.st.Stats()
	clock.add(time.Hour)
	// Delete four chunks of five.
	var dead, live []chunk.Hash
	for i, h := range order {
		if i%5 == 0 {
			live = append(live, h)
		} else {
			dead = append(dead, h)
		}
	}
	if nd, _, err := n.st.Delete(dead, clock.Now()); err != nil || nd != len(dead) {
		t.Fatalf("Delete: %d of %d, %v", nd, len(dead), err)
	}

	// Readers of the live chunks run through the compaction.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr atomic.Value
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h := live[i%len(live)]
				if _, err := n.st.Get(ctx, h, nil); err != nil {
					readErr.Store(err)
					return
				}
			}
		}()
	}
	st, err := n.st.Compact(ctx, 0.5)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if e := readErr.Load(); e != nil {
		t.Fatalf("a read during compaction failed: %v", e)
	}
	after := n.st.Stats()
	t.Logf("compact: %+v; segments %d -> %d, bytes %d -> %d", st, before.Segments, after.Segments, before.Bytes, after.Bytes)
	if st.Segments == 0 || st.Moved == 0 {
		t.Fatalf("nothing compacted: %+v", st)
	}
	if after.Bytes > before.Bytes/2 {
		t.Fatalf("bytes %d -> %d: less than half given back with 80%% deleted", before.Bytes, after.Bytes)
	}
	if files, err := fs.List("seg"); err != nil || len(files) != after.Segments {
		t.Fatalf("%d segment files for %d segments in the stats (%v)", len(files), after.Segments, err)
	}
	check := func(st *Store) {
		t.Helper()
		for _, h := range live {
			mustGet(t, st, h, data[h])
		}
		for _, h := range dead {
			if _, err := st.Get(ctx, h, nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted chunk %s: Get = %v", h, err)
			}
		}
	}
	check(n.st)
	// A second pass finds nothing more to do.
	if st, err := n.st.Compact(ctx, 0.5); err != nil || st.Segments != 0 {
		t.Fatalf("second compaction: %+v, %v", st, err)
	}
	n.close(t)
	n = openClocked(t, fs, 64<<10, clock)
	defer n.close(t)
	check(n.st)
	if got := n.st.Stats(); got.Bytes != after.Bytes || got.Segments != after.Segments {
		t.Fatalf("after reopen: %+v, want %+v", got, after)
	}
}

// TestCollectModel runs random puts, touches, deletes, compactions and
// restarts against a model of each chunk's last touch: a chunk is never
// deleted if it was touched at or after the cutoff, and every chunk not
// deleted reads back whole.
func TestCollectModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run("", func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 99))
			clock := &fakeClock{}
			fs := vfs.NewMem()
			n := openClocked(t, fs, 32<<10, clock)
			defer func() { n.close(t) }()
			data := map[chunk.Hash][]byte{}
			touch := map[chunk.Hash]time.Duration{} // the model's last touch
			stored := map[chunk.Hash]bool{}
			var all []chunk.Hash
			now := func() time.Duration { return time.Duration(clock.ns.Load()) }
			for step := range 400 {
				clock.add(time.Duration(rng.IntN(3)) * time.Second)
				switch op := rng.IntN(10); {
				case op < 4: // put, new or again
					var h chunk.Hash
					if len(all) > 0 && rng.IntN(2) == 0 {
						h = all[rng.IntN(len(all))]
					} else {
						var d []byte
						d, h = randomChunk(rng, 500+rng.IntN(3000))
						data[h] = d
						all = append(all, h)
					}
					if err := n.st.Put(ctx, h, data[h]); err != nil {
						t.Fatal(err)
					}
					stored[h], touch[h] = true, now()
				case op < 5 && len(all) > 0: // touch
					h := all[rng.IntN(len(all))]
					missing, err := n.st.Touch([]chunk.Hash{h})
					if err != nil {
						t.Fatal(err)
					}
					if (len(missing) == 0) != stored[h] {
						t.Fatalf("step %d: Touch says held=%v, model %v", step, len(missing) == 0, stored[h])
					}
					if stored[h] {
						touch[h] = now()
					}
				case op < 8: // delete a random subset with a cutoff in the past
					cutoff := now() - time.Duration(rng.IntN(10))*time.Second
					var hs []chunk.Hash
					for _, h := range all {
						if rng.IntN(2) == 0 {
							hs = append(hs, h)
						}
					}
					if _, _, err := n.st.Delete(hs, clock.at(cutoff)); err != nil {
						t.Fatal(err)
					}
					for _, h := range hs {
						held, err := n.st.Has(h)
						if err != nil {
							t.Fatal(err)
						}
						if !held && stored[h] && touch[h] >= cutoff {
							t.Fatalf("step %d: chunk touched at %v deleted with cutoff %v", step, touch[h], cutoff)
						}
						stored[h] = held
					}
				case op < 9:
					if _, err := n.st.Compact(ctx, 0.3+rng.Float64()*0.7); err != nil {
						t.Fatal(err)
					}
				default:
					n.close(t)
					n = openClocked(t, fs, 32<<10, clock)
					for h := range stored {
						if stored[h] {
							touch[h] = max(touch[h], now())
						}
					}
				}
			}
			for h, ok := range stored {
				if ok {
					mustGet(t, n.st, h, data[h])
				} else if _, err := n.st.Get(ctx, h, nil); !errors.Is(err, ErrNotFound) {
					t.Fatalf("chunk deleted in the model: Get = %v", err)
				}
			}
		})
	}
}

// TestCompactSealsGarbageOpenSegment deletes every chunk right after
// writing them: compaction seals the open segment to give it back too.
func TestCompactSealsGarbageOpenSegment(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	n := openClocked(t, vfs.NewMem(), 1<<20, clock)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var all []chunk.Hash
	for range 100 {
		d, h := randomChunk(rng, 8000)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		all = append(all, h)
	}
	before := n.st.Stats()
	clock.add(time.Hour)
	if nd, _, err := n.st.Delete(all, clock.Now()); err != nil || nd != len(all) {
		t.Fatalf("Delete: %d, %v", nd, err)
	}
	st, err := n.st.Compact(ctx, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	after := n.st.Stats()
	if st.Segments != before.Segments || after.Segments != 1 || after.Bytes > 16<<10 {
		t.Fatalf("compact %+v: %+v -> %+v; want every written segment gone and one empty open segment", st, before, after)
	}
	// The store takes writes as before.
	d, h := randomChunk(rng, 8000)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatal(err)
	}
	mustGet(t, n.st, h, d)
}

// TestRecoveryDropsEntriesOfRemovedFiles: a segment file gone with its
// bookkeeping left (a crash inside a compaction's removal) takes the
// index entries that point into it along: the chunks read as absent and
// a Put stores them again, rather than being "found" and acknowledged.
func TestRecoveryDropsEntriesOfRemovedFiles(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	fs := vfs.NewMem()
	n := openClocked(t, fs, 32<<10, clock)
	rng := rand.New(rand.NewPCG(7, 8))
	data := map[chunk.Hash][]byte{}
	var order []chunk.Hash
	for range 20 {
		d, h := randomChunk(rng, 6000)
		if err := n.st.Put(ctx, h, d); err != nil {
			t.Fatal(err)
		}
		data[h] = d
		order = append(order, h)
	}
	first := mustLocate(t, n.st, order[0]).seg
	n.close(t)
	if err := fs.Remove(fs.PathJoin("seg", segmentName(first))); err != nil {
		t.Fatal(err)
	}
	n = openClocked(t, fs, 32<<10, clock)
	defer n.close(t)
	for _, h := range order {
		if ok, _ := n.st.Has(h); ok {
			mustGet(t, n.st, h, data[h]) // in a segment still there
			continue
		}
		if err := n.st.Put(ctx, h, data[h]); err != nil {
			t.Fatal(err)
		}
		mustGet(t, n.st, h, data[h])
	}
	if ok, _ := n.st.Has(order[0]); !ok {
		t.Fatal("the chunk of the removed file was not stored again")
	}
}
