package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/node"
	"github.com/cairn-db/cairn/internal/object"
)

const (
	testAccess = "CAIRNTESTKEY"
	testSecret = "cairn-test-secret-key"
)

// startNode runs a single node on free ports with a known root key and
// returns its S3 endpoint.
func startNode(t *testing.T) string {
	t.Helper()
	return startNodeWith(t, nil)
}

// startNodeWith is startNode with tls, if set, the node's certificate:
// the endpoint is then https.
func startNodeWith(t *testing.T, tls *testCert) string {
	t.Helper()
	return startNodeWithConfig(t, tls, nil)
}

// startNodeWithConfig is startNodeWith with more configuration.
func startNodeWithConfig(t *testing.T, tls *testCert, more func(*node.Config)) string {
	t.Helper()
	_, ep := openNode(t, tls, more)
	return ep
}

// openNode is startNodeWithConfig that returns the node too.
func openNode(t testing.TB, tls *testCert, more func(*node.Config)) (*node.Node, string) {
	t.Helper()
	cfg := node.Config{
		Config: cluster.Config{DataDir: t.TempDir(), MetaPort: -1, PeerPort: -1, MetaClientPort: -1,
			RootAccessKey: testAccess, RootSecretKey: testSecret,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NativePort: -1, HTTPPort: -1,
	}
	if tls != nil {
		cfg.TLSCertFile, cfg.TLSKeyFile = tls.certFile, tls.keyFile
	}
	if more != nil {
		more(&cfg)
	}
	n, err := node.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Serve()
	t.Cleanup(func() { _ = n.Close() })
	if tls != nil {
		return n, "https://" + n.HTTPAddr()
	}
	return n, "http://" + n.HTTPAddr()
}

func client(endpoint, access, secret string, opts ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, nil
		}),
	}, opts...)
}

// apiCode is the S3 error code of err, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestSDKBucketsAndObjects(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	bucket := aws.String("photos")

	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, bucket)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); apiCode(err) != "BucketAlreadyOwnedByYou" {
		t.Fatalf("second create: %v", err)
	}
	for _, bad := range []string{"Bad_Name", "xn--bcher-kva", "sthree-x", "photos-s3alias", "photos--ol-s3"} {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bad)}); apiCode(err) != "InvalidBucketName" {
			t.Fatalf("create with the bad name %q: %v", bad, err)
		}
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("nosuch")}); err == nil {
		t.Fatal("HeadBucket of a missing bucket succeeded")
	}
	lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || aws.ToString(lb.Buckets[0].Name) != "photos" {
		t.Fatalf("ListBuckets: %v %+v", err, lb)
	}
	loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: bucket})
	if err != nil || loc.LocationConstraint != "" {
		t.Fatalf("GetBucketLocation: %v %+v", err, loc)
	}

	body := bytes.Repeat([]byte("cairn "), 1000)
	sum := md5.Sum(body)
	put, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: bucket, Key: aws.String("2026/cat one.jpg"), Body: bytes.NewReader(body),
		ContentType: aws.String("image/jpeg"), Metadata: map[string]string{"camera": "x100"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantETag := `"` + hex.EncodeToString(sum[:]) + `"`
	if aws.ToString(put.ETag) != wantETag || aws.ToString(put.VersionId) == "" {
		t.Fatalf("PutObject: ETag %s (want %s), version %q", aws.ToString(put.ETag), wantETag, aws.ToString(put.VersionId))
	}
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("2026/cat one.jpg")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if !bytes.Equal(got, body) || aws.ToString(get.ContentType) != "image/jpeg" || get.Metadata["camera"] != "x100" ||
		aws.ToString(get.ETag) != wantETag || aws.ToString(get.VersionId) != aws.ToString(put.VersionId) {
		t.Fatalf("GetObject: %d bytes, type %q, meta %v, etag %s", len(got), aws.ToString(get.ContentType), get.Metadata, aws.ToString(get.ETag))
	}
	rg, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("2026/cat one.jpg"), Range: aws.String("bytes=6-11")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(rg.Body)
	rg.Body.Close()
	if string(got) != "cairn " || aws.ToString(rg.ContentRange) != fmt.Sprintf("bytes 6-11/%d", len(body)) {
		t.Fatalf("ranged GET: %q, %s", got, aws.ToString(rg.ContentRange))
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("2026/cat one.jpg"), Range: aws.String("bytes=99999-")}); apiCode(err) != "InvalidRange" {
		t.Fatalf("unsatisfiable range: %v", err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("2026/cat one.jpg"), IfNoneMatch: aws.String(wantETag)}); err == nil {
		t.Fatal("If-None-Match with the current ETag answered a body")
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String("2026/cat one.jpg")})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(body)) {
		t.Fatalf("HeadObject: %v %+v", err, head)
	}

	for _, k := range []string{"2026/dog.jpg", "2025/a.jpg", "2025/b.jpg", "top.txt", "z/y/x"} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, Delimiter: aws.String("/")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range l.CommonPrefixes {
		names = append(names, aws.ToString(p.Prefix))
	}
	for _, o := range l.Contents {
		names = append(names, aws.ToString(o.Key))
	}
	if strings.Join(names, ",") != "2025/,2026/,z/,top.txt" || aws.ToInt32(l.KeyCount) != 4 {
		t.Fatalf("delimited listing: %v (KeyCount %d)", names, aws.ToInt32(l.KeyCount))
	}
	// Pages of two, through the paginator (continuation tokens).
	var all []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: bucket, MaxKeys: aws.Int32(2)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Contents) > 2 {
			t.Fatalf("page of %d keys with max-keys 2", len(page.Contents))
		}
		for _, o := range page.Contents {
			all = append(all, aws.ToString(o.Key))
		}
	}
	if strings.Join(all, ",") != "2025/a.jpg,2025/b.jpg,2026/cat one.jpg,2026/dog.jpg,top.txt,z/y/x" {
		t.Fatalf("paged listing: %v", all)
	}
	l, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, Prefix: aws.String("2025/"), StartAfter: aws.String("2025/a.jpg")})
	if err != nil || len(l.Contents) != 1 || aws.ToString(l.Contents[0].Key) != "2025/b.jpg" {
		t.Fatalf("prefix + start-after: %v %+v", err, l)
	}
	v1, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: bucket, Prefix: aws.String("2026/")})
	if err != nil || len(v1.Contents) != 2 {
		t.Fatalf("ListObjects (v1): %v %+v", err, v1)
	}

	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: bucket}); apiCode(err) != "BucketNotEmpty" {
		t.Fatalf("deleting a full bucket: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String("top.txt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("top.txt")}); apiCode(err) != "NoSuchKey" {
		t.Fatalf("GET after delete: %v", err)
	}
	// The old version is still there: Cairn keeps history.
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("2026/cat one.jpg"), VersionId: put.VersionId}); err != nil {
		t.Fatalf("GET by version id: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String("never-was")}); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nosuch"), Key: aws.String("k")}); apiCode(err) != "NoSuchBucket" {
		t.Fatalf("GET from a missing bucket: %v", err)
	}
}

