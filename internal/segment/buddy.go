package segment

import "math/bits"

// buddy hands out extents of a space of bytes by offset. Free space is
// kept as blocks of 2^k bytes at multiples of 2^k, for minOrder ≤ k ≤
// maxOrder. A request, rounded up to a multiple of 2^minOrder, is cut
// from the smallest free block that holds it, halving that as often as
// it can; what the request leaves of the block's end goes back at once,
// as the largest aligned blocks that tile it, so a request just over a
// power of two (a 4 MiB chunk and its record header) takes only what it
// needs. An extent given back is freed as the aligned blocks that tile
// it, each merged with its buddy (the other half of the block they were
// cut from) while that one is free too. Nothing is ever moved. The data
// cache keeps its chunks in one (arena.go). Not safe for concurrent use.
type buddy struct {
	minOrder, maxOrder int
	free               []freeList // by order
	used               int64      // bytes in extents handed out
}

// freeList is a set of free block offsets of one order: a stack, with
// each offset's place in it so that a buddy is taken out in O(1).
type freeList struct {
	offs []int64
	at   map[int64]int
}

func (l *freeList) push(off int64) {
	l.at[off] = len(l.offs)
	l.offs = append(l.offs, off)
}

func (l *freeList) pop() int64 {
	off := l.offs[len(l.offs)-1]
	l.offs = l.offs[:len(l.offs)-1]
	delete(l.at, off)
	return off
}

// remove takes off out if it is free, reporting whether it was.
func (l *freeList) remove(off int64) bool {
	i, ok := l.at[off]
	if !ok {
		return false
	}
	last := l.offs[len(l.offs)-1]
	l.offs[i] = last
	l.at[last] = i
	l.offs = l.offs[:len(l.offs)-1]
	delete(l.at, off)
	return true
}

// newBuddy returns a buddy over size bytes, which it rounds down to a
// multiple of 2^maxOrder.
func newBuddy(size int64, minOrder, maxOrder int) *buddy {
	b := &buddy{minOrder: minOrder, maxOrder: maxOrder, free: make([]freeList, maxOrder+1)}
	for k := range b.free {
		b.free[k].at = make(map[int64]int)
	}
	top := int64(1) << maxOrder
	// Pushed from the end, so the first blocks handed out are the
	// lowest: a small cache touches only the start of its space.
	for off := size/top*top - top; off >= 0; off -= top {
		b.free[maxOrder].push(off)
	}
	return b
}

// size returns the extent n bytes take: n rounded up to a multiple of
// 2^minOrder.
func (b *buddy) size(n int64) int64 {
	unit := int64(1) << b.minOrder
	return max(unit, (n+unit-1)&^(unit-1))
}

// orderOf returns the order of the block an extent for n bytes is cut
// from, or -1 when no block is large enough.
func (b *buddy) orderOf(n int64) int {
	k := bits.Len64(uint64(b.size(n) - 1))
	if k > b.maxOrder {
		return -1
	}
	return max(k, b.minOrder)
}

// alloc returns the offset and size (size(n)) of a free extent of at
// least n bytes. It reports false when no free block is large enough.
func (b *buddy) alloc(n int64) (int64, int64, bool) {
	k := b.orderOf(n)
	if k < 0 {
		return 0, 0, false
	}
	j := k
	for j <= b.maxOrder && len(b.free[j].offs) == 0 {
		j++
	}
	if j > b.maxOrder {
		return 0, 0, false
	}
	off := b.free[j].pop()
	for ; j > k; j-- {
		// Keep the lower half; the upper one is free.
		b.free[j-1].push(off + 1<<(j-1))
	}
	size := b.size(n)
	b.tile(off+size, off+1<<k, b.free1)
	b.used += size
	return off, size, true
}

// release gives back the extent at off of size bytes (from alloc).
func (b *buddy) release(off, size int64) {
	b.used -= size
	b.tile(off, off+size, b.free1)
}

// tile calls f with each of the largest aligned blocks that cover
// [from, to), in order; from and to are multiples of 2^minOrder.
func (b *buddy) tile(from, to int64, f func(off int64, k int)) {
	for from < to {
		k := b.maxOrder
		if from != 0 {
			k = min(k, bits.TrailingZeros64(uint64(from)))
		}
		for from+1<<k > to {
			k--
		}
		f(from, k)
		from += 1 << k
	}
}

// free1 frees the block at off of order k, merging it with its buddy
// while that is free.
func (b *buddy) free1(off int64, k int) {
	for k < b.maxOrder && b.free[k].remove(off^(1<<k)) {
		off &^= 1 << k
		k++
	}
	b.free[k].push(off)
}
