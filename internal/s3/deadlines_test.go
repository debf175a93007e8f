package s3_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairn-db/cairn/internal/node"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// closedWithin reports whether the server closes nc within d, reading and
// dropping what it sends meanwhile.
func closedWithin(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	ne, ok := err.(net.Error)
	return err == nil || !(ok && ne.Timeout())
}

// TestHTTPDeadlines: an upload whose body stalls is cut after the idle
// timeout and stores nothing, while a slow but steady one that takes
// several idle timeouts in all succeeds; an idle keep-alive connection is
// closed.
func TestHTTPDeadlines(t *testing.T) {
	ctx := context.Background()
	const idle = 400 * time.Millisecond
	n, ep := openNode(t, nil, func(c *node.Config) { c.IdleTimeout = idle })
	c := client(ep, testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("slow")}); err != nil {
		t.Fatal(err)
	}
	presign := func(key string) *url.URL {
		t.Helper()
		p, err := s3.NewPresignClient(c).PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("slow"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(p.URL)
		return u
	}
	const size = 256 << 10
	start := func(u *url.URL) net.Conn {
		t.Helper()
		nc, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		fmt.Fprintf(nc, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, size)
		return nc
	}

	// Stalled: a few bytes, then nothing.
	nc := start(presign("stalled"))
	nc.Write(make([]byte, 1000))
	if !closedWithin(nc, 3*time.Second) {
		t.Fatal("a stalled upload's connection stayed open")
	}
	if _, err := n.Stat(ctx, &object.GetRequest{Space: "slow", Key: "stalled", Length: -1}); object.KindOf(err) != object.NotFound {
		t.Fatalf("a cut-off upload was stored: %v", err)
	}

	// Slow but steady: 16 KiB every idle/4, about four idle timeouts.
	nc = start(presign("steady"))
	for sent := 0; sent < size; sent += 16 << 10 {
		if _, err := nc.Write(make([]byte, 16<<10)); err != nil {
			t.Fatalf("the server cut a steady upload after %d bytes: %v", sent, err)
		}
		time.Sleep(idle / 4)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a steady upload: %v %v", resp, err)
	}
	resp.Body.Close()
	// The same connection, now idle, is closed after the idle timeout.
	if !closedWithin(nc, 3*time.Second) {
		t.Fatal("an idle keep-alive connection stayed open")
	}
	if info, err := n.Stat(ctx, &object.GetRequest{Space: "slow", Key: "steady", Length: -1}); err != nil || info.Size != size {
		t.Fatalf("the steady upload: %+v %v", info, err)
	}
}

// TestProfiles: Go's profiles are served to cluster admins' signed
// requests at /_cairn/debug/pprof/, to anyone at /debug/pprof/ only with
// Config.Pprof, and to nobody else.
func TestProfiles(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t, nil, nil)
	reader, err := n.CreateKey(ctx, wire.KeySpec{Grants: map[string]string{"*": "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	// Signed as generic SigV4 clients (curl --aws-sigv4) sign: without
	// x-amz-content-sha256.
	get := func(path, access, secret string) int {
		t.Helper()
		r, _ := http.NewRequest(http.MethodGet, ep+path, nil)
		if access != "" {
			sum := sha256.Sum256(nil)
			if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, r, hex.EncodeToString(sum[:]), "s3", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !bytes.Contains(body, []byte("goroutine")) {
			t.Fatalf("%s answered 200 without profiles: %.200s", path, body)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, access, secret string
		want                 int
	}{
		{"/debug/pprof/", "", "", http.StatusNotFound}, // without --pprof, S3's: no bucket "debug"
		{"/_cairn/debug/pprof/", "", "", http.StatusForbidden},
		{"/_cairn/debug/pprof/", reader.Access, reader.Secret, http.StatusForbidden},
		{"/_cairn/debug/pprof/", testAccess, testSecret, http.StatusOK},
	} {
		if got := get(tc.path, tc.access, tc.secret); got != tc.want {
			t.Errorf("GET %s as %q: %d, want %d", tc.path, tc.access, got, tc.want)
		}
	}
	_, open := openNode(t, nil, func(c *node.Config) { c.Pprof = true })
	ep = open
	if got := get("/debug/pprof/", "", ""); got != http.StatusOK {
		t.Errorf("GET /debug/pprof/ with --pprof: %d", got)
	}
	// Not the command line, which may hold secrets given as flags.
	resp, err := http.Get(ep + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("/debug/pprof/cmdline is served to anyone with --pprof")
	}
}
