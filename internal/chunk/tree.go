package chunk

import (
	"encoding/binary"
	"math/bits"

	"lukechampine.com/blake3/guts"
)

// The content hash of an object is BLAKE3 over its bytes, a Merkle tree of
// 1 KiB chunks. Every block of TreeBlock bytes at a multiple of TreeBlock
// lies under one node of that tree whenever the object is larger than a
// block, and that node's chaining value depends only on the block's bytes
// and position. A manifest keeps those values (Manifest.Tree), so the hash
// of a version made by byte-range writes comes from its parent's values
// and the blocks the writes touched — not from reading the whole object
// again (TreeSum).

// TreeBlock is the size of the blocks whose chaining values a manifest
// keeps: 16 BLAKE3 chunks.
const TreeBlock = 16 * guts.ChunkSize

// CV is a chaining value of the BLAKE3 tree; the zero value stands for
// one not known (a real one equal to it would only be computed again).
type CV [32]byte

// BlockCV returns the chaining value of block index i, b its TreeBlock
// bytes.
func BlockCV(i int64, b []byte) CV {
	n := guts.CompressEigentree(b, &guts.IV, uint64(i)*(TreeBlock/guts.ChunkSize), 0)
	return cvBytes(guts.ChainingValue(n))
}

func cvBytes(w [8]uint32) (c CV) {
	for i, x := range w {
		binary.LittleEndian.PutUint32(c[4*i:], x)
	}
	return c
}

func cvWords(c CV) (w [8]uint32) {
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(c[4*i:])
	}
	return w
}

// TreeSum returns the BLAKE3 hash of content of size bytes (more than
// TreeBlock) from the chaining values of its whole blocks, cvs (len: size
// / TreeBlock, none zero), and tail, its bytes after the last whole block.
func TreeSum(size int64, cvs []CV, tail []byte) Hash {
	chunks := uint64((size + guts.ChunkSize - 1) / guts.ChunkSize)
	per := uint64(TreeBlock / guts.ChunkSize)
	tailStart := uint64(len(cvs)) * per
	var node func(lo, hi uint64) guts.Node
	cv := func(lo, hi uint64) [8]uint32 {
		if hi-lo == per && lo%per == 0 && lo < tailStart {
			return cvWords(cvs[lo/per])
		}
		return guts.ChainingValue(node(lo, hi))
	}
	node = func(lo, hi uint64) guts.Node {
		if hi-lo == 1 {
			off := (lo - tailStart) * guts.ChunkSize
			end := min(off+guts.ChunkSize, uint64(len(tail)))
			return guts.CompressChunk(tail[off:end], &guts.IV, lo, 0)
		}
		// BLAKE3's tree is left-balanced: the left subtree holds the
		// largest power of two of chunks below the whole.
		mid := lo + 1<<(bits.Len64(hi-lo-1)-1)
		return guts.ParentNode(cv(lo, mid), cv(mid, hi), &guts.IV, 0)
	}
	root := node(0, chunks)
	root.Flags |= guts.FlagRoot
	out := guts.WordsToBytes(guts.CompressNode(root))
	var h Hash
	copy(h[:], out[:HashSize])
	return h
}
