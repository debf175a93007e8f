package chunk

// Extent is a byte range [Off, Off+Len) of an object's content.
type Extent struct {
	Off, Len int64
}

// Diff returns the byte ranges where b's content may differ from a's at
// the same offsets, in offset order, adjacent ranges merged, computed
// from the two manifests alone. Bytes that both take from the same byte
// of the same chunk are equal; any other byte of the
// shorter length may differ (chunk-granular: a whole chunk that was
// rewritten is reported whole), and every byte past the shorter length
// differs (the object grew or shrank). Equal manifests give none.
func Diff(a, b Manifest) []Extent {
	var out []Extent
	add := func(off, n int64) {
		if n <= 0 {
			return
		}
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == off {
			out[k].Len += n
			return
		}
		out = append(out, Extent{Off: off, Len: n})
	}
	// Walk both manifests' chunk boundaries together: between two
	// consecutive boundaries (of either) each side is inside one chunk.
	var (
		i, j   int   // current chunk of a, of b
		aStart int64 // offset of a.Chunks[i]
		bStart int64
		off    int64 // current position
		sizeA  = a.Size()
		sizeB  = b.Size()
		common = min(sizeA, sizeB)
	)
	for off < common {
		ra, rb := a.Chunks[i], b.Chunks[j]
		aEnd, bEnd := aStart+int64(ra.Size), bStart+int64(rb.Size)
		end := min(aEnd, bEnd)
		// The same byte of the same chunk is the same byte.
		if !(ra.Hash == rb.Hash && off-aStart+int64(ra.Off) == off-bStart+int64(rb.Off)) {
			add(off, end-off)
		}
		off = end
		if off == aEnd {
			i, aStart = i+1, aEnd
		}
		if off == bEnd {
			j, bStart = j+1, bEnd
		}
	}
	add(common, max(sizeA, sizeB)-common)
	return out
}

// DiffBytes returns the exact byte ranges where b differs from a, both
// read at offset off of their objects (a byte past the end of one differs
// from the other's), adjacent ranges merged.
func DiffBytes(a, b []byte, off int64) []Extent {
	var out []Extent
	n := min(len(a), len(b))
	for i := 0; i < n; {
		if a[i] == b[i] {
			i++
			continue
		}
		j := i + 1
		for j < n && a[j] != b[j] {
			j++
		}
		out = append(out, Extent{Off: off + int64(i), Len: int64(j - i)})
		i = j
	}
	if long := max(len(a), len(b)); long > n {
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == off+int64(n) {
			out[k].Len += int64(long - n)
		} else {
			out = append(out, Extent{Off: off + int64(n), Len: int64(long - n)})
		}
	}
	return out
}
