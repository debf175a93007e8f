package chunk

import "sync/atomic"

// Pin keeps the memory under views of a chunk from being reused while
// they are read: a node's cache of verified chunks recycles its memory
// (it is not the garbage collector's), so whoever holds a view of it
// holds a reference, and the memory goes back to the cache only when the
// last one is released. Each holder calls Release once; a holder that
// hands a view on to another (a queued frame, say) Retains first. A nil
// Pin pins nothing: its view is ordinary garbage-collected memory.
type Pin struct {
	refs atomic.Int32
	free func()
}

// NewPin returns a Pin with one reference, whose release calls free.
func NewPin(free func()) *Pin {
	p := &Pin{free: free}
	p.refs.Store(1)
	return p
}

// Retain adds a reference.
func (p *Pin) Retain() {
	if p != nil && p.refs.Add(1) <= 1 {
		panic("chunk: Retain of a released Pin")
	}
}

// Release drops a reference; the last one frees the memory.
func (p *Pin) Release() {
	if p == nil {
		return
	}
	switch n := p.refs.Add(-1); {
	case n == 0:
		p.free()
	case n < 0:
		panic("chunk: Pin released more often than retained")
	}
}
