package s3_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestSDKSnapshotBucket: a snapshot reads as a bucket frozen at its
// making — listings, downloads and ListObjectVersions — and every write
// to it is AccessDenied.
func TestSDKSnapshotBucket(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("live")}); err != nil {
		t.Fatal(err)
	}
	putS := func(key, body string) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("live"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	putS("a.txt", "old a")
	putS("b.txt", "old b")
	if _, err := n.CreateSnapshot(ctx, "live", "live-frozen"); err != nil {
		t.Fatal(err)
	}
	putS("a.txt", "new a")
	putS("c.txt", "new c")
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("live"), Key: aws.String("b.txt")}); err != nil {
		t.Fatal(err)
	}

	frozen := aws.String("live-frozen")
	bl, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(bl.Buckets) != 2 || *bl.Buckets[0].Name != "live" || *bl.Buckets[1].Name != "live-frozen" {
		t.Fatalf("ListBuckets: %+v %v", bl, err)
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: frozen})
	if err != nil || len(l.Contents) != 2 || *l.Contents[0].Key != "a.txt" || *l.Contents[1].Key != "b.txt" {
		t.Fatalf("listing the snapshot: %+v %v", l, err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: frozen, Key: aws.String("a.txt")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(body) != "old a" {
		t.Fatalf("the snapshot's a.txt reads %q", body)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: frozen, Key: aws.String("c.txt")}); apiCode(err) != "NoSuchKey" {
		t.Fatalf("a key written after the snapshot: %v", err)
	}
	v, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: frozen})
	if err != nil || len(v.Versions) != 2 || len(v.DeleteMarkers) != 0 {
		t.Fatalf("the snapshot's versions: %+v %v", v, err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: frozen}); err != nil {
		t.Fatalf("HeadBucket of the snapshot: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: frozen, Key: aws.String("x"), Body: strings.NewReader("x")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("PutObject to the snapshot: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: frozen, Key: aws.String("a.txt")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("DeleteObject in the snapshot: %v", err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: frozen, Key: aws.String("y"), CopySource: aws.String("live/a.txt")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("CopyObject into the snapshot: %v", err)
	}
	// Copying out of it restores the past.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("live"), Key: aws.String("b.txt"), CopySource: aws.String("live-frozen/b.txt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("live")}); err == nil {
		t.Fatal("the bucket of a snapshot was deleted")
	}
}
