package s3_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	cairnclient "github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// TestObjectLock: retention and legal holds keep versions from removal
// through S3 (GOVERNANCE yields to an admin's bypass, COMPLIANCE to
// nothing and can only be extended); a bucket's default retention applies
// to new versions; a delete without a version only writes a marker; the
// bucket's versioning cannot be suspended.
func TestObjectLock(t *testing.T) {
	_, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("worm")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b, ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, in *s3.PutObjectInput) string {
		t.Helper()
		if in == nil {
			in = &s3.PutObjectInput{}
		}
		in.Bucket, in.Key, in.Body = b, aws.String(key), strings.NewReader("v")
		out, err := c.PutObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.VersionId)
	}
	del := func(key, v string, bypass bool) error {
		_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(key), VersionId: aws.String(v), BypassGovernanceRetention: aws.Bool(bypass)})
		return err
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)

	gv := put("gov", &s3.PutObjectInput{ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(until)})
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("gov")}); err != nil || h.ObjectLockMode != types.ObjectLockModeGovernance || !aws.ToTime(h.ObjectLockRetainUntilDate).Equal(until) {
		t.Fatalf("HEAD of a retained version: %+v %v", h, err)
	}
	if err := del("gov", gv, false); apiCode(err) != "AccessDenied" {
		t.Fatalf("removing a GOVERNANCE version: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("gov")}); err != nil {
		t.Fatalf("a delete marker over a retained version: %v", err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("gov"), VersionId: aws.String(gv)}); err != nil {
		t.Fatalf("the retained version after the marker: %v", err)
	}
	if err := del("gov", gv, true); err != nil {
		t.Fatalf("removing a GOVERNANCE version with the bypass: %v", err)
	}

	cv := put("comp", &s3.PutObjectInput{ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(until)})
	if err := del("comp", cv, true); apiCode(err) != "AccessDenied" {
		t.Fatalf("removing a COMPLIANCE version with the bypass: %v", err)
	}
	shorter := &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until.Add(-time.Minute))}
	if _, err := c.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: b, Key: aws.String("comp"), Retention: shorter, BypassGovernanceRetention: aws.Bool(true)}); apiCode(err) != "AccessDenied" {
		t.Fatalf("shortening a COMPLIANCE retention: %v", err)
	}
	longer := &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until.Add(time.Hour))}
	if _, err := c.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: b, Key: aws.String("comp"), Retention: longer}); err != nil {
		t.Fatalf("extending a COMPLIANCE retention: %v", err)
	}
	// DeleteObjects refuses the locked version too.
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("comp"), VersionId: aws.String(cv)}}}})
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects of a COMPLIANCE version: %+v %v", out, err)
	}

	hv := put("held", &s3.PutObjectInput{ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	if err := del("held", hv, true); apiCode(err) != "AccessDenied" {
		t.Fatalf("removing a version under a legal hold: %v", err)
	}
	if _, err := c.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: b, Key: aws.String("held"), LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}}); err != nil {
		t.Fatal(err)
	}
	if err := del("held", hv, false); err != nil {
		t.Fatalf("removing a version once its hold is off: %v", err)
	}

	// The default retention.
	if _, err := c.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: b, ObjectLockConfiguration: &types.ObjectLockConfiguration{
		ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	dv := put("default", nil)
	if r, err := c.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: b, Key: aws.String("default")}); err != nil || r.Retention.Mode != types.ObjectLockRetentionModeGovernance {
		t.Fatalf("the default retention: %+v %v", r, err)
	}
	if err := del("default", dv, false); apiCode(err) != "AccessDenied" {
		t.Fatalf("removing a version under the default retention: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: b, VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}}); apiCode(err) != "InvalidBucketState" {
		t.Fatalf("suspending versioning under object lock: %v", err)
	}
	// A bucket without object lock refuses the lock headers.
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("plain")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("k"), Body: strings.NewReader("v"), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn}); apiCode(err) != "InvalidRequest" {
		t.Fatalf("a legal hold in a bucket without object lock: %v", err)
	}
}

