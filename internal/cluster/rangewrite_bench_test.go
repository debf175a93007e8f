package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

// BenchmarkRangeWrite: one 16 KiB byte-range write at a random offset of
// an object of each size, each making a version. Such a write stores its
// own bytes, and the new version's hash comes from the chaining values of
// the blocks it did not change, so its cost should not grow with the
// object (before: the whole object was read and hashed again).
func BenchmarkRangeWrite(b *testing.B) {
	for _, size := range []int{4 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("object=%dMiB", size>>20), func(b *testing.B) {
			ctx := context.Background()
			n, err := openStarted(ctx, testConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Close() })
			if _, err := n.CreateSpace(ctx, "bench", object.SpaceSettings{}); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			body := randBytes(r, size)
			if _, err := n.Put(ctx, &object.PutRequest{Space: "bench", Key: "o", Size: int64(size)}, bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
			data := randBytes(r, 16<<10)
			write := func() {
				copy(data, fmt.Sprint(r.Uint64())) // distinct bytes each time
				off := r.Int64N(int64(size - len(data)))
				if _, err := n.Put(ctx, &object.PutRequest{Space: "bench", Key: "o", Mode: object.PutWriteAt, Offset: off, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
			write() // the first computes every block's chaining value
			b.ResetTimer()
			cpu0 := testenv.CPUTime(b)
			for range b.N {
				write()
			}
			b.ReportMetric(float64((testenv.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
