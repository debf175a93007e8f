package s3_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-db/cairn/internal/admin"
)

// anonymous GETs url unsigned and returns the status and body.
func anonymous(t *testing.T, method, url string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBucketPolicy: a policy opens a prefix to anonymous readers and a
// bucket to a key with no grant on it, an explicit deny wins over the
// root key's grants, an admin can always remove the policy, and the
// public access block refuses or restricts public policies.
func TestBucketPolicy(t *testing.T) {
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("pol")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"public/a.txt", "private/b.txt"} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(k), Body: strings.NewReader("data of " + k)}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := n.CreateKey(ctx, admin.KeySpec{Grants: map[string]string{"elsewhere": "write"}})
	if err != nil {
		t.Fatal(err)
	}
	oc := client(ep, other.Access, other.Secret)

	if st, _ := anonymous(t, "GET", ep+"/pol/public/a.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous GET before any policy: %d", st)
	}
	if st, err := c.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: b}); err != nil || aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Fatalf("policy status without a policy: %+v %v", st, err)
	}
	doc := `{"Version":"2012-10-17","Statement":[
	 {"Sid":"public","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/public/*"},
	 {"Sid":"other","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + other.Access + `:root"},"Action":["s3:ListBucket","s3:PutObject"],"Resource":["arn:aws:s3:::pol","arn:aws:s3:::pol/inbox/*"]},
	 {"Sid":"encrypted","Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::pol/secure/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(doc)}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b}); err != nil || aws.ToString(got.Policy) != doc {
		t.Fatalf("GetBucketPolicy: %v", err)
	}
	if st, err := c.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: b}); err != nil || !aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Fatalf("policy status: %+v %v", st, err)
	}
	if st, body := anonymous(t, "GET", ep+"/pol/public/a.txt", ""); st != http.StatusOK || body != "data of public/a.txt" {
		t.Fatalf("anonymous GET of a public object: %d %q", st, body)
	}
	for _, u := range []string{"/pol/private/b.txt", "/pol", "/"} {
		if st, _ := anonymous(t, "GET", ep+u, ""); st != http.StatusForbidden {
			t.Fatalf("anonymous GET %s: %d", u, st)
		}
	}
	if st, _ := anonymous(t, "PUT", ep+"/pol/public/new", "x"); st != http.StatusForbidden {
		t.Fatalf("anonymous PUT: %d", st)
	}
	// The other key: what the policy names, nothing more.
	if _, err := oc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b}); err != nil {
		t.Fatalf("the other key lists: %v", err)
	}
	if _, err := oc.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("inbox/x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("the other key writes into inbox/: %v", err)
	}
	if _, err := oc.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("private/x"), Body: strings.NewReader("x")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("the other key writes into private/: %v", err)
	}
	if _, err := oc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("inbox/x")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("the other key deletes: %v", err)
	}
	// The deny binds the root key too.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("secure/x"), Body: strings.NewReader("x")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("an unencrypted PUT the policy denies: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("secure/x"), Body: strings.NewReader("x"), ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatalf("an encrypted PUT: %v", err)
	}
	// Deny everything: the admin may still replace the policy.
	deny := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::pol","arn:aws:s3:::pol/*"]}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(deny)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("public/a.txt")}); err == nil {
		t.Fatal("a read the policy denies succeeded")
	}
	if _, err := c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Fatalf("the admin removes a deny-all policy: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("public/a.txt")}); err != nil {
		t.Fatal(err)
	}
	// Malformed policies are refused and change nothing.
	for _, bad := range []string{`{`, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::someone-else/*"}]}`} {
		if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(bad)}); apiCode(err) != "MalformedPolicy" {
			t.Fatalf("policy %s: %v", bad, err)
		}
	}
	if _, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b}); apiCode(err) != "NoSuchBucketPolicy" {
		t.Fatalf("after refused policies: %v", err)
	}
	// The public access block.
	if _, err := c.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: b, PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicPolicy: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(doc)}); apiCode(err) != "AccessDenied" {
		t.Fatalf("a public policy under BlockPublicPolicy: %v", err)
	}
	if _, err := c.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: b, PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{RestrictPublicBuckets: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(doc)}); err != nil {
		t.Fatal(err)
	}
	if st, _ := anonymous(t, "GET", ep+"/pol/public/a.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous GET under RestrictPublicBuckets: %d", st)
	}
	if g, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: b}); err != nil || !aws.ToBool(g.PublicAccessBlockConfiguration.RestrictPublicBuckets) {
		t.Fatalf("GetPublicAccessBlock: %+v %v", g, err)
	}
}

// TestAuthorizationEdges: a request naming two subresources is refused
// (it would be checked as one and served as another); DeleteObjects is
// authorized key by key; a copy reads its source version under that
// version's ACL; a policy condition without a value is refused.
func TestAuthorizationEdges(t *testing.T) {
	_, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("edges")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b, ACL: types.BucketCannedACLPublicReadWrite}); err != nil {
		t.Fatal(err)
	}
	enableVersioning(t, c, b)
	if st, _ := anonymous(t, "GET", ep+"/edges?versions&policy", ""); st != http.StatusBadRequest {
		t.Fatalf("two subresources: %d", st)
	}
	old, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("private")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("public"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", ep+"/edges/stolen", nil)
	req.Header.Set("X-Amz-Copy-Source", "/edges/k?versionId="+aws.ToString(old.VersionId))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an anonymous copy of a private older version: %d", resp.StatusCode)
	}
	deny := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject*","Resource":"arn:aws:s3:::edges/protected/*"}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(deny)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("protected/x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("protected/x")}, {Key: aws.String("stolen")}}}})
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "protected/x" || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects under a deny on a prefix: %+v %v", out, err)
	}
	bad := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::edges/*","Condition":{"Null":{"aws:Referer":[]}}}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(bad)}); apiCode(err) != "MalformedPolicy" {
		t.Fatalf("a condition without a value: %v", err)
	}
}

// TestGoneBucketIsNoSuchBucket: a request for a bucket that was deleted
// answers NoSuchBucket to anyone, anonymous included, as S3 does, even
// while its public ACL may still be cached.
func TestGoneBucketIsNoSuchBucket(t *testing.T) {
	_, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("gone-public")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b, ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if st, _ := anonymous(t, "GET", ep+"/gone-public?list-type=2", ""); st != http.StatusOK {
		t.Fatalf("an anonymous listing of the public bucket: %d", st)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if st, body := anonymous(t, "DELETE", ep+"/gone-public/foo", ""); st != http.StatusNotFound || !strings.Contains(body, "NoSuchBucket") {
		t.Fatalf("an anonymous DELETE in the deleted bucket: %d %s", st, body)
	}
}
