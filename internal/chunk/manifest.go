package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrCorrupt is returned by UnmarshalManifest when its input is not a valid
// encoded manifest (bad magic, unknown version, wrong length, checksum
// mismatch, empty chunk). It is also wrapped by WriteAt and Append when a
// loaded chunk has the wrong size.
var ErrCorrupt = errors.New("chunk: corrupt")

// Ref is one entry of a manifest: Size bytes of the stored chunk named by
// Hash, from byte Off of it. Most entries hold a whole chunk (Off 0, Size
// the chunk's size); a byte-range write keeps the untouched part of a
// chunk it overwrites in part as an entry holding a slice of it, so that
// it stores only the bytes it changes (see WriteAt).
type Ref struct {
	Hash Hash
	Size uint32
	Off  uint32
}

// Of returns the bytes r holds of b, the content of its chunk, or an error
// wrapping ErrCorrupt if b is too short to hold them.
func (r Ref) Of(b []byte) ([]byte, error) {
	return Piece{Ref: r, Off: int64(r.Off), Len: int64(r.Size)}.Of(b)
}

// Manifest lists the entries of an object's body in order. Its content is
// the concatenation of the bytes its entries hold. Every entry has Size >
// 0; the empty object has none. A Manifest is a value: functions here
// never modify one in place.
type Manifest struct {
	Chunks []Ref
	// Tree holds the chaining values of the content's whole blocks of
	// TreeBlock bytes, block i's at i (tree.go): what a byte-range write
	// left of its parent's, zero where it changed a block or none was
	// known. At most Size()/TreeBlock of them; often none.
	Tree []CV
}

// Size returns the object size in bytes.
func (m Manifest) Size() int64 {
	var n int64
	for _, r := range m.Chunks {
		n += int64(r.Size)
	}
	return n
}

// Locate returns the index of the chunk holding byte off and the offset of
// that byte within the chunk. For off >= Size() it returns
// (len(m.Chunks), off-Size()); for off < 0 it returns (-1, off).
func (m Manifest) Locate(off int64) (idx int, within int64) {
	if off < 0 {
		return -1, off
	}
	for i, r := range m.Chunks {
		if off < int64(r.Size) {
			return i, off
		}
		off -= int64(r.Size)
	}
	return len(m.Chunks), off
}

// Piece is the part of one chunk that a byte range covers: bytes [Off,
// Off+Len) of the chunk named by Ref.Hash (Off counts from the chunk's
// start, not from the entry's).
type Piece struct {
	Ref
	Off, Len int64
}

// Of returns the bytes p covers of b, the content of its chunk, or an
// error wrapping ErrCorrupt if b is too short to hold them.
func (p Piece) Of(b []byte) ([]byte, error) {
	if p.Off < 0 || p.Len < 0 || p.Off+p.Len > int64(len(b)) {
		return nil, fmt.Errorf("%w: chunk %s has %d bytes; the manifest reads %d at %d", ErrCorrupt, p.Hash, len(b), p.Len, p.Off)
	}
	return b[p.Off : p.Off+p.Len], nil
}

// Span plans a read of length bytes at off: the pieces of chunks to read, in
// order. The range is clipped to [0, Size()); an empty or out-of-range
// request yields no pieces.
func (m Manifest) Span(off, length int64) []Piece {
	if off < 0 {
		length += off
		off = 0
	}
	if length <= 0 {
		return nil
	}
	idx, within := m.Locate(off)
	var out []Piece
	for i := idx; i < len(m.Chunks) && length > 0; i++ {
		r := m.Chunks[i]
		n := int64(r.Size) - within
		if n > length {
			n = length
		}
		out = append(out, Piece{Ref: r, Off: int64(r.Off) + within, Len: n})
		length -= n
		within = 0
	}
	return out
}

// Encoded manifest layout (all integers big-endian):
//
//	+-----------+---------+-----------+--------------------------------------+----------------------------+------------+
//	| magic (4) | ver (1) | count (4) | count x ( hash (32) size (4) [off (4)] )| [tcount (4) tcount x cv (32)] | crc32c (4) |
//	| "CRMF"    | 1, 2, 3 |           |                                      |                            |            |
//	+-----------+---------+-----------+--------------------------------------+----------------------------+------------+
//
// Version 1 entries hold whole chunks and have no offset; versions 2 and 3
// entries carry one, and version 3 ends with the tree's chaining values
// (at least one). Marshal writes the lowest version that holds m, so
// manifests without slices or tree read as they always did. The CRC32C
// (Castagnoli) covers every preceding byte.
const (
	manifestMagic   = 0x43524d46 // "CRMF"
	manifestWhole   = 1
	manifestSliced  = 2
	manifestTree    = 3
	manifestHeader  = 4 + 1 + 4
	manifestTrailer = 4
)

