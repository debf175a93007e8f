package s3_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
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
	enableVersioning(t, c, b)
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

// listedVersions lists a bucket's versions and delete markers as entry
// strings, sorted.
func listedVersions(t *testing.T, c *s3.Client, b *string) []string {
	t.Helper()
	out, err := c.ListObjectVersions(context.Background(), &s3.ListObjectVersionsInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range out.Versions {
		got = append(got, entry(aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest), false))
	}
	for _, m := range out.DeleteMarkers {
		got = append(got, entry(aws.ToString(m.Key), aws.ToString(m.VersionId), aws.ToBool(m.IsLatest), true))
	}
	slices.Sort(got)
	return got
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
	if _, err := put("k", "x", func(in *s3.PutObjectInput) { in.IfNoneMatch = second.ETag }); apiCode(err) != "PreconditionFailed" {
		t.Fatalf("If-None-Match with the current ETag on PUT: %v", err)
	}
	if _, err := put("fresh", "x", func(in *s3.PutObjectInput) { in.IfNoneMatch = second.ETag }); err != nil {
		t.Fatalf("If-None-Match with an ETag on a missing key: %v", err)
	}
	third, err := put("fresh", "y", func(in *s3.PutObjectInput) { in.IfNoneMatch = first.ETag })
	if err != nil {
		t.Fatalf("If-None-Match with another ETag: %v", err)
	}
	if aws.ToString(third.ETag) == "" {
		t.Fatal("the conditional write gave no ETag")
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

// TestTagging: object tags set with the PUT, replaced and removed in place
// (the version keeps its id), per version, copied or replaced by
// CopyObject, carried through multipart; bucket tags; S3's limits.
func TestTagging(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	b := aws.String("tags")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, b)
	tagsOf := func(key, version string) map[string]string {
		t.Helper()
		in := &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String(key)}
		if version != "" {
			in.VersionId = aws.String(version)
		}
		out, err := c.GetObjectTagging(ctx, in)
		if err != nil {
			t.Fatalf("tags of %s@%s: %v", key, version, err)
		}
		m := map[string]string{}
		for _, tg := range out.TagSet {
			m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		return m
	}
	v1, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("one"), Tagging: aws.String("a=1&b=two%20words")})
	if err != nil {
		t.Fatal(err)
	}
	if got := tagsOf("k", ""); !maps.Equal(got, map[string]string{"a": "1", "b": "two words"}) {
		t.Fatalf("tags from x-amz-tagging: %v", got)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("k")})
	if err != nil || aws.ToInt32(h.TagCount) != 2 {
		t.Fatalf("HEAD tag count: %v %v", h.TagCount, err)
	}
	v2, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("two")})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("state"), Value: aws.String("new")}}}})
	if err != nil || aws.ToString(pt.VersionId) != aws.ToString(v2.VersionId) {
		t.Fatalf("PutObjectTagging on the latest: %+v %v", pt, err)
	}
	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("k"), VersionId: v1.VersionId,
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("state"), Value: aws.String("old")}}}}); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf("k", ""); !maps.Equal(got, map[string]string{"state": "new"}) {
		t.Fatalf("latest's tags: %v", got)
	}
	if got := tagsOf("k", aws.ToString(v1.VersionId)); !maps.Equal(got, map[string]string{"state": "old"}) {
		t.Fatalf("first version's tags: %v", got)
	}
	// Tagging changes no content and makes no version.
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b})
	if err != nil || len(vs.Versions) != 2 {
		t.Fatalf("versions after tagging: %d %v", len(vs.Versions), err)
	}
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("k")})
	if err != nil || aws.ToString(g.ETag) != aws.ToString(v2.ETag) {
		t.Fatalf("GET after tagging: %v", err)
	}
	g.Body.Close()

	// CopyObject keeps the source's tags, or takes new ones.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("kept"), CopySource: aws.String("tags/k")}); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf("kept", ""); !maps.Equal(got, map[string]string{"state": "new"}) {
		t.Fatalf("copied tags: %v", got)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("replaced"), CopySource: aws.String("tags/k"),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("x=y")}); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf("replaced", ""); !maps.Equal(got, map[string]string{"x": "y"}) {
		t.Fatalf("replaced tags: %v", got)
	}
	// Multipart: the tags given at create.
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp"), Tagging: aws.String("m=p")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}}); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf("mp", ""); !maps.Equal(got, map[string]string{"m": "p"}) {
		t.Fatalf("multipart tags: %v", got)
	}

	// Removing, and the limits (each refusal changes nothing).
	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: aws.String("replaced")}); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf("replaced", ""); len(got) != 0 {
		t.Fatalf("after DeleteObjectTagging: %v", got)
	}
	var eleven []types.Tag
	for i := range 11 {
		eleven = append(eleven, types.Tag{Key: aws.String(fmt.Sprint("k", i)), Value: aws.String("v")})
	}
	for _, bad := range [][]types.Tag{
		eleven,
		{{Key: aws.String(strings.Repeat("k", 129)), Value: aws.String("v")}},
		{{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("a"), Value: aws.String("2")}},
	} {
		_, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("k"), Tagging: &types.Tagging{TagSet: bad}})
		if apiCode(err) != "InvalidTag" {
			t.Fatalf("bad tag set of %d: %v", len(bad), err)
		}
	}
	if got := tagsOf("k", ""); !maps.Equal(got, map[string]string{"state": "new"}) {
		t.Fatalf("tags after refused changes: %v", got)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("x"), Tagging: aws.String("a=1&a=2")}); apiCode(err) != "InvalidTag" {
		t.Fatalf("duplicate x-amz-tagging keys: %v", err)
	}
	if _, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String("nosuch")}); apiCode(err) != "NoSuchKey" {
		t.Fatalf("tags of a missing key: %v", err)
	}

	// Bucket tags.
	if _, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b}); apiCode(err) != "NoSuchTagSet" {
		t.Fatalf("bucket tags before any: %v", err)
	}
	if _, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("cost"), Value: aws.String("ml")}}}}); err != nil {
		t.Fatal(err)
	}
	bt, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil || len(bt.TagSet) != 1 || aws.ToString(bt.TagSet[0].Value) != "ml" {
		t.Fatalf("bucket tags: %+v %v", bt, err)
	}
	// Settings are not objects: the listing does not show them.
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	if err != nil || len(l.Contents) != 4 {
		t.Fatalf("listing holds %d objects, want 4: %v", len(l.Contents), err)
	}
	if _, err := c.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b}); apiCode(err) != "NoSuchTagSet" {
		t.Fatalf("bucket tags after delete: %v", err)
	}
	// A bucket whose only keys are its settings can be deleted.
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("tagged-empty")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String("tagged-empty"), Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("tagged-empty")}); err != nil {
		t.Fatalf("deleting a bucket that holds only settings: %v", err)
	}
}

