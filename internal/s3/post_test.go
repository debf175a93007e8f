package s3_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// postForm posts fields and then a file to u as a browser would.
func postForm(t *testing.T, u string, fields map[string]string, file string) (int, string) {
	t.Helper()
	st, body, _ := postFormHeader(t, u, fields, file)
	return st, body
}

// postFormHeader is postForm giving the response's header too.
func postFormHeader(t *testing.T, u string, fields map[string]string, file string) (int, string, http.Header) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = w.WriteField(k, v)
	}
	fw, _ := w.CreateFormFile("file", "upload.txt")
	_, _ = fw.Write([]byte(file))
	_ = w.Close()
	resp, err := http.Post(u, w.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// TestPostUpload: a browser upload with a SigV4 policy made by minio-go
// is stored as its fields say; a form that breaks its policy, a file
// outside the length range, an expired policy, a bad signature and an
// unsigned form to a private bucket store nothing.
func TestPostUpload(t *testing.T) {
	_, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("posts")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(ep)
	mc, err := minio.New(pu.Host, &minio.Options{Creds: credentials.NewStaticV4(testAccess, testSecret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	policy := func(expires time.Time) (string, map[string]string) {
		p := minio.NewPostPolicy()
		_ = p.SetBucket("posts")
		_ = p.SetKeyStartsWith("uploads/")
		_ = p.SetExpires(expires)
		_ = p.SetContentLengthRange(1, 100)
		_ = p.SetContentType("text/plain")
		_ = p.SetUserMetadata("origin", "browser")
		u, fields, err := mc.PresignedPostPolicy(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		fields["Content-Type"] = "text/plain"
		fields["x-amz-meta-origin"] = "browser"
		return u.String(), fields
	}
	u, fields := policy(time.Now().Add(time.Hour))
	fields["key"] = "uploads/${filename}"
	st, body, hd := postFormHeader(t, u, fields, "hello")
	if st != http.StatusNoContent {
		t.Fatalf("POST: %d %s", st, body)
	}
	if loc := hd.Get("Location"); loc != ep+"/posts/uploads/upload.txt" {
		t.Errorf("the upload's Location is %q, want the object's absolute URL", loc)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("uploads/upload.txt")})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(data) != "hello" || aws.ToString(got.ContentType) != "text/plain" || got.Metadata["origin"] != "browser" {
		t.Fatalf("the upload: %q, %q, %v", data, aws.ToString(got.ContentType), got.Metadata)
	}

	refused := map[string]func(map[string]string) (map[string]string, string){
		"a key outside the policy's prefix": func(f map[string]string) (map[string]string, string) { f["key"] = "elsewhere/x"; return f, "x" },
		"a file over the length range": func(f map[string]string) (map[string]string, string) {
			f["key"] = "uploads/big"
			return f, strings.Repeat("x", 101)
		},
		"a field the policy does not name": func(f map[string]string) (map[string]string, string) {
			f["key"] = "uploads/extra"
			f["x-amz-meta-more"] = "1"
			return f, "x"
		},
		"a signature of another policy": func(f map[string]string) (map[string]string, string) {
			f["key"] = "uploads/forged"
			f["x-amz-signature"] = strings.Repeat("0", 64)
			return f, "x"
		},
	}
	for name, change := range refused {
		_, f := policy(time.Now().Add(time.Hour))
		f, file := change(f)
		if st, _ := postForm(t, u, f, file); st < 400 {
			t.Errorf("%s: %d", name, st)
		}
	}
	_, f := policy(time.Now().Add(-time.Minute))
	f["key"] = "uploads/late"
	if st, _ := postForm(t, u, f, "x"); st != http.StatusForbidden {
		t.Errorf("an expired policy: %d", st)
	}
	if st, _ := postForm(t, u, map[string]string{"key": "uploads/anon"}, "x"); st != http.StatusForbidden {
		t.Errorf("an unsigned form to a private bucket: %d", st)
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	if err != nil || len(l.Contents) != 1 {
		t.Fatalf("after the refused forms the bucket holds %d objects (%v)", len(l.Contents), err)
	}
}
