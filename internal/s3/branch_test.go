package s3_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairn-db/cairn/internal/object"
)

// TestSDKBranchBucket: a branch is a bucket an S3 client reads and
// writes: it shows its base as of the branch point, takes puts, copies
// and deletes without touching the base, lists the merge of the two, and
// what it wrote reaches the base by a merge.
func TestSDKBranchBucket(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("live")}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, aws.String("live"))
	putS := func(bucket, key, body string) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	getS := func(bucket, key string) string {
		t.Helper()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return apiCode(err)
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		return string(b)
	}
	listS := func(bucket string) string {
		t.Helper()
		l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range l.Contents {
			ks = append(ks, *o.Key)
		}
		return strings.Join(ks, ",")
	}
	putS("live", "a.txt", "old a")
	putS("live", "b.txt", "old b")
	if _, err := n.CreateBranch(ctx, "live", "live-dev", ""); err != nil {
		t.Fatal(err)
	}
	putS("live", "a.txt", "new a") // after the branch point
	putS("live-dev", "c.txt", "dev c")
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("live-dev"), Key: aws.String("b.txt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("live-dev"), Key: aws.String("a2.txt"), CopySource: aws.String("live-dev/a.txt")}); err != nil {
		t.Fatal(err)
	}
	bl, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(bl.Buckets) != 2 || *bl.Buckets[1].Name != "live-dev" {
		t.Fatalf("ListBuckets: %+v %v", bl, err)
	}
	if got := listS("live-dev"); got != "a.txt,a2.txt,c.txt" {
		t.Fatalf("the branch lists %s", got)
	}
	if got := listS("live"); got != "a.txt,b.txt" {
		t.Fatalf("the base lists %s", got)
	}
	for key, want := range map[string]string{"a.txt": "old a", "a2.txt": "old a", "b.txt": "NoSuchKey", "c.txt": "dev c"} {
		if got := getS("live-dev", key); got != want {
			t.Fatalf("live-dev/%s = %q, want %q", key, got, want)
		}
	}
	v, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("live-dev")})
	if err != nil || len(v.Versions) != 4 || len(v.DeleteMarkers) != 1 {
		t.Fatalf("the branch's versions: %+v %v", v, err)
	}
	res, err := n.MergeBranch(ctx, &object.MergeRequest{Branch: "live-dev"})
	if err != nil || res.Applied != 3 {
		t.Fatalf("merge: %+v %v", res, err)
	}
	if got := listS("live"); got != "a.txt,a2.txt,c.txt" {
		t.Fatalf("the base after the merge lists %s", got)
	}
	if got := getS("live", "a.txt"); got != "new a" {
		t.Fatalf("the base's own change was merged over: %q", got)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("live")}); err == nil {
		t.Fatal("the bucket of a branch was deleted")
	}
}
