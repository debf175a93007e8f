package chunk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveDiff is DiffBytes's model: one position at a time.
func naiveDiff(a, b []byte) []bool {
	d := make([]bool, max(len(a), len(b)))
	for i := range d {
		d[i] = i >= len(a) || i >= len(b) || a[i] != b[i]
	}
	return d
}

func covered(ext []Extent, n int) []bool {
	c := make([]bool, n)
	for _, e := range ext {
		for i := e.Off; i < e.Off+e.Len; i++ {
			c[i] = true
		}
	}
	return c
}

func checkMerged(t *testing.T, ext []Extent) {
	t.Helper()
	for i, e := range ext {
		if e.Len <= 0 || i > 0 && ext[i-1].Off+ext[i-1].Len >= e.Off {
			t.Fatalf("extents not sorted, non-empty and apart: %v", ext)
		}
	}
}

// TestDiffModel: versions made by byte-range writes, appends and whole
// rewrites of a random base. Diff of their manifests covers every byte
// that differs (it is never wrong), reports no byte of a chunk shared at
// the same place, and narrowing its extents by reading them (DiffBytes)
// gives exactly the differing bytes.
func TestDiffModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := newMemChunks()
		const fixed = 64
		base := make([]byte, rng.IntN(2000))
		for i := range base {
			base[i] = byte(rng.IntN(4)) // few values: equal bytes happen
		}
		a, err := WriteAt(Manifest{}, 0, base, fixed, s.load, s.store)
		if err != nil {
			t.Fatal(err)
		}
		b := a
		for range 1 + rng.IntN(4) {
			data := make([]byte, 1+rng.IntN(200))
			for i := range data {
				data[i] = byte(rng.IntN(4))
			}
			switch rng.IntN(3) {
			case 0, 1:
				b, err = WriteAt(b, rng.Int64N(b.Size()+1), data, fixed, s.load, s.store)
			default:
				b, err = Append(b, data, fixed, s.load, s.store)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(10) == 0 {
			b = a // no change
		}
		ca, cb := s.content(t, a), s.content(t, b)
		want := naiveDiff(ca, cb)
		ext := Diff(a, b)
		checkMerged(t, ext)
		got := covered(ext, len(want))
		for i := range want {
			if want[i] && !got[i] {
				t.Fatalf("seed %d: byte %d differs but Diff %v misses it", seed, i, ext)
			}
		}
		if slices.Equal(a.Chunks, b.Chunks) && len(ext) != 0 {
			t.Fatalf("seed %d: equal manifests, diff %v", seed, ext)
		}
		// Shared chunks at the same offset are never reported.
		var off int64
		pos := map[int64]Hash{}
		for _, r := range a.Chunks {
			pos[off] = r.Hash
			off += int64(r.Size)
		}
		off = 0
		for _, r := range b.Chunks {
			if h, ok := pos[off]; ok && h == r.Hash && off+int64(r.Size) <= int64(len(ca)) {
				for i := off; i < off+int64(r.Size); i++ {
					if got[i] {
						t.Fatalf("seed %d: byte %d of a chunk shared at %d reported changed", seed, i, off)
					}
				}
			}
			off += int64(r.Size)
		}
		// Narrowing by reading gives the exact answer.
		var exact []Extent
		for _, e := range ext {
			ra := ca[min(e.Off, int64(len(ca))):min(e.Off+e.Len, int64(len(ca)))]
			rb := cb[min(e.Off, int64(len(cb))):min(e.Off+e.Len, int64(len(cb)))]
			exact = append(exact, DiffBytes(ra, rb, e.Off)...)
		}
		if w := DiffBytes(ca, cb, 0); !slices.Equal(covered(exact, len(want)), covered(w, len(want))) {
			t.Fatalf("seed %d: narrowed %v, want %v", seed, exact, w)
		}
	}
}

func TestDiffBytes(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 9))
		a := make([]byte, rng.IntN(40))
		b := make([]byte, rng.IntN(40))
		for i := range a {
			a[i] = byte(rng.IntN(2))
		}
		for i := range b {
			b[i] = byte(rng.IntN(2))
		}
		off := rng.Int64N(100)
		ext := DiffBytes(a, b, off)
		checkMerged(t, ext)
		for i := range ext {
			ext[i].Off -= off
		}
		if want := naiveDiff(a, b); !slices.Equal(covered(ext, len(want)), want) {
			t.Fatalf("%v vs %v: %v", a, b, ext)
		}
	}
	if ext := DiffBytes([]byte("abc"), []byte("abc"), 5); ext != nil {
		t.Fatalf("equal bytes: %v", ext)
	}
	if ext := DiffBytes([]byte("abX"), []byte("abYdef"), 10); !slices.Equal(ext, []Extent{{12, 4}}) {
		t.Fatalf("change then growth merge: %v", ext)
	}
}
