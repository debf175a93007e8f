package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-db/cairn/internal/node"
	"github.com/cairn-db/cairn/internal/object"
)

// sseC is an SSE-C key as the SDK takes it: the key and its MD5, base64.
type sseC struct{ key, md5 string }

func newSSEC(seed byte) sseC {
	k := testBytes(32, seed)
	m := md5.Sum(k)
	return sseC{base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(m[:])}
}

// stored reads a version's bytes as the node stores them, under the S3
// layer.
func stored(t *testing.T, n *node.Node, bucket, key string) []byte {
	t.Helper()
	_, rc, err := n.Get(context.Background(), &object.GetRequest{Space: bucket, Key: key, Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func getAll(t *testing.T, c *s3.Client, in *s3.GetObjectInput) ([]byte, *s3.GetObjectOutput, error) {
	t.Helper()
	out, err := c.GetObject(context.Background(), in)
	if err != nil {
		return nil, nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, out, err
}

// TestServerSideEncryption writes and reads objects with each kind of
// server-side encryption: the bytes at rest are not the plaintext, two
// equal plaintexts are stored as unrelated bytes, a read without the
// customer's key (or with another) fails, ranges decrypt, and copies move
// data between encryptions.
func TestServerSideEncryption(t *testing.T) {
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("sse")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	plain := testBytes(300_000, 7)
	sum := md5.Sum(plain)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	ck, other := newSSEC(1), newSSEC(2)

	// SSE-S3 and SSE-KMS (with a key made first: naming a missing one fails).
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("kms"), Body: bytes.NewReader(plain),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("k1")}); apiCode(err) != "KMS.NotFoundException" {
		t.Fatalf("PUT under a missing KMS key: %v", err)
	}
	if _, err := n.CreateKMSKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	puts := map[string]*s3.PutObjectInput{
		"s3a": {ServerSideEncryption: types.ServerSideEncryptionAes256},
		"s3b": {ServerSideEncryption: types.ServerSideEncryptionAes256},
		"kms": {ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("k1")},
		"c":   {SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)},
	}
	for key, in := range puts {
		in.Bucket, in.Key, in.Body = b, aws.String(key), bytes.NewReader(plain)
		out, err := c.PutObject(ctx, in)
		if err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
		if aws.ToString(out.ETag) != etag || out.ServerSideEncryption != in.ServerSideEncryption || aws.ToString(out.SSECustomerKeyMD5) != aws.ToString(in.SSECustomerKeyMD5) {
			t.Fatalf("PUT %s answered ETag %s, encryption %q/%q", key, aws.ToString(out.ETag), out.ServerSideEncryption, aws.ToString(out.SSECustomerKeyMD5))
		}
		at := stored(t, n, "sse", key)
		if len(at) != len(plain) || bytes.Equal(at, plain) {
			t.Fatalf("%s: %d bytes at rest, equal to the plaintext: %v", key, len(at), bytes.Equal(at, plain))
		}
	}
	// SSE-S3's own key, made by the writes above, is not a client's.
	if ks, err := n.ListKMSKeys(ctx); err != nil || len(ks) != 1 || ks[0].ID != "k1" {
		t.Fatalf("KMS keys after SSE-S3 writes: %+v %v", ks, err)
	}
	if bytes.Equal(stored(t, n, "sse", "s3a"), stored(t, n, "sse", "s3b")) {
		t.Fatal("two SSE-S3 versions of equal content are stored as equal bytes")
	}
	for _, key := range []string{"s3a", "kms"} {
		got, out, err := getAll(t, c, &s3.GetObjectInput{Bucket: b, Key: aws.String(key), Range: aws.String("bytes=70000-200000")})
		if err != nil || !bytes.Equal(got, plain[70000:200001]) || out.ServerSideEncryption != puts[key].ServerSideEncryption {
			t.Fatalf("ranged GET %s: %v, equal %v, encryption %q", key, err, bytes.Equal(got, plain[70000:200001]), out.ServerSideEncryption)
		}
	}

	// SSE-C: the key is needed, and must be the one.
	if _, _, err := getAll(t, c, &s3.GetObjectInput{Bucket: b, Key: aws.String("c")}); apiCode(err) != "InvalidRequest" {
		t.Fatalf("GET without the key: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("c"), SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(other.key), SSECustomerKeyMD5: aws.String(other.md5)}); err == nil {
		t.Fatal("HEAD with another key succeeded")
	}
	if _, _, err := getAll(t, c, &s3.GetObjectInput{Bucket: b, Key: aws.String("s3a"), SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)}); apiCode(err) != "InvalidRequest" {
		t.Fatalf("GET of an SSE-S3 object with a customer key: %v", err)
	}
	getC := &s3.GetObjectInput{Bucket: b, Key: aws.String("c"), Range: aws.String("bytes=5-99999"), SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)}
	if got, _, err := getAll(t, c, getC); err != nil || !bytes.Equal(got, plain[5:100000]) {
		t.Fatalf("ranged GET with the key: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("bad"), Body: bytes.NewReader(plain),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(other.md5)}); apiCode(err) != "InvalidArgument" {
		t.Fatalf("PUT with a key whose MD5 is wrong: %v", err)
	}

	// Copies: from SSE-C to SSE-KMS, from SSE-KMS to plaintext.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("c2kms"), CopySource: aws.String("sse/c"),
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(ck.key), CopySourceSSECustomerKeyMD5: aws.String(ck.md5),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("k1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("kms2plain"), CopySource: aws.String("sse/c2kms")}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored(t, n, "sse", "kms2plain"), plain) {
		t.Fatal("a copy of an SSE-KMS object into a plain one is not stored as its plaintext")
	}
	if got, out, err := getAll(t, c, &s3.GetObjectInput{Bucket: b, Key: aws.String("c2kms")}); err != nil || !bytes.Equal(got, plain) || out.ServerSideEncryption != types.ServerSideEncryptionAwsKms {
		t.Fatalf("GET of the copy: %v", err)
	}

	// Bucket default encryption applies to writes that ask for none.
	if _, err := c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: b, ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}}); err != nil {
		t.Fatal(err)
	}
	if ge, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: b}); err != nil ||
		ge.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != types.ServerSideEncryptionAes256 {
		t.Fatalf("GetBucketEncryption: %v", err)
	}
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("default"), Body: bytes.NewReader(plain)})
	if err != nil || out.ServerSideEncryption != types.ServerSideEncryptionAes256 || bytes.Equal(stored(t, n, "sse", "default"), plain) {
		t.Fatalf("PUT into a bucket with default encryption: %v, %q", err, out.ServerSideEncryption)
	}
	if _, err := c.DeleteBucketEncryption(ctx, &s3.DeleteBucketEncryptionInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: b}); apiCode(err) != "ServerSideEncryptionConfigurationNotFoundError" {
		t.Fatalf("GetBucketEncryption after delete: %v", err)
	}
}

