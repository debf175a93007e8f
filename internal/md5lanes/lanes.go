// Package md5lanes computes the MD5 digests of many concurrent streams
// together, each stream in one 32-bit lane of AVX-512 registers, so that
// sixteen streams cost about what one costs with crypto/md5.
//
// MD5 is a serial chain within a stream; the only way to hash faster on
// one core is to hash several streams at once. A Hasher owns a slab of
// fixed-size slots. A Stream's Write copies whole 64-byte blocks into free
// slots and queues them, and returns at once unless every slot is queued
// (then it waits for one: the Hasher's memory is bounded). One goroutine
// per Hasher takes the head slot of up to sixteen streams with queued work
// and runs the kernel over all of them in one pass; a stream's slots are
// hashed in the order they were written. A pass costs the same however
// few lanes it fills, so the goroutine waits for work to pile up: it runs
// once fullPass streams have work queued, or a Sum is waiting, or half the
// slots are queued. Sum waits until the stream's queue is empty and
// finishes the digest with the padding.
//
// This is github.com/minio/md5-simd's kernel under a different scheduler:
// md5-simd hands each 32 KiB over a channel and waits for its turn, and
// its server yields whenever a registered stream has nothing queued, so on
// a busy machine its lanes run mostly empty while writers wait. Here a
// writer queues whole chunks and goes on, and the kernel runs whenever any
// stream has work.
//
// Without AVX-512 (or off amd64) a Stream is crypto/md5, hashed in its
// writer's goroutine.
package md5lanes

import (
	"crypto/md5"
	"encoding/binary"
	"hash"
	"runtime"
	"sync"
	"unsafe"
)

const (
	// Lanes is how many streams one pass of the kernel hashes.
	Lanes = 16

	blockSize = md5.BlockSize
	// slotSize is the most one queued piece holds: 64 KiB keeps a pass
	// long enough (1 MiB over sixteen lanes) that the bookkeeping between
	// passes is noise.
	slotSize = 64 << 10
	// numSlots bounds the Hasher's memory (16 MiB): a full 1 MiB chunk
	// queued for each of sixteen streams.
	numSlots = 256
	// fullPass is how many streams with queued work make a pass worth
	// running without a waiting Sum or a filling slab.
	fullPass = Lanes / 2
)

// MD5's initial state and its 64 additive constants.
var (
	md5Init   = [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}
	md5Consts = [64]uint32{
		0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
		0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
		0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
		0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
		0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
		0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
		0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
		0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
	}
)

// state16 is the kernel's state: word w of lane i is w[i] (v0..v3 are
// MD5's A..D).
type state16 struct {
	v0, v1, v2, v3 [Lanes]uint32
}

func (s *state16) set(i int, d [4]uint32) {
	s.v0[i], s.v1[i], s.v2[i], s.v3[i] = d[0], d[1], d[2], d[3]
}

func (s *state16) get(i int) [4]uint32 {
	return [4]uint32{s.v0[i], s.v1[i], s.v2[i], s.v3[i]}
}

// piece is a queued run of whole blocks in the slab.
type piece struct {
	off int32 // of its slot in the slab
	n   int32 // bytes, a multiple of blockSize
}

// A Hasher hashes the queued blocks of its Streams. It is safe for
// concurrent use; each Stream has one writer at a time.
type Hasher struct {
	slab []byte
	free chan int32 // offsets of the slots not queued

	mu struct {
		sync.Mutex
		work   sync.Cond // signalled when a pass may be due or the Hasher closes
		ready  []*Stream // streams with queued pieces, oldest work first
		queued int       // pieces queued in all
		urgent int       // streams waiting in drain
		closed bool
	}
	done chan struct{}
}

// New returns a Hasher. Without AVX-512 it starts nothing and its Streams
// are crypto/md5.
func New() *Hasher {
	h := &Hasher{done: make(chan struct{})}
	h.mu.work.L = &h.mu.Mutex
	if !haveKernel {
		close(h.done)
		return h
	}
	h.slab = make([]byte, numSlots*slotSize)
	h.free = make(chan int32, numSlots)
	for i := range numSlots {
		h.free <- int32(i * slotSize)
	}
	go h.run()
	return h
}

