// Package md5lanes computes MD5 digests of many streams at once. MD5 is a
// chain: each 64-byte block waits for the one before it, so one stream
// hashes at the speed of one core's dependent adds (some 650 MB/s), and a
// 16 MiB S3 PUT spent 40% of its CPU on its ETag. With AVX-512 one core
// can carry sixteen chains side by side, one per vector lane, for about
// the cost of one: the process's Digests hand their whole blocks to one
// engine, which hashes the streams that are waiting together.
//
// A Digest is a hash.Hash giving crypto/md5's results. A Write returns
// once its bytes are hashed, so the caller may reuse them; a stream waits
// for no other (a lane whose stream ends is given to the next waiting
// one, and a stream hashed alone goes through crypto/md5). Without
// AVX-512 every Digest is crypto/md5's.
package md5lanes

//go:generate go run gen.go

import (
	"crypto/md5"
	"encoding"
	"encoding/binary"
	"hash"
	"sync"
	"unsafe"
)

// Size and BlockSize are MD5's.
const (
	Size      = md5.Size
	BlockSize = md5.BlockSize
)

// minLanes is the shortest run of blocks a Write sends to the engine:
// below it the hand-off costs more than hashing in place.
const minLanes = 8 << 10

// maxRun is the most blocks one engine pass hashes before it gives free
// lanes to streams that arrived meanwhile (16 KiB a lane).
const maxRun = 256

// New returns a Digest: crypto/md5's where the engine cannot run.
func New() hash.Hash {
	if !haveLanes {
		return md5.New()
	}
	d := &Digest{done: make(chan struct{}, 1)}
	d.Reset()
	return d
}

// Digest is an MD5 hash whose whole blocks go through the engine.
type Digest struct {
	s       [4]uint32
	x       [BlockSize]byte
	nx      int
	len     uint64
	p       []byte // the blocks the engine has yet to hash
	done    chan struct{}
	pending bool // blocks handed to the engine by Start, not waited for
}

var initState = [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}

// Reset returns d to its empty state.
func (d *Digest) Reset() {
	d.Wait()
	d.s, d.nx, d.len, d.p = initState, 0, 0, nil
}

// Size returns Size.
func (d *Digest) Size() int { return Size }

// BlockSize returns BlockSize.
func (d *Digest) BlockSize() int { return BlockSize }

// Write adds p to the stream. It never returns an error.
func (d *Digest) Write(p []byte) (int, error) {
	d.Start(p)
	d.Wait()
	return len(p), nil
}

// Start adds p to the stream like Write, but may return before p is
// hashed: the caller must not change p until Wait (or the next Start,
// Write, Sum or Reset, which wait first). An upload that starts its
// chunk's MD5 before it hashes and copies the chunk itself lets the two
// overlap, and the engine meet more uploads at once.
func (d *Digest) Start(p []byte) {
	d.Wait()
	d.len += uint64(len(p))
	if d.nx > 0 {
		c := copy(d.x[d.nx:], p)
		d.nx += c
		p = p[c:]
		if d.nx < BlockSize {
			return
		}
		d.scalar(d.x[:])
		d.nx = 0
	}
	whole := len(p) &^ (BlockSize - 1)
	// The tail is kept first: the engine may hash the blocks after
	// Start returns, but only the tail is read after that.
	d.nx = copy(d.x[:], p[whole:])
	if whole >= minLanes {
		d.p, d.pending = p[:whole], true
		submit(d)
	} else if whole > 0 {
		d.scalar(p[:whole])
	}
}

// Wait returns once the blocks Start handed to the engine are hashed.
func (d *Digest) Wait() {
	if d.pending {
		<-d.done
		d.pending = false
	}
}

// Sum appends the digest of what was written to in; d is unchanged.
func (d *Digest) Sum(in []byte) []byte {
	d.Wait()
	h := d.md5()
	return h.Sum(in)
}

