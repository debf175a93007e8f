package s3_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestSignatureV2: minio-go signing with Signature Version 2 creates a
// bucket, writes, reads and lists; its SigV2 presigned URL reads; a
// wrong secret and an expired URL are refused.
func TestSignatureV2(t *testing.T) {
	_, ep := openNode(t, nil, nil)
	u, _ := url.Parse(ep)
	ctx := context.Background()
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV2(testAccess, testSecret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "sigv2", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, "sigv2", "dir/a b", strings.NewReader("hello"), 5, minio.PutObjectOptions{UserMetadata: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	o, err := mc.GetObject(ctx, "sigv2", "dir/a b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(o)
	if err != nil || string(b) != "hello" {
		t.Fatalf("GET: %q %v", b, err)
	}
	n := 0
	for obj := range mc.ListObjects(ctx, "sigv2", minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("listed %d objects", n)
	}
	pu, err := mc.PresignedGetObject(ctx, "sigv2", "dir/a b", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !pu.Query().Has("Signature") {
		t.Fatalf("not a SigV2 URL: %s", pu)
	}
	if st, body := anonymous(t, "GET", pu.String(), ""); st != http.StatusOK || body != "hello" {
		t.Fatalf("SigV2 presigned GET: %d %q", st, body)
	}
	q := pu.Query()
	q.Set("Expires", "1000")
	pu.RawQuery = q.Encode()
	if st, _ := anonymous(t, "GET", pu.String(), ""); st != http.StatusForbidden {
		t.Fatalf("an expired SigV2 URL: %d", st)
	}
	bad, _ := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV2(testAccess, "wrong-secret", ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if _, err := bad.StatObject(ctx, "sigv2", "dir/a b", minio.StatObjectOptions{}); err == nil {
		t.Fatal("a SigV2 request with a wrong secret succeeded")
	}
}
