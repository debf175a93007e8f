//go:build !linux

package segment

import "sync/atomic"

// mapArena allocates the arena on the Go heap, where no mapping call is
// at hand; blockSize alignment is kept by the allocation's own.
func mapArena(size int64) ([]byte, func() error, error) {
	return alignedBuf(int(size)), nil, nil
}

// populate does nothing here: the heap's memory is touched as it is used.
func populate(mem []byte, stop *atomic.Bool, done func()) { done() }
