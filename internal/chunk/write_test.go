package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// memChunks is an in-memory chunk store for the load/store callbacks.
type memChunks struct {
	m      map[Hash][]byte
	loads  int
	stores int
	stored int64 // bytes handed to store
}

func newMemChunks() *memChunks { return &memChunks{m: map[Hash][]byte{}} }

func (s *memChunks) store(b []byte) (Ref, error) {
	s.stores++
	s.stored += int64(len(b))
	h := Sum(b)
	if _, ok := s.m[h]; !ok {
		s.m[h] = b // kept, as WriteAt allows: a later change to it shows in the contents
	}
	return Ref{Hash: h, Size: uint32(len(b))}, nil
}

func (s *memChunks) load(r Ref) ([]byte, error) {
	s.loads++
	b, ok := s.m[r.Hash]
	if !ok {
		return nil, fmt.Errorf("chunk %s not stored", r.Hash)
	}
	return b, nil
}

func (s *memChunks) chunkSize(h Hash) uint32 { return uint32(len(s.m[h])) }

func (s *memChunks) content(t *testing.T, m Manifest) []byte {
	t.Helper()
	var out []byte
	for _, p := range m.Span(0, m.Size()) {
		b, err := s.load(p.Ref)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[p.Off:p.Off+p.Len]...)
	}
	return out
}

// build chunks data with small content-defined chunks.
func (s *memChunks) build(t *testing.T, data []byte) Manifest {
	t.Helper()
	var m Manifest
	for _, c := range chunkAll(t, bytes.NewReader(data), Options{MinSize: 64, AvgSize: 256, MaxSize: 1024}) {
		r, _ := s.store(c)
		m.Chunks = append(m.Chunks, r)
	}
	return m
}

// TestWriteModel runs random WriteAt and Append sequences against a plain
// byte-slice model and checks after every step that the manifest's content
// equals the model, that the parent is unchanged, and that every chunk the
// operation did not touch is shared (the same Ref) with the parent.
func TestWriteModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for iter := range 30 {
		s := newMemChunks()
		model := pseudoRandom(rng.Uint64(), rng.IntN(8000))
		m := s.build(t, model)
		fixed := []int{16, 100, 256, 1000}[rng.IntN(4)]
		for step := range 60 {
			parent, orig := m.clone(), m
			size := int64(len(model))
			data := pseudoRandom(rng.Uint64(), rng.IntN(3*fixed+2))
			s.loads = 0
			var err error
			var op string
			var off int64
			if rng.IntN(4) == 0 {
				op = "append"
				m, err = Append(m, data, fixed, s.load, s.store)
				off = size
				model = append(model, data...)
			} else {
				op = "writeat"
				switch rng.IntN(5) {
				case 0: // past the end, leaving a gap of zeros
					off = size + rng.Int64N(int64(5*fixed))
				case 1: // a chunk boundary
					idx := rng.IntN(len(parent.Chunks) + 1)
					for _, r := range parent.Chunks[:idx] {
						off += int64(r.Size)
					}
				default:
					off = rng.Int64N(size + 1)
				}
				m, err = WriteAt(m, off, data, fixed, s.load, s.store)
				if len(data) > 0 { // an empty write changes nothing, even past the end
					if end := off + int64(len(data)); end > int64(len(model)) {
						model = append(model, make([]byte, end-int64(len(model)))...)
					}
					copy(model[off:], data)
				}
			}
			loads := s.loads
			if err != nil {
				t.Fatalf("iter %d step %d: %s: %v", iter, step, op, err)
			}
			ctx := fmt.Sprintf("iter %d step %d: %s off %d len %d fixed %d", iter, step, op, off, len(data), fixed)
			if got := s.content(t, m); !bytes.Equal(got, model) {
				t.Fatalf("%s: content differs from the model (%d vs %d bytes)", ctx, len(got), len(model))
			}
			if m.Size() != int64(len(model)) {
				t.Fatalf("%s: Size %d, want %d", ctx, m.Size(), len(model))
			}
			if loads > 2 {
				t.Fatalf("%s: loaded %d chunks, want at most 2", ctx, loads)
			}
			for i, r := range m.Chunks {
				// A region's first piece runs to the grid: up to 1.25 pieces.
				if r.Size == 0 || int(r.Size) > max(fixed+fixed/4, 1024) {
					t.Fatalf("%s: chunk %d has size %d", ctx, i, r.Size)
				}
			}
			if fmt.Sprint(orig.Chunks) != fmt.Sprint(parent.Chunks) {
				t.Fatalf("%s: the parent manifest was modified", ctx)
			}
			checkShared(t, ctx, parent, m, off, off+int64(len(data)), op == "append", fixed)
			if rt, err := UnmarshalManifest(m.Marshal()); err != nil || len(rt.Chunks) != len(m.Chunks) {
				t.Fatalf("%s: manifest round trip: %v", ctx, err)
			}
		}
	}
}

