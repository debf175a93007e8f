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
// them on a bucket that has none.
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
	if _, err := c.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: b}); apiCode(err) != "OwnershipControlsNotFoundError" {
		t.Errorf("ownership controls of a new bucket: %v", err)
	}
	if _, err := c.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: b}); err != nil {
		t.Errorf("logging: %v", err)
	}
	if _, err := c.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: b}); err != nil {
		t.Errorf("notification: %v", err)
	}
}