// TestVersioningSuspended: a bucket starts Enabled; once suspended, each
// write and delete makes the key's "null" version, replacing the one
// before, while versions written before keep their ids; enabling again
// keeps the null version until it is deleted by its id.
func TestVersioningSuspended(t *testing.T) {
	ctx := context.Background()
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	b := aws.String("susp")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	status := func() types.BucketVersioningStatus {
		t.Helper()
		out, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		return out.Status
	}
	setStatus := func(s types.BucketVersioningStatus) {
		t.Helper()
		if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: b,
			VersioningConfiguration: &types.VersioningConfiguration{Status: s}}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(body string) string {
		t.Helper()
		p, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(p.VersionId)
	}
	versions := func() []string { t.Helper(); return listedVersions(t, c, b) }
	read := func(version string) string {
		t.Helper()
		in := &s3.GetObjectInput{Bucket: b, Key: aws.String("k")}
		if version != "" {
			in.VersionId = aws.String(version)
		}
		g, err := c.GetObject(ctx, in)
		if err != nil {
			t.Fatalf("GET k@%q: %v", version, err)
		}
		defer g.Body.Close()
		var sb strings.Builder
		if _, err := io.Copy(&sb, g.Body); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}

	if s := status(); s != "" {
		t.Fatalf("a new bucket's versioning: %q, want none (unversioned)", s)
	}
	setStatus(types.BucketVersioningStatusEnabled)
	v1 := put("enabled")
	setStatus(types.BucketVersioningStatusSuspended)
	if s := status(); s != types.BucketVersioningStatusSuspended {
		t.Fatalf("after suspending: %q", s)
	}
	if id := put("null one"); id != "null" {
		t.Fatalf("a write while suspended has version id %q, want null", id)
	}
	if id := put("null two"); id != "null" {
		t.Fatalf("a second write while suspended: %q", id)
	}
	// The second null version replaced the first; v1 stays.
	want := []string{"k " + v1, "k null latest"}
	if got := versions(); !slices.Equal(got, want) {
		t.Fatalf("versions while suspended: %q, want %q", got, want)
	}
	if got := read("null"); got != "null two" {
		t.Fatalf("GET versionId=null: %q", got)
	}
	// A delete makes a null delete marker, replacing the null version.
	d, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k")})
	if err != nil || !aws.ToBool(d.DeleteMarker) || aws.ToString(d.VersionId) != "null" {
		t.Fatalf("delete while suspended: %+v %v", d, err)
	}
	want = []string{"k " + v1, "k null latest marker"}
	if got := versions(); !slices.Equal(got, want) {
		t.Fatalf("versions after a suspended delete: %q, want %q", got, want)
	}
	// Enabled again: new versions get ids; the null version stays.
	setStatus(types.BucketVersioningStatusEnabled)
	v3 := put("enabled again")
	if v3 == "null" || v3 == "" {
		t.Fatalf("a write after re-enabling: %q", v3)
	}
	want = []string{"k " + v1, "k " + v3 + " latest", "k null marker"}
	if got := versions(); !slices.Equal(got, want) {
		t.Fatalf("versions after re-enabling: %q, want %q", got, want)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k"), VersionId: aws.String("null")}); err != nil {
		t.Fatal(err)
	}
	want = []string{"k " + v1, "k " + v3 + " latest"}
	if got := versions(); !slices.Equal(got, want) {
		t.Fatalf("versions after deleting the null version: %q, want %q", got, want)
	}
	// No null version now: reading it fails, deleting it is a no-op.
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("k"), VersionId: aws.String("null")}); apiCode(err) != "NoSuchVersion" {
		t.Fatalf("GET of a missing null version: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k"), VersionId: aws.String("null")}); err != nil {
		t.Fatalf("deleting a missing null version: %v", err)
	}
	if got := read(v1); got != "enabled" {
		t.Fatalf("the first version: %q", got)
	}
	// Bad documents change nothing.
	for _, bad := range []string{"<VersioningConfiguration><Status>Maybe</Status></VersioningConfiguration>", "<nope"} {
		code, body := signedPut(t, ep+"/susp?versioning", bad, sha256hex(bad), nil)
		if code != http.StatusBadRequest || !strings.Contains(body, "MalformedXML") {
			t.Fatalf("PutBucketVersioning %q: %d %s", bad, code, body)
		}
	}
	if s := status(); s != types.BucketVersioningStatusEnabled {
		t.Fatalf("after bad documents: %q", s)
	}
}

