package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// pseudoRandom returns n deterministic incompressible bytes.
func pseudoRandom(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint64())
	}
	return b
}

func chunkAll(t testing.TB, r io.Reader, o Options) [][]byte {
	t.Helper()
	c := NewChunker(r, o)
	var out [][]byte
	for {
		b, err := c.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(b))
	}
}

func sizes(chunks [][]byte) []int {
	s := make([]int, len(chunks))
	for i, c := range chunks {
		s[i] = len(c)
	}
	return s
}

var smallOpts = Options{MinSize: 1 << 10, AvgSize: 4 << 10, MaxSize: 16 << 10}

func TestChunkerReassemblesAndRespectsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		data []byte
	}{
		{"empty", smallOpts, nil},
		{"tiny", smallOpts, []byte("hello")},
		{"random", smallOpts, pseudoRandom(1, 1<<20)},
		{"zeros", smallOpts, make([]byte, 100<<10)},
		{"default-random", Options{}, pseudoRandom(2, 9<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.EnsureDefaults()
			chunks := chunkAll(t, bytes.NewReader(tc.data), tc.o)
			if got := bytes.Join(chunks, nil); !bytes.Equal(got, tc.data) {
				t.Fatalf("chunks do not reassemble the input (%d vs %d bytes)", len(got), len(tc.data))
			}
			for i, c := range chunks {
				if len(c) > o.MaxSize || len(c) == 0 || (i < len(chunks)-1 && len(c) < o.MinSize) {
					t.Fatalf("chunk %d has size %d outside [%d, %d]", i, len(c), o.MinSize, o.MaxSize)
				}
			}
		})
	}
}

// TestChunkerGolden pins the cut points: they decide deduplication across
// nodes and versions, so any change to them must be deliberate.
func TestChunkerGolden(t *testing.T) {
	got := fmt.Sprint(sizes(chunkAll(t, bytes.NewReader(pseudoRandom(42, 64<<10)), smallOpts)))
	const want = "[4278 4600 1409 4697 4499 4384 4758 4198 4472 6938 4183 4383 4109 4217 1740 2671]"
	if got != want {
		t.Errorf("small cut points changed:\n got %s\nwant %s", got, want)
	}
	got = fmt.Sprint(sizes(chunkAll(t, bytes.NewReader(pseudoRandom(43, 12<<20)), Options{})))
	const wantDefault = "[1057232 1222289 1194639 1260339 1334845 385498 1476706 1090272 1214160 1606358 641334 99240]"
	if got != wantDefault {
		t.Errorf("default cut points changed:\n got %s\nwant %s", got, wantDefault)
	}
}

// TestChunkerReaderIndependent checks that cut points do not depend on how
// the reader splits its reads.
func TestChunkerReaderIndependent(t *testing.T) {
	data := pseudoRandom(3, 100<<10)
	want := fmt.Sprint(sizes(chunkAll(t, bytes.NewReader(data), smallOpts)))
	for name, r := range map[string]io.Reader{
		"half":    iotest.HalfReader(bytes.NewReader(data)),
		"dataerr": iotest.DataErrReader(bytes.NewReader(data)),
		"onebyte": iotest.OneByteReader(bytes.NewReader(data)),
	} {
		if got := fmt.Sprint(sizes(chunkAll(t, r, smallOpts))); got != want {
			t.Errorf("%s: sizes %v, want %v", name, got, want)
		}
	}
}

// TestChunkerShiftResistance checks the point of content-defined chunking:
// inserting bytes near the start changes only the chunks around the edit.
func TestChunkerShiftResistance(t *testing.T) {
	data := pseudoRandom(4, 1<<20)
	edited := append(append(append([]byte(nil), data[:5000]...), []byte("inserted bytes")...), data[5000:]...)
	a := chunkAll(t, bytes.NewReader(data), smallOpts)
	b := chunkAll(t, bytes.NewReader(edited), smallOpts)
	set := map[Hash]bool{}
	for _, c := range a {
		set[Sum(c)] = true
	}
	shared := 0
	for _, c := range b {
		if set[Sum(c)] {
			shared++
		}
	}
	if shared < len(a)-3 {
		t.Fatalf("only %d of %d chunks survive a 14-byte insertion", shared, len(a))
	}
}

