package s3_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// partChecksum picks alg's checksum out of the SDK's fields.
func partChecksum(alg string, crc32, crc32c, crc64, sha1, sha256 *string) string {
	return aws.ToString(map[string]*string{"CRC32": crc32, "CRC32C": crc32c, "CRC64NVME": crc64, "SHA1": sha1, "SHA256": sha256}[alg])
}

// TestMultipartChecksums uploads with each algorithm and checksum type
// through aws-sdk-go-v2 (which checksums each part and, for a full-object
// CRC, checks the download against it): Complete, HEAD and GET give the
// object's checksum (COMPOSITE: the digest of the parts' digests with
// "-N"; FULL_OBJECT: the CRC of the content), ListParts the parts', a
// copied part gets one, and a part without one, a part checksum that does
// not match in Complete, or a wrong whole-object checksum is refused.
func TestMultipartChecksums(t *testing.T) {
	ctx := context.Background()
	ep := startNode(t)
	c := client(ep, testAccess, testSecret, func(o *s3.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
	})
	b := aws.String("mpsums")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	src := testBytes(300<<10, 9)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("src"), Body: bytes.NewReader(src)}); err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{testBytes(5<<20, 1), testBytes(5<<20+3, 2), src} // the last one copied
	whole := bytes.Join(parts, nil)
	for _, tc := range []struct {
		alg types.ChecksumAlgorithm
		typ types.ChecksumType // "": the default
		get types.ChecksumType
	}{
		{types.ChecksumAlgorithmCrc32, "", types.ChecksumTypeComposite},
		{types.ChecksumAlgorithmCrc32c, types.ChecksumTypeFullObject, types.ChecksumTypeFullObject},
		{types.ChecksumAlgorithmCrc64nvme, "", types.ChecksumTypeFullObject},
		{types.ChecksumAlgorithmSha256, types.ChecksumTypeComposite, types.ChecksumTypeComposite},
		{types.ChecksumAlgorithmSha1, "", types.ChecksumTypeComposite},
	} {
		alg := string(tc.alg)
		key := aws.String("obj-" + strings.ToLower(alg))
		cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: key, ChecksumAlgorithm: tc.alg, ChecksumType: tc.typ})
		if err != nil {
			t.Fatalf("%s: create: %v", alg, err)
		}
		if cr.ChecksumAlgorithm != tc.alg || cr.ChecksumType != tc.get {
			t.Errorf("%s: create answered %s %s", alg, cr.ChecksumAlgorithm, cr.ChecksumType)
		}
		var done []types.CompletedPart
		var digests []byte
		for i, p := range parts[:2] {
			up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: key, UploadId: cr.UploadId, PartNumber: aws.Int32(int32(i + 1)),
				Body: bytes.NewReader(p), ChecksumAlgorithm: tc.alg})
			if err != nil {
				t.Fatalf("%s: part %d: %v", alg, i+1, err)
			}
			sum := partChecksum(alg, up.ChecksumCRC32, up.ChecksumCRC32C, up.ChecksumCRC64NVME, up.ChecksumSHA1, up.ChecksumSHA256)
			if want := checksumOf(alg, p); sum != want {
				t.Fatalf("%s: part %d checksum %q, want %q", alg, i+1, sum, want)
			}
			done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32,
				ChecksumCRC32C: up.ChecksumCRC32C, ChecksumCRC64NVME: up.ChecksumCRC64NVME, ChecksumSHA1: up.ChecksumSHA1, ChecksumSHA256: up.ChecksumSHA256})
		}
		cp, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: b, Key: key, UploadId: cr.UploadId, PartNumber: aws.Int32(3), CopySource: aws.String("mpsums/src")})
		if err != nil {
			t.Fatalf("%s: part copy: %v", alg, err)
		}
		r := cp.CopyPartResult
		if sum := partChecksum(alg, r.ChecksumCRC32, r.ChecksumCRC32C, r.ChecksumCRC64NVME, r.ChecksumSHA1, r.ChecksumSHA256); sum != checksumOf(alg, src) {
			t.Fatalf("%s: copied part checksum %q, want %q", alg, sum, checksumOf(alg, src))
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(3), ETag: r.ETag})
		for _, p := range parts {
			d, _ := base64.StdEncoding.DecodeString(checksumOf(alg, p))
			digests = append(digests, d...)
		}
		want := checksumOf(alg, whole)
		if tc.get == types.ChecksumTypeComposite {
			want = checksumOf(alg, digests) + "-3"
		}

		lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: key, UploadId: cr.UploadId})
		if err != nil || len(lp.Parts) != 3 || lp.ChecksumAlgorithm != tc.alg {
			t.Fatalf("%s: ListParts: %+v, %v", alg, lp, err)
		}
		for i, p := range lp.Parts {
			if sum := partChecksum(alg, p.ChecksumCRC32, p.ChecksumCRC32C, p.ChecksumCRC64NVME, p.ChecksumSHA1, p.ChecksumSHA256); sum != checksumOf(alg, parts[i]) {
				t.Errorf("%s: ListParts part %d checksum %q", alg, i+1, sum)
			}
		}

		// A part checksum that is not the part's, and a whole-object
		// checksum that is not the object's: refused, the upload still open.
		bad := append([]types.CompletedPart(nil), done...)
		bad[0].ChecksumCRC32, bad[0].ChecksumCRC32C, bad[0].ChecksumCRC64NVME, bad[0].ChecksumSHA1, bad[0].ChecksumSHA256 = nil, nil, nil, nil, nil
		other := checksumOf(alg, []byte("other"))
		switch tc.alg {
		case types.ChecksumAlgorithmCrc32:
			bad[0].ChecksumCRC32 = &other
		case types.ChecksumAlgorithmCrc32c:
			bad[0].ChecksumCRC32C = &other
		case types.ChecksumAlgorithmCrc64nvme:
			bad[0].ChecksumCRC64NVME = &other
		case types.ChecksumAlgorithmSha1:
			bad[0].ChecksumSHA1 = &other
		case types.ChecksumAlgorithmSha256:
			bad[0].ChecksumSHA256 = &other
		}
		if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: cr.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: bad}}); apiCode(err) != "InvalidPart" {
			t.Fatalf("%s: Complete with a wrong part checksum: want InvalidPart, got %v", alg, err)
		}
		if tc.alg == types.ChecksumAlgorithmCrc32c {
			if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: cr.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: done}, ChecksumCRC32C: &other, ChecksumType: tc.get}); apiCode(err) != "BadDigest" {
				t.Fatalf("%s: Complete with a wrong object checksum: want BadDigest, got %v", alg, err)
			}
		}

		in := &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: cr.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}
		if tc.alg == types.ChecksumAlgorithmCrc32c {
			in.ChecksumCRC32C, in.ChecksumType = &want, tc.get // the client's own whole-object checksum
		}
		co, err := c.CompleteMultipartUpload(ctx, in)
		if err != nil {
			t.Fatalf("%s: complete: %v", alg, err)
		}
		if sum := partChecksum(alg, co.ChecksumCRC32, co.ChecksumCRC32C, co.ChecksumCRC64NVME, co.ChecksumSHA1, co.ChecksumSHA256); sum != want || co.ChecksumType != tc.get {
			t.Errorf("%s: Complete answered %q %s, want %q %s", alg, sum, co.ChecksumType, want, tc.get)
		}
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if sum := partChecksum(alg, head.ChecksumCRC32, head.ChecksumCRC32C, head.ChecksumCRC64NVME, head.ChecksumSHA1, head.ChecksumSHA256); sum != want || head.ChecksumType != tc.get {
			t.Errorf("%s: HEAD gave %q %s, want %q %s", alg, sum, head.ChecksumType, want, tc.get)
		}
		get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(get.Body) // the SDK checks a full-object CRC as it reads
		get.Body.Close()
		if err != nil || !bytes.Equal(got, whole) {
			t.Fatalf("%s: GET: %d bytes, %v", alg, len(got), err)
		}
	}

	// A part without the upload's checksum is refused.
	plain := client(ep, testAccess, testSecret)
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("strict"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("strict"), UploadId: cr.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader([]byte("x"))}); apiCode(err) != "InvalidRequest" {
		t.Fatalf("a part without the upload's checksum: want InvalidRequest, got %v", err)
	}
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("bad"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeFullObject}); apiCode(err) != "InvalidRequest" {
		t.Fatalf("a full-object SHA256 upload: want InvalidRequest, got %v", err)
	}
}

