package s3

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: the CRC combined from two pieces' CRCs is the CRC of
// the two laid end to end, for every combinable algorithm and lengths
// from empty up to past a power of two.
func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for name, c := range crcs {
		alg, _ := findChecksum(name)
		sum := func(b []byte) uint64 { h := alg.new(); h.Write(b); return digestUint(h.Sum(nil)) }
		for _, cut := range [][2]int{{0, 0}, {0, 7}, {7, 0}, {1, 1}, {100, 1024}, {4999, 1}, {1, 4999}, {2500, 2500}, {17, 4096}} {
			a, b := data[:cut[0]], data[cut[0]:cut[0]+cut[1]]
			got := crcCombine(c.poly, c.width, sum(a), sum(b), int64(len(b)))
			if want := sum(bytes.Join([][]byte{a, b}, nil)); got != want {
				t.Errorf("%s: combine(%d bytes, %d bytes) = %x, want %x", name, len(a), len(b), got, want)
			}
		}
	}
}

// TestMultipartChecksum: a full-object checksum of three parts is the
// checksum of their content; a composite one is the digest of the
// digests with the part count.
func TestMultipartChecksum(t *testing.T) {
	parts := [][]byte{bytes.Repeat([]byte("a"), 300), bytes.Repeat([]byte("bc"), 77), []byte("d")}
	for _, tc := range []struct{ alg, typ string }{{"crc32", checksumFullObject}, {"crc32c", checksumFullObject}, {"crc64nvme", checksumFullObject}, {"sha256", checksumComposite}, {"crc32", checksumComposite}} {
		alg, _ := findChecksum(tc.alg)
		var digests [][]byte
		var sizes []int64
		whole, ofDigests := alg.new(), alg.new()
		for _, p := range parts {
			h := alg.new()
			h.Write(p)
			digests, sizes = append(digests, h.Sum(nil)), append(sizes, int64(len(p)))
			whole.Write(p)
			ofDigests.Write(h.Sum(nil))
		}
		want := b64(whole.Sum(nil))
		if tc.typ == checksumComposite {
			want = b64(ofDigests.Sum(nil)) + "-3"
		}
		if got := multipartChecksum(alg, tc.typ, digests, sizes); got != want {
			t.Errorf("%s %s: %s, want %s", tc.alg, tc.typ, got, want)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
