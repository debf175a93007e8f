package s3

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzAuthenticate: no Authorization header or query a client sends makes
// the verifier panic, and none without the secret passes.
func FuzzAuthenticate(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AK/20261121/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=00", "20261121T120000Z", "UNSIGNED-PAYLOAD", "")
	f.Add("AWS4-HMAC-SHA256 Credential=AK/2026/x/s3/aws4_request,SignedHeaders=,Signature=", "bad", "", "X-Amz-Credential=AK%2F20261121%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00")
	f.Add("", "", "", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK/20261121/r/s3/aws4_request&X-Amz-Date=20261121T120000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=ab")
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	creds := StaticCredentials{"AK": "secret-secret"}
	f.Fuzz(func(t *testing.T, authz, date, payload, query string) {
		r := httptest.NewRequest(http.MethodGet, "http://h/b/k", nil)
		r.URL.RawQuery = query
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		r.Header.Set("X-Amz-Date", date)
		r.Header.Set("X-Amz-Content-Sha256", payload)
		a, e := authenticate(r, creds, now)
		if e == nil || a != nil {
			t.Fatalf("a made-up signature passed: %+v", a)
		}
	})
}

// FuzzParseRange: a parsed range resolves within the object or not at all.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=5-", "bytes=-3", "bytes=9-2", "bytes=1-2,4-5", "bytes=-0", "items=1-2"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, s string, size int64) {
		if size < 0 {
			size = -size
		}
		br, ok := parseRange(s)
		if !ok {
			return
		}
		off, n, ok := br.resolve(size)
		if ok && (off < 0 || n <= 0 || off+n > size) {
			t.Fatalf("%q on %d bytes: offset %d length %d", s, size, off, n)
		}
	})
}