// Close stops the Hasher's goroutine once the pieces already queued are
// hashed. No Stream of it may be written after Close.
func (h *Hasher) Close() {
	h.mu.Lock()
	h.mu.closed = true
	h.mu.work.Broadcast()
	h.mu.Unlock()
	<-h.done
}

// A Stream is one MD5 computation (a hash.Hash). Its Write and Sum must
// not be called concurrently.
type Stream struct {
	h   *Hasher
	std hash.Hash // crypto/md5, without the kernel

	// Owned by the writer.
	x   [blockSize]byte // a partial block not yet queued
	nx  int
	len uint64
	pad [2 * blockSize]byte // the final blocks; in the struct so that it is on the heap

	// Guarded by h.mu.
	queue   []piece
	state   [4]uint32
	queued  bool          // in h.mu.ready
	drained chan struct{} // closed when queue empties, if Sum waits
}

// NewStream returns an empty Stream.
func (h *Hasher) NewStream() *Stream {
	s := &Stream{h: h}
	if !haveKernel {
		s.std = md5.New()
	}
	s.state = md5Init
	return s
}

// Size returns md5.Size.
func (s *Stream) Size() int { return md5.Size }

// BlockSize returns md5.BlockSize.
func (s *Stream) BlockSize() int { return blockSize }

// Write adds p to the stream. It copies p's whole blocks into the Hasher's
// slots and queues them, waiting only while every slot is queued; p may
// be reused once Write returns. It never returns an error.
func (s *Stream) Write(p []byte) (int, error) {
	if s.std != nil {
		return s.std.Write(p)
	}
	n := len(p)
	s.len += uint64(n)
	if s.nx > 0 {
		c := copy(s.x[s.nx:], p)
		s.nx += c
		p = p[c:]
		if s.nx < blockSize {
			return n, nil
		}
	}
	// The pieces of one Write are queued together (one lock), but a
	// Write that must wait for a slot queues what it has filled first:
	// the slots it waits for may be the ones it holds.
	var fill [16]piece
	pending := fill[:0]
	for s.nx == blockSize || len(p) >= blockSize {
		var off int32
		select {
		case off = <-s.h.free:
		default:
			s.h.enqueue(s, pending)
			pending = pending[:0]
			off = <-s.h.free
		}
		buf := s.h.slab[off : off+slotSize]
		k := 0
		if s.nx == blockSize {
			k = copy(buf, s.x[:])
			s.nx = 0
		}
		m := min(len(p), slotSize-k) &^ (blockSize - 1)
		k += copy(buf[k:], p[:m])
		p = p[m:]
		pending = append(pending, piece{off: off, n: int32(k)})
		if len(pending) == cap(pending) {
			s.h.enqueue(s, pending)
			pending = pending[:0]
		}
	}
	s.h.enqueue(s, pending)
	s.nx = copy(s.x[:], p)
	return n, nil
}