// TestLifecycle: a noncurrent-version expiry rule for the whole bucket
// becomes the bucket's retention, reads back as sent, and is undone by
// deleting it; rules that cannot be honoured or are invalid are refused
// and change nothing.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	b := aws.String("life")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	retention := func() string {
		t.Helper()
		spaces, err := n.ListSpaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range spaces {
			if sp.Name == "life" {
				return fmt.Sprintf("%s %d %d", sp.Settings.Retention, sp.Settings.KeepLast, sp.Settings.KeepForSeconds)
			}
		}
		t.Fatal("no space life")
		return ""
	}
	if _, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b}); apiCode(err) != "NoSuchLifecycleConfiguration" {
		t.Fatalf("lifecycle of a new bucket: %v", err)
	}
	rule := types.LifecycleRule{ID: aws.String("old-versions"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
		NoncurrentVersionExpiration:    &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(30)},
		AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(7)}}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{rule}}}); err != nil {
		t.Fatal(err)
	}
	if got := retention(); got != "duration 0 2592000" {
		t.Fatalf("retention after a 30-day noncurrent expiry rule: %s", got)
	}
	out, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil || len(out.Rules) != 1 || aws.ToInt32(out.Rules[0].NoncurrentVersionExpiration.NoncurrentDays) != 30 || aws.ToString(out.Rules[0].ID) != "old-versions" {
		t.Fatalf("lifecycle read back: %+v %v", out, err)
	}
	for code, bad := range map[string]types.LifecycleRule{
		"NotImplemented": {ID: aws.String("transition"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Transitions: []types.Transition{{Days: aws.Int32(1), StorageClass: types.TransitionStorageClassGlacier}}},
		"InvalidArgument": {ID: aws.String("date"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))}},
	} {
		_, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{bad}}})
		if apiCode(err) != code {
			t.Fatalf("rule %s: %v, want %s", aws.ToString(bad.ID), err, code)
		}
	}
	// A rule refused as invalid changes nothing either: not the policy,
	// and not the document GetBucketLifecycleConfiguration returns.
	_, err = c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("forever"),
			Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(200_000)}}}}})
	if apiCode(err) != "InvalidArgument" {
		t.Fatalf("a 200,000-day rule: %v, want InvalidArgument", err)
	}
	if got := retention(); got != "duration 0 2592000" {
		t.Fatalf("retention after refused rules: %s", got)
	}
	out, err = c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil || len(out.Rules) != 1 || aws.ToString(out.Rules[0].ID) != "old-versions" {
		t.Fatalf("lifecycle read back after refused rules: %+v %v", out, err)
	}
	if _, err := c.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if got := retention(); got != "all 0 0" {
		t.Fatalf("retention after DeleteBucketLifecycle: %s", got)
	}
	if _, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b}); apiCode(err) != "NoSuchLifecycleConfiguration" {
		t.Fatalf("lifecycle after delete: %v", err)
	}
}