// entrySize is the encoded size of one entry in format version v.
func entrySize(v byte) int64 {
	if v >= manifestSliced {
		return HashSize + 4 + 4
	}
	return HashSize + 4
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Marshal encodes m (see the layout above).
func (m Manifest) Marshal() []byte {
	v := byte(manifestWhole)
	switch {
	case len(m.Tree) > 0:
		v = manifestTree
	case m.sliced():
		v = manifestSliced
	}
	b := make([]byte, 0, manifestHeader+int64(len(m.Chunks))*entrySize(v)+4+int64(len(m.Tree))*32+manifestTrailer)
	b = binary.BigEndian.AppendUint32(b, manifestMagic)
	b = append(b, v)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Chunks)))
	for _, r := range m.Chunks {
		b = append(b, r.Hash[:]...)
		b = binary.BigEndian.AppendUint32(b, r.Size)
		if v >= manifestSliced {
			b = binary.BigEndian.AppendUint32(b, r.Off)
		}
	}
	if v == manifestTree {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Tree)))
		for _, c := range m.Tree {
			b = append(b, c[:]...)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// sliced reports whether an entry of m starts inside its chunk.
func (m Manifest) sliced() bool {
	for _, r := range m.Chunks {
		if r.Off != 0 {
			return true
		}
	}
	return false
}

// UnmarshalManifest decodes what Marshal produced. Any malformed input yields
// an error wrapping ErrCorrupt. The result does not alias b.
func UnmarshalManifest(b []byte) (Manifest, error) {
	if len(b) < manifestHeader+manifestTrailer {
		return Manifest{}, fmt.Errorf("%w: manifest of %d bytes is too short", ErrCorrupt, len(b))
	}
	if magic := binary.BigEndian.Uint32(b); magic != manifestMagic {
		return Manifest{}, fmt.Errorf("%w: manifest magic %#x", ErrCorrupt, magic)
	}
	v := b[4]
	if v != manifestWhole && v != manifestSliced && v != manifestTree {
		return Manifest{}, fmt.Errorf("%w: manifest format version %d unknown", ErrCorrupt, v)
	}
	count := int64(binary.BigEndian.Uint32(b[5:]))
	var tcount int64
	if v == manifestTree {
		at := manifestHeader + count*entrySize(v)
		if at+4+manifestTrailer > int64(len(b)) {
			return Manifest{}, fmt.Errorf("%w: manifest of %d chunks has %d bytes, too few for its tree", ErrCorrupt, count, len(b))
		}
		tcount = int64(binary.BigEndian.Uint32(b[at:]))
	}
	want := manifestHeader + count*entrySize(v) + manifestTrailer
	if v == manifestTree {
		want += 4 + tcount*32
	}
	if int64(len(b)) != want {
		return Manifest{}, fmt.Errorf("%w: manifest of %d chunks has %d bytes, want %d", ErrCorrupt, count, len(b), want)
	}
	body, sum := b[:len(b)-manifestTrailer], binary.BigEndian.Uint32(b[len(b)-manifestTrailer:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return Manifest{}, fmt.Errorf("%w: manifest checksum %#x, want %#x", ErrCorrupt, got, sum)
	}
	var m Manifest
	if count > 0 {
		m.Chunks = make([]Ref, count)
	}
	p := body[manifestHeader:]
	for i := range m.Chunks {
		copy(m.Chunks[i].Hash[:], p)
		m.Chunks[i].Size = binary.BigEndian.Uint32(p[HashSize:])
		if m.Chunks[i].Size == 0 {
			return Manifest{}, fmt.Errorf("%w: manifest chunk %d is empty", ErrCorrupt, i)
		}
		if v >= manifestSliced {
			m.Chunks[i].Off = binary.BigEndian.Uint32(p[HashSize+4:])
			if uint64(m.Chunks[i].Off)+uint64(m.Chunks[i].Size) > MaxChunkSize {
				return Manifest{}, fmt.Errorf("%w: manifest entry %d reads past the largest chunk", ErrCorrupt, i)
			}
		}
		p = p[entrySize(v):]
	}
	if v == manifestSliced && !m.sliced() {
		// Marshal writes such a manifest as version 1: one encoding each.
		return Manifest{}, fmt.Errorf("%w: manifest of format version 2 holds no slice", ErrCorrupt)
	}
	if v == manifestTree {
		p = p[4:]
		if tcount == 0 {
			return Manifest{}, fmt.Errorf("%w: manifest of format version 3 holds no tree", ErrCorrupt)
		}
		if tcount > m.Size()/TreeBlock {
			return Manifest{}, fmt.Errorf("%w: manifest tree of %d blocks for %d bytes", ErrCorrupt, tcount, m.Size())
		}
		m.Tree = make([]CV, tcount)
		for i := range m.Tree {
			copy(m.Tree[i][:], p)
			p = p[32:]
		}
	}
	return m, nil
}
