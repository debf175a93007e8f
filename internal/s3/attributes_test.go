package s3_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestGetObjectAttributes: a plain object's ETag, size and checksum, and a
// multipart object's parts, paginated.
func TestGetObjectAttributes(t *testing.T) {
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("attrs")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("one"), Body: strings.NewReader("hello"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	all := []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum, types.ObjectAttributesObjectParts, types.ObjectAttributesStorageClass, types.ObjectAttributesObjectSize}
	a, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: aws.String("one"), ObjectAttributes: all})
	if err != nil || `"`+aws.ToString(a.ETag)+`"` != aws.ToString(put.ETag) || aws.ToInt64(a.ObjectSize) != 5 || a.StorageClass != types.StorageClassStandard ||
		a.Checksum == nil || aws.ToString(a.Checksum.ChecksumSHA256) != aws.ToString(put.ChecksumSHA256) || a.ObjectParts != nil {
		t.Fatalf("attributes of a plain object: %+v %v", a, err)
	}
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("multi")})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i := 1; i <= 3; i++ {
		size := 5 << 20
		if i == 3 {
			size = 7
		}
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("multi"), UploadId: cr.UploadId, PartNumber: aws.Int32(int32(i)), Body: bytes.NewReader(testBytes(size, byte(i)))})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i)), ETag: up.ETag})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("multi"), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	a, err = c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: aws.String("multi"), ObjectAttributes: all, MaxParts: aws.Int32(1), PartNumberMarker: aws.String("1")})
	if err != nil || a.ObjectParts == nil || aws.ToInt32(a.ObjectParts.TotalPartsCount) != 3 || len(a.ObjectParts.Parts) != 1 ||
		aws.ToInt32(a.ObjectParts.Parts[0].PartNumber) != 2 || aws.ToInt64(a.ObjectParts.Parts[0].Size) != 5<<20 || !aws.ToBool(a.ObjectParts.IsTruncated) ||
		aws.ToString(a.ObjectParts.NextPartNumberMarker) != "2" {
		t.Fatalf("attributes of a multipart object: %+v %v", a.ObjectParts, err)
	}
	if _, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: aws.String("none"), ObjectAttributes: all}); apiCode(err) != "NoSuchKey" {
		t.Fatalf("attributes of a missing object: %v", err)
	}
}