// TestAccessKeyGrants: keys made with CreateKey sign requests and may do
// what their grants say, bucket by bucket; a removed key is refused.
func TestAccessKeyGrants(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	root := client(ep, testAccess, testSecret)
	for _, b := range []string{"photos", "logs", "secret"} {
		if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
		if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := n.CreateKey(ctx, wire.KeySpec{Grants: map[string]string{"photos": "read", "logs": "write"}})
	if err != nil || k.Access == "" || len(k.Secret) < 8 {
		t.Fatalf("CreateKey: %+v %v", k, err)
	}
	c := client(ep, k.Access, k.Secret)
	denied := func(what string, err error) {
		t.Helper()
		if apiCode(err) != "AccessDenied" {
			t.Fatalf("%s: %v, want AccessDenied", what, err)
		}
	}
	lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 2 {
		t.Fatalf("ListBuckets with grants on two buckets: %+v %v", lb, err)
	}
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("read with a read grant: %v", err)
	}
	g.Body.Close()
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("k"), Body: strings.NewReader("x")})
	denied("PUT with a read grant", err)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("secret"), Key: aws.String("k")})
	denied("GET without a grant", err)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("logs"), Key: aws.String("new"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("PUT with a write grant: %v", err)
	}
	_, err = c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("logs"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	denied("configuring a bucket with a write grant", err)
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("photos")})
	denied("DeleteBucket with a read grant", err)
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("logs"), Key: aws.String("stolen"), CopySource: aws.String("secret/k")})
	denied("copying from a bucket without a grant", err)
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("logs"), Key: aws.String("copied"), CopySource: aws.String("photos/k")}); err != nil {
		t.Fatalf("copying from a readable bucket into a writable one: %v", err)
	}
	// A refused request changed nothing.
	g, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if string(body) != "photos" {
		t.Fatalf("photos/k after refused writes: %q", body)
	}
	keys, err := n.ListKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].Access != k.Access || keys[0].Secret != "" {
		t.Fatalf("ListKeys: %+v %v", keys, err)
	}
	if err := n.DeleteKey(ctx, k.Access); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListBuckets(ctx, &s3.ListBucketsInput{}); apiCode(err) != "InvalidAccessKeyId" {
		t.Fatalf("a removed key: %v", err)
	}
	if _, err := n.CreateKey(ctx, wire.KeySpec{Access: testAccess, Grants: map[string]string{"*": "read"}}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a key named as the root key: %v", err)
	}
	if _, err := n.CreateKey(ctx, wire.KeySpec{Grants: map[string]string{"photos": "owner"}}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("an unknown permission: %v", err)
	}
}