func TestChunkerReadError(t *testing.T) {
	boom := errors.New("boom")
	c := NewChunker(io.MultiReader(bytes.NewReader(make([]byte, 100)), iotest.ErrReader(boom)), smallOpts)
	if _, err := c.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next = %v, want %v", err, boom)
	}
	if _, err := c.Next(); !errors.Is(err, boom) {
		t.Fatalf("second Next = %v, want %v", err, boom)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{}
	o.EnsureDefaults()
	if o.MinSize != DefaultMinSize || o.AvgSize != DefaultAvgSize || o.MaxSize != DefaultMaxSize {
		t.Fatalf("defaults = %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Options{MinSize: 10, AvgSize: 100, MaxSize: 1 << 30}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad options validated")
	}
	// Every problem is reported at once.
	for _, want := range []string{"MinSize 10", "AvgSize 100", "MaxSize 1073741824"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := NewChunker(bytes.NewReader(nil), bad).Next(); err == nil || err == io.EOF {
		t.Fatalf("Next with bad options = %v", err)
	}
}

func BenchmarkChunker(b *testing.B) {
	data := pseudoRandom(5, 64<<20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c := NewChunker(bytes.NewReader(data), Options{})
		for {
			if _, err := c.Next(); err != nil {
				break
			}
		}
	}
}

// TestChunkerClose checks that a Chunker's buffer can be reused by the
// next one without changing its chunks, and that Next fails after Close.
func TestChunkerClose(t *testing.T) {
	data := pseudoRandom(44, 3<<20)
	var first [][]byte
	for round := range 3 {
		c := NewChunker(bytes.NewReader(data), smallOpts)
		var got [][]byte
		for {
			b, err := c.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, bytes.Clone(b))
		}
		c.Close()
		c.Close() // idempotent
		if _, err := c.Next(); err == nil || err == io.EOF {
			t.Fatalf("Next after Close = %v", err)
		}
		if !bytes.Equal(bytes.Join(got, nil), data) {
			t.Fatalf("round %d: chunks do not reassemble the input", round)
		}
		if round == 0 {
			first = got
		} else if fmt.Sprint(sizes(got)) != fmt.Sprint(sizes(first)) {
			t.Fatalf("round %d: cut points differ from the first round's", round)
		}
	}
}

// cutRef is cut one byte at a time, as FastCDC describes it.
func cutRef(data []byte, minSize, avgSize, maxSize int, maskS, maskL uint64) int {
	n := len(data)
	if n <= minSize {
		return n
	}
	n = min(n, maxSize)
	normal := min(avgSize, n)
	var fp uint64
	for i := minSize; i < n; i++ {
		fp = fp<<1 + gear[data[i]]
		mask := maskL
		if i < normal {
			mask = maskS
		}
		if fp&mask == 0 {
			return i + 1
		}
	}
	return n
}

// TestCutMatchesReference checks the four-bytes-at-a-time cut against the
// byte-at-a-time one, with masks easy enough that cuts land at every
// offset modulo four and on both sides of the normal size.
func TestCutMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 20000 {
		data := pseudoRandom(r.Uint64(), r.IntN(300))
		min, avg := r.IntN(40), 40+r.IntN(40)
		max := avg + r.IntN(200)
		maskS := ^uint64(0) << (64 - 1 - r.IntN(6))
		maskL := ^uint64(0) << (64 - 1 - r.IntN(3))
		if got, want := cut(data, min, avg, max, maskS, maskL), cutRef(data, min, avg, max, maskS, maskL); got != want {
			t.Fatalf("len %d min %d avg %d max %d masks %x %x: cut %d, want %d", len(data), min, avg, max, maskS, maskL, got, want)
		}
	}
}
