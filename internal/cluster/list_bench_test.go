package cluster

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

// BenchmarkList lists a whole space in pages of 1,000 keys, as an S3
// client pages through a bucket: keys objects of 1 KiB (inline), each
// with versions versions. ns/key is the wall time of one listed key;
// cpu-ns/op the CPU time the whole node spent on a listing, which a busy
// machine disturbs less than wall time.
func BenchmarkList(b *testing.B) {
	for _, c := range []struct{ keys, versions int }{{10000, 1}, {10000, 4}} {
		b.Run(fmt.Sprintf("keys=%d/versions=%d", c.keys, c.versions), func(b *testing.B) {
			n, err := openStarted(context.Background(), testConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Close() })
			fillSpace(b, n, "bench", c.keys, c.versions, 1<<10)
			// Settle the LSM first, so no flush or compaction runs during
			// the listings and they read from tables, as in a bucket that
			// is not being written.
			if err := n.eng.DB().Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 16), true); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for b.Loop() {
				req := object.ListRequest{Space: "bench", Limit: 1000}
				listed := 0
				for {
					res, err := n.List(ctx, &req)
					if err != nil {
						b.Fatal(err)
					}
					listed += len(res.Objects)
					if !res.Truncated {
						break
					}
					req.StartAfter = res.Next
				}
				if listed != c.keys {
					b.Fatalf("listed %d keys, want %d", listed, c.keys)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.keys), "ns/key")
			b.ReportMetric(float64((testenv.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// fillSpace creates space and writes keys objects of size bytes into it,
// versions times each, from a few writers at once.
func fillSpace(b *testing.B, n *Node, space string, keys, versions, size int) {
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, space, object.SpaceSettings{}); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), size)
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for range versions {
				for i := w; i < keys; i += writers {
					req := object.PutRequest{Space: space, Key: fmt.Sprintf("photos/2026/%08d.jpg", i), Size: int64(size)}
					if _, err := n.Put(ctx, &req, bytes.NewReader(body)); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
