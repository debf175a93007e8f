package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-db/cairn/internal/node"
)

// TestMultipartUpload goes through an upload with aws-sdk-go-v2: parts
// listed while it is open, the upload listed, completion with the
// multipart ETag, the object whole and by part number, and the upload
// gone afterwards (and never in the bucket's listing).
func TestMultipartUpload(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	b := aws.String("mpu")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, b)
	key := aws.String("dir/big object")
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: key,
		ContentType: aws.String("video/mp4"), Metadata: map[string]string{"who": "me"}, CacheControl: aws.String("max-age=60")})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.UploadId
	parts := [][]byte{testBytes(5<<20, 1), testBytes(5<<20, 2), testBytes(1<<20+7, 3)}
	var done []types.CompletedPart
	md := md5.New()
	for i, p := range parts {
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: key, UploadId: id, PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(p)
		md.Write(sum[:])
		if aws.ToString(up.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
			t.Fatalf("part %d ETag %s", i+1, aws.ToString(up.ETag))
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
	}
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: key, UploadId: id, MaxParts: aws.Int32(2)})
	if err != nil || len(lp.Parts) != 2 || !aws.ToBool(lp.IsTruncated) || aws.ToInt64(lp.Parts[1].Size) != 5<<20 {
		t.Fatalf("ListParts: %v %+v", err, lp)
	}
	lp, err = c.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: key, UploadId: id, PartNumberMarker: lp.NextPartNumberMarker})
	if err != nil || len(lp.Parts) != 1 || aws.ToInt32(lp.Parts[0].PartNumber) != 3 {
		t.Fatalf("ListParts page 2: %v %+v", err, lp)
	}
	lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b})
	if err != nil || len(lu.Uploads) != 1 || aws.ToString(lu.Uploads[0].Key) != *key || aws.ToString(lu.Uploads[0].UploadId) != *id {
		t.Fatalf("ListMultipartUploads: %v %+v", err, lu)
	}
	if l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b}); err != nil || len(l.Contents) != 0 {
		t.Fatalf("the open upload shows in the listing: %v %+v", err, l.Contents)
	}

	// Completion refuses a bad part list and changes nothing.
	bad := []struct {
		parts []types.CompletedPart
		code  string
	}{
		{[]types.CompletedPart{done[1], done[0], done[2]}, "InvalidPartOrder"},
		{[]types.CompletedPart{done[0], {PartNumber: aws.Int32(2), ETag: aws.String(`"00000000000000000000000000000000"`)}}, "InvalidPart"},
		{[]types.CompletedPart{done[0], {PartNumber: aws.Int32(9), ETag: done[1].ETag}}, "InvalidPart"},
		{[]types.CompletedPart{done[2], {PartNumber: aws.Int32(4), ETag: done[2].ETag}}, "InvalidPart"},
	}
	for _, bc := range bad {
		_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: id,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: bc.parts}})
		if apiCode(err) != bc.code {
			t.Fatalf("complete with %d parts: %v, want %s", len(bc.parts), err, bc.code)
		}
	}
	comp, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	wantETag := `"` + hex.EncodeToString(md.Sum(nil)) + `-3"`
	if aws.ToString(comp.ETag) != wantETag || aws.ToString(comp.VersionId) == "" {
		t.Fatalf("complete: ETag %s (want %s), version %q", aws.ToString(comp.ETag), wantETag, aws.ToString(comp.VersionId))
	}
	// Complete sent again (a client whose first answer was lost) gets the
	// same answer; the upload is gone all the same.
	again, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil || aws.ToString(again.ETag) != wantETag || aws.ToString(again.VersionId) != aws.ToString(comp.VersionId) {
		t.Fatalf("a second Complete: %+v %v", again, err)
	}
	if _, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: key, UploadId: id}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("ListParts of a completed upload: %v", err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("other"), UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("completing the upload again under another key: %v", err)
	}
	whole := slices.Concat(parts...)
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if !bytes.Equal(got, whole) || aws.ToString(get.ETag) != wantETag || aws.ToString(get.ContentType) != "video/mp4" ||
		get.Metadata["who"] != "me" || aws.ToString(get.CacheControl) != "max-age=60" {
		t.Fatalf("GET: %d bytes, ETag %s, type %s, meta %v, cache %s", len(got), aws.ToString(get.ETag), aws.ToString(get.ContentType), get.Metadata, aws.ToString(get.CacheControl))
	}
	for n, want := range parts {
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: key, PartNumber: aws.Int32(int32(n + 1))})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(g.Body)
		g.Body.Close()
		if !bytes.Equal(got, want) || aws.ToInt32(g.PartsCount) != 3 {
			t.Fatalf("part %d: %d bytes, parts count %d", n+1, len(got), aws.ToInt32(g.PartsCount))
		}
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: key, PartNumber: aws.Int32(4)}); err == nil {
		t.Fatal("HEAD of part 4 of 3 succeeded")
	}
	lu, err = c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b})
	if err != nil || len(lu.Uploads) != 0 {
		t.Fatalf("after completion: %v %+v", err, lu.Uploads)
	}
	if _, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: key, UploadId: id}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("ListParts after completion: %v", err)
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	if err != nil || len(l.Contents) != 1 || aws.ToInt64(l.Contents[0].Size) != int64(len(whole)) {
		t.Fatalf("listing after completion: %v %+v", err, l.Contents)
	}

	// Too small a part that is not the last; abort; an unknown upload.
	cr2, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("small")})
	if err != nil {
		t.Fatal(err)
	}
	var small []types.CompletedPart
	for n := int32(1); n <= 2; n++ {
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("small"), UploadId: cr2.UploadId, PartNumber: aws.Int32(n), Body: strings.NewReader("tiny part")})
		if err != nil {
			t.Fatal(err)
		}
		small = append(small, types.CompletedPart{PartNumber: aws.Int32(n), ETag: up.ETag})
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("small"), UploadId: cr2.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: small}})
	if apiCode(err) != "EntityTooSmall" {
		t.Fatalf("a small first part: %v", err)
	}
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("small"), UploadId: cr2.UploadId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("small"), UploadId: cr2.UploadId, PartNumber: aws.Int32(3), Body: strings.NewReader("x")}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("UploadPart after abort: %v", err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: key, UploadId: aws.String("nosuch"), PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("UploadPart to an unknown upload: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("small")}); err == nil {
		t.Fatal("the aborted upload's key exists")
	}
}

func testBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) * 2654435761
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestCopy copies objects and parts: CopyObject with each metadata
// directive and from a version, UploadPartCopy of ranges.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	for _, b := range []string{"src", "dst"} {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
		enableVersioning(t, c, aws.String(b))
	}
	v1body, v2body := testBytes(3<<20, 7), testBytes(200<<10, 8)
	v1, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String("a b"), Body: bytes.NewReader(v1body),
		ContentType: aws.String("text/one"), Metadata: map[string]string{"k": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String("a b"), Body: bytes.NewReader(v2body), ContentType: aws.String("text/two")}); err != nil {
		t.Fatal(err)
	}
	read := func(b, k string) ([]byte, *s3.GetObjectOutput) {
		t.Helper()
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(g.Body)
		g.Body.Close()
		return got, g
	}
	// COPY (the default) of an old version, across buckets.
	cp, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy"),
		CopySource: aws.String("src/a%20b?versionId=" + aws.ToString(v1.VersionId))})
	if err != nil {
		t.Fatal(err)
	}
	if got, g := read("dst", "copy"); !bytes.Equal(got, v1body) || aws.ToString(g.ContentType) != "text/one" || g.Metadata["k"] != "1" ||
		aws.ToString(cp.CopyObjectResult.ETag) != aws.ToString(v1.ETag) || aws.ToString(cp.CopySourceVersionId) != aws.ToString(v1.VersionId) {
		t.Fatalf("COPY: %d bytes, type %s, meta %v, ETag %s (source %s)", len(got), aws.ToString(g.ContentType), g.Metadata, aws.ToString(cp.CopyObjectResult.ETag), aws.ToString(v1.ETag))
	}
	// REPLACE of the latest.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("replaced"), CopySource: aws.String("/src/a b"),
		MetadataDirective: types.MetadataDirectiveReplace, ContentType: aws.String("text/new"), Metadata: map[string]string{"n": "2"}}); err != nil {
		t.Fatal(err)
	}
	if got, g := read("dst", "replaced"); !bytes.Equal(got, v2body) || aws.ToString(g.ContentType) != "text/new" || g.Metadata["n"] != "2" || g.Metadata["k"] != "" {
		t.Fatalf("REPLACE: %d bytes, type %s, meta %v", len(got), aws.ToString(g.ContentType), g.Metadata)
	}
	// Onto itself without a change; from nothing; a failed condition.
	for _, in := range []*s3.CopyObjectInput{
		{Bucket: aws.String("src"), Key: aws.String("a b"), CopySource: aws.String("src/a b")},
		{Bucket: aws.String("dst"), Key: aws.String("x"), CopySource: aws.String("src/nosuch")},
		{Bucket: aws.String("dst"), Key: aws.String("x"), CopySource: aws.String("src/a b"), CopySourceIfMatch: aws.String(`"nope"`)},
	} {
		if _, err := c.CopyObject(ctx, in); err == nil {
			t.Fatalf("CopyObject %s -> %s succeeded", aws.ToString(in.CopySource), aws.ToString(in.Key))
		}
	}
	// UploadPartCopy: the old version in two ranges, plus a plain part.
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("assembled")})
	if err != nil {
		t.Fatal(err)
	}
	src := aws.String("src/a b?versionId=" + aws.ToString(v1.VersionId))
	var done []types.CompletedPart
	half := len(v1body)/2 + 12345
	// Parts must be 5 MiB but for the last: copy the first 5 MiB of a
	// bigger source first.
	big := testBytes(6<<20, 9)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String("big"), Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	// Part 1 a range of another object, part 2 uploaded, part 3 a range
	// of the old version.
	mid := testBytes(5<<20, 10)
	copies := []struct {
		src   *string
		rng   string
		bytes []byte
	}{
		{aws.String("src/big"), fmt.Sprintf("bytes=%d-%d", 100, 100+5<<20-1), big[100 : 100+5<<20]},
		{nil, "", mid},
		{src, fmt.Sprintf("bytes=%d-%d", half, len(v1body)-1), v1body[half:]},
	}
	var want []byte
	for i, cpy := range copies {
		n := aws.Int32(int32(i + 1))
		want = append(want, cpy.bytes...)
		if cpy.src == nil {
			up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("dst"), Key: aws.String("assembled"), UploadId: cr.UploadId, PartNumber: n, Body: bytes.NewReader(cpy.bytes)})
			if err != nil {
				t.Fatal(err)
			}
			done = append(done, types.CompletedPart{PartNumber: n, ETag: up.ETag})
			continue
		}
		out, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("dst"), Key: aws.String("assembled"), UploadId: cr.UploadId,
			PartNumber: n, CopySource: cpy.src, CopySourceRange: aws.String(cpy.rng)})
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(cpy.bytes)
		if aws.ToString(out.CopyPartResult.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
			t.Fatalf("part copy %d: ETag %s", i+1, aws.ToString(out.CopyPartResult.ETag))
		}
		done = append(done, types.CompletedPart{PartNumber: n, ETag: out.CopyPartResult.ETag})
	}
	if _, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("dst"), Key: aws.String("assembled"), UploadId: cr.UploadId,
		PartNumber: aws.Int32(4), CopySource: src, CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", len(v1body)))}); err == nil {
		t.Fatal("a copy range past the source's end succeeded")
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("assembled"), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := read("dst", "assembled"); !bytes.Equal(got, want) {
		t.Fatalf("assembled: %d bytes, want %d", len(got), len(want))
	}
}