// Sum appends the digest of everything written to b. It waits for the
// stream's queued blocks to be hashed; the stream can be written after.
func (s *Stream) Sum(b []byte) []byte {
	if s.std != nil {
		return s.std.Sum(b)
	}
	d := s.h.drain(s)
	k := copy(s.pad[:], s.x[:s.nx])
	clear(s.pad[k:])
	s.pad[k] = 0x80
	n := blockSize
	if s.nx >= blockSize-8 {
		n = 2 * blockSize
	}
	binary.LittleEndian.PutUint64(s.pad[n-8:], s.len<<3)
	var st state16
	st.set(0, d)
	ptrs := [Lanes]int32{}
	block16(&st.v0[0], uintptr(unsafe.Pointer(&s.pad[0])), &ptrs[0], 1, n)
	// The kernel has only pad's address: s must stay reachable until it
	// returns.
	runtime.KeepAlive(s)
	d = st.get(0)
	for _, w := range d {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

// Reset empties the stream.
func (s *Stream) Reset() {
	if s.std != nil {
		s.std.Reset()
		return
	}
	s.h.drain(s)
	s.h.mu.Lock()
	s.state = md5Init
	s.h.mu.Unlock()
	s.nx, s.len = 0, 0
}

// enqueue queues ps on s, in order.
func (h *Hasher) enqueue(s *Stream, ps []piece) {
	if len(ps) == 0 {
		return
	}
	h.mu.Lock()
	s.queue = append(s.queue, ps...)
	h.mu.queued += len(ps)
	if !s.queued {
		s.queued = true
		h.mu.ready = append(h.mu.ready, s)
	}
	if h.passDueLocked() {
		h.mu.work.Signal()
	}
	h.mu.Unlock()
}

// passDueLocked reports whether the goroutine should run a pass now.
func (h *Hasher) passDueLocked() bool {
	if len(h.mu.ready) == 0 {
		return false
	}
	return len(h.mu.ready) >= fullPass || h.mu.urgent > 0 || h.mu.closed || 2*h.mu.queued >= numSlots
}

// drain waits until s has nothing queued and returns its state.
func (h *Hasher) drain(s *Stream) [4]uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(s.queue) == 0 {
		return s.state
	}
	s.drained = make(chan struct{})
	ch := s.drained
	h.mu.urgent++
	h.mu.work.Signal()
	h.mu.Unlock()
	<-ch
	h.mu.Lock()
	return s.state
}

// run is the Hasher's goroutine: it hashes the head piece of up to Lanes
// ready streams per pass until the Hasher is closed and nothing is queued.
func (h *Hasher) run() {
	defer close(h.done)
	var (
		lanes  [Lanes]*Stream
		pieces [Lanes]piece
		st     state16
	)
	base := uintptr(unsafe.Pointer(&h.slab[0]))
	h.mu.Lock()
	for {
		for !h.passDueLocked() && !h.mu.closed {
			h.mu.work.Wait()
		}
		if len(h.mu.ready) == 0 {
			h.mu.Unlock()
			return
		}
		n := copy(lanes[:], h.mu.ready)
		for i, s := range lanes[:n] {
			pieces[i] = s.queue[0]
			st.set(i, s.state)
		}
		h.mu.Unlock()

		hashPieces(&st, base, pieces[:n])
		runtime.KeepAlive(h.slab) // base is its address

		h.mu.Lock()
		// The streams just hashed go to the back of the line if they have
		// more queued, so that a seventeenth stream gets its turn.
		rest := h.mu.ready[:copy(h.mu.ready, h.mu.ready[n:])]
		for i, s := range lanes[:n] {
			s.state = st.get(i)
			s.queue[0] = piece{}
			s.queue = s.queue[1:]
			h.mu.queued--
			h.free <- pieces[i].off
			if len(s.queue) > 0 {
				rest = append(rest, s)
			} else {
				s.queue = nil
				s.queued = false
				if s.drained != nil {
					close(s.drained)
					s.drained = nil
					h.mu.urgent--
				}
			}
			lanes[i] = nil
		}
		clear(h.mu.ready[len(rest):])
		h.mu.ready = rest
	}
}

// hashPieces advances the state of lane i over pieces[i], lanes of
// different lengths in as many kernel passes as there are distinct
// lengths (each pass masks off the lanes already finished).
func hashPieces(st *state16, base uintptr, pieces []piece) {
	var ptrs [Lanes]int32
	for i, p := range pieces {
		ptrs[i] = p.off
	}
	done := int32(0)
	for {
		var mask uint64
		next := int32(-1)
		for i, p := range pieces {
			if p.n > done {
				mask |= 1 << i
				if next < 0 || p.n < next {
					next = p.n
				}
			}
		}
		if mask == 0 {
			return
		}
		n := next - done
		out := *st
		block16(&out.v0[0], base, &ptrs[0], mask, int(n))
		for i := range pieces {
			if mask&(1<<i) != 0 {
				st.set(i, out.get(i))
			}
			ptrs[i] += n
		}
		done = next
	}
}
