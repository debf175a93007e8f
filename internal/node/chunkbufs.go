package node

import (
	"math/bits"
	"sync"

	"github.com/cairn-db/cairn/internal/chunk"
)

// Buffer size classes of chunkBufs: powers of two from 64 KiB to
// chunk.MaxChunkSize.
const (
	minBufShift = 16
	maxBufShift = 26
	bufClasses  = maxBufShift - minBufShift + 1
)

// The classes must reach chunk.MaxChunkSize.
var _ [1<<maxBufShift - chunk.MaxChunkSize]struct{}

// chunkBufs recycles the buffers that streamed chunk reads land in, so
// that a large GET does not allocate, and the runtime zero, a fresh buffer
// for every chunk. Buffers are kept in power-of-two size classes (a chunk
// takes at most twice its size). The zero value is ready to use; it is
// safe for concurrent use.
//
// A buffer must go back (put) only once nothing refers to its memory any
// more: chunkReader puts one back when the reader has copied all of it out
// or is closed.
type chunkBufs struct {
	classes [bufClasses]sync.Pool // of *[]byte
}

// bufClass is the index of the smallest class that holds n bytes, or -1
// if none does.
func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minBufShift
	if c >= bufClasses {
		return -1
	}
	return c
}

// get returns a buffer of at least n bytes (its contents are garbage) with
// len n.
func (p *chunkBufs) get(n int) *[]byte {
	c := bufClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := p.classes[c].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<(c+minBufShift))
	return &b
}

// put gives a buffer from get back for reuse. bp may be nil.
func (p *chunkBufs) put(bp *[]byte) {
	if bp == nil {
		return
	}
	// A buffer goes back to the class it was taken from: its capacity is
	// that class's size exactly.
	c := bufClass(cap(*bp))
	if c < 0 || cap(*bp) != 1<<(c+minBufShift) {
		return
	}
	p.classes[c].Put(bp)
}