// TestPresignedURL: a presigned GET works with a plain HTTP client until
// it expires; a tampered one is refused.
func TestPresignedURL(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("share")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("share"), Key: aws.String("a b+c"), Body: strings.NewReader("hello")}); err != nil {
		t.Fatal(err)
	}
	ps := s3.NewPresignClient(c)
	req, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("share"), Key: aws.String("a b+c")}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(req.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello" {
		t.Fatalf("presigned GET: %d %s", resp.StatusCode, b)
	}
	resp, err = http.Get(strings.Replace(req.URL, "a%20b", "a%20c", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tampered presigned GET: %d", resp.StatusCode)
	}
}

// TestBadRequestsChangeNothing: a wrong secret, a body that does not match
// its signed hash, and a body shorter than its length are refused, and
// nothing is written.
func TestBadRequestsChangeNothing(t *testing.T) {
	ctx := context.Background()
	endpoint := startNode(t)
	c := client(endpoint, testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt1")}); err != nil {
		t.Fatal(err)
	}
	bad := client(endpoint, testAccess, "not-the-secret")
	if _, err := bad.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt1"), Key: aws.String("k"), Body: strings.NewReader("x")}); apiCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	unknown := client(endpoint, "NOSUCHKEY", testSecret)
	if _, err := unknown.ListBuckets(ctx, &s3.ListBucketsInput{}); apiCode(err) != "InvalidAccessKeyId" {
		t.Fatalf("unknown access key: %v", err)
	}

	// A body whose SHA-256 is not the one signed, and an empty one.
	claimed := sha256hex("another body!")
	for _, c := range []struct{ key, body string }{{"k", "the real body"}, {"empty", ""}} {
		status, msg := signedPut(t, endpoint+"/bkt1/"+c.key, c.body, claimed, nil)
		if status != http.StatusBadRequest || !strings.Contains(msg, "XAmzContentSHA256Mismatch") {
			t.Fatalf("%q signed with another payload hash: %d %s", c.body, status, msg)
		}
	}

	// Anonymous.
	resp, err := http.Get(endpoint + "/bkt1")
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(msg), "<Code>AccessDenied</Code>") {
		t.Fatalf("anonymous request: %d %s", resp.StatusCode, msg)
	}

	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt1")})
	if err != nil || len(l.Contents) != 0 {
		t.Fatalf("after the refused writes the bucket holds %v (%v)", l.Contents, err)
	}
}