// TestRawResponses checks what clients read off the wire: an empty PUT
// sent with Expect: 100-continue gets its 100 Continue before the answer
// (botocore misreads the connection otherwise), and user metadata comes
// back with lower-case names, as stored (botocore keeps the case).
func TestRawResponses(t *testing.T) {
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("raw")}); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ep, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	send := func(method, path string, hdr map[string]string) string {
		t.Helper()
		r, _ := http.NewRequest(method, ep+path, http.NoBody)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		r.Header.Set("X-Amz-Content-Sha256", sha256hex(""))
		creds := aws.Credentials{AccessKeyID: testAccess, SecretAccessKey: testSecret}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, sha256hex(""), "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		if method == http.MethodPut {
			r.ContentLength = 0
			r.Header.Set("Content-Length", "0")
		}
		if err := r.Write(conn); err != nil {
			t.Fatal(err)
		}
		// Read up to the end of the final answer's headers (no bodies here).
		var sb strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the answer: %v (so far %q)", err, sb.String())
			}
			sb.WriteString(line)
			if line == "\r\n" && !strings.HasPrefix(sb.String(), "HTTP/1.1 100") || (line == "\r\n" && strings.Count(sb.String(), "HTTP/1.1 ") == 2) {
				return sb.String()
			}
		}
	}
	got := send(http.MethodPut, "/raw/empty", map[string]string{"Expect": "100-continue", "X-Amz-Meta-Color": "blue"})
	if !strings.HasPrefix(got, "HTTP/1.1 100 Continue\r\n") || !strings.Contains(got, "HTTP/1.1 200 OK\r\n") {
		t.Fatalf("an empty PUT with Expect: 100-continue got:\n%s", got)
	}
	got = send(http.MethodHead, "/raw/empty", nil)
	if !strings.Contains(got, "\r\nx-amz-meta-color: blue\r\n") {
		t.Fatalf("HEAD does not send the metadata name in lower case:\n%s", got)
	}
}

// TestLifecycleSweep: the rules the retention does not carry out are
// carried out by SweepLifecycle as of the time it is given: current
// versions expire by days under a prefix and tag filter, noncurrent ones
// beyond NewerNoncurrentVersions, expired delete markers go, incomplete
// uploads are aborted; what the rules do not match stays.
func TestLifecycleSweep(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	b := aws.String("sweep")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, b)
	put := func(key, tagging string) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader("v"), Tagging: aws.String(tagging)}); err != nil {
			t.Fatal(err)
		}
	}
	put("logs/a", "kind=tmp")
	put("logs/b", "kind=keep")
	put("other/a", "kind=tmp")
	for i := 0; i < 4; i++ {
		put("hist/k", "")
	}
	put("gone/k", "")
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("gone/k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp/x")}); err != nil {
		t.Fatal(err)
	}
	enabled := types.ExpirationStatusEnabled
	rules := []types.LifecycleRule{
		{ID: aws.String("tmp-logs"), Status: enabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{
			Prefix: aws.String("logs/"), Tags: []types.Tag{{Key: aws.String("kind"), Value: aws.String("tmp")}}}},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		{ID: aws.String("hist"), Status: enabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("hist/")},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1), NewerNoncurrentVersions: aws.Int32(1)}},
		{ID: aws.String("markers"), Status: enabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("gone/")},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)},
			Expiration:                  &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)}},
		{ID: aws.String("uploads"), Status: enabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("mp/")},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}},
	}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}}); err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]int {
		t.Helper()
		out, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, v := range out.Versions {
			m[aws.ToString(v.Key)]++
		}
		for _, d := range out.DeleteMarkers {
			m[aws.ToString(d.Key)+" marker"]++
		}
		return m
	}
	before := versions()
	n.SweepLifecycle(ctx, time.Now()) // nothing is due yet
	if got := versions(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a sweep before anything is due changed %v to %v", before, got)
	}
	n.SweepLifecycle(ctx, time.Now().Add(50*time.Hour))
	got := versions()
	// logs/a: expired (a marker over it); logs/b and other/a: not matched;
	// hist/k: the current and one newer noncurrent version; gone/k: the
	// noncurrent version expired, which left the marker alone, and a
	// second sweep removes it.
	want := map[string]int{"logs/a": 1, "logs/a marker": 1, "logs/b": 1, "other/a": 1, "hist/k": 2, "gone/k marker": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the sweep: %v, want %v", got, want)
	}
	n.SweepLifecycle(ctx, time.Now().Add(50*time.Hour))
	delete(want, "gone/k marker")
	if got := versions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the second sweep: %v, want %v", got, want)
	}
	if lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b}); err != nil || len(lu.Uploads) != 0 {
		t.Fatalf("uploads after the sweep: %+v %v", lu, err)
	}
}

