package segment

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// openFiltered opens a store whose filters are sized for at least min
// entries, so that they fill and are rebuilt often.
func openFiltered(t *testing.T, clock *fakeClock, min int64) *testNode {
	t.Helper()
	fs := vfs.NewMem()
	eng, err := storage.Open(storage.Options{Dir: "db", FS: fs, CacheSize: 1 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(Options{Dir: "seg", FS: fs, DB: eng.DB(), SegmentSize: 1 << 20, Logger: quietLogger(), Now: clock.Now, filterMin: min})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	return &testNode{fs: fs, eng: eng, st: st}
}

// waitFilter waits for the build under way, if any, to finish.
func waitFilter(t *testing.T, st *Store) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st.filter.mu.Lock()
		building := st.filter.building
		st.filter.mu.Unlock()
		if !building && st.filter.cur.Load() != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no chunk index filter after 10s")
		}
	}
}

// TestFilterHoldsTheIndex checks the filter's one promise — it never
// says "not held" of a chunk the index holds — while writers put chunks,
// the collector deletes some, deleted ones are written again, and the
// filters fill and are rebuilt from the index under the writes: a
// checker asks the filter about every acknowledged chunk throughout.
func TestFilterHoldsTheIndex(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	n := openFiltered(t, clock, 32)
	defer n.close(t)
	rng := rand.New(rand.NewPCG(81, 82))

	var mu sync.Mutex
	acked := map[chunk.Hash][]byte{} // held: Put returned, not deleted since
	var gone [][]byte                // deleted, to write again
	stop := make(chan struct{})
	var checks sync.WaitGroup
	checks.Add(1)
	failed := make(chan string, 1)
	go func() {
		defer checks.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			for h := range acked {
				if !n.st.maybeHeld(h) {
					select {
					case failed <- h.String():
					default:
					}
				}
			}
			mu.Unlock()
		}
	}()
	for round := range 30 {
		var wg sync.WaitGroup
		batch := make([][]byte, 40)
		for i := range batch {
			batch[i], _ = randomChunk(rng, 100+rng.IntN(3000))
		}
		if round%5 == 4 {
			// What the collector took is written again: the filter may
			// still have it or not (a build since), and must once the
			// write is acknowledged.
			batch = append(batch, gone...)
			gone = nil
		}
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(batch); i += 4 {
					h := chunk.Sum(batch[i])
					if err := n.st.Put(ctx, h, batch[i]); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked[h] = batch[i]
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// The collector takes a third of what is held; a few of the
		// chunks it took are written again next.
		clock.add(time.Hour)
		mu.Lock()
		var del []chunk.Hash
		for h, b := range acked {
			if rng.IntN(3) == 0 {
				del = append(del, h)
				delete(acked, h)
				if rng.IntN(4) == 0 {
					gone = append(gone, b)
				}
			}
		}
		mu.Unlock()
		if nd, _, err := n.st.Delete(del, clock.Now()); err != nil || nd != len(del) {
			t.Fatalf("Delete of %d chunks: %d, %v", len(del), nd, err)
		}
	}
	close(stop)
	checks.Wait()
	select {
	case h := <-failed:
		t.Fatalf("the filter said chunk %s is not held while the index held it", h)
	default:
	}
	waitFilter(t, n.st)
	n.st.filter.mu.Lock()
	builds := n.st.filter.builds
	n.st.filter.mu.Unlock()
	if builds < 3 {
		t.Fatalf("%d filter builds: the test did not exercise rebuilding under writes", builds)
	}
	for h := range acked {
		if ok, err := n.st.Has(h); err != nil || !ok {
			t.Fatalf("Has %s = %v, %v", h, ok, err)
		}
		if !n.st.maybeHeld(h) {
			t.Fatalf("the filter lost %s", h)
		}
	}
}

// TestFilterSkipsIndex checks what the filter is for: once built, a write
// of new chunks (the writer's dedup check) and a read of a chunk the
// store does not hold read no index entry; chunks held still read and
// deduplicate; and a filter with few false positives.
func TestFilterSkipsIndex(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	n := openFiltered(t, clock, 0)
	defer n.close(t)
	waitFilter(t, n.st)
	rng := rand.New(rand.NewPCG(83, 84))
	lookups0, skips0 := n.st.Lookups()
	var data [][]byte
	for range 200 {
		b, h := randomChunk(rng, 2000)
		if err := n.st.Put(ctx, h, b); err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	_, absent := randomChunk(rng, 10)
	if _, err := n.st.Get(ctx, absent, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a chunk never written = %v", err)
	}
	lookups1, skips1 := n.st.Lookups()
	if d := lookups1 - lookups0; d > 10 { // a false positive or two may look
		t.Fatalf("200 new chunks and one absent Get read the index %d times", d)
	}
	if d := skips1 - skips0; d < 190 {
		t.Fatalf("the filter answered %d of 201 lookups of absent chunks", d)
	}
	for _, b := range data[:20] {
		mustGet(t, n.st, chunk.Sum(b), b)
		if err := n.st.Put(ctx, chunk.Sum(b), b); err != nil { // held: deduplicated
			t.Fatal(err)
		}
	}
	if s := n.st.Stats(); s.Chunks != 200 {
		t.Fatalf("%d chunk records after writing 20 held chunks again, want 200", s.Chunks)
	}
	f := n.st.filter.cur.Load()
	fp := 0
	for range 100000 {
		_, h := randomChunk(rng, 8)
		if f.has(h) {
			fp++
		}
	}
	if fp > 100 { // sized for 1 Mi entries, holding 200
		t.Fatalf("%d false positives in 100,000", fp)
	}
}
