package s3

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
		a, e := authenticate(r, r.URL.Query(), creds, "us-east-1", now, nil)
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

// FuzzChunkedReader: no aws-chunked body makes the decoder panic or
// overrun, and one it accepts yields exactly the declared length, with
// the trailing checksum it recorded being that of the bytes it yielded.
func FuzzChunkedReader(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), int64(5), false)
	f.Add([]byte("3\r\nhel\r\n2\r\nlo\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\n\r\n\r\n"), int64(5), false)
	f.Add([]byte("0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n"), int64(0), false)
	f.Add([]byte("5;chunk-signature=0000000000000000000000000000000000000000000000000000000000000000\r\nhello\r\n0;chunk-signature=00\r\n\r\n"), int64(5), true)
	alg, _ := findChecksum("crc32")
	a := &auth{key: []byte("key"), sc: scope{accessKey: "AK", date: "20261121", region: "r", service: "s3"}, date: "20261121T000000Z", seed: "seed"}
	f.Fuzz(func(t *testing.T, body []byte, size int64, signed bool) {
		if size < 0 || size > 1<<20 {
			return
		}
		var sa *auth
		if signed {
			sa = a
		}
		sum := &checksumRequest{alg: alg, trailer: true}
		fault := &bodyFault{}
		headers := map[string]string{}
		c, e := newChunkedReader(bytes.NewReader(body), size, sa, !signed, sum, headers, fault)
		if e != nil {
			return
		}
		out, err := io.ReadAll(io.LimitReader(c, size+1))
		if err != nil {
			if fault.e == nil {
				t.Fatalf("read failed with %v and no fault", err)
			}
			return
		}
		if signed {
			t.Fatalf("a body with made-up chunk signatures was accepted: %q", out)
		}
		if int64(len(out)) != size {
			t.Fatalf("accepted %d bytes, declared %d", len(out), size)
		}
		h := crc32.NewIEEE()
		h.Write(out)
		if headers["x-amz-checksum-crc32"] != base64.StdEncoding.EncodeToString(h.Sum(nil)) {
			t.Fatalf("accepted %q with trailing checksum %q", out, headers["x-amz-checksum-crc32"])
		}
	})
}

// FuzzHeaderValue: the fast path for a header value that needs no folding
// gives what folding gives.
func FuzzHeaderValue(f *testing.F) {
	for _, s := range []string{"", "a", " a", "a ", "a  b", "a b", "a\tb", "a\u00a0b", "a\u0085b", "x-amz-date"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodGet, "http://h/b/k", nil)
		r.Header["X-Test"] = []string{v}
		if got, want := headerValue(r, "x-test"), strings.Join(strings.Fields(v), " "); got != want {
			t.Fatalf("headerValue(%q) = %q, want %q", v, got, want)
		}
	})
}

// FuzzListXML: the hand-written listing documents are byte for byte what
// encoding/xml writes, whatever the keys, prefixes and markers hold.
func FuzzListXML(f *testing.F) {
	for i := 0; i+2 < len(trickyKeys); i += 3 {
		f.Add(trickyKeys[i], trickyKeys[i+1], trickyKeys[i+2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var esc bytes.Buffer
		_ = xml.EscapeText(&esc, []byte(a))
		if got := appendEscaped(nil, a); !bytes.Equal(got, esc.Bytes()) {
			t.Fatalf("%q escapes to %q, want %q", a, got, esc.Bytes())
		}
		for i, doc := range listDocs([]string{a, b, c}) {
			want, err := xml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if got := doc.appendXML(nil); !bytes.Equal(got, want) {
				t.Fatalf("document %d (%T):\n got %q\nwant %q", i, doc, got, want)
			}
		}
	})
}
