package s3

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"net/http"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// Additional checksums (x-amz-checksum-*): a client sends the digest of the
// body in a header, or names the algorithm in x-amz-trailer and sends the
// digest after an aws-chunked body. Either way the body is checked against
// it before the version commits, and the value is stored with the version
// (object.Info.Headers) and returned by GET and HEAD when asked for
// with x-amz-checksum-mode: ENABLED.

const checksumPrefix = "x-amz-checksum-"

// checksumAlg is one algorithm S3 clients send.
type checksumAlg struct {
	name string // as in the header name, lower case: crc32, sha256, ...
	new  func() hash.Hash
}

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// CRC-64/NVME (polynomial 0xAD93D23594C93659, reflected).
	crc64NVME = crc64.MakeTable(0x9A6C9329AC4BC9B5)
)

var checksumAlgs = []checksumAlg{
	{"crc32", func() hash.Hash { return crc32.NewIEEE() }},
	{"crc32c", func() hash.Hash { return crc32.New(castagnoli) }},
	{"crc64nvme", func() hash.Hash { return crc64.New(crc64NVME) }},
	{"sha1", sha1.New},
	{"sha256", sha256.New},
	// The algorithms S3 added in 2026. XXHASH64 is XXH64 with seed 0,
	// XXHASH3 XXH3-64 and XXHASH128 XXH3-128; each digest big-endian.
	{"md5", md5.New},
	{"sha512", sha512.New},
	{"xxhash64", func() hash.Hash { return xxhash.New() }},
	{"xxhash3", func() hash.Hash { return xxh3.New() }},
	{"xxhash128", func() hash.Hash { return xxh3.New128() }},
}

// checksumNames lists the algorithms for error messages: "CRC32, ...".
func checksumNames() string {
	names := make([]string, len(checksumAlgs))
	for i, a := range checksumAlgs {
		names[i] = strings.ToUpper(a.name)
	}
	return strings.Join(names, ", ")
}

func findChecksum(name string) (checksumAlg, bool) {
	name = strings.ToLower(name)
	for _, a := range checksumAlgs {
		if a.name == name {
			return a, true
		}
	}
	return checksumAlg{}, false
}

// header is the algorithm's header name.
func (a checksumAlg) header() string { return checksumPrefix + a.name }

// sentIn reports whether h carries the algorithm's checksum, as a header
// or as the trailer it announces.
func (a checksumAlg) sentIn(h http.Header) bool {
	return h.Get(a.header()) != "" || strings.EqualFold(strings.TrimSpace(h.Get("X-Amz-Trailer")), a.header())
}

// digestSize is the size of the algorithm's digest in bytes.
func (a checksumAlg) digestSize() int { return a.new().Size() }

// checksumRequest is what a PUT says about its additional checksum.
type checksumRequest struct {
	alg checksumAlg
	// want is the digest from the header; nil when it comes as a trailer.
	want []byte
	// trailer is set when the digest follows the body (x-amz-trailer).
	trailer bool
}

// parseChecksum reads a request's checksum headers. ok is false when the
// request has none. A trailer is allowed only with a streaming encoding
// that carries trailers.
func parseChecksum(h http.Header, trailers bool) (c checksumRequest, ok bool, e *apiError) {
	n := 0
	for _, a := range checksumAlgs {
		v := h.Get(a.header())
		if v == "" {
			continue
		}
		n++
		want, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(want) != a.digestSize() {
			return c, false, errInvalidRequest.with("Value for " + a.header() + " header is invalid.")
		}
		c, ok = checksumRequest{alg: a, want: want}, true
	}
	if n > 1 {
		return c, false, errInvalidRequest.with("Expecting a single x-amz-checksum- header. Multiple checksum types are not allowed.")
	}
	if t := h.Get("X-Amz-Trailer"); t != "" {
		name, isSum := strings.CutPrefix(strings.ToLower(strings.TrimSpace(t)), checksumPrefix)
		a, known := findChecksum(name)
		switch {
		case !isSum || !known:
			return c, false, errInvalidRequest.with("The trailer " + t + " is not an x-amz-checksum- header this server knows (" + strings.ToLower(checksumNames()) + ").")
		case !trailers:
			return c, false, errInvalidRequest.with("x-amz-trailer needs a STREAMING-*-TRAILER payload (x-amz-content-sha256).")
		case ok:
			return c, false, errInvalidRequest.with("Expecting a single x-amz-checksum- header or trailer, not both.")
		}
		c, ok = checksumRequest{alg: a, trailer: true}, true
	}
	if s := h.Get("X-Amz-Sdk-Checksum-Algorithm"); s != "" {
		a, known := findChecksum(s)
		if !known {
			return c, false, errInvalidRequest.with("Checksum algorithm " + s + " is not supported (" + checksumNames() + ").")
		}
		if !ok || c.alg.name != a.name {
			return c, false, errInvalidRequest.with("x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.")
		}
	}
	return c, ok, nil
}

// mismatch is the error of a body that does not match its checksum.
func (a checksumAlg) mismatch() *apiError {
	return errBadDigest.with("The " + strings.ToUpper(a.name) + " you specified did not match the calculated checksum.")
}
