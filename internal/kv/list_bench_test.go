//go:build unix

package kv

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// BenchmarkList lists pages of 1,000 objects from pebble, as a leaseholder
// serves a listing: 10,000 objects with a 1 KiB inline body, each with
// versions versions, compacted into tables. cpu-ns/op is the process's
// CPU time per page, which a busy machine disturbs less than wall time.
func BenchmarkList(b *testing.B) {
	for _, versions := range []int{1, 4} {
		b.Run(fmt.Sprintf("versions=%d", versions), func(b *testing.B) {
			db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem(), Comparer: storage.Comparer})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			const objects = 10000
			body := bytes.Repeat([]byte("x"), 1<<10)
			for v := 1; v <= versions; v++ {
				batch := db.NewIndexedBatch()
				for i := range objects {
					obj := keys.Object(1, nil, fmt.Appendf(nil, "photos/2026/%08d.jpg", i))
					rec := &mvcc.Record{Version: tstamp.Make(int64(v), 0), Size: int64(len(body)), ETag: "9b2cf535f27731c974343645a3985328",
						ContentType: "image/jpeg", Inline: body}
					if _, err := mvcc.Put(BatchRW{B: batch}, obj, rec, mvcc.Retention{}, rec.Version); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
			}
			lower, upper := keys.VersionSpan(keys.SpaceStart(1), keys.SpaceEnd(1))
			if err := db.Compact(context.Background(), lower, upper, false); err != nil {
				b.Fatal(err)
			}
			o := mvcc.ListOptions{Lower: keys.SpaceStart(1), Upper: keys.SpaceEnd(1), Limit: 1000}
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for b.Loop() {
				ents, more, err := mvcc.List(Reader{R: db}, o)
				if err != nil || len(ents) != o.Limit {
					b.Fatal(len(ents), err)
				}
				o.StartAfter = ents[len(ents)-1].Obj
				if !more {
					o.StartAfter = nil
				}
			}
			b.ReportMetric(float64((testenv.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
