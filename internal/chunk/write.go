package chunk

import (
	"fmt"
	"slices"
)

// DefaultFixedSize is the piece size WriteAt and Append cut rewritten regions
// into when given fixedSize <= 0.
const DefaultFixedSize = 1 << 20

// WriteAt returns a manifest whose content is m's with bytes [off,
// off+len(data)) replaced by data. The object grows if the write ends past
// its end; a gap between the old end and off reads as zeros.
//
// It stores about what it changes: data is cut into new pieces of
// fixedSize bytes (DefaultFixedSize if fixedSize <= 0; a last remainder
// under a quarter piece joins the piece before it), each handed to store,
// and the parts of the first and last entries it overwrites in part stay
// where they are as entries holding slices of their chunks (Ref.Off) —
// nothing around the write is read or stored again. Every entry entirely
// before off or entirely after the write keeps its Ref, so the new
// version shares it with the parent. Two exceptions keep manifests and
// reads in bounds: a kept part under an eighth of a piece (a sliver) is
// re-stored with the new bytes, as is a neighbour of a write that would
// otherwise leave a piece under an eighth; and a kept part of an entry
// larger than two pieces (a content-defined chunk, or a piece of a larger
// write) is re-cut into pieces, so that no slice of a small write reads a
// large chunk for a few bytes. Every entry a write makes is thus at least
// an eighth of a piece unless the object is smaller, and a manifest of an
// object of S bytes written in pieces of F has at most 8·S/F entries, with
// no compaction needed. An empty write returns m unchanged (a copy).
//
// load returns the content of a chunk of m (only the first and last touched
// entries' chunks are loaded, and only in the cases above). store saves a
// piece and returns its Ref; it must not modify the slice, and may keep
// it: WriteAt does not reuse it (a piece is a slice of data, or a buffer
// of its own), so the caller must not change data after either. A load or
// store error is returned wrapped; m is never modified.
func WriteAt(m Manifest, off int64, data []byte, fixedSize int, load func(Ref) ([]byte, error), store func([]byte) (Ref, error)) (Manifest, error) {
	if off < 0 {
		return Manifest{}, fmt.Errorf("chunk: WriteAt at negative offset %d", off)
	}
	fixedSize, err := pieceSize(fixedSize)
	if err != nil {
		return Manifest{}, err
	}
	if len(data) == 0 {
		return m.clone(), nil
	}
	end := off + int64(len(data))

	// Entries [i0, i1) are touched; entry i0 starts at s0; entry i1-1
	// starts at sLast; the old content ends at size.
	i0, i1 := len(m.Chunks), len(m.Chunks)
	var s0, sLast, pos int64
	for i, r := range m.Chunks {
		next := pos + int64(r.Size)
		if i0 == len(m.Chunks) && next > off {
			i0, s0 = i, pos
		}
		if pos >= end {
			i1 = i
			break
		}
		if i0 != len(m.Chunks) {
			sLast = pos
		}
		pos = next
	}
	size := m.Size()
	if i0 == len(m.Chunks) {
		s0 = size
	}

	sliver := int64(fixedSize / 8)
	sliceable := func(r Ref) bool { return int64(r.Off)+int64(r.Size) <= 2*int64(fixedSize) }
	var (
		head, tail   []Ref  // slices of the first and last entries kept
		headP, tailP []part // or those parts, stored again
		mid          []part
		length       int64 // of the parts stored again
	)
	if s0 < off && i0 < len(m.Chunks) {
		r := m.Chunks[i0]
		keep := off - s0
		if sliceable(r) && keep >= sliver {
			head = []Ref{{Hash: r.Hash, Off: r.Off, Size: uint32(keep)}}
		} else {
			headP = []part{{chunk: i0, from: 0, to: keep}}
			length += keep
		}
	}
	if off > size {
		mid = append(mid, part{chunk: -1, zeros: off - size})
		length += off - size
	}
	mid = append(mid, part{chunk: -1, data: data})
	length += int64(len(data))
	if i1 > i0 {
		r := m.Chunks[i1-1]
		lastEnd := sLast + int64(r.Size)
		if end < lastEnd {
			within, keep := end-sLast, lastEnd-end
			if sliceable(r) && keep >= sliver {
				tail = []Ref{{Hash: r.Hash, Off: r.Off + uint32(within), Size: uint32(keep)}}
			} else {
				tailP = []part{{chunk: i1 - 1, from: within, to: int64(r.Size)}}
				length += keep
			}
		}
	}
	// No sliver of new bytes between two kept slices: take a neighbour in.
	if length < sliver {
		switch {
		case head != nil:
			headP, head = []part{{chunk: i0, from: 0, to: off - s0}}, nil
		case tail != nil:
			r := m.Chunks[i1-1]
			tailP, tail = []part{{chunk: i1 - 1, from: end - sLast, to: int64(r.Size)}}, nil
		}
	}
	parts := append(append(headP, mid...), tailP...)
	nm, err := rewrite(m, i0, i1, head, parts, tail, fixedSize, load, store)
	if err != nil {
		return Manifest{}, err
	}
	nm.Tree = treeAfter(m.Tree, off, end)
	return nm, nil
}

