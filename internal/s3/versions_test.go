package s3_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestListObjectVersions lists every version and delete marker, newest
// first within a key, in pages that end inside a history and across
// common prefixes, through the SDK's paginator.
func TestListObjectVersions(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	b := aws.String("hist")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	put := func(k string) string {
		t.Helper()
		p, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(k), Body: strings.NewReader("v of " + k)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(p.VersionId)
	}
	// want lists "key version latest marker" lines in S3's order.
	var a []string
	for range 3 {
		a = append(a, put("a"))
	}
	vb := put("b")
	d, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("b")})
	if err != nil || !aws.ToBool(d.DeleteMarker) {
		t.Fatalf("delete b: %+v %v", d, err)
	}
	put("dir/x")
	put("dir/y")
	vc := put("c")
	want := []string{
		"a " + a[2] + " latest", "a " + a[1], "a " + a[0],
		"b " + aws.ToString(d.VersionId) + " latest marker", "b " + vb,
		"c " + vc + " latest",
	}
	wantAll := append(slices.Clone(want), "dir/x * latest", "dir/y * latest")

	for _, tc := range []struct {
		delimiter string
		max       int32
		want      []string
	}{
		{"", 1000, wantAll},
		{"", 2, wantAll},
		{"/", 1, append(slices.Clone(want), "prefix dir/")},
		{"/", 3, append(slices.Clone(want), "prefix dir/")},
	} {
		var got []string
		pages := 0
		in := &s3.ListObjectVersionsInput{Bucket: b, MaxKeys: aws.Int32(tc.max)}
		if tc.delimiter != "" {
			in.Delimiter = aws.String(tc.delimiter)
		}
		for p := s3.NewListObjectVersionsPaginator(c, in); p.HasMorePages(); {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			n := len(out.Versions) + len(out.DeleteMarkers) + len(out.CommonPrefixes)
			if n > int(tc.max) || (aws.ToBool(out.IsTruncated) && n != int(tc.max)) {
				t.Fatalf("max-keys %d: a page of %d (truncated %v)", tc.max, n, aws.ToBool(out.IsTruncated))
			}
			// The SDK splits versions and markers; merge them back by key
			// and version (newest first) as the document orders them.
			var ents []string
			for _, v := range out.Versions {
				ents = append(ents, entry(aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest), false))
			}
			for _, m := range out.DeleteMarkers {
				ents = append(ents, entry(aws.ToString(m.Key), aws.ToString(m.VersionId), aws.ToBool(m.IsLatest), true))
			}
			slices.SortStableFunc(ents, func(x, y string) int {
				kx, vx, _ := strings.Cut(x, " ")
				ky, vy, _ := strings.Cut(y, " ")
				if c := strings.Compare(kx, ky); c != 0 {
					return c
				}
				return -strings.Compare(vx, vy)
			})
			for _, cp := range out.CommonPrefixes {
				ents = append(ents, "prefix "+aws.ToString(cp.Prefix))
			}
			got = append(got, ents...)
		}
		for i := range got {
			if strings.HasPrefix(got[i], "dir/") {
				k, rest, _ := strings.Cut(got[i], " ")
				_, rest, _ = strings.Cut(rest, " ")
				got[i] = k + " * " + rest
			}
		}
		// Prefixes sort with the keys.
		slices.SortStableFunc(got, func(x, y string) int { return strings.Compare(sortKey(x), sortKey(y)) })
		if !slices.Equal(got, tc.want) {
			t.Fatalf("delimiter %q max %d, %d pages:\n got %q\nwant %q", tc.delimiter, tc.max, pages, got, tc.want)
		}
	}

	// An old version named by the listing reads back.
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("a"), VersionId: aws.String(a[0])})
	if err != nil {
		t.Fatal(err)
	}
	g.Body.Close()
	// A version-id marker needs a key marker.
	_, err = c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, VersionIdMarker: aws.String(a[1])})
	if apiCode(err) != "InvalidArgument" {
		t.Fatalf("version-id-marker alone: %v", err)
	}
	// Resuming inside a's history.
	out, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, KeyMarker: aws.String("a"), VersionIdMarker: aws.String(a[2]), MaxKeys: aws.Int32(1)})
	if err != nil || len(out.Versions) != 1 || aws.ToString(out.Versions[0].VersionId) != a[1] || aws.ToBool(out.Versions[0].IsLatest) ||
		aws.ToString(out.NextKeyMarker) != "a" || aws.ToString(out.NextVersionIdMarker) != a[1] {
		t.Fatalf("resume inside a: %+v %v", out, err)
	}
}

func entry(key, version string, latest, marker bool) string {
	s := key + " " + version
	if latest {
		s += " latest"
	}
	if marker {
		s += " marker"
	}
	return s
}

// sortKey orders listing lines by key, a common prefix by its text.
func sortKey(s string) string {
	if p, ok := strings.CutPrefix(s, "prefix "); ok {
		return p
	}
	return strings.Fields(s)[0]
}

// TestConditionalWrites: If-Match on PUT replaces only the version whose
// ETag it names, If-None-Match: * only creates, and both hold on
// CompleteMultipartUpload too.
func TestConditionalWrites(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	b := aws.String("cond")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string, mod func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
		in := &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader(body)}
		if mod != nil {
			mod(in)
		}
		return c.PutObject(ctx, in)
	}
	first, err := put("k", "one", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put("k", "again", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("If-None-Match * over an object: %v", err)
	}
	second, err := put("k", "two", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag })
	if err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	if _, err := put("k", "stale", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag }); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with an old ETag: %v", err)
	}
	if _, err := put("missing", "x", func(in *s3.PutObjectInput) { in.IfMatch = first.ETag }); apiCode(err) != "NoSuchKey" {
		t.Fatalf("If-Match on a missing key: %v", err)
	}
	if _, err := put("k", "x", func(in *s3.PutObjectInput) { in.IfNoneMatch = second.ETag }); apiCode(err) != "NotImplemented" {
		t.Fatalf("If-None-Match with an ETag on PUT: %v", err)
	}
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("k")})
	if err != nil || aws.ToString(g.ETag) != aws.ToString(second.ETag) {
		t.Fatalf("after the refused writes k is %v %v, want %s", aws.ToString(g.ETag), err, aws.ToString(second.ETag))
	}
	g.Body.Close()

	// Completing an upload onto a key that changed since: refused, and
	// the upload stays open to complete without the condition.
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("k"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatal(err)
	}
	complete := &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("k"), UploadId: up.UploadId, IfMatch: first.ETag,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}}
	if _, err := c.CompleteMultipartUpload(ctx, complete); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("Complete with an old If-Match: %v", err)
	}
	complete.IfMatch = second.ETag
	if _, err := c.CompleteMultipartUpload(ctx, complete); err != nil {
		t.Fatalf("Complete with the current If-Match: %v", err)
	}
}
