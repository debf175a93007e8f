package md5lanes

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestDigestMatchesMD5 writes streams of many lengths, in pieces of many
// sizes (some through Start, their bytes changed once waited for), from
// many goroutines at once, and compares every digest with crypto/md5's.
func TestDigestMatchesMD5(t *testing.T) {
	if !haveLanes {
		t.Log("no AVX-512: New returns crypto/md5's hash")
	}
	const streams = 40
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), 7))
			for round := range 6 {
				size := rng.IntN(2 << 20)
				if round == 0 {
					size = rng.IntN(200)
				}
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				d := New()
				dg, _ := d.(*Digest)
				for rest := data; len(rest) > 0; {
					n := min(len(rest), 1+rng.IntN(1<<rng.IntN(21)))
					if dg != nil && rng.IntN(2) == 0 {
						// Start, then change the bytes once it has
						// waited (Wait, or the next call's own).
						piece := append([]byte(nil), rest[:n]...)
						dg.Start(piece)
						if rng.IntN(2) == 0 {
							dg.Wait()
							clear(piece)
						}
					} else {
						d.Write(rest[:n])
					}
					rest = rest[n:]
				}
				want := md5.Sum(data)
				if got := d.Sum(nil); !bytes.Equal(got, want[:]) {
					errs <- fmt.Errorf("stream %d round %d (%d bytes): %x, want %x", s, round, size, got, want)
					return
				}
				// Sum leaves the state: writing on continues the stream.
				d.Write([]byte("more"))
				want = md5.Sum(append(data, "more"...))
				if got := d.Sum(nil); !bytes.Equal(got, want[:]) {
					errs <- fmt.Errorf("stream %d round %d: after Sum, %x, want %x", s, round, got, want)
					return
				}
				d.Reset()
				d.Write(data[:size/2])
				want = md5.Sum(data[:size/2])
				if got := d.Sum(nil); !bytes.Equal(got, want[:]) {
					errs <- fmt.Errorf("stream %d round %d: after Reset, %x, want %x", s, round, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBlock16Lanes runs the kernel with lanes on and off: a lane outside
// the mask keeps its state, one inside gets crypto/md5's, each from its
// own blocks.
func TestBlock16Lanes(t *testing.T) {
	if !haveLanes {
		t.Skip("no AVX-512")
	}
	const blocks = 5
	rng := rand.New(rand.NewPCG(1, 2))
	var data [16][]byte
	var st [4][16]uint32
	var ptrs [16]uint64
	for i := range data {
		data[i] = make([]byte, blocks*BlockSize)
		for j := range data[i] {
			data[i][j] = byte(rng.Uint32())
		}
		for w := range st {
			st[w][i] = initState[w]
		}
		ptrs[i] = uint64(uintptr(unsafePtr(data[i])))
	}
	const mask = 0b1010_0110_1100_0011
	block16(&st, &ptrs, mask, blocks)
	for i := range data {
		if mask&(1<<i) == 0 {
			for w := range st {
				if st[w][i] != initState[w] {
					t.Fatalf("lane %d is off but its state changed", i)
				}
			}
			continue
		}
		d := &Digest{}
		d.Reset()
		for w := range d.s {
			d.s[w] = st[w][i]
		}
		d.len = blocks * BlockSize
		want := md5.Sum(data[i])
		if got := d.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("lane %d: %x, want %x", i, got, want)
		}
	}
	runtimeKeepAlive(data)
}

// BenchmarkStreams hashes 16 MiB streams in 1 MiB writes from a number
// of goroutines at once, through the engine and through crypto/md5.
func BenchmarkStreams(b *testing.B) {
	buf := make([]byte, 1<<20)
	for _, streams := range []int{1, 2, 4, 8, 16} {
		for _, impl := range []struct {
			name string
			new  func() interface{ Write([]byte) (int, error) }
		}{
			{"lanes", func() interface{ Write([]byte) (int, error) } { return New() }},
			{"crypto", func() interface{ Write([]byte) (int, error) } { return md5.New() }},
		} {
			b.Run(fmt.Sprintf("%s/%d", impl.name, streams), func(b *testing.B) {
				b.SetBytes(int64(streams) * 16 << 20)
				for range b.N {
					var wg sync.WaitGroup
					for range streams {
						wg.Add(1)
						go func() {
							defer wg.Done()
							h := impl.new()
							for range 16 {
								h.Write(buf)
							}
						}()
					}
					wg.Wait()
				}
			})
		}
	}
}