// TestObjectLockNativePaths: object lock holds on Cairn's own API too. A
// retained or held version is not removed through the native protocol
// (there is no GOVERNANCE bypass there), the bucket is not dropped through
// it or through S3 while any version is held, and versions nothing holds
// go as usual.
func TestObjectLockNativePaths(t *testing.T) {
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("vault")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b, ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	put := func(key string, in *s3.PutObjectInput) uint64 {
		t.Helper()
		in.Bucket, in.Key, in.Body = b, aws.String(key), strings.NewReader("v")
		out, err := c.PutObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tstamp.Parse(aws.ToString(out.VersionId))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	gov := put("gov", &s3.PutObjectInput{ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(until)})
	held := put("held", &s3.PutObjectInput{ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	free := put("free", &s3.PutObjectInput{})

	// A crash between a write and its lock document leaves the lock in
	// the version itself: the version is held all the same.
	sum := sha256.Sum256([]byte("gov"))
	doc := object.SystemKeyPrefix + "olock/" + hex.EncodeToString(sum[:16]) + "/" + tstamp.String(gov)
	if _, err := n.Stat(object.WithSystemKeys(ctx), &object.GetRequest{Space: "vault", Key: doc, Length: -1}); err != nil {
		t.Fatalf("the lock document of gov: %v", err)
	}
	if _, err := n.Delete(object.WithSystemKeys(ctx), &object.DeleteRequest{Space: "vault", Key: doc}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("gov"), VersionId: aws.String(tstamp.String(gov))}); apiCode(err) != "AccessDenied" {
		t.Fatalf("an S3 delete of a version whose lock document is gone: %v", err)
	}

	nc, err := cairnclient.DialOptions(ctx, cairnclient.Options{Addrs: []string{n.NativeAddr()}, AccessKey: testAccess, SecretKey: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for key, v := range map[string]uint64{"gov": gov, "held": held} {
		if _, err := nc.Delete(ctx, "vault", key, cairnclient.WithVersion(v)); err == nil || !strings.Contains(err.Error(), "object lock") {
			t.Errorf("a native delete of %s's locked version: %v", key, err)
		}
		if _, err := nc.Stat(ctx, "vault", key, cairnclient.WithVersion(v)); err != nil {
			t.Errorf("%s's locked version is gone: %v", key, err)
		}
	}
	if err := nc.DeleteSpace(ctx, "vault"); err == nil || !strings.Contains(err.Error(), "object lock") {
		t.Errorf("a native drop of the bucket: %v", err)
	}
	if _, err := nc.Delete(ctx, "vault", "free", cairnclient.WithVersion(free)); err != nil {
		t.Errorf("a native delete of a version nothing holds: %v", err)
	}
	// Through S3: the bucket holds no live object once its keys have
	// delete markers, but its held versions keep it.
	for _, key := range []string{"gov", "held"} {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b}); apiCode(err) != "AccessDenied" {
		t.Errorf("an S3 DeleteBucket of a bucket with held versions: %v", err)
	}
	if _, err := n.Stat(ctx, &object.GetRequest{Space: "vault", Key: "held", Version: held, Length: -1}); err != nil {
		t.Fatalf("after the refused drops the held version is gone: %v", err)
	}
}

// TestGovernanceBypassByPolicy: a key that may write but is no admin of
// the bucket bypasses GOVERNANCE retention only when a bucket policy
// allows it s3:BypassGovernanceRetention, as in S3.
func TestGovernanceBypassByPolicy(t *testing.T) {
	n, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("govpol")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b, ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("v"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := n.CreateKey(ctx, admin.KeySpec{Grants: map[string]string{"govpol": "write"}})
	if err != nil {
		t.Fatal(err)
	}
	wc := client(ep, writer.Access, writer.Secret)
	del := func() error {
		_, err := wc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k"), VersionId: out.VersionId, BypassGovernanceRetention: aws.Bool(true)})
		return err
	}
	if err := del(); apiCode(err) != "AccessDenied" {
		t.Fatalf("a writer's bypass without the permission: %v", err)
	}
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"` + writer.Access + `"},` +
		`"Action":"s3:BypassGovernanceRetention","Resource":"arn:aws:s3:::govpol/*"}]}`
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(doc)}); err != nil {
		t.Fatal(err)
	}
	if err := del(); err != nil {
		t.Fatalf("a writer's bypass the policy allows: %v", err)
	}
}