// checkShared asserts that parent chunks entirely before off form a prefix
// of m and those entirely at or after end form a suffix of m.
func checkShared(t *testing.T, ctx string, parent, m Manifest, off, end int64, isAppend bool, fixed int) {
	t.Helper()
	if off == end {
		if len(parent.Chunks) != len(m.Chunks) {
			t.Fatalf("%s: empty write changed the chunk list", ctx)
		}
		for i := range m.Chunks {
			if m.Chunks[i] != parent.Chunks[i] {
				t.Fatalf("%s: empty write changed chunk %d", ctx, i)
			}
		}
		return
	}
	var pos int64
	before, after := 0, 0
	for _, r := range parent.Chunks {
		if pos+int64(r.Size) <= off {
			before++
		}
		if pos >= end {
			after++
		}
		pos += int64(r.Size)
	}
	if isAppend && before > 0 && int(parent.Chunks[before-1].Size) < fixed/4 {
		before-- // Append may re-cut a small last chunk
	}
	if len(m.Chunks) < before+after {
		t.Fatalf("%s: %d chunks, want at least %d shared", ctx, len(m.Chunks), before+after)
	}
	for i := range before {
		if m.Chunks[i] != parent.Chunks[i] {
			t.Fatalf("%s: chunk %d before the write is not shared", ctx, i)
		}
	}
	for i := range after {
		if m.Chunks[len(m.Chunks)-1-i] != parent.Chunks[len(parent.Chunks)-1-i] {
			t.Fatalf("%s: chunk %d from the end, after the write, is not shared", ctx, i)
		}
	}
}

func TestWriteAtDefaultPiecesAndZeroGap(t *testing.T) {
	s := newMemChunks()
	// A 1-byte object written 3.5 MiB past its end: zeros then data.
	m, err := WriteAt(Manifest{}, 0, []byte{1}, 0, s.load, s.store)
	if err != nil {
		t.Fatal(err)
	}
	const off = 3<<20 + 1<<19
	m, err = WriteAt(m, off, []byte("tail"), 0, s.load, s.store)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []uint32
	for _, r := range m.Chunks {
		sizes = append(sizes, r.Size)
	}
	// The first chunk is shared; the rest is cut into pieces of 1 MiB from
	// where the write starts.
	if fmt.Sprint(sizes) != fmt.Sprint([]uint32{1, 1 << 20, 1 << 20, 1 << 20, 1<<19 + 3}) {
		t.Fatalf("piece sizes %v", sizes)
	}
	if m.Chunks[1] != m.Chunks[2] || m.Chunks[2] != m.Chunks[3] {
		t.Fatal("whole zero pieces are not the same chunk")
	}
	want := make([]byte, off+4)
	want[0] = 1
	copy(want[off:], "tail")
	if !bytes.Equal(s.content(t, m), want) {
		t.Fatal("content differs")
	}
}

func TestWriteErrors(t *testing.T) {
	s := newMemChunks()
	m := s.build(t, pseudoRandom(9, 5000))
	boom := errors.New("boom")
	failLoad := func(Ref) ([]byte, error) { return nil, boom }
	failStore := func([]byte) (Ref, error) { return Ref{}, boom }
	if _, err := WriteAt(m, 10, []byte("x"), 0, failLoad, s.store); !errors.Is(err, boom) {
		t.Fatalf("load error: %v", err)
	}
	if _, err := WriteAt(m, 10, []byte("x"), 0, s.load, failStore); !errors.Is(err, boom) {
		t.Fatalf("store error: %v", err)
	}
	short := func(r Ref) ([]byte, error) { return make([]byte, r.Size-1), nil }
	if _, err := WriteAt(m, 10, []byte("x"), 0, short, s.store); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short chunk: %v", err)
	}
	if _, err := WriteAt(m, -1, []byte("x"), 0, s.load, s.store); err == nil {
		t.Fatal("negative offset accepted")
	}
	if _, err := Append(m, []byte("x"), MaxChunkSize+1, s.load, s.store); err == nil {
		t.Fatal("oversized piece accepted")
	}
}

// TestWriteAtStoresWhatChanges: random writes of a piece each into an
// object of pieces store about the bytes they write (VOSD's workload in
// small), and the manifest stays within its bound of entries however many
// writes it takes.
func TestWriteAtStoresWhatChanges(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const fixed, size = 1024, 256 << 10
	s := newMemChunks()
	model := pseudoRandom(rng.Uint64(), size)
	m, err := Append(Manifest{}, model, fixed, s.load, s.store)
	if err != nil {
		t.Fatal(err)
	}
	s.stored = 0
	var written int64
	for i := range 4000 {
		n := 1 + rng.IntN(fixed)
		if i%2 == 0 {
			n = fixed // VOSD's: writes of one piece
		}
		off := rng.Int64N(size - int64(n))
		data := pseudoRandom(rng.Uint64(), n)
		if m, err = WriteAt(m, off, data, fixed, s.load, s.store); err != nil {
			t.Fatal(err)
		}
		copy(model[off:], data)
		written += int64(n)
		if limit := 8 * size / fixed; len(m.Chunks) > limit {
			t.Fatalf("write %d: %d entries, over the bound of %d", i, len(m.Chunks), limit)
		}
	}
	if !bytes.Equal(s.content(t, m), model) {
		t.Fatal("content differs from the model")
	}
	if ratio := float64(s.stored) / float64(written); ratio > 1.1 {
		t.Fatalf("stored %d bytes for %d written (%.2fx)", s.stored, written, ratio)
	} else {
		t.Logf("stored %d bytes for %d written (%.3fx); %d entries for %d bytes", s.stored, written, ratio, len(m.Chunks), size)
	}
}
