package cluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

// BenchmarkSpaceDiff diffs a snapshot against its space after changes
// keys were written: a diff's cost follows the change (the listing of
// what changed after the snapshot skips every block of older versions),
// so with the same change it should cost about the same in a space of
// 1,000 keys as in one of 100,000. cpu-ns/op is the node's CPU time per
// diff. The LSM is compacted before the change is written (the bulk of
// a space that is not being rewritten lies in tables), and the change is
// flushed to a table of its own.
func BenchmarkSpaceDiff(b *testing.B) {
	for _, c := range []struct{ keys, changes int }{{1000, 10}, {100000, 10}} {
		b.Run(fmt.Sprintf("keys=%d/changes=%d", c.keys, c.changes), func(b *testing.B) {
			ctx := context.Background()
			n, err := openStarted(ctx, testConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Close() })
			fillSpace(b, n, "bench", c.keys, 1, 256)
			db := n.eng.DB()
			if err := db.Compact(ctx, []byte{0}, bytes.Repeat([]byte{0xff}, 16), true); err != nil {
				b.Fatal(err)
			}
			if _, err := n.CreateSnapshot(ctx, "bench", "bench-then"); err != nil {
				b.Fatal(err)
			}
			for i := range c.changes {
				k := fmt.Sprintf("photos/2026/%08d.jpg", i*(c.keys/c.changes))
				if _, err := n.Put(ctx, &object.PutRequest{Space: "bench", Key: k, Size: 3}, bytes.NewReader([]byte("new"))); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for b.Loop() {
				d, err := n.DiffSpaces(ctx, &object.SpaceDiffRequest{From: "bench-then", To: "bench"})
				if err != nil || len(d.Changes) != c.changes || d.Truncated {
					b.Fatalf("diff: %d changes, truncated %t, %v", len(d.Changes), d.Truncated, err)
				}
			}
			b.ReportMetric(float64((testenv.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
