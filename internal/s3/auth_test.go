package s3

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	authAccess = "AKAUTHTEST"
	authSecret = "auth-test-secret-key"
)

// signedAuthGet is a GET of /bucket/key?versionId=... signed by aws-sdk-go-v2
// as a client would sign it.
func signedAuthGet(tb testing.TB, now time.Time) *http.Request {
	tb.Helper()
	r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:7080/bucket/some/key.txt?versionId=null&x-id=GetObject", nil)
	r.Header.Set("User-Agent", "aws-sdk-go-v2/1.0 os/linux lang/go#1.26")
	r.Header.Set("Amz-Sdk-Invocation-Id", "6c5bd8a4-7b35-4d3c-9f39-5b8bb2ec0a0e")
	return signEmpty(tb, r, authAccess, authSecret, now)
}

// signEmpty signs r, a request without a body, at now with access and
// secret, as aws-sdk-go-v2 does.
func signEmpty(tb testing.TB, r *http.Request, access, secret string, now time.Time) *http.Request {
	tb.Helper()
	r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	creds := aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, emptySHA256, "s3", "us-east-1", now); err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestKeyCache: a cached signing key verifies what a fresh one does, and
// a changed secret is not served the old key.
func TestKeyCache(t *testing.T) {
	now := time.Now()
	r := signedAuthGet(t, now)
	var keys keyCache
	for i := 0; i < 3; i++ {
		if _, e := authenticate(r, r.URL.Query(), StaticCredentials{authAccess: authSecret}, "us-east-1", now, &keys); e != nil {
			t.Fatalf("try %d: %v", i, e)
		}
	}
	if _, e := authenticate(r, r.URL.Query(), StaticCredentials{authAccess: "another-secret"}, "us-east-1", now, &keys); e != errSignatureMismatch {
		t.Fatalf("a rotated secret: got %v, want SignatureDoesNotMatch", e)
	}
}

// BenchmarkAuthenticate is the signature check of a signed GET, with the
// signing key derived per request ("fresh") and from the cache.
func BenchmarkAuthenticate(b *testing.B) {
	now := time.Now()
	r := signedAuthGet(b, now)
	creds := StaticCredentials{authAccess: authSecret}
	for _, bc := range []struct {
		name string
		keys *keyCache
	}{{"fresh", nil}, {"cached", &keyCache{}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, e := authenticate(r, r.URL.Query(), creds, "us-east-1", now, bc.keys); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
