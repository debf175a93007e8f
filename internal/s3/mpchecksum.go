package s3

import (
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
)

// Checksums of multipart uploads. CreateMultipartUpload names an
// algorithm (x-amz-checksum-algorithm) and how the object's checksum is
// made of the parts' (x-amz-checksum-type):
//
//   - COMPOSITE: the algorithm's digest of the parts' digests laid end to
//     end, with "-N" after it for N parts (S3's checksum of checksums).
//     Not a checksum of the content: clients do not verify a download
//     against it. The default for CRC32, CRC32C, SHA1 and SHA256.
//   - FULL_OBJECT: the CRC of the whole content, combined from the parts'
//     CRCs and sizes without reading the data (crcCombine). CRC32,
//     CRC32C and CRC64NVME only; the default, and the only type, for
//     CRC64NVME.
//
// Every part then carries a checksum of that algorithm (each verified
// against its body when uploaded, as any PUT's is; a copied part's is
// computed from the data), and Complete checks the ones its document
// names against them.

const (
	// Kept with the upload: the algorithm's name and the type.
	uploadChecksumHeader = "cairn-checksum-algorithm"
	// Kept with the upload and its object: how the object's checksum is
	// made (checksumComposite or checksumFullObject; absent: full object).
	checksumTypeHeader = "cairn-checksum-type"

	checksumComposite  = "COMPOSITE"
	checksumFullObject = "FULL_OBJECT"
)

// crcs are the algorithms whose checksums combine: the reflected
// polynomial and width of each. All three start from and end with all
// ones, as crcCombine assumes.
var crcs = map[string]struct {
	poly  uint64
	width uint
}{
	"crc32":     {0xedb88320, 32},
	"crc32c":    {0x82f63b78, 32},
	"crc64nvme": {0x9a6c9329ac4bc9b5, 64},
}

// uploadChecksum reads what CreateMultipartUpload asks for. ok is false
// when it names no algorithm.
func uploadChecksum(h http.Header) (alg checksumAlg, typ string, ok bool, e *apiError) {
	name, typ := h.Get("X-Amz-Checksum-Algorithm"), strings.ToUpper(h.Get("X-Amz-Checksum-Type"))
	if name == "" {
		if typ != "" {
			return alg, "", false, errInvalidRequest.with("x-amz-checksum-type needs x-amz-checksum-algorithm.")
		}
		return alg, "", false, nil
	}
	alg, known := findChecksum(name)
	if !known {
		return alg, "", false, errInvalidRequest.with("Checksum algorithm " + name + " is not supported (" + checksumNames() + ").")
	}
	_, isCRC := crcs[alg.name]
	switch typ {
	case "":
		typ = checksumComposite
		if alg.name == "crc64nvme" {
			typ = checksumFullObject
		}
	case checksumComposite:
		if alg.name == "crc64nvme" {
			return alg, "", false, errInvalidRequest.with("The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.")
		}
	case checksumFullObject:
		if !isCRC {
			return alg, "", false, errInvalidRequest.with("The FULL_OBJECT checksum type cannot be used with the " + alg.name + " checksum algorithm.")
		}
	default:
		return alg, "", false, errInvalidRequest.with("Value for x-amz-checksum-type header is invalid: COMPOSITE or FULL_OBJECT.")
	}
	return alg, typ, true, nil
}

// uploadAlg is the checksum algorithm an upload was created with (its
// record's headers); ok is false when it names none.
func uploadAlg(upload map[string]string) (alg checksumAlg, ok bool) {
	return findChecksum(upload[uploadChecksumHeader])
}

// setUploadChecksumHeaders answers an upload's algorithm and type.
func setUploadChecksumHeaders(hd http.Header, upload map[string]string) {
	if a, ok := uploadAlg(upload); ok {
		hd.Set("x-amz-checksum-algorithm", strings.ToUpper(a.name))
		hd.Set("x-amz-checksum-type", upload[checksumTypeHeader])
	}
}

// checksumXML holds the checksum elements of S3's multipart documents
// (parts, completed uploads, copied parts): one per algorithm, empty ones
// left out.
type checksumXML struct {
	ChecksumCRC32     string `xml:",omitempty"`
	ChecksumCRC32C    string `xml:",omitempty"`
	ChecksumCRC64NVME string `xml:",omitempty"`
	ChecksumSHA1      string `xml:",omitempty"`
	ChecksumSHA256    string `xml:",omitempty"`
	ChecksumMD5       string `xml:",omitempty"`
	ChecksumSHA512    string `xml:",omitempty"`
	ChecksumXXHASH64  string `xml:",omitempty"`
	ChecksumXXHASH3   string `xml:",omitempty"`
	ChecksumXXHASH128 string `xml:",omitempty"`
}