// md5 returns a crypto/md5 hash holding d's state.
func (d *Digest) md5() hash.Hash { return stateMD5(d.s, d.x[:d.nx], d.len) }

// stateMD5 returns a crypto/md5 hash in state s, with x buffered and
// length n written, through its binary form: magic, the four state
// words, the block buffer and the length, big-endian.
func stateMD5(s [4]uint32, x []byte, n uint64) hash.Hash {
	var b [4 + 16 + BlockSize + 8]byte
	copy(b[:], "md5\x01")
	for i, v := range s {
		binary.BigEndian.PutUint32(b[4+4*i:], v)
	}
	copy(b[20:], x)
	binary.BigEndian.PutUint64(b[20+BlockSize:], n)
	h := md5.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(b[:]); err != nil {
		panic("md5lanes: crypto/md5 refused its binary form: " + err.Error())
	}
	return h
}

// scalar hashes whole blocks into d.s with crypto/md5. It reads and
// writes d.s alone (the engine calls it while d's owner may be at work
// on the rest of d).
func (d *Digest) scalar(blocks []byte) {
	h := stateMD5(d.s, nil, 0)
	h.Write(blocks)
	var b [4 + 16 + BlockSize + 8]byte
	out, err := h.(encoding.BinaryAppender).AppendBinary(b[:0])
	if err != nil {
		panic("md5lanes: crypto/md5 has no binary form: " + err.Error())
	}
	for i := range d.s {
		d.s[i] = binary.BigEndian.Uint32(out[4+4*i:])
	}
}

// idle is what the lanes without a stream hash (their results are not
// kept).
var idle [maxRun * BlockSize]byte

// The engine: one goroutine at a time hashes the waiting streams, sixteen
// lanes at once; it exits when none is left.
var engine struct {
	mu      sync.Mutex
	queue   []*Digest
	running bool
}

func submit(d *Digest) {
	engine.mu.Lock()
	engine.queue = append(engine.queue, d)
	start := !engine.running
	engine.running = true
	engine.mu.Unlock()
	if start {
		go run()
	}
}

func run() {
	var (
		lanes [16]*Digest
		st    [4][16]uint32
		ptrs  [16]uint64
	)
	for {
		engine.mu.Lock()
		active := 0
		for i := range lanes {
			if lanes[i] == nil && len(engine.queue) > 0 {
				d := engine.queue[0]
				engine.queue[0] = nil
				engine.queue = engine.queue[1:]
				lanes[i] = d
				for w := range d.s {
					st[w][i] = d.s[w]
				}
			}
			if lanes[i] != nil {
				active++
			}
		}
		if active == 0 {
			engine.running = false
			engine.queue = engine.queue[:0:0]
			engine.mu.Unlock()
			return
		}
		engine.mu.Unlock()

		if active == 1 {
			// Alone: crypto/md5 is faster than one lane of sixteen.
			for i, d := range lanes {
				if d == nil {
					continue
				}
				for w := range d.s {
					d.s[w] = st[w][i]
				}
				n := min(len(d.p), maxRun*BlockSize)
				d.scalar(d.p[:n])
				d.p = d.p[n:]
				for w := range d.s {
					st[w][i] = d.s[w]
				}
				if len(d.p) == 0 {
					lanes[i] = nil
					d.done <- struct{}{}
				}
			}
			continue
		}

		n := maxRun
		var mask uint16
		for i, d := range lanes {
			if d != nil {
				n = min(n, len(d.p)/BlockSize)
				mask |= 1 << i
				ptrs[i] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(d.p))))
			} else {
				ptrs[i] = uint64(uintptr(unsafe.Pointer(&idle)))
			}
		}
		block16(&st, &ptrs, mask, n)
		for i, d := range lanes {
			if d == nil {
				continue
			}
			d.p = d.p[n*BlockSize:]
			if len(d.p) == 0 {
				for w := range d.s {
					d.s[w] = st[w][i]
				}
				lanes[i] = nil
				d.done <- struct{}{}
			}
		}
	}
}
