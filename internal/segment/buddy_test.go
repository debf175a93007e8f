package segment

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestBuddyModel runs random allocations and releases against a model
// (the extents handed out) and checks after each step that free blocks
// are aligned, that extents and free blocks lie inside the space without
// overlap and add up to it; that an extent is its request rounded up to
// the unit; that an allocation fails only when no free block is large
// enough; and, once all is given back, that the space is whole again.
func TestBuddyModel(t *testing.T) {
	const minOrder, maxOrder = 4, 10
	const size = 5<<maxOrder + 100 // rounded down to 5 top blocks
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		b := newBuddy(size, minOrder, maxOrder)
		type extent struct {
			off, size int64
			free      bool
		}
		var held []extent
		check := func(step int) {
			t.Helper()
			var free int64
			for k, l := range b.free {
				free += int64(len(l.offs)) << k
			}
			all := append([]extent(nil), held...)
			for k, l := range b.free {
				for _, off := range l.offs {
					if off%(1<<k) != 0 {
						t.Fatalf("seed %d step %d: free block %d of order %d is not aligned", seed, step, off, k)
					}
					all = append(all, extent{off, 1 << k, true})
				}
			}
			sort.Slice(all, func(i, j int) bool { return all[i].off < all[j].off })
			var end int64
			for _, x := range all {
				if x.off < end {
					t.Fatalf("seed %d step %d: %+v overlaps the one before", seed, step, x)
				}
				end = x.off + x.size
			}
			if end > 5<<maxOrder || free+b.used != 5<<maxOrder {
				t.Fatalf("seed %d step %d: free %d + used %d, space %d, last block ends at %d", seed, step, free, b.used, 5<<maxOrder, end)
			}
		}
		for step := range 2000 {
			if len(held) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(held))
				b.release(held[i].off, held[i].size)
				held = append(held[:i], held[i+1:]...)
			} else {
				n := 1 + rng.Int64N(1<<(minOrder+rng.IntN(maxOrder-minOrder+2)))
				off, size, ok := b.alloc(n)
				want := b.orderOf(n)
				if ok {
					if size < n || size%(1<<minOrder) != 0 || size-n >= 1<<minOrder {
						t.Fatalf("seed %d step %d: %d bytes got an extent of %d", seed, step, n, size)
					}
					held = append(held, extent{off, size, false})
				} else if want >= 0 {
					for j := want; j <= maxOrder; j++ {
						if len(b.free[j].offs) > 0 {
							t.Fatalf("seed %d step %d: %d bytes refused with a block of order %d free", seed, step, n, j)
						}
					}
				}
			}
			check(step)
		}
		for _, x := range held {
			b.release(x.off, x.size)
		}
		held = nil
		check(-1)
		if len(b.free[maxOrder].offs) != 5 || b.used != 0 {
			t.Fatalf("seed %d: all given back, %d whole top blocks and %d bytes used", seed, len(b.free[maxOrder].offs), b.used)
		}
	}
}

// TestBuddyLowFirst: the first blocks handed out are at the start of the
// space, so a cache that never fills touches only that much memory.
func TestBuddyLowFirst(t *testing.T) {
	b := newBuddy(4<<20, 16, 20)
	var last int64 = -1
	for range 16 {
		off, _, ok := b.alloc(64 << 10)
		if !ok || off <= last || off >= 1<<20 {
			t.Fatalf("allocation at %d after %d", off, last)
		}
		last = off
	}
}
