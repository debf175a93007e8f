package kv

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cairn-db/cairn/internal/mvcc"
)

func TestCacheFillAndWrite(t *testing.T) {
	c := NewCache(1 << 20)
	obj := []byte("obj")
	r1, r2 := &mvcc.Record{Version: 10}, &mvcc.Record{Version: 20}

	got, tok := c.Get(obj)
	if got != nil || !tok.ok {
		t.Fatalf("empty cache: got %v, token %v", got, tok)
	}
	c.Fill(obj, r1, tok)
	if got, _ := c.Get(obj); got != r1 {
		t.Fatalf("after fill: got %v, want version 10", got)
	}

	// While a write is pending the key is neither served nor filled.
	c.begin(obj)
	if got, tok := c.Get(obj); got != nil || tok.ok {
		t.Fatalf("pending key: got %v, token %v; want a miss without a token", got, tok)
	}
	c.end(obj, r2)
	if got, _ := c.Get(obj); got != r2 {
		t.Fatalf("after the write committed: got %v, want version 20", got)
	}

	// A reader that missed before a commit must not install what it read.
	c.begin(obj)
	c.end(obj, nil) // a version was removed: the latest is unknown
	got, tok = c.Get(obj)
	if got != nil {
		t.Fatalf("after removing a version: got %v, want a miss", got)
	}
	c.begin(obj)
	c.end(obj, r1)
	c.Fill(obj, r2, tok) // stale read from before the last commit
	if got, _ := c.Get(obj); got != r1 {
		t.Fatalf("stale fill replaced the committed latest: got %v", got)
	}
	c.begin(obj)
	c.end(obj, nil)
	if got, tok = c.Get(obj); got != nil || !tok.ok {
		t.Fatalf("after removing a version: got %v, token %v; want a miss with a token", got, tok)
	}
	c.begin(obj)
	c.end(obj, nil)
	c.Fill(obj, r2, tok) // read before the removal committed
	if got, _ := c.Get(obj); got != nil {
		t.Fatalf("a fill that raced with a removal installed version %d", got.Version)
	}
}

func TestCacheStats(t *testing.T) {
	c := NewCache(1 << 20)
	obj := []byte("obj")
	_, tok := c.Get(obj) // miss
	c.Fill(obj, &mvcc.Record{Version: 1}, tok)
	c.Get(obj) // hit
	c.Get(obj) // hit
	c.begin(obj)
	c.Get(obj) // pending: a miss
	c.end(obj, &mvcc.Record{Version: 2})
	if h, m := c.Stats(); h != 2 || m != 2 {
		t.Fatalf("Stats = %d hits, %d misses; want 2, 2", h, m)
	}
	if h, m := (*Cache)(nil).Stats(); h != 0 || m != 0 {
		t.Fatalf("nil cache Stats = %d, %d", h, m)
	}
}

func TestCacheNilHoldsNothing(t *testing.T) {
	c := NewCache(0)
	if c != nil {
		t.Fatal("NewCache(0) should be the nil cache")
	}
	got, tok := c.Get([]byte("k"))
	c.Fill([]byte("k"), &mvcc.Record{Version: 1}, tok)
	if got, _ = c.Get([]byte("k")); got != nil || c.Len() != 0 {
		t.Fatalf("nil cache returned %v", got)
	}
}

func TestCacheEvictsToCapacity(t *testing.T) {
	const capacity = 64 << 10
	c := NewCache(capacity)
	for i := range 10000 {
		obj := fmt.Appendf(nil, "key-%d", i)
		_, tok := c.Get(obj)
		c.Fill(obj, &mvcc.Record{Version: uint64(i + 1), Inline: make([]byte, 100)}, tok)
	}
	var total int64
	for i := range c.shards {
		total += c.shards[i].bytes
	}
	if total > capacity || c.Len() == 0 {
		t.Fatalf("cache holds %d bytes in %d records; capacity %d", total, c.Len(), capacity)
	}
}