// TestAbandonedUploadsSwept: an upload left open past the expiry is
// aborted by the node's sweep.
func TestAbandonedUploadsSwept(t *testing.T) {
	ctx := context.Background()
	c := client(startNodeWithConfig(t, nil, func(cfg *node.Config) {
		cfg.MultipartExpiry, cfg.MultipartSweep = 300*time.Millisecond, 100*time.Millisecond
	}), testAccess, testSecret)
	b := aws.String("mpu")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("left")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("left"), UploadId: cr.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("part")}); err != nil {
		t.Fatal(err)
	}
	// A completed upload's record (for a Complete sent again) goes too.
	dc, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("done")})
	if err != nil {
		t.Fatal(err)
	}
	dp, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("done"), UploadId: dc.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatal(err)
	}
	complete := func() error {
		_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("done"), UploadId: dc.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: dp.ETag}}}})
		return err
	}
	if err := complete(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for apiCode(complete()) != "NoSuchUpload" {
		if time.Now().After(deadline) {
			t.Fatal("the completed upload's record is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		if len(lu.Uploads) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned upload is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: aws.String("left"), UploadId: cr.UploadId}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("ListParts of the swept upload: %v", err)
	}
	// The bucket holds only the completed object: with it gone, the
	// bucket can be deleted.
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("done")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucket after the sweep: %v", err)
	}
}

// TestDeleteObjects deletes in bulk: keys and a version, a missing key
// (deleted, as S3 has it) and a bad version id (an error entry).
func TestDeleteObjects(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	b := aws.String("bulk")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, b)
	var vers []string
	for _, k := range []string{"a", "b", "c", "c"} {
		p, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(k), Body: strings.NewReader("body of " + k)})
		if err != nil {
			t.Fatal(err)
		}
		vers = append(vers, aws.ToString(p.VersionId))
	}
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("a")}, {Key: aws.String("c"), VersionId: aws.String(vers[3])}, {Key: aws.String("nosuch")},
		{Key: aws.String("b"), VersionId: aws.String("not-a-version")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Deleted) != 3 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "b" {
		t.Fatalf("DeleteObjects: deleted %+v, errors %+v", out.Deleted, out.Errors)
	}
	if !aws.ToBool(out.Deleted[0].DeleteMarker) || aws.ToString(out.Deleted[0].DeleteMarkerVersionId) == "" {
		t.Fatalf("deleting a: %+v", out.Deleted[0])
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range l.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	// c's older version is latest again.
	if !slices.Equal(keys, []string{"b", "c"}) {
		t.Fatalf("after DeleteObjects: %v", keys)
	}
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("c")})
	if err != nil || aws.ToString(g.VersionId) != vers[2] {
		t.Fatalf("c: %v, version %s, want %s", err, aws.ToString(g.VersionId), vers[2])
	}
	g.Body.Close()
}

