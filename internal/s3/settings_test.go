package s3_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestBucketSettings: the settings Cairn does not keep read as S3 reads
// them on a bucket that has none, ACLs are disabled (only the owner's
// full control may be set), and a refused ACL changes nothing.
func TestBucketSettings(t *testing.T) {
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("settings")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("v"), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("PUT with the private ACL: %v", err)
	}

	// Settings that are absent.
	absent := map[string]error{}
	_, absent["NoSuchBucketPolicy"] = c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b})
	_, absent["NoSuchCORSConfiguration"] = c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	_, absent["ServerSideEncryptionConfigurationNotFoundError"] = c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: b})
	_, absent["ObjectLockConfigurationNotFoundError"] = c.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: b})
	_, absent["NoSuchWebsiteConfiguration"] = c.GetBucketWebsite(ctx, &s3.GetBucketWebsiteInput{Bucket: b})
	_, absent["ReplicationConfigurationNotFoundError"] = c.GetBucketReplication(ctx, &s3.GetBucketReplicationInput{Bucket: b})
	_, absent["NoSuchPublicAccessBlockConfiguration"] = c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: b})
	for code, err := range absent {
		if apiCode(err) != code {
			t.Errorf("want %s, got %v", code, err)
		}
	}
	if _, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("no-such-bucket")}); apiCode(err) != "NoSuchBucket" {
		t.Errorf("policy of a missing bucket: want NoSuchBucket, got %v", err)
	}
	if _, err := c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Errorf("DeleteBucketPolicy: %v", err)
	}
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(`{"Version":"2012-10-17","Statement":[]}`)}); apiCode(err) != "MalformedPolicy" {
		t.Errorf("PutBucketPolicy without a statement: want MalformedPolicy, got %v", err)
	}

	// Settings with a fixed answer.
	rp, err := c.GetBucketRequestPayment(ctx, &s3.GetBucketRequestPaymentInput{Bucket: b})
	if err != nil || rp.Payer != types.PayerBucketOwner {
		t.Errorf("request payment: %+v, %v", rp, err)
	}
	oc, err := c.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: b})
	if err != nil || len(oc.OwnershipControls.Rules) != 1 || oc.OwnershipControls.Rules[0].ObjectOwnership != types.ObjectOwnershipBucketOwnerEnforced {
		t.Errorf("ownership controls: %+v, %v", oc, err)
	}
	if _, err := c.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: b}); err != nil {
		t.Errorf("logging: %v", err)
	}
	if _, err := c.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: b}); err != nil {
		t.Errorf("notification: %v", err)
	}

	// ACLs: read as the owner's full control, set only as that.
	for _, get := range []func() (*types.Owner, []types.Grant, error){
		func() (*types.Owner, []types.Grant, error) {
			o, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: b})
			if err != nil {
				return nil, nil, err
			}
			return o.Owner, o.Grants, nil
		},
		func() (*types.Owner, []types.Grant, error) {
			o, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("k")})
			if err != nil {
				return nil, nil, err
			}
			return o.Owner, o.Grants, nil
		},
	} {
		o, gs, err := get()
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(o.ID) != testAccess || len(gs) != 1 || gs[0].Permission != types.PermissionFullControl ||
			gs[0].Grantee.Type != types.TypeCanonicalUser || aws.ToString(gs[0].Grantee.ID) != testAccess {
			t.Errorf("ACL: owner %+v, grants %+v", o, gs)
		}
	}
	if _, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("missing")}); apiCode(err) != "NoSuchKey" {
		t.Errorf("ACL of a missing object: want NoSuchKey, got %v", err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPrivate}); err != nil {
		t.Errorf("PutBucketAcl private: %v", err)
	}
	if _, err := c.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead}); apiCode(err) != "AccessControlListNotSupported" {
		t.Errorf("PutObjectAcl public-read: want AccessControlListNotSupported, got %v", err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, GrantRead: aws.String(`uri="http://acs.amazonaws.com/groups/global/AllUsers"`)}); apiCode(err) != "AccessControlListNotSupported" {
		t.Errorf("PutBucketAcl grant-read: want AccessControlListNotSupported, got %v", err)
	}
	own := types.Grant{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String(testAccess)}, Permission: types.PermissionFullControl}
	all := types.Grant{Grantee: &types.Grantee{Type: types.TypeGroup, URI: aws.String("http://acs.amazonaws.com/groups/global/AllUsers")}, Permission: types.PermissionRead}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, AccessControlPolicy: &types.AccessControlPolicy{
		Owner: &types.Owner{ID: aws.String(testAccess)}, Grants: []types.Grant{own}}}); err != nil {
		t.Errorf("PutBucketAcl with the owner's full control: %v", err)
	}
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, AccessControlPolicy: &types.AccessControlPolicy{
		Owner: &types.Owner{ID: aws.String(testAccess)}, Grants: []types.Grant{own, all}}}); apiCode(err) != "AccessControlListNotSupported" {
		t.Errorf("PutBucketAcl granting AllUsers read: want AccessControlListNotSupported, got %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("public"), Body: strings.NewReader("v"), ACL: types.ObjectCannedACLPublicRead})
	if apiCode(err) != "AccessControlListNotSupported" {
		t.Fatalf("PUT with public-read: want AccessControlListNotSupported, got %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("public")}); err == nil {
		t.Fatal("a PUT refused for its ACL stored the object")
	}
}