// signedPut PUTs body to url with the headers hdr, signed by the root key
// with payload as its declared SHA-256, and returns the answer's status
// and body.
func signedPut(t *testing.T, url, body, payload string, hdr http.Header) (int, string) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	for k, v := range hdr {
		r.Header[k] = v
	}
	r.Header.Set("X-Amz-Content-Sha256", payload)
	creds := aws.Credentials{AccessKeyID: testAccess, SecretAccessKey: testSecret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, payload, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(msg)
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestCredentialRegion: a request whose credential scope names another
// region than the server's is refused and changes nothing, in the header
// and in a presigned URL; GetBucketLocation may be signed for us-east-1,
// as clients ask it before they know the region.
func TestCredentialRegion(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, func(c *node.Config) { c.S3Region = "eu-central-1" })
	inRegion := client(ep, testAccess, testSecret, func(o *s3.Options) { o.Region = "eu-central-1" })
	elsewhere := client(ep, testAccess, testSecret)
	if _, err := inRegion.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("regional")}); err != nil {
		t.Fatal(err)
	}
	_, err := elsewhere.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("regional"), Key: aws.String("k"), Body: strings.NewReader("x")})
	if apiCode(err) != "AuthorizationHeaderMalformed" || !strings.Contains(err.Error(), `expecting "eu-central-1"`) {
		t.Fatalf("PUT signed for us-east-1: %v", err)
	}
	pre, err := s3.NewPresignClient(elsewhere).PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("regional"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, pre.URL, strings.NewReader("x"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "AuthorizationQueryParametersError") {
		t.Fatalf("presigned PUT for us-east-1: %d %s", resp.StatusCode, body)
	}
	if _, err := n.Stat(ctx, &object.GetRequest{Space: "regional", Key: "k", Length: -1}); object.KindOf(err) != object.NotFound {
		t.Fatalf("after the refused PUTs the key is there: %v", err)
	}
	loc, err := elsewhere.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("regional")})
	if err != nil || loc.LocationConstraint != "eu-central-1" {
		t.Fatalf("GetBucketLocation signed for us-east-1: %+v %v", loc, err)
	}
	if _, err := inRegion.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("regional"), Key: aws.String("k"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("PUT signed for the server's region: %v", err)
	}

	// A bucket created with another location constraint (signed for that
	// region, as clients configured for it sign) answers for that region:
	// GetBucketLocation and HEAD give it, and requests for the bucket may
	// be signed for it, while requests for other buckets may not.
	if _, err := elsewhere.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("abroad"),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: "us-west-2"}}); apiCode(err) != "AuthorizationHeaderMalformed" {
		t.Fatalf("a location constraint signed for a third region: %v", err)
	}
	west := client(ep, testAccess, testSecret, func(o *s3.Options) { o.Region = "us-west-2" })
	if _, err := west.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("abroad"),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: "us-west-2"}}); err != nil {
		t.Fatalf("a bucket in another region: %v", err)
	}
	if loc, err := inRegion.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("abroad")}); err != nil || loc.LocationConstraint != "us-west-2" {
		t.Fatalf("GetBucketLocation of the bucket in us-west-2: %+v %v", loc, err)
	}
	if h, err := west.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("abroad")}); err != nil || aws.ToString(h.BucketRegion) != "us-west-2" {
		t.Fatalf("HEAD of the bucket in us-west-2: %+v %v", h, err)
	}
	if _, err := west.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("abroad"), Key: aws.String("k"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("PUT signed for the bucket's region: %v", err)
	}
	if _, err := west.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("regional"), Key: aws.String("k2"), Body: strings.NewReader("x")}); apiCode(err) != "AuthorizationHeaderMalformed" {
		t.Fatalf("PUT to another bucket signed for us-west-2: %v", err)
	}
	if _, err := inRegion.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("badloc"),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: "Not_A_Region"}}); apiCode(err) != "InvalidLocationConstraint" {
		t.Fatalf("a location constraint that is no region name: %v", err)
	}
}

// TestStorageClasses: any storage class S3 names is taken (Cairn keeps
// every object one way and reports STANDARD), including on a copy of an
// object onto itself; a class S3 does not know is refused and writes
// nothing.
func TestStorageClasses(t *testing.T) {
	ctx := context.Background()
	c := client(startNode(t), testAccess, testSecret)
	b := aws.String("classes")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("rrs"), Body: strings.NewReader("x"), StorageClass: types.StorageClassReducedRedundancy}); err != nil {
		t.Fatalf("REDUCED_REDUNDANCY: %v", err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("rrs"), CopySource: aws.String("classes/rrs"), StorageClass: types.StorageClassStandardIa}); err != nil {
		t.Fatalf("a copy onto itself changing the class: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("bad"), Body: strings.NewReader("x"), StorageClass: "INVALID_CLASS"}); apiCode(err) != "InvalidStorageClass" {
		t.Fatalf("an unknown class: %v", err)
	}
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("bad"), StorageClass: "INVALID_CLASS"}); apiCode(err) != "InvalidStorageClass" {
		t.Fatalf("an unknown class for an upload: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("bad")}); apiCode(err) != "NotFound" {
		t.Fatalf("the refused write made the key: %v", err)
	}
}

// enableVersioning turns a bucket's versioning on: a bucket made through
// S3 starts unversioned, as in S3.
func enableVersioning(t testing.TB, c *s3.Client, bucket *string) {
	t.Helper()
	if _, err := c.PutBucketVersioning(context.Background(), &s3.PutBucketVersioningInput{Bucket: bucket,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
}
