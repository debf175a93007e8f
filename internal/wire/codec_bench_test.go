package wire

import (
	"testing"

	"github.com/cairn-db/cairn/internal/object"
)

// The codec's cost per message on the request path: decoding a PUT's
// request and an answer's ObjectInfo (the common shapes: a few metadata
// entries and headers).
func benchInfo() object.Info {
	return object.Info{Space: "photos", Key: "2026/11/26/img-0001.jpg", Version: 1 << 50, Parent: 1 << 49, Size: 1 << 20,
		ETag: "9e107d9d372bb6826bd81d3542a419d6", ContentType: "image/jpeg", Modified: 1 << 60,
		Meta: map[string]string{"camera": "x100", "owner": "ana"}, Tags: map[string]string{"album": "autumn"},
		Headers: map[string]string{"cache-control": "max-age=60"}}
}

func BenchmarkDecodeObjectInfo(b *testing.B) {
	info := benchInfo()
	enc := AppendObjectInfo(nil, &info)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := DecodeObjectInfo(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePutRequest(b *testing.B) {
	req := object.PutRequest{Space: "photos", Key: "2026/11/26/img-0001.jpg", Size: 1 << 20, ContentType: "image/jpeg",
		Meta: map[string]string{"camera": "x100", "owner": "ana"}, Headers: map[string]string{"cache-control": "max-age=60"}}
	enc := AppendPutRequest(nil, &req)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, _, err := DecodePutRequest(enc); err != nil {
			b.Fatal(err)
		}
	}
}
