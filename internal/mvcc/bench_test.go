package mvcc

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// benchKV holds nObj objects of space 1 with nVer versions each (every
// fourth object's newest version a delete marker).
func benchKV(b *testing.B, nObj, nVer int) (*MemKV, [][]byte) {
	kv := NewMemKV()
	objs := make([][]byte, nObj)
	for i := range objs {
		objs[i] = keys.Object(1, nil, fmt.Appendf(nil, "photos/2026/%08d.jpg", i))
		for v := 1; v <= nVer; v++ {
			rec := &Record{Version: tstamp.Make(int64(v), 0), Size: 1000, ETag: "etag",
				ContentType: "image/jpeg", DeleteMarker: v == nVer && i%4 == 0}
			if _, err := Put(kv, objs[i], rec, Retention{}, rec.Version); err != nil {
				b.Fatal(err)
			}
		}
	}
	return kv, objs
}

func BenchmarkLatest(b *testing.B) {
	for _, nVer := range []int{1, 10} {
		b.Run(fmt.Sprintf("versions=%d", nVer), func(b *testing.B) {
			kv, objs := benchKV(b, 1000, nVer)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := Latest(kv, objs[i%len(objs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkList(b *testing.B) {
	for _, nVer := range []int{1, 10} {
		for _, asOf := range []uint64{0, tstamp.Make(int64(nVer)/2+1, 0)} {
			b.Run(fmt.Sprintf("versions=%d/asof=%t", nVer, asOf != 0), func(b *testing.B) {
				kv, _ := benchKV(b, 2000, nVer)
				o := ListOptions{Lower: keys.SpaceStart(1), Upper: keys.SpaceEnd(1), Limit: 1000, AsOf: asOf}
				b.ReportAllocs()
				for b.Loop() {
					ents, _, err := List(kv, o)
					if err != nil || len(ents) == 0 {
						b.Fatal(len(ents), err)
					}
				}
			})
		}
	}
}
