package segment

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// arena is the data cache's memory (datacache.go): one mapping made when
// the store opens, outside the Go heap, cut into power-of-two blocks by a
// buddy allocator. Memory the cache lets go of is handed to the next chunk
// it keeps, already mapped and touched, rather than left to the garbage
// collector: copying a chunk into freshly allocated memory, which the
// kernel must find and zero page by page, halved the 16 MiB PUTs when the
// cache took the chunks written (docs/benchmarks.md). The mapping asks
// for huge pages where the kernel has them (one fault per 2 MiB rather
// than per 4 KiB the first time a block is touched), and the heap stays
// the size of the live objects, with no cache for the collector to scan
// past or double. Blocks are aligned to their size, so any block of
// blockSize or more takes an O_DIRECT read.
type arena struct {
	mu     sync.Mutex
	size   int64 // of the mapping
	mem    []byte
	b      *buddy
	unmap  func() error
	closed atomic.Bool    // unmapped once the last block comes back
	filled sync.WaitGroup // populate, until it has done or closed is set
}

// Orders of the arena's blocks: from 4 KiB (one device block) to 128 MiB
// (the largest record, of a MaxChunkSize chunk, with the device blocks
// around it a direct read takes, fits).
const (
	arenaMinOrder = 12
	arenaMaxOrder = 27
)

// newArena maps size bytes (rounded down to whole blocks of the largest
// order, or, when that is less than one, to a power of two), or returns
// nil when size is too small to hold a block. With prefault, the whole
// mapping is faulted in from the start, at low priority (populate).
func newArena(size int64, prefault bool) (*arena, error) {
	top := arenaMaxOrder
	if size < 1<<top {
		if size < 1<<arenaMinOrder {
			return nil, nil
		}
		top = bits.Len64(uint64(size)) - 1
	}
	size = size >> top << top
	mem, unmap, err := mapArena(size)
	if err != nil {
		return nil, err
	}
	a := &arena{size: size, mem: mem, b: newBuddy(size, arenaMinOrder, top), unmap: unmap}
	if prefault {
		a.filled.Add(1)
		go populate(mem, &a.closed, a.filled.Done)
	}
	return a, nil
}

// block is memory of the arena: n bytes, in the extent at off of size
// bytes.
type block struct {
	b    []byte
	off  int64
	size int64
}

// alloc returns a block of n bytes (its slice has n bytes, its capacity
// what the block holds), or reports false when no free block is large
// enough or the arena is closed.
func (a *arena) alloc(n int) (block, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() {
		return block{}, false
	}
	off, size, ok := a.b.alloc(int64(n))
	if !ok {
		return block{}, false
	}
	return block{b: a.mem[off : off+int64(n) : off+size], off: off, size: size}, true
}

// fits reports whether the arena has a block for n bytes at all.
func (a *arena) fits(n int) bool { return a.b.orderOf(int64(n)) >= 0 }

// release gives bl back; no view of it may be read from then on.
func (a *arena) release(bl block) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.b.release(bl.off, bl.size)
	if a.closed.Load() && a.b.used == 0 {
		a.unmapLocked()
	}
}

// used returns the bytes of the blocks handed out.
func (a *arena) used() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.b.used
}

// close unmaps the arena, now or, while blocks are still out (views a
// reader holds past the store's close), when the last comes back.
func (a *arena) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed.Store(true)
	if a.b.used == 0 {
		a.unmapLocked()
	}
}

func (a *arena) unmapLocked() {
	a.filled.Wait() // (it stops within a step of closed)
	if a.unmap != nil {
		_ = a.unmap() // (fails only on a bad range: ours is the mapping's)
		a.unmap = nil
	}
	a.mem = nil
}
