package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

func testManifest(sizes ...uint32) Manifest {
	var m Manifest
	for i, s := range sizes {
		m.Chunks = append(m.Chunks, Ref{Hash: Sum([]byte{byte(i)}), Size: s})
	}
	return m
}

// slicedManifest has entries that start inside their chunks (format
// version 2).
func slicedManifest() Manifest {
	m := testManifest(10, 20, 30)
	m.Chunks[1].Off = 5
	m.Chunks[2].Off = 1 << 20
	return m
}

// treeManifest keeps chaining values of its blocks (format version 3).
func treeManifest() Manifest {
	m := testManifest(10, 20, 3*TreeBlock)
	m.Tree = []CV{{1}, {}, {3}}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []Manifest{{}, testManifest(1), testManifest(10, 20, 30), slicedManifest(), treeManifest()} {
		b := m.Marshal()
		got, err := UnmarshalManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: got %+v, want %+v", got, m)
		}
		if !bytes.Equal(got.Marshal(), b) {
			t.Fatal("re-encoding differs")
		}
	}
}

// TestManifestCorruptionDetected flips every bit and cuts every prefix of an
// encoding; each must be reported as ErrCorrupt.
func TestManifestCorruptionDetected(t *testing.T) {
	for _, m := range []Manifest{testManifest(10, 20, 30), slicedManifest(), treeManifest()} {
		checkCorruptionDetected(t, m.Marshal())
	}
	// More chaining values than the content has blocks.
	over := treeManifest()
	over.Tree = append(over.Tree, CV{4})
	if _, err := UnmarshalManifest(over.Marshal()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a tree of more blocks than the content: err = %v", err)
	}
	// Format version 2 with no slice: version 1 is its one encoding.
	whole := testManifest(10, 20, 30)
	var b []byte
	b = binary.BigEndian.AppendUint32(b, manifestMagic)
	b = append(b, manifestSliced)
	b = binary.BigEndian.AppendUint32(b, uint32(len(whole.Chunks)))
	for _, r := range whole.Chunks {
		b = append(b, r.Hash[:]...)
		b = binary.BigEndian.AppendUint32(b, r.Size)
		b = binary.BigEndian.AppendUint32(b, 0)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if _, err := UnmarshalManifest(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2 without a slice: err = %v", err)
	}
}

func checkCorruptionDetected(t *testing.T, b []byte) {
	t.Helper()
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, err := UnmarshalManifest(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip byte %d bit %d: err = %v", i, bit, err)
			}
		}
	}
	for n := range len(b) {
		if _, err := UnmarshalManifest(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: err = %v", n, err)
		}
	}
	if _, err := UnmarshalManifest(append(bytes.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

func TestManifestLocateSpan(t *testing.T) {
	m := testManifest(10, 20, 30) // chunks at [0,10) [10,30) [30,60)
	if m.Size() != 60 {
		t.Fatalf("Size = %d", m.Size())
	}
	for _, tc := range []struct {
		off    int64
		idx    int
		within int64
	}{{0, 0, 0}, {9, 0, 9}, {10, 1, 0}, {29, 1, 19}, {30, 2, 0}, {59, 2, 29}, {60, 3, 0}, {65, 3, 5}, {-1, -1, -1}} {
		idx, within := m.Locate(tc.off)
		if idx != tc.idx || within != tc.within {
			t.Errorf("Locate(%d) = %d, %d; want %d, %d", tc.off, idx, within, tc.idx, tc.within)
		}
	}
	type pc struct{ idx, off, len int64 }
	span := func(off, length int64) []pc {
		var out []pc
		for _, p := range m.Span(off, length) {
			i := -1
			for j, r := range m.Chunks {
				if r == p.Ref {
					i = j
				}
			}
			out = append(out, pc{int64(i), p.Off, p.Len})
		}
		return out
	}
	for _, tc := range []struct {
		off, length int64
		want        []pc
	}{
		{0, 60, []pc{{0, 0, 10}, {1, 0, 20}, {2, 0, 30}}},
		{5, 10, []pc{{0, 5, 5}, {1, 0, 5}}},
		{12, 3, []pc{{1, 2, 3}}},
		{25, 100, []pc{{1, 15, 5}, {2, 0, 30}}},
		{-5, 10, []pc{{0, 0, 5}}},
		{60, 10, nil},
		{10, 0, nil},
		{70, 5, nil},
	} {
		if got := span(tc.off, tc.length); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Span(%d, %d) = %v, want %v", tc.off, tc.length, got, tc.want)
		}
	}
}

func FuzzUnmarshalManifest(f *testing.F) {
	f.Add(Manifest{}.Marshal())
	f.Add(testManifest(10, 20, 30).Marshal())
	f.Add(slicedManifest().Marshal())
	f.Add(treeManifest().Marshal())
	f.Add([]byte("CRMF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := UnmarshalManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(m.Marshal(), b) {
			t.Fatal("accepted input does not re-encode identically")
		}
	})
}

// TestSpanOfSlices: a piece of an entry that holds a slice counts its
// offset from the chunk's start.
func TestSpanOfSlices(t *testing.T) {
	m := slicedManifest() // entries [0,10) [10,30) from 5, [30,60) from 1 MiB
	got := m.Span(12, 20)
	if len(got) != 2 || got[0].Off != 7 || got[0].Len != 18 || got[1].Off != 1<<20 || got[1].Len != 2 {
		t.Fatalf("Span(12, 20) = %+v", got)
	}
	b := make([]byte, 30)
	for i := range b {
		b[i] = byte(i)
	}
	if s, err := m.Chunks[1].Of(b); err != nil || len(s) != 20 || s[0] != 5 {
		t.Fatalf("Of = %v, %v", s, err)
	}
	if _, err := m.Chunks[1].Of(b[:24]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Of a short chunk: %v", err)
	}
}
