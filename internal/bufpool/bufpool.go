// Package bufpool recycles the large byte buffers of the data plane (chunk
// reads, segment records, the chunker's window), so that moving a chunk
// does not allocate, and the runtime zero, a fresh buffer of up to several
// MiB each time. The data plane shares one pool (Get, Put).
package bufpool

import (
	"math/bits"
	"sync"
)

// Buffer size classes: powers of two from 64 KiB to 64 MiB (the largest
// chunk). A larger request is allocated and not kept.
const (
	minShift = 16
	maxShift = 26
	classes  = maxShift - minShift + 1
)

// Pool keeps buffers in power-of-two size classes (a request takes at most
// twice its size). The zero value is ready to use; it is safe for
// concurrent use.
//
// A buffer must go back (Put) only once nothing refers to its memory any
// more.
type Pool struct {
	classes [classes]sync.Pool // of *[]byte
}

// class is the index of the smallest class that holds n bytes, or -1 if
// none does.
func class(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minShift
	if c >= classes {
		return -1
	}
	return c
}

// Get returns a buffer of at least n bytes (its contents are garbage) with
// len n.
func (p *Pool) Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := p.classes[c].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<(c+minShift))
	return &b
}

// shared is the process's pool: a buffer one user gives back serves the
// next, whatever it is for.
var shared Pool

// Get returns a buffer of the process's pool (Pool.Get).
func Get(n int) *[]byte { return shared.Get(n) }

// Put gives a buffer back to the process's pool (Pool.Put).
func Put(bp *[]byte) { shared.Put(bp) }

// Put gives a buffer from Get back for reuse. bp may be nil.
func (p *Pool) Put(bp *[]byte) {
	if bp == nil {
		return
	}
	// A buffer goes back to the class it was taken from: its capacity is
	// that class's size exactly.
	c := class(cap(*bp))
	if c < 0 || cap(*bp) != 1<<(c+minShift) {
		return
	}
	p.classes[c].Put(bp)
}