// field is the element of algorithm a.
func (c *checksumXML) field(a checksumAlg) *string {
	switch a.name {
	case "crc32":
		return &c.ChecksumCRC32
	case "crc32c":
		return &c.ChecksumCRC32C
	case "crc64nvme":
		return &c.ChecksumCRC64NVME
	case "sha1":
		return &c.ChecksumSHA1
	case "md5":
		return &c.ChecksumMD5
	case "sha512":
		return &c.ChecksumSHA512
	case "xxhash64":
		return &c.ChecksumXXHASH64
	case "xxhash3":
		return &c.ChecksumXXHASH3
	case "xxhash128":
		return &c.ChecksumXXHASH128
	}
	return &c.ChecksumSHA256
}

// storedChecksums are the checksums kept in a version's headers.
func storedChecksums(headers map[string]string) checksumXML {
	var c checksumXML
	for _, a := range checksumAlgs {
		*c.field(a) = headers[a.header()]
	}
	return c
}

// multipartChecksum is the object's checksum made of its parts' digests
// and sizes as typ says.
func multipartChecksum(alg checksumAlg, typ string, digests [][]byte, sizes []int64) string {
	if typ == checksumComposite {
		h := alg.new()
		for _, d := range digests {
			h.Write(d)
		}
		return base64.StdEncoding.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(digests))
	}
	c := crcs[alg.name]
	sum := digestUint(digests[0])
	for i := 1; i < len(digests); i++ {
		sum = crcCombine(c.poly, c.width, sum, digestUint(digests[i]), sizes[i])
	}
	out := binary.BigEndian.AppendUint64(nil, sum)
	return base64.StdEncoding.EncodeToString(out[8-c.width/8:])
}

// digestUint is a CRC's big-endian digest as a number.
func digestUint(d []byte) uint64 {
	var v uint64
	for _, b := range d {
		v = v<<8 | uint64(b)
	}
	return v
}

// crcCombine returns the CRC of A followed by B from crc1, the CRC of A,
// crc2, the CRC of B, and the length of B, for a reflected CRC of the
// given polynomial and width that starts from and ends with all ones
// (zlib's crc32_combine, for any such CRC): crc1 is multiplied by
// x^(8*len2) modulo the polynomial, which is what appending len2 bytes
// does to it, and crc2 added.
func crcCombine(poly uint64, width uint, crc1, crc2 uint64, len2 int64) uint64 {
	if len2 <= 0 {
		return crc1
	}
	top := uint64(1) << (width - 1)
	// mulmod multiplies a and b, polynomials with x^0 in the top bit,
	// modulo poly.
	mulmod := func(a, b uint64) uint64 {
		var p uint64
		for m := top; m != 0; m >>= 1 {
			if a&m != 0 {
				p ^= b
			}
			if b&1 != 0 {
				b = b>>1 ^ poly
			} else {
				b >>= 1
			}
		}
		return p
	}
	// x^(8*len2) by repeated squaring: sq is x^(2^k * 8), starting at x^8.
	xn := top      // x^0
	sq := top >> 8 // x^8
	for n := uint64(len2); n != 0; n >>= 1 {
		if n&1 != 0 {
			xn = mulmod(sq, xn)
		}
		sq = mulmod(sq, sq)
	}
	return mulmod(xn, crc1) ^ crc2
}

// checkCompleteChecksum checks what a Complete request says of the
// object's checksum (want: its x-amz-checksum-* headers by algorithm, and
// x-amz-checksum-type) against the upload's algorithm and type and the
// checksum made of the parts. A composite checksum may be given without
// its "-N" (minio-go sends it so).
func checkCompleteChecksum(hd http.Header, want map[string]string, alg checksumAlg, sums bool, typ, checksum string, parts int) *apiError {
	if t := hd.Get("X-Amz-Checksum-Type"); t != "" && (!sums || !strings.EqualFold(t, typ)) {
		have := "no checksum"
		if sums {
			have = "the " + typ + " type"
		}
		return errInvalidRequest.with("x-amz-checksum-type " + t + " does not match the upload's, which was created with " + have + ".")
	}
	for name, v := range want {
		a, _ := findChecksum(name)
		switch {
		case !sums || name != alg.name:
			return errInvalidRequest.with("The upload was not created with the " + strings.ToUpper(name) + " checksum algorithm (x-amz-checksum-algorithm), so its object has no such checksum to compare.")
		case v != checksum && !(typ == checksumComposite && v+"-"+strconv.Itoa(parts) == checksum):
			return a.mismatch()
		}
	}
	return nil
}
