package md5lanes

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/testenv"
)

// writeSplit writes data to h in pieces of random sizes, some of them
// under a block and some over a slot.
func writeSplit(rng *rand.Rand, h interface{ Write([]byte) (int, error) }, data []byte) {
	for len(data) > 0 {
		var n int
		switch rng.IntN(4) {
		case 0:
			n = rng.IntN(blockSize + 1)
		case 1:
			n = rng.IntN(4 * blockSize)
		case 2:
			n = rng.IntN(slotSize + 3*blockSize)
		default:
			n = rng.IntN(3 * slotSize)
		}
		n = min(n, len(data))
		h.Write(data[:n])
		data = data[n:]
	}
}

// needKernel skips a test of the lanes' scheduler where there is no
// kernel: there a Stream is crypto/md5 itself.
func needKernel(tb testing.TB) {
	if !haveKernel {
		tb.Skip("no AVX-512 here: streams are crypto/md5, and the scheduler does not run")
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestMatchesCryptoMD5 hashes many streams at once, each written in
// random pieces, and checks every digest against crypto/md5's, for every
// length near a block or slot boundary and for streams longer than the
// slab.
func TestMatchesCryptoMD5(t *testing.T) {
	needKernel(t)
	h := New()
	defer h.Close()
	var sizes []int
	for _, edge := range []int{0, blockSize, 2 * blockSize, slotSize, 2 * slotSize} {
		for d := -9; d <= 9; d++ {
			if edge+d >= 0 {
				sizes = append(sizes, edge+d)
			}
		}
	}
	sizes = append(sizes, 1<<20+17, numSlots*slotSize+5*blockSize+3)
	for _, streams := range []int{1, 3, Lanes, 2*Lanes + 5} {
		t.Run(fmt.Sprintf("streams=%d", streams), func(t *testing.T) {
			var wg sync.WaitGroup
			for w := range streams {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(streams), uint64(w)))
					for i := w; i < len(sizes); i += streams {
						data := randBytes(rng, sizes[i])
						s := h.NewStream()
						writeSplit(rng, s, data)
						if got, want := s.Sum(nil), md5.Sum(data); !bytes.Equal(got, want[:]) {
							t.Errorf("%d bytes: digest %x, want %x", len(data), got, want)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestSumThenWrite checks that Sum leaves the stream as it was, and that
// Reset empties it.
func TestSumThenWrite(t *testing.T) {
	needKernel(t)
	h := New()
	defer h.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	data := randBytes(rng, 3*slotSize+100)
	s := h.NewStream()
	for _, cut := range []int{0, 55, 56, 64, 200, slotSize + 1, len(data)} {
		s.Reset()
		s.Write(data[:cut])
		if got, want := s.Sum(nil), md5.Sum(data[:cut]); !bytes.Equal(got, want[:]) {
			t.Fatalf("prefix %d: %x, want %x", cut, got, want)
		}
		s.Write(data[cut:])
		if got, want := s.Sum([]byte("x")), md5.Sum(data); !bytes.Equal(got, append([]byte("x"), want[:]...)) {
			t.Fatalf("after prefix %d: %x, want x%x", cut, got, want)
		}
	}
}

// TestCloseDrains checks that Close waits for queued work and that an
// abandoned stream's slots come back.
func TestCloseDrains(t *testing.T) {
	needKernel(t)
	h := New()
	rng := rand.New(rand.NewPCG(3, 3))
	data := randBytes(rng, numSlots*slotSize/2)
	for range 4 {
		s := h.NewStream()
		s.Write(data) // abandoned without Sum
	}
	s := h.NewStream()
	s.Write(data)
	if got, want := s.Sum(nil), md5.Sum(data); !bytes.Equal(got, want[:]) {
		t.Fatalf("digest %x, want %x", got, want)
	}
	h.Close()
	if len(h.free) != numSlots {
		t.Fatalf("%d of %d slots free after Close", len(h.free), numSlots)
	}
}

func FuzzStream(f *testing.F) {
	needKernel(f)
	f.Add([]byte("abc"), uint16(1), uint16(2))
	f.Add(bytes.Repeat([]byte{0xa5}, 300), uint16(64), uint16(65))
	h := New()
	f.Cleanup(h.Close)
	f.Fuzz(func(t *testing.T, data []byte, a, b uint16) {
		i, j := int(a)%(len(data)+1), int(b)%(len(data)+1)
		if i > j {
			i, j = j, i
		}
		s := h.NewStream()
		s.Write(data[:i])
		s.Write(data[i:j])
		s.Write(data[j:])
		if got, want := s.Sum(nil), md5.Sum(data); !bytes.Equal(got, want[:]) {
			t.Fatalf("digest %x, want %x", got, want)
		}
	})
}

// BenchmarkStreams hashes 16 MiB streams in 1 MiB writes (a chunked
// upload's pieces), from 1 to 16 at once, with crypto/md5 and with one
// Hasher; cpu-ms/op is the process's CPU time per stream.
//
//	go test ./internal/md5lanes -run '^$' -bench Streams -benchtime 40x
func BenchmarkStreams(b *testing.B) {
	const size, write = 16 << 20, 1 << 20
	data := randBytes(rand.New(rand.NewPCG(1, 1)), size)
	for _, streams := range []int{1, 2, 4, 8, 16} {
		for _, lanes := range []bool{false, true} {
			b.Run(fmt.Sprintf("streams=%d/lanes=%v", streams, lanes), func(b *testing.B) {
				type hasher interface {
					Write([]byte) (int, error)
					Sum([]byte) []byte
				}
				newHash := func() hasher { return md5.New() }
				if lanes {
					h := New()
					defer h.Close()
					newHash = func() hasher { return h.NewStream() }
				}
				b.SetBytes(size)
				var left atomic.Int64
				left.Store(int64(b.N))
				cpu0 := testenv.CPUTime(b)
				var wg sync.WaitGroup
				for range streams {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							h := newHash()
							for off := 0; off < size; off += write {
								h.Write(data[off : off+write])
							}
							h.Sum(nil)
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(testenv.CPUTime(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			})
		}
	}
}
