package segment

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/testenv"
)

// BenchmarkPut stores distinct 1 MiB chunks on the real disk (fsync
// included) from 1 and 8 concurrent writers; with 8, group commit shares
// each fsync among the writers. Each writer hashes its chunk, then stores
// it with Put (which hashes it again to check) or with PutAsyncHashed.
// cpu-µs/op is the process's CPU time per chunk.
//
//	go test -run XXX -bench . ./internal/segment
func BenchmarkPut(b *testing.B) {
	for _, writers := range []int{1, 8} {
		for _, hashed := range []bool{false, true} {
			b.Run(fmt.Sprintf("writers=%d/hashed=%v", writers, hashed), func(b *testing.B) {
				benchPut(b, writers, hashed)
			})
		}
	}
}

func benchPut(b *testing.B, writers int, hashed bool) {
	n := openNodeAt(b, vfs.Default, b.TempDir(), 0)
	defer n.close(b)
	base, _ := randomChunk(rand.New(rand.NewPCG(1, 2)), 1<<20)
	var next atomic.Int64
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	cpu0 := testenv.CPUTime(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			ctx := context.Background()
			data := make([]byte, len(base))
			copy(data, base)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				binary.BigEndian.PutUint64(data, uint64(i))
				h := chunk.Sum(data)
				var err error
				if hashed {
					err = n.st.PutAsyncHashed(h, data).Wait(ctx)
				} else {
					err = n.st.Put(ctx, h, data)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(testenv.CPUTime(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// BenchmarkGet reads 1 MiB chunks, verified, into a reused buffer.
func BenchmarkGet(b *testing.B) {
	n := openNodeAt(b, vfs.Default, b.TempDir(), 0)
	defer n.close(b)
	var hashes []chunk.Hash
	rng := rand.New(rand.NewPCG(3, 4))
	for range 16 {
		d, h := randomChunk(rng, 1<<20)
		if err := n.st.Put(context.Background(), h, d); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	cpu0 := testenv.CPUTime(b)
	for i := 0; b.Loop(); i++ {
		var err error
		if buf, err = n.st.Get(context.Background(), hashes[i%len(hashes)], buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(testenv.CPUTime(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}
