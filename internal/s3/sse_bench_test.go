package s3_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// BenchmarkSSE16MiB puts (each time new content) and gets 16 MiB objects
// on one node through
// aws-sdk-go-v2, unencrypted and with SSE-S3, in one run, so the ratio of
// their throughputs (the target: SSE-S3 at least 0.8 of
// unencrypted) is measured on the same machine at the same time:
//
//	go test ./internal/s3 -run '^$' -bench SSE16MiB -benchtime 40x -count 3
func BenchmarkSSE16MiB(b *testing.B) {
	_, ep := openNode(b, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	bucket := aws.String("ssebench")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		b.Fatal(err)
	}
	body := testBytes(16<<20, 5)
	for _, mode := range []struct {
		name string
		sse  types.ServerSideEncryption
	}{{"plain", ""}, {"sse-s3", types.ServerSideEncryptionAes256}} {
		key := aws.String("obj-" + mode.name)
		b.Run(mode.name+"/put", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				// Fresh content each time: equal bodies would share
				// their chunks (unencrypted ones only), writing nothing.
				b.StopTimer()
				for off := 0; off+8 <= len(body); off += 4096 {
					binary.LittleEndian.PutUint64(body[off:], uint64(i)<<8|uint64(len(mode.name)))
				}
				b.StartTimer()
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: bytes.NewReader(body), ServerSideEncryption: mode.sse}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/get", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key})
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, out.Body)
				out.Body.Close()
				if err != nil || n != int64(len(body)) {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
		})
	}
}