// treeAfter is tree, a manifest's chaining values, with those of the
// blocks a write of [off, end) changed forgotten (zero).
func treeAfter(tree []CV, off, end int64) []CV {
	if len(tree) == 0 {
		return nil
	}
	out := slices.Clone(tree)
	for i := off / TreeBlock; i < int64(len(out)) && i*TreeBlock < end; i++ {
		out[i] = CV{}
	}
	return out
}

// Append returns a manifest whose content is m's followed by data. If m's
// last chunk is small (under a quarter of fixedSize) it is re-cut together
// with data, so that repeated small appends do not leave a trail of tiny
// chunks; otherwise data just becomes new chunks. New pieces are fixedSize
// bytes (DefaultFixedSize if fixedSize <= 0). load and store are as for
// WriteAt; every other chunk of m is shared.
func Append(m Manifest, data []byte, fixedSize int, load func(Ref) ([]byte, error), store func([]byte) (Ref, error)) (Manifest, error) {
	fixedSize, err := pieceSize(fixedSize)
	if err != nil {
		return Manifest{}, err
	}
	if len(data) == 0 {
		return m.clone(), nil
	}
	n, i0 := len(m.Chunks), len(m.Chunks)
	parts := []part{{chunk: -1, data: data}}
	if n > 0 && int(m.Chunks[n-1].Size) < fixedSize/4 {
		i0 = n - 1
		parts = append([]part{{chunk: n - 1, from: 0, to: int64(m.Chunks[n-1].Size)}}, parts...)
	}
	nm, err := rewrite(m, i0, n, nil, parts, nil, fixedSize, load, store)
	if err != nil {
		return Manifest{}, err
	}
	nm.Tree = slices.Clone(m.Tree) // whole blocks end before the old end: unchanged
	return nm, nil
}

func pieceSize(fixedSize int) (int, error) {
	if fixedSize <= 0 {
		return DefaultFixedSize, nil
	}
	if fixedSize > MaxChunkSize {
		return 0, fmt.Errorf("chunk: fixed piece size %d exceeds %d", fixedSize, MaxChunkSize)
	}
	return fixedSize, nil
}

func (m Manifest) clone() Manifest {
	if m.Chunks == nil {
		return Manifest{}
	}
	return Manifest{Chunks: append([]Ref(nil), m.Chunks...), Tree: slices.Clone(m.Tree)}
}

// part is one source of a rewritten region: a sub-range [from, to) of chunk
// index chunk of the parent, a run of zeros, or caller data.
type part struct {
	chunk    int // parent chunk index, or -1
	from, to int64
	zeros    int64
	data     []byte
}

