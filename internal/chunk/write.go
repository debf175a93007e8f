package chunk

import (
	"fmt"
)

// DefaultFixedSize is the piece size WriteAt and Append cut rewritten regions
// into when given fixedSize <= 0.
const DefaultFixedSize = 1 << 20

// WriteAt returns a manifest whose content is m's with bytes [off,
// off+len(data)) replaced by data. The object grows if the write ends past
// its end; a gap between the old end and off reads as zeros.
//
// Only the chunks the write touches are re-cut: the region from the start of
// the first touched chunk to the end of the last one (or of the write) is cut
// into pieces that end on multiples of fixedSize bytes from the object's
// start (DefaultFixedSize if fixedSize <= 0; the first piece runs from the
// region's start to the first multiple at least a quarter piece away, the
// last may be shorter), each handed to store. Regions rewritten at
// different times thus share one grid, and a later write of fixedSize
// bytes touches at most two pieces. Every chunk entirely
// before off or entirely after the write keeps its Ref, so the new version
// shares it with the parent. An empty write returns m unchanged (a copy).
//
// load returns the content of a chunk of m (only the first and last touched
// chunks are loaded, and only if the write covers them partly). store saves
// a piece and returns its Ref; it must not retain or modify the slice after
// it returns. A load or store error is returned wrapped; m is never modified.
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

	// Chunks [i0, i1) are touched; chunk i0 starts at s0; chunk i1-1 starts
	// at sLast; the old content ends at size.
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

	var parts []part
	if s0 < off && i0 < len(m.Chunks) {
		parts = append(parts, part{chunk: i0, from: 0, to: off - s0})
	}
	if off > size {
		parts = append(parts, part{chunk: -1, zeros: off - size})
	}
	parts = append(parts, part{chunk: -1, data: data})
	if i1 > i0 {
		lastEnd := sLast + int64(m.Chunks[i1-1].Size)
		if end < lastEnd {
			parts = append(parts, part{chunk: i1 - 1, from: end - sLast, to: lastEnd - sLast})
		}
	}
	return rewrite(m, i0, i1, parts, fixedSize, load, store)
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
	n := len(m.Chunks)
	if n > 0 && int(m.Chunks[n-1].Size) < fixedSize/4 {
		parts := []part{
			{chunk: n - 1, from: 0, to: int64(m.Chunks[n-1].Size)},
			{chunk: -1, data: data},
		}
		return rewrite(m, n-1, n, parts, fixedSize, load, store)
	}
	return rewrite(m, n, n, []part{{chunk: -1, data: data}}, fixedSize, load, store)
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
	return Manifest{Chunks: append([]Ref(nil), m.Chunks...)}
}

// part is one source of a rewritten region: a sub-range [from, to) of chunk
// index chunk of the parent, a run of zeros, or caller data.
type part struct {
	chunk    int // parent chunk index, or -1
	from, to int64
	zeros    int64
	data     []byte
}

// rewrite replaces chunks [i0, i1) of m by the concatenation of parts, cut
// into pieces of fixedSize bytes.
func rewrite(m Manifest, i0, i1 int, parts []part, fixedSize int, load func(Ref) ([]byte, error), store func([]byte) (Ref, error)) (Manifest, error) {
	loaded := map[int][]byte{}
	get := func(i int) ([]byte, error) {
		if b, ok := loaded[i]; ok {
			return b, nil
		}
		r := m.Chunks[i]
		b, err := load(r)
		if err != nil {
			return nil, fmt.Errorf("chunk: load %s: %w", r.Hash, err)
		}
		if len(b) != int(r.Size) {
			return nil, fmt.Errorf("%w: chunk %s loaded %d bytes, want %d", ErrCorrupt, r.Hash, len(b), r.Size)
		}
		loaded[i] = b
		return b, nil
	}
	var (
		out     []Ref
		buf     []byte // a piece being assembled
		zeroRef *Ref   // the Ref of a full piece of zeros, once stored
		// room is the size of the piece being assembled (see WriteAt).
		room = fixedSize
	)
	var s0 int64 // where the region starts
	for _, r := range m.Chunks[:i0] {
		s0 += int64(r.Size)
	}
	if rem := int(s0 % int64(fixedSize)); rem != 0 {
		room = fixedSize - rem
		if room < fixedSize/4 && room+fixedSize <= MaxChunkSize {
			room += fixedSize // no sliver of a piece: the first one runs to the next multiple
		}
	}
	put := func(p []byte) error {
		r, err := store(p)
		if err != nil {
			return fmt.Errorf("chunk: store piece: %w", err)
		}
		if int(r.Size) != len(p) {
			return fmt.Errorf("chunk: store returned size %d for a piece of %d bytes", r.Size, len(p))
		}
		out = append(out, r)
		room = fixedSize
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
				buf = make([]byte, 0, fixedSize)
			}
			n := min(room-len(buf), len(b))
			buf = append(buf, b[:n]...)
			b = b[n:]
			if len(buf) == room {
				if err := put(buf); err != nil {
					return err
				}
				buf = buf[:0]
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
	res := make([]Ref, 0, i0+len(out)+len(m.Chunks)-i1)
	res = append(res, m.Chunks[:i0]...)
	res = append(res, out...)
	res = append(res, m.Chunks[i1:]...)
	if len(res) == 0 {
		return Manifest{}, nil
	}
	return Manifest{Chunks: res}, nil
}