// TestMinioMultipartChecksums: minio-go's multipart uploads with its
// automatic checksum (CRC32C, composite) and each algorithm it offers
// (with the five S3 added in 2026) get the checksum the parts make, which
// minio-go sends with Complete (a composite one without its "-N"). A GET
// of part 2 gives that part's checksum, GetObjectAttributes every part's
// and the object's (a composite one without "-N"), and a copy the
// checksum of the whole content (the copy is not a multipart object).
func TestMinioMultipartChecksums(t *testing.T) {
	ctx := context.Background()
	ep, err := url.Parse(startNode(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(ep.Host, &minio.Options{Creds: credentials.NewStaticV4(testAccess, testSecret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, TrailingHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(ctx, "minio-mp", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	body := testBytes(11<<20, 5)
	parts := [][]byte{body[:5<<20], body[5<<20 : 10<<20], body[10<<20:]}
	for _, tc := range []struct {
		sum  minio.ChecksumType
		alg  string
		full bool
	}{
		{minio.ChecksumNone, "CRC32C", false}, // minio-go's default
		{minio.ChecksumCRC32, "CRC32", false},
		{minio.ChecksumSHA256, "SHA256", false},
		{minio.ChecksumCRC64NVME, "CRC64NVME", true},
		{minio.ChecksumFullObjectCRC32C, "CRC32C", true},
		{minio.ChecksumMD5, "MD5", false},
		{minio.ChecksumSHA512, "SHA512", false},
		{minio.ChecksumXXHash64, "XXHASH64", false},
		{minio.ChecksumXXHash3, "XXHASH3", false},
		{minio.ChecksumXXHash128, "XXHASH128", false},
	} {
		key := "obj-" + tc.sum.String()
		if _, err := c.PutObject(ctx, "minio-mp", key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{Checksum: tc.sum, PartSize: 5 << 20}); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		want, typ := checksumOf(tc.alg, body), "FULL_OBJECT"
		if !tc.full {
			var digests []byte
			for _, p := range parts {
				d, _ := base64.StdEncoding.DecodeString(checksumOf(tc.alg, p))
				digests = append(digests, d...)
			}
			want, typ = checksumOf(tc.alg, digests)+"-3", "COMPOSITE"
		}
		st, err := c.StatObject(ctx, "minio-mp", key, minio.StatObjectOptions{Checksum: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := minioChecksum(st, tc.alg); got != want || st.ChecksumMode != typ {
			t.Errorf("%s: stat gave %s %q, want %s %q", key, st.ChecksumMode, got, typ, want)
		}

		r, err := c.GetObject(ctx, "minio-mp", key, minio.GetObjectOptions{Checksum: true, PartNumber: 2})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, parts[1]) {
			t.Fatalf("%s: part 2: %d bytes, %v", key, len(got), err)
		}
		ps, _ := r.Stat()
		r.Close()
		if sum := minioChecksum(ps, tc.alg); sum != checksumOf(tc.alg, parts[1]) {
			t.Errorf("%s: part 2's checksum %q, want %q", key, sum, checksumOf(tc.alg, parts[1]))
		}

		attrs, err := c.GetObjectAttributes(ctx, "minio-mp", key, minio.ObjectAttributesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m := attrs.Checksum.ChecksumType; m != typ {
			t.Errorf("%s: attributes' checksum type %s, want %s", key, m, typ)
		}
		if len(attrs.ObjectParts.Parts) != 3 {
			t.Fatalf("%s: attributes list %d parts", key, len(attrs.ObjectParts.Parts))
		}
		for i, p := range attrs.ObjectParts.Parts {
			if sum := attrPartChecksum(p, tc.alg); sum != checksumOf(tc.alg, parts[i]) {
				t.Errorf("%s: attributes give part %d checksum %q, want %q", key, i+1, sum, checksumOf(tc.alg, parts[i]))
			}
		}

		if _, err := c.CopyObject(ctx, minio.CopyDestOptions{Bucket: "minio-mp", Object: key + "-copy"}, minio.CopySrcOptions{Bucket: "minio-mp", Object: key}); err != nil {
			t.Fatal(err)
		}
		cs, err := c.StatObject(ctx, "minio-mp", key+"-copy", minio.StatObjectOptions{Checksum: true})
		if err != nil {
			t.Fatal(err)
		}
		if sum := minioChecksum(cs, tc.alg); sum != checksumOf(tc.alg, body) || cs.ChecksumMode != "FULL_OBJECT" {
			t.Errorf("%s: the copy's checksum is %s %q, want FULL_OBJECT %q", key, cs.ChecksumMode, sum, checksumOf(tc.alg, body))
		}
	}
}

// minioChecksum picks alg's checksum out of minio-go's object info.
func minioChecksum(st minio.ObjectInfo, alg string) string {
	return map[string]string{"CRC32": st.ChecksumCRC32, "CRC32C": st.ChecksumCRC32C, "CRC64NVME": st.ChecksumCRC64NVME, "SHA1": st.ChecksumSHA1,
		"SHA256": st.ChecksumSHA256, "MD5": st.ChecksumMD5, "SHA512": st.ChecksumSHA512, "XXHASH64": st.ChecksumXXHash64,
		"XXHASH3": st.ChecksumXXHash3, "XXHASH128": st.ChecksumXXHash128}[alg]
}

// attrPartChecksum picks alg's checksum out of a GetObjectAttributes part.
func attrPartChecksum(p *minio.ObjectAttributePart, alg string) string {
	return map[string]string{"CRC32": p.ChecksumCRC32, "CRC32C": p.ChecksumCRC32C, "CRC64NVME": p.ChecksumCRC64NVME, "SHA1": p.ChecksumSHA1,
		"SHA256": p.ChecksumSHA256, "MD5": p.ChecksumMD5, "SHA512": p.ChecksumSHA512, "XXHASH64": p.ChecksumXXHash64,
		"XXHASH3": p.ChecksumXXHash3, "XXHASH128": p.ChecksumXXHash128}[alg]
}
