package s3_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairn-db/cairn/internal/object"
)

// TestDeleteObjectsIsOneTransaction: DeleteObjects over keys in four
// ranges deletes them in one transaction — a reader listing meanwhile sees
// all of them or none — and answers for each key with one marker version.
func TestDeleteObjectsIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	if _, err := n.CreateSpace(ctx, "multi", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	c := client(ep, testAccess, testSecret)
	ks := []string{"!a", "5b", "Lc", "zd"}
	for round := range 20 {
		for _, k := range ks {
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("multi"), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		seen := make(chan int, 64)
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("multi")})
				if err == nil {
					select {
					case seen <- len(out.Contents):
					default:
					}
				}
			}
		}()
		var objs []types.ObjectIdentifier
		for _, k := range ks {
			objs = append(objs, types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("multi"), Delete: &types.Delete{Objects: objs}})
		close(stop)
		wg.Wait()
		close(seen)
		if err != nil || len(out.Deleted) != 4 || len(out.Errors) != 0 {
			t.Fatalf("round %d: %v %+v", round, err, out)
		}
		v := aws.ToString(out.Deleted[0].DeleteMarkerVersionId)
		for _, d := range out.Deleted {
			if !aws.ToBool(d.DeleteMarker) || aws.ToString(d.DeleteMarkerVersionId) != v {
				t.Fatalf("round %d: %s deleted with marker %v %s, not the one version %s", round, aws.ToString(d.Key), aws.ToBool(d.DeleteMarker), aws.ToString(d.DeleteMarkerVersionId), v)
			}
		}
		for l := range seen {
			if l != 0 && l != 4 {
				t.Fatalf("round %d: a listing saw %d of the 4 keys mid-delete", round, l)
			}
		}
	}
}

// TestConditionalPutsRace: many writers create one key with If-None-Match
// at once: exactly one wins, the others fail with PreconditionFailed.
func TestConditionalPutsRace(t *testing.T) {
	ctx := context.Background()
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("cond")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wins := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("cond"), Key: aws.String("once"),
				Body: strings.NewReader(fmt.Sprint(i)), IfNoneMatch: aws.String("*")})
			if err == nil {
				wins <- fmt.Sprint(i)
			} else if code := apiCode(err); code != "PreconditionFailed" && code != "ConditionalRequestConflict" {
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	var won []string
	for w := range wins {
		won = append(won, w)
	}
	if len(won) != 1 {
		t.Fatalf("%d writers created the key: %v", len(won), won)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("once")})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	k, _ := got.Body.Read(b)
	if string(b[:k]) != won[0] {
		t.Fatalf("the key holds %q, the winner wrote %q", b[:k], won[0])
	}
}