// TestSSECMultipart uploads an SSE-C object in parts (one sent twice),
// copies a range of an SSE-S3 object in as a part, and reads ranges that
// cross the parts' boundaries.
func TestSSECMultipart(t *testing.T) {
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b, key := aws.String("ssemp"), aws.String("big")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	ck := newSSEC(3)
	alg := aws.String("AES256")
	src := testBytes(6<<20, 9)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("src"), Body: bytes.NewReader(src), ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: key, SSECustomerAlgorithm: alg, SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil {
		t.Fatal(err)
	}
	p1 := testBytes(5<<20+3, 4)
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: key, UploadId: cr.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(p1)}); apiCode(err) != "InvalidRequest" {
		t.Fatalf("a part without the upload's key: %v", err)
	}
	var parts []types.CompletedPart
	for i := 0; i < 2; i++ { // the part sent twice keeps its ETag
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: key, UploadId: cr.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(p1),
			SSECustomerAlgorithm: alg, SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(1), ETag: up.ETag})
		} else if aws.ToString(up.ETag) != aws.ToString(parts[0].ETag) {
			t.Fatalf("the part sent again has ETag %s, not %s", aws.ToString(up.ETag), aws.ToString(parts[0].ETag))
		}
	}
	cp, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: b, Key: key, UploadId: cr.UploadId, PartNumber: aws.Int32(2), CopySource: aws.String("ssemp/src"),
		CopySourceRange: aws.String("bytes=1000-2000999"), SSECustomerAlgorithm: alg, SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil {
		t.Fatal(err)
	}
	parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(2), ETag: cp.CopyPartResult.ETag})
	// Completing needs no key (awscli sends none), but a key given must be
	// the upload's.
	wrong := newSSEC(0x77)
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, SSECustomerAlgorithm: alg, SSECustomerKey: aws.String(wrong.key), SSECustomerKeyMD5: aws.String(wrong.md5)}); apiCode(err) != "AccessDenied" && apiCode(err) != "InvalidRequest" {
		t.Fatalf("completing with another key: %v", err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatalf("completing without the key: %v", err)
	}
	want := append(append([]byte(nil), p1...), src[1000:2001000]...)
	if at := stored(t, n, "ssemp", "big"); bytes.Equal(at[:1000], want[:1000]) || bytes.Equal(at[len(p1):len(p1)+1000], want[len(p1):len(p1)+1000]) {
		t.Fatal("a part is stored as plaintext")
	}
	for _, r := range [][2]int{{0, len(want) - 1}, {len(p1) - 10, len(p1) + 10}, {len(p1) - 1, len(p1)}, {len(p1) + 17, len(want) - 1}, {3, 5}} {
		got, _, err := getAll(t, c, &s3.GetObjectInput{Bucket: b, Key: key, Range: aws.String(fmt.Sprintf("bytes=%d-%d", r[0], r[1])),
			SSECustomerAlgorithm: alg, SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
		if err != nil || !bytes.Equal(got, want[r[0]:r[1]+1]) {
			t.Fatalf("range %v: %v, equal %v", r, err, bytes.Equal(got, want[r[0]:r[1]+1]))
		}
	}
	got, _, err := getAll(t, c, &s3.GetObjectInput{Bucket: b, Key: key, PartNumber: aws.Int32(2),
		SSECustomerAlgorithm: alg, SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil || !bytes.Equal(got, src[1000:2001000]) {
		t.Fatalf("part 2: %v", err)
	}
}
