package s3_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-db/cairn/internal/admin"
)

// TestACLs: canned ACLs and grants on buckets and objects allow what they
// name to whom they name it and nothing more; an object's ACL belongs to
// its version; a policy's deny wins over them; BucketOwnerEnforced and the
// public access block refuse them; a refused ACL changes nothing.
func TestACLs(t *testing.T) {
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("acls")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	put := func(cl *s3.Client, key string, acl types.ObjectCannedACL) error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader("v of " + key), ACL: acl})
		return err
	}
	if err := put(c, "k", ""); err != nil {
		t.Fatal(err)
	}
	other, err := n.CreateKey(ctx, admin.KeySpec{Grants: map[string]string{"elsewhere": "write"}})
	if err != nil {
		t.Fatal(err)
	}
	oc := client(ep, other.Access, other.Secret)

	ba, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: b})
	if err != nil || aws.ToString(ba.Owner.ID) != testAccess || len(ba.Grants) != 1 || ba.Grants[0].Permission != types.PermissionFullControl {
		t.Fatalf("a new bucket's ACL: %+v %v", ba, err)
	}
	if _, err := oc.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("k")}); err == nil {
		t.Fatal("a key with no grant read a private object")
	}
	if st, _ := anonymous(t, "GET", ep+"/acls/k", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous GET of a private object: %d", st)
	}

	// An object made public-read, then written again: the new version is private.
	if _, err := c.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if st, body := anonymous(t, "GET", ep+"/acls/k", ""); st != http.StatusOK || body != "v of k" {
		t.Fatalf("anonymous GET of a public-read object: %d %q", st, body)
	}
	oa, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("k")})
	if err != nil || len(oa.Grants) != 2 || aws.ToString(oa.Grants[0].Grantee.URI) != "http://acs.amazonaws.com/groups/global/AllUsers" {
		t.Fatalf("GetObjectAcl: %+v %v", oa, err)
	}
	if st, _ := anonymous(t, "PUT", ep+"/acls/k", "x"); st != http.StatusForbidden {
		t.Fatalf("anonymous PUT over a public-read object: %d", st)
	}
	if err := put(c, "k", ""); err != nil {
		t.Fatal(err)
	}
	if st, _ := anonymous(t, "GET", ep+"/acls/k", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous GET of the new version: %d", st)
	}
	if err := put(c, "pub", types.ObjectCannedACLPublicRead); err != nil {
		t.Fatal(err)
	}
	if st, _ := anonymous(t, "GET", ep+"/acls/pub", ""); st != http.StatusOK {
		t.Fatalf("anonymous GET of an object written public-read: %d", st)
	}

	// Bucket grants: READ to the other key lists, not writes; WRITE to
	// everyone lets anonymous writes in.
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, GrantRead: aws.String(`id="` + other.Access + `"`), GrantFullControl: aws.String(`id="` + testAccess + `"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := oc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b}); err != nil {
		t.Fatalf("listing with a READ grant: %v", err)
	}
	if err := put(oc, "o", ""); apiCode(err) != "AccessDenied" {
		t.Fatalf("writing with a READ grant: %v", err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPublicReadWrite}); err != nil {
		t.Fatal(err)
	}
	if err := put(oc, "o", ""); err != nil {
		t.Fatalf("writing into a public-read-write bucket: %v", err)
	}
	if oa, err := oc.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("o")}); err != nil || aws.ToString(oa.Owner.ID) != other.Access {
		t.Fatalf("the writer owns its object: %+v %v", oa, err)
	}
	if st, _ := anonymous(t, "PUT", ep+"/acls/anon", "x"); st != http.StatusOK {
		t.Fatalf("anonymous PUT into a public-read-write bucket: %d", st)
	}

	// Refusals: e-mail grantees, unknown keys; a deny in the policy.
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, GrantRead: aws.String(`emailAddress="a@example.com"`)}); apiCode(err) != "UnresolvableGrantByEmailAddress" {
		t.Fatalf("an e-mail grantee: %v", err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, GrantRead: aws.String(`id="NOSUCHKEY"`)}); apiCode(err) != "InvalidArgument" {
		t.Fatalf("an unknown grantee: %v", err)
	}
	deny := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::acls/*"}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(deny)}); err != nil {
		t.Fatal(err)
	}
	if st, _ := anonymous(t, "PUT", ep+"/acls/anon", "x"); st != http.StatusForbidden {
		t.Fatalf("anonymous PUT the policy denies: %d", st)
	}
	if _, err := c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}

	// BucketOwnerEnforced: refused over a public ACL, then ACLs are off.
	enforced := &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced}}}
	if _, err := c.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: b, OwnershipControls: enforced}); apiCode(err) != "InvalidBucketAclWithObjectOwnership" {
		t.Fatalf("BucketOwnerEnforced over a public ACL: %v", err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: b, OwnershipControls: enforced}); err != nil {
		t.Fatal(err)
	}
	if err := put(c, "refused", types.ObjectCannedACLPublicRead); apiCode(err) != "AccessControlListNotSupported" {
		t.Fatalf("a public ACL under BucketOwnerEnforced: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("refused")}); err == nil {
		t.Fatal("a PUT refused for its ACL stored the object")
	}
	if err := put(c, "ok", types.ObjectCannedACLBucketOwnerFullControl); err != nil {
		t.Fatalf("bucket-owner-full-control under BucketOwnerEnforced: %v", err)
	}
	// BlockPublicAcls.
	if _, err := c.DeleteBucketOwnershipControls(ctx, &s3.DeleteBucketOwnershipControlsInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: b, PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPublicRead}); apiCode(err) != "AccessDenied" {
		t.Fatalf("a public ACL under BlockPublicAcls: %v", err)
	}
}