// rewrite replaces entries [i0, i1) of m by head, the concatenation of
// parts cut into pieces of fixedSize bytes (a last remainder under a
// quarter piece joins the piece before it), and tail.
func rewrite(m Manifest, i0, i1 int, head []Ref, parts []part, tail []Ref, fixedSize int, load func(Ref) ([]byte, error), store func([]byte) (Ref, error)) (Manifest, error) {
	loaded := map[int][]byte{}
	get := func(i int) ([]byte, error) {
		if b, ok := loaded[i]; ok {
			return b, nil
		}
		r := m.Chunks[i]
		c, err := load(r)
		if err != nil {
			return nil, fmt.Errorf("chunk: load %s: %w", r.Hash, err)
		}
		b, err := r.Of(c)
		if err != nil {
			return nil, err
		}
		loaded[i] = b
		return b, nil
	}
	var total int64
	for _, p := range parts {
		switch {
		case p.chunk >= 0:
			total += p.to - p.from
		case p.zeros > 0:
			total += p.zeros
		default:
			total += int64(len(p.data))
		}
	}
	var (
		out     []Ref
		buf     []byte // a piece being assembled
		zeroRef *Ref   // the Ref of a full piece of zeros, once stored
		done    int64  // bytes of the region cut so far
		room    int    // the size of the piece being assembled
	)
	// next sizes the piece that starts at done: fixedSize, or the whole
	// rest if that is under a piece and a quarter.
	next := func() {
		room = fixedSize
		if rest := total - done; rest <= int64(fixedSize+fixedSize/4) && rest <= MaxChunkSize {
			room = int(rest)
		}
	}
	next()
	put := func(p []byte) error {
		r, err := store(p)
		if err != nil {
			return fmt.Errorf("chunk: store piece: %w", err)
		}
		if int(r.Size) != len(p) || r.Off != 0 {
			return fmt.Errorf("chunk: store returned %d bytes at %d for a piece of %d bytes", r.Size, r.Off, len(p))
		}
		out = append(out, r)
		done += int64(len(p))
		next()
		return nil
	}
	// add appends b to the piece being assembled, storing full pieces. A
	// whole piece available in b is stored without copying.
	add := func(b []byte) error {
		for len(b) > 0 {
			if len(buf) == 0 && len(b) >= room {
				n := room
				if err := put(b[:n]); err != nil {
					return err
				}
				b = b[n:]
				continue
			}
			if buf == nil {
				buf = make([]byte, 0, room)
			}
			n := min(room-len(buf), len(b))
			buf = append(buf, b[:n]...)
			b = b[n:]
			if len(buf) == room {
				if err := put(buf); err != nil {
					return err
				}
				buf = nil // store may keep it
			}
		}
		return nil
	}
	var zeros []byte
	for _, p := range parts {
		switch {
		case p.chunk >= 0:
			b, err := get(p.chunk)
			if err != nil {
				return Manifest{}, err
			}
			if err := add(b[p.from:p.to]); err != nil {
				return Manifest{}, err
			}
		case p.zeros > 0:
			if zeros == nil {
				zeros = make([]byte, fixedSize)
			}
			left := p.zeros
			for left > 0 {
				if len(buf) == 0 && room == fixedSize && left >= int64(fixedSize) {
					// Whole pieces of zeros are all the same chunk: store
					// it once.
					if zeroRef == nil {
						if err := put(zeros); err != nil {
							return Manifest{}, err
						}
						zr := out[len(out)-1]
						zeroRef = &zr
					} else {
						out = append(out, *zeroRef)
						done += int64(fixedSize)
						next()
					}
					left -= int64(fixedSize)
					continue
				}
				n := min(int64(room-len(buf)), left, int64(fixedSize))
				if err := add(zeros[:n]); err != nil {
					return Manifest{}, err
				}
				left -= n
			}
		default:
			if err := add(p.data); err != nil {
				return Manifest{}, err
			}
		}
	}
	if len(buf) > 0 {
		if err := put(buf); err != nil {
			return Manifest{}, err
		}
	}
	res := make([]Ref, 0, i0+len(head)+len(out)+len(tail)+len(m.Chunks)-i1)
	res = append(res, m.Chunks[:i0]...)
	res = append(res, head...)
	res = append(res, out...)
	res = append(res, tail...)
	res = append(res, m.Chunks[i1:]...)
	if len(res) == 0 {
		return Manifest{}, nil
	}
	return Manifest{Chunks: res}, nil
}
