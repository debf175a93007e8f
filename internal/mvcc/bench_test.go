package mvcc

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// benchKV holds nObj objects of space 1 with nVer versions each (every
// fourth object's newest version a delete marker), each version with an
// inline body of inline bytes.
func benchKV(b *testing.B, nObj, nVer, inline int) (*MemKV, [][]byte) {
	kv := NewMemKV()
	objs := make([][]byte, nObj)
	body := make([]byte, inline)
	for i := range body {
		body[i] = byte(i)
	}
	for i := range objs {
		objs[i] = keys.Object(1, nil, fmt.Appendf(nil, "photos/2026/%08d.jpg", i))
		for v := 1; v <= nVer; v++ {
			rec := &Record{Version: tstamp.Make(int64(v), 0), Size: int64(inline), ETag: "etag",
				ContentType: "image/jpeg", DeleteMarker: v == nVer && i%4 == 0}
			if !rec.DeleteMarker && inline > 0 {
				rec.Inline = body
			}
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
			kv, objs := benchKV(b, 1000, nVer, 0)
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

// BenchmarkList lists a page of 1,000 objects; inline is the size of each
// version's inline body, which a listing does not return (16 KiB bodies
// only with one version, to keep the store small).
func BenchmarkList(b *testing.B) {
	for _, inline := range []int{0, 1 << 10, 16 << 10} {
		for _, nVer := range []int{1, 10} {
			if inline > 1<<10 && nVer > 1 {
				continue
			}
			for _, asOf := range []uint64{0, tstamp.Make(int64(nVer)/2+1, 0)} {
				b.Run(fmt.Sprintf("inline=%d/versions=%d/asof=%t", inline, nVer, asOf != 0), func(b *testing.B) {
					kv, _ := benchKV(b, 2000, nVer, inline)
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
}

// BenchmarkListVersions lists a page of 1,000 versions (AllVersions).
func BenchmarkListVersions(b *testing.B) {
	for _, inline := range []int{0, 1 << 10} {
		b.Run(fmt.Sprintf("inline=%d", inline), func(b *testing.B) {
			kv, _ := benchKV(b, 500, 4, inline)
			o := ListOptions{Lower: keys.SpaceStart(1), Upper: keys.SpaceEnd(1), Limit: 1000, AllVersions: true}
			b.ReportAllocs()
			for b.Loop() {
				ents, _, err := List(kv, o)
				if err != nil || len(ents) != 1000 {
					b.Fatal(len(ents), err)
				}
			}
		})
	}
}

// BenchmarkUnmarshal: decoding one version record (every read of an
// object's latest version does it once).
func BenchmarkUnmarshal(b *testing.B) {
	rec := &Record{Version: 1 << 50, Size: 1 << 20, ContentType: "image/jpeg",
		Meta: map[string]string{"camera": "x100", "owner": "ana"}}
	enc := rec.Marshal()
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := Unmarshal(enc); err != nil {
			b.Fatal(err)
		}
	}
}