// TestCacheLinearizable interleaves, step by step under a seeded random
// scheduler, a writer that applies puts and latest-version removals through
// the begin / commit / end protocol against a model of pebble, with readers
// that read through the cache and fill it on a miss. Every read must return a
// record that was the committed latest at some moment between the read's
// start (at least what had been acknowledged) and its end.
func TestCacheLinearizable(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { cacheInterleavings(t, seed) })
	}
}

func cacheInterleavings(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := NewCache(1 << 20)
	obj := []byte("hot")
	history := []*mvcc.Record{{Version: 1}} // history[i]: latest after commit i
	versions := []*mvcc.Record{history[0]}
	acked, next := 0, uint64(2)

	// The writer: 0 idle, 1 begun, 2 committed (then end and acknowledge).
	wphase, wlatest := 0, (*mvcc.Record)(nil)
	stepWriter := func() {
		switch wphase {
		case 0:
			if rng.IntN(4) == 0 { // another key of the same shard
				c.begin([]byte("other"))
				c.end([]byte("other"), &mvcc.Record{Version: next})
				next++
			}
			if rng.IntN(3) == 0 && len(versions) > 1 {
				versions = versions[:len(versions)-1]
			} else {
				versions = append(versions, &mvcc.Record{Version: next})
				next++
			}
			wlatest = versions[len(versions)-1]
			c.begin(obj)
		case 1:
			history = append(history, wlatest) // the apply batch commits
		case 2:
			if rng.IntN(2) == 0 {
				c.end(obj, wlatest)
			} else {
				c.end(obj, nil)
			}
			acked = len(history) - 1
		}
		wphase = (wphase + 1) % 3
	}

	// A reader: 0 start (Get), 1 read pebble, 2 fill, 3 finish (check).
	type reader struct {
		phase int
		lo    int
		got   *mvcc.Record
		tok   CacheToken
	}
	readers := make([]reader, 3)
	stepReader := func(r *reader) {
		switch r.phase {
		case 0:
			r.lo = acked
			if r.got, r.tok = c.Get(obj); r.got != nil {
				r.phase = 3
				return
			}
		case 1:
			r.got = history[len(history)-1]
		case 2:
			c.Fill(obj, r.got, r.tok)
		case 3:
			hi := len(history) - 1
			ok := false
			for i := r.lo; i <= hi; i++ {
				ok = ok || history[i] == r.got
			}
			if !ok {
				t.Fatalf("read version %d, which was not the latest at any commit in %d..%d", r.got.Version, r.lo, hi)
			}
			r.phase = 0
			return
		}
		r.phase++
	}

	for range 100000 {
		if i := rng.IntN(len(readers) + 1); i == len(readers) {
			stepWriter()
		} else {
			stepReader(&readers[i])
		}
	}
}

func TestCacheClearRange(t *testing.T) {
	c := NewCache(1 << 20)
	obj := []byte("k")
	_, tok := c.Get(obj)
	c.Fill(obj, &mvcc.Record{Version: 1}, tok)
	outside := []byte("z")
	_, tok = c.Get(outside)
	c.Fill(outside, &mvcc.Record{Version: 3}, tok)
	_, stale := c.Get([]byte("other"))
	c.ClearRange([]byte("a"), []byte("p"))
	if rec, _ := c.Get(obj); rec != nil {
		t.Fatal("record served after Clear")
	}
	c.Fill([]byte("other"), &mvcc.Record{Version: 2}, stale)
	if rec, _ := c.Get([]byte("other")); rec != nil {
		t.Fatal("a miss from before Clear filled the cache")
	}
	if rec, _ := c.Get(outside); rec == nil || rec.Version != 3 {
		t.Fatalf("a record of another range was dropped: %+v", rec)
	}
	c.ClearRange(nil, nil)
	if rec, _ := c.Get(outside); rec != nil {
		t.Fatal("record served after clearing everything")
	}
	(*Cache)(nil).ClearRange(nil, nil)
}