// TestXMLBodiesChecked: an XML body that does not match its signed
// SHA-256 is refused before it is read as XML.
func TestXMLBodiesChecked(t *testing.T) {
	ep := startNode(t)
	doc := `<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>`
	status, msg := signedPut(t, ep+"/checked", doc, sha256hex("another document"), nil)
	if status != 400 || !strings.Contains(msg, "XAmzContentSHA256Mismatch") {
		t.Fatalf("CreateBucket with a body not matching its hash: %d %s", status, msg)
	}
	c := client(ep, testAccess, testSecret)
	if _, err := c.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("checked")}); err == nil {
		t.Fatal("the bucket was created")
	}
	if status, msg := signedPut(t, ep+"/checked", doc, sha256hex(doc), nil); status != 200 {
		t.Fatalf("CreateBucket: %d %s", status, msg)
	}
}

// TestSystemKeysUnreachable: a client cannot name the keys uploads keep
// their state under, by any call (they are not UTF-8).
func TestSystemKeysUnreachable(t *testing.T) {
	ctx := context.Background()
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	b := aws.String("sys")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("src"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	sys := aws.String("\xffmpu/0123456789abcdef0123456789abcdef")
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: sys, CopySource: aws.String("sys/src")}); apiCode(err) != "InvalidArgument" {
		t.Fatalf("CopyObject onto a system key: %v", err)
	}
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: sys}); apiCode(err) != "InvalidArgument" {
		t.Fatalf("an upload to a system key: %v", err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("dst"), CopySource: aws.String("sys/%FFmpu/x")}); err == nil {
		t.Fatal("CopyObject from a system key succeeded")
	}
}