// TestUnversionedBucket: a bucket made through S3 answers as S3's
// unversioned buckets do (no versioning status, no version ids, writes
// replace the key's null version, a delete leaves no marker in S3's view,
// DELETE versionId=null removes the object), while the space keeps the
// replaced versions in Cairn's history as its retention says. Enabling
// versioning then shows each key's null version beside the new ones.
func TestUnversionedBucket(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	b := aws.String("plain")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: b}); err != nil || v.Status != "" {
		t.Fatalf("a new bucket's versioning: %+v %v", v, err)
	}
	put := func(key, body string) {
		t.Helper()
		p, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		if p.VersionId != nil {
			t.Fatalf("a write to an unversioned bucket answered version id %q", aws.ToString(p.VersionId))
		}
	}
	versions := func() []string { t.Helper(); return listedVersions(t, c, b) }
	read := func(key, version string) (string, error) {
		in := &s3.GetObjectInput{Bucket: b, Key: aws.String(key)}
		if version != "" {
			in.VersionId = aws.String(version)
		}
		g, err := c.GetObject(ctx, in)
		if err != nil {
			return "", err
		}
		defer g.Body.Close()
		data, err := io.ReadAll(g.Body)
		return string(data), err
	}
	history := func(key string) int {
		t.Helper()
		vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "plain", Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return len(vs.Versions)
	}

	put("k", "one")
	put("k", "two")
	put("gone", "x")
	if got, want := versions(), []string{"gone null latest", "k null latest"}; !slices.Equal(got, want) {
		t.Fatalf("versions: %q, want %q", got, want)
	}
	if got, err := read("k", "null"); err != nil || got != "two" {
		t.Fatalf("GET versionId=null: %q %v", got, err)
	}
	if h := history("k"); h != 2 {
		t.Fatalf("Cairn's history of k holds %d versions, want 2 (the retention is all)", h)
	}
	d, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("gone")})
	if err != nil || d.DeleteMarker != nil || d.VersionId != nil {
		t.Fatalf("a delete in an unversioned bucket: %+v %v", d, err)
	}
	if _, err := read("gone", ""); apiCode(err) != "NoSuchKey" {
		t.Fatalf("GET of a deleted key: %v", err)
	}
	if _, err := read("gone", "null"); apiCode(err) != "NoSuchVersion" {
		t.Fatalf("GET versionId=null of a deleted key: %v", err)
	}
	if got, want := versions(), []string{"k null latest"}; !slices.Equal(got, want) {
		t.Fatalf("versions after the delete: %q, want %q", got, want)
	}
	if h := history("gone"); h != 2 {
		t.Fatalf("Cairn's history of the deleted key holds %d versions, want 2", h)
	}

	// Enabled: new writes get ids; k's null version (the latest write
	// before) stays, and only it.
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("three")})
	if err != nil || aws.ToString(p.VersionId) == "" || aws.ToString(p.VersionId) == "null" {
		t.Fatalf("a write after enabling: %+v %v", p, err)
	}
	v3 := aws.ToString(p.VersionId)
	if got, want := versions(), []string{"k " + v3 + " latest", "k null"}; !slices.Equal(got, want) {
		t.Fatalf("versions after enabling: %q, want %q", got, want)
	}
	// One version a page: the replaced null version stays out.
	var paged []string
	in := &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("k"), MaxKeys: aws.Int32(1)}
	for {
		out, err := c.ListObjectVersions(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			paged = append(paged, aws.ToString(v.VersionId))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	if want := []string{v3, "null"}; !slices.Equal(paged, want) {
		t.Fatalf("versions a page at a time: %q, want %q", paged, want)
	}
	// Deleting the null version removes it and the ones it replaced: none
	// takes its place.
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k"), VersionId: aws.String("null")}); err != nil {
		t.Fatal(err)
	}
	if got, want := versions(), []string{"k " + v3 + " latest"}; !slices.Equal(got, want) {
		t.Fatalf("versions after deleting the null version: %q, want %q", got, want)
	}
	if _, err := read("k", "null"); apiCode(err) != "NoSuchVersion" {
		t.Fatalf("GET versionId=null after its delete: %v", err)
	}
	if h := history("k"); h != 1 {
		t.Fatalf("Cairn's history of k holds %d versions after the null version's delete, want 1", h)
	}
	// A space made through Cairn's own API answers Enabled.
	if _, err := n.CreateSpace(ctx, "native", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("native")}); err != nil || v.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("a native space's versioning: %+v %v", v, err)
	}
}
