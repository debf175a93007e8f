package s3_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/node"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// testCert is a self-signed certificate for 127.0.0.1, in PEM files.
type testCert struct {
	certFile, keyFile string
	pool              *x509.CertPool
}

func newTestCert(t *testing.T) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cairn test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &testCert{certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"), pool: x509.NewCertPool()}
	if err := os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c.pool.AddCert(cert)
	return c
}

// recorder carries requests and notes the payload encoding
// (x-amz-content-sha256) of each PUT, to show which path a client took.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func newRecorder(c *testCert) *recorder {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: c.pool}
	}
	return &recorder{base: tr}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		p := req.Header.Get("X-Amz-Content-Sha256")
		if len(p) == 64 && !strings.HasPrefix(p, "STREAMING") {
			p = "sha256"
		}
		r.mu.Lock()
		r.seen = append(r.seen, p)
		r.mu.Unlock()
	}
	return r.base.RoundTrip(req)
}

// take returns the encodings seen since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = nil
	return s
}

// checksumOf is the base64 x-amz-checksum-* value of b.
func checksumOf(alg string, b []byte) string {
	var h hash.Hash
	switch strings.ToLower(alg) {
	case "crc32":
		h = crc32.NewIEEE()
	case "crc32c":
		h = crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case "crc64nvme":
		h = crc64.New(crc64.MakeTable(0x9A6C9329AC4BC9B5))
	case "sha1":
		h = sha1.New()
	case "sha256":
		h = sha256.New()
	case "md5":
		h = md5.New()
	case "sha512":
		h = sha512.New()
	case "xxhash64":
		h = xxhash.New()
	case "xxhash3":
		h = xxh3.New()
	case "xxhash128":
		h = xxh3.New128()
	}
	h.Write(b)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// testBody is 200 KiB: several chunks of every client's aws-chunked
// encoding, the last one short.
func testBody() []byte { return testBytes(200<<10+123, 42) }

// checkStored checks the checksums a client was given back, by algorithm:
// body's for alg want, none for the others.
func checkStored(t *testing.T, what string, got map[string]string, want string, body []byte) {
	t.Helper()
	for alg, v := range got {
		w := ""
		if alg == want {
			w = checksumOf(alg, body)
		}
		if v != w {
			t.Errorf("%s returned %s checksum %q, want %q", what, alg, v, w)
		}
	}
}

// TestSDKEncodings drives aws-sdk-go-v2 over HTTP and TLS with checksums
// off, on by default (CRC32) and with each algorithm: the SDK sends a
// SHA-256 payload hash with a checksum header over HTTP and aws-chunked
// with a trailing checksum over TLS. Every object reads back whole, and
// its checksum comes back (and is checked by the SDK) when asked for.
func TestSDKEncodings(t *testing.T) {
	for _, secure := range []bool{false, true} {
		name := map[bool]string{false: "http", true: "https"}[secure]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var cert *testCert
			if secure {
				cert = newTestCert(t)
			}
			ep := startNodeWith(t, cert)
			rec := newRecorder(cert)
			mk := func(checksums bool) *s3.Client {
				return client(ep, testAccess, testSecret, func(o *s3.Options) {
					o.HTTPClient = &http.Client{Transport: rec}
					if checksums {
						o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
						o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
					} else {
						o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
						o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
					}
				})
			}
			on, off := mk(true), mk(false)
			bucket := aws.String("enc")
			if _, err := on.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
				t.Fatal(err)
			}
			body := testBody()
			cases := []struct {
				name string
				c    *s3.Client
				alg  types.ChecksumAlgorithm
				want string // the checksum stored; "" for none
			}{
				{"off", off, "", ""},
				{"default", on, "", "CRC32"},
				{"crc32", on, types.ChecksumAlgorithmCrc32, "CRC32"},
				{"crc32c", on, types.ChecksumAlgorithmCrc32c, "CRC32C"},
				{"crc64nvme", on, types.ChecksumAlgorithmCrc64nvme, "CRC64NVME"},
				{"sha1", on, types.ChecksumAlgorithmSha1, "SHA1"},
				{"sha256", on, types.ChecksumAlgorithmSha256, "SHA256"},
			}
			for _, tc := range cases {
				key := aws.String("obj-" + tc.name)
				// Over TLS the body is not seekable, as from a pipe: the
				// SDK must stream it.
				var r io.Reader = bytes.NewReader(body)
				if secure {
					r = struct{ io.Reader }{r}
				}
				_, err := tc.c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: r,
					ContentLength: aws.Int64(int64(len(body))), ChecksumAlgorithm: tc.alg})
				if err != nil {
					t.Fatalf("%s: PutObject: %v", tc.name, err)
				}
				t.Logf("%s: sent %v", tc.name, rec.take())
				get, err := on.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: key, ChecksumMode: types.ChecksumModeEnabled})
				if err != nil {
					t.Fatalf("%s: GetObject: %v", tc.name, err)
				}
				got, err := io.ReadAll(get.Body)
				get.Body.Close()
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("%s: read back %d bytes (%v), want the %d written", tc.name, len(got), err, len(body))
				}
				checkStored(t, tc.name+": GET", map[string]string{"CRC32": aws.ToString(get.ChecksumCRC32),
					"CRC32C": aws.ToString(get.ChecksumCRC32C), "CRC64NVME": aws.ToString(get.ChecksumCRC64NVME),
					"SHA1": aws.ToString(get.ChecksumSHA1), "SHA256": aws.ToString(get.ChecksumSHA256)}, tc.want, body)
				head, err := on.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: key, ChecksumMode: types.ChecksumModeEnabled})
				if err != nil {
					t.Fatalf("%s: HeadObject: %v", tc.name, err)
				}
				if tc.want == "CRC32C" && aws.ToString(head.ChecksumCRC32C) != checksumOf("crc32c", body) {
					t.Errorf("%s: HEAD checksum %q", tc.name, aws.ToString(head.ChecksumCRC32C))
				}
			}
		})
	}
}

// TestMinioEncodings drives minio-go over HTTP (signed streaming chunks,
// with a signed trailer when it sends a checksum) and TLS (unsigned, with
// an unsigned trailer when it sends a checksum).
func TestMinioEncodings(t *testing.T) {
	for _, secure := range []bool{false, true} {
		name := map[bool]string{false: "http", true: "https"}[secure]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var cert *testCert
			if secure {
				cert = newTestCert(t)
			}
			ep, err := url.Parse(startNodeWith(t, cert))
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(cert)
			mk := func(trailers bool) *minio.Client {
				c, err := minio.New(ep.Host, &minio.Options{
					Creds: credentials.NewStaticV4(testAccess, testSecret, ""), Secure: secure,
					Transport: rec, Region: "us-east-1", BucketLookup: minio.BucketLookupPath, TrailingHeaders: trailers,
				})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			plain, trailing := mk(false), mk(true)
			if err := plain.MakeBucket(ctx, "enc", minio.MakeBucketOptions{}); err != nil {
				t.Fatal(err)
			}
			body := testBody()
			cases := []struct {
				name string
				c    *minio.Client
				sum  minio.ChecksumType
				want string
			}{
				{"off", plain, minio.ChecksumNone, ""},
				{"md5", plain, minio.ChecksumNone, ""},
				// Only names CRC32C in x-amz-checksum-algorithm (which
				// CreateMultipartUpload takes): no checksum to store.
				{"default", trailing, minio.ChecksumNone, ""},
				{"crc32", trailing, minio.ChecksumCRC32, "CRC32"},
				{"crc32c", trailing, minio.ChecksumCRC32C, "CRC32C"},
				{"crc64nvme", trailing, minio.ChecksumCRC64NVME, "CRC64NVME"},
				{"sha1", trailing, minio.ChecksumSHA1, "SHA1"},
				{"sha256", trailing, minio.ChecksumSHA256, "SHA256"},
			}
			var sent []string
			for _, tc := range cases {
				key := "obj-" + tc.name
				opts := minio.PutObjectOptions{Checksum: tc.sum, SendContentMd5: tc.name == "md5"}
				if _, err := tc.c.PutObject(ctx, "enc", key, bytes.NewReader(body), int64(len(body)), opts); err != nil {
					t.Fatalf("%s: PutObject: %v", tc.name, err)
				}
				s := rec.take()
				sent = append(sent, s...)
				t.Logf("%s: sent %v", tc.name, s)
				o, err := plain.GetObject(ctx, "enc", key, minio.GetObjectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(o)
				o.Close()
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("%s: read back %d bytes (%v), want the %d written", tc.name, len(got), err, len(body))
				}
				st, err := plain.StatObject(ctx, "enc", key, minio.StatObjectOptions{Checksum: true})
				if err != nil {
					t.Fatal(err)
				}
				checkStored(t, tc.name+": stat", map[string]string{"CRC32": st.ChecksumCRC32, "CRC32C": st.ChecksumCRC32C,
					"CRC64NVME": st.ChecksumCRC64NVME, "SHA1": st.ChecksumSHA1, "SHA256": st.ChecksumSHA256}, tc.want, body)
			}
			// The encodings each path is known for were exercised.
			want := []string{"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"}
			if secure {
				want = []string{"UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}
			}
			for _, w := range want {
				if !slices.Contains(sent, w) {
					t.Errorf("no PUT was sent as %s (sent %v)", w, sent)
				}
			}
		})
	}
}

// sha256Hasher is the md5simd.Hasher minio-go's signer takes.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// streamed returns a PUT of body to url in minio-go's signed aws-chunked
// encoding (with trailer, if set, as a signed trailer), and the encoded
// body, for the caller to tamper with.
func streamed(t *testing.T, url string, body []byte, trailer http.Header) (*http.Request, []byte) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Trailer = trailer
	r = signer.StreamingSignV4(r, testAccess, testSecret, "", "us-east-1", int64(len(body)), time.Now().UTC(), sha256Hasher{sha256.New()})
	enc, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r, enc
}

// send sends r with body enc and returns the status and the error code.
func send(t *testing.T, r *http.Request, enc []byte) (int, string) {
	t.Helper()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(enc)), int64(len(enc))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	code, _, _ := strings.Cut(string(msg), "</Code>")
	_, code, _ = strings.Cut(code, "<Code>")
	return resp.StatusCode, code
}

// splitChunks splits an aws-chunked body into its chunks (header, data,
// CRLF), the last element being the rest (the final chunk and trailer).
func splitChunks(t *testing.T, b []byte) [][]byte {
	var out [][]byte
	for {
		i := bytes.Index(b, []byte("\r\n"))
		hexSize, _, _ := strings.Cut(string(b[:i]), ";")
		n, err := strconv.ParseInt(hexSize, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return append(out, b)
		}
		end := i + 2 + int(n) + 2
		out, b = append(out, b[:end]), b[end:]
	}
}

// TestChunkedBodiesRejected sends aws-chunked bodies that fail a check:
// each is refused with the error S3 gives, and nothing is written.
func TestChunkedBodiesRejected(t *testing.T) {
	ctx := context.Background()
	ep := startNode(t)
	c := client(ep, testAccess, testSecret)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("enc")}); err != nil {
		t.Fatal(err)
	}
	body := testBody()
	url := ep + "/enc/k"
	crc := func(v string) http.Header { return http.Header{"x-amz-checksum-crc32c": {v}} }
	good := checksumOf("crc32c", body)
	wrong := checksumOf("crc32c", []byte("something else"))

	// The untampered forms go through (then are deleted again).
	for _, tr := range []http.Header{nil, crc(good)} {
		r, enc := streamed(t, url, body, tr)
		if status, code := send(t, r, enc); status != http.StatusOK {
			t.Fatalf("untampered stream (trailer %v): %d %s", tr, status, code)
		}
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("enc"), Key: aws.String("k")}); err != nil {
			t.Fatal(err)
		}
	}

	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 1; return b }
	cases := []struct {
		name    string
		trailer http.Header
		mangle  func(enc []byte) []byte
		status  int
		code    string
	}{
		{"first chunk's data", nil, func(b []byte) []byte { return flip(b, 200) }, 403, "SignatureDoesNotMatch"},
		{"last chunk's data", nil, func(b []byte) []byte { return flip(b, len(b)-100-90) }, 403, "SignatureDoesNotMatch"},
		{"a chunk signature", nil, func(b []byte) []byte { return flip(b, bytes.Index(b, []byte("signature="))+12) }, 403, "SignatureDoesNotMatch"},
		{"truncated", nil, func(b []byte) []byte { return b[:len(b)-30] }, 400, "IncompleteBody"},
		{"a chunk dropped", nil, func(b []byte) []byte {
			cs := splitChunks(t, b)
			return bytes.Join(append(cs[:1:1], cs[2:]...), nil)
		}, 403, "SignatureDoesNotMatch"},
		{"chunks swapped", nil, func(b []byte) []byte {
			cs := splitChunks(t, b)
			cs[0], cs[1] = cs[1], cs[0]
			return bytes.Join(cs, nil)
		}, 403, "SignatureDoesNotMatch"},
		{"extra bytes after the end", nil, func(b []byte) []byte { return append(bytes.Clone(b), "junk\r\n"...) }, 400, "InvalidRequest"},
		{"wrong trailing checksum", crc(wrong), func(b []byte) []byte { return b }, 400, "BadDigest"},
		{"tampered trailer", crc(good), func(b []byte) []byte {
			i := bytes.Index(b, []byte("x-amz-checksum-crc32c:"))
			return append(append(bytes.Clone(b[:i+22]), wrong...), b[i+22+len(wrong):]...)
		}, 403, "SignatureDoesNotMatch"},
		{"no trailer signature", crc(good), func(b []byte) []byte {
			i := bytes.Index(b, []byte("x-amz-trailer-signature"))
			return append(bytes.Clone(b[:i]), "\r\n"...)
		}, 403, "SignatureDoesNotMatch"},
	}
	for _, tc := range cases {
		r, enc := streamed(t, url, body, tc.trailer)
		if status, code := send(t, r, tc.mangle(enc)); status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}

	// Unsigned chunks with a trailing checksum (the AWS SDKs over TLS),
	// and checksums in headers.
	unsigned := func(sum string) string {
		return fmt.Sprintf("%x\r\n%s\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n", len(body), body, sum)
	}
	trailerHdr := http.Header{"X-Amz-Trailer": {"x-amz-checksum-crc32"}, "Content-Encoding": {"aws-chunked"},
		"X-Amz-Decoded-Content-Length": {fmt.Sprint(len(body))}}
	const unsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	for _, tc := range []struct {
		name, body, payload string
		hdr                 http.Header
		status              int
		code                string
	}{
		{"unsigned, wrong trailing checksum", unsigned(checksumOf("crc32", []byte("x"))), unsignedTrailer, trailerHdr, 400, "BadDigest"},
		{"unsigned, trailing checksum missing", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body), unsignedTrailer, trailerHdr, 400, "InvalidRequest"},
		{"unsigned, short", unsigned(checksumOf("crc32", body))[:1000], unsignedTrailer, trailerHdr, 400, "IncompleteBody"},
		{"unsigned, no decoded length", unsigned(checksumOf("crc32", body)), unsignedTrailer,
			http.Header{"X-Amz-Trailer": {"x-amz-checksum-crc32"}}, 411, "MissingContentLength"},
		{"unsigned, empty, wrong trailing checksum", "0\r\nx-amz-checksum-crc32:" + checksumOf("crc32", []byte("x")) + "\r\n\r\n", unsignedTrailer,
			http.Header{"X-Amz-Trailer": {"x-amz-checksum-crc32"}, "X-Amz-Decoded-Content-Length": {"0"}}, 400, "BadDigest"},
		{"trailer without a streaming payload", string(body), "UNSIGNED-PAYLOAD", trailerHdr, 400, "InvalidRequest"},
		{"wrong checksum header", string(body), "UNSIGNED-PAYLOAD",
			http.Header{"X-Amz-Checksum-Sha256": {checksumOf("sha256", []byte("x"))}}, 400, "BadDigest"},
		{"malformed checksum header", string(body), "UNSIGNED-PAYLOAD",
			http.Header{"X-Amz-Checksum-Crc32": {"not base64!"}}, 400, "InvalidRequest"},
		{"two checksum headers", string(body), "UNSIGNED-PAYLOAD",
			http.Header{"X-Amz-Checksum-Crc32": {checksumOf("crc32", body)}, "X-Amz-Checksum-Sha1": {checksumOf("sha1", body)}}, 400, "InvalidRequest"},
		{"algorithm named, no checksum", string(body), "UNSIGNED-PAYLOAD",
			http.Header{"X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}}, 400, "InvalidRequest"},
		{"SigV4a streaming", string(body), "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", nil, 501, "NotImplemented"},
	} {
		status, msg := signedPut(t, url, tc.body, tc.payload, tc.hdr)
		if status != tc.status || !strings.Contains(msg, "<Code>"+tc.code+"</Code>") {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, msg, tc.status, tc.code)
		}
	}
	// None of them wrote a version: the key is still deleted.
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("k")}); err == nil {
		t.Fatal("a refused PUT left the key live")
	}
	// The well-formed unsigned trailer goes through, and its checksum is kept.
	if status, msg := signedPut(t, url, unsigned(checksumOf("crc32", body)), unsignedTrailer, trailerHdr); status != http.StatusOK {
		t.Fatalf("unsigned trailer: %d %s", status, msg)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(head.ChecksumCRC32) != checksumOf("crc32", body) {
		t.Fatalf("after the unsigned trailer: %v, crc32 %q", err, aws.ToString(head.ChecksumCRC32))
	}
}

// TestTLSSetupErrors: a node given a certificate it cannot load, or half
// of the pair, does not start, and says which file.
func TestTLSSetupErrors(t *testing.T) {
	c := newTestCert(t)
	base := node.Config{
		Config: cluster.Config{DataDir: t.TempDir(), MetaPort: -1, PeerPort: -1, MetaClientPort: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NativePort: -1, HTTPPort: -1,
	}
	half := base
	half.TLSCertFile = c.certFile
	if _, err := node.Open(context.Background(), half); err == nil || !strings.Contains(err.Error(), "TLS certificate and its key") {
		t.Fatalf("a certificate without its key: %v", err)
	}
	missing := base
	missing.TLSCertFile, missing.TLSKeyFile = c.certFile, filepath.Join(t.TempDir(), "nosuch.pem")
	n, err := node.Open(context.Background(), missing)
	if err == nil {
		n.Close()
		t.Fatal("a missing key file: the node started")
	}
	if !strings.Contains(err.Error(), "nosuch.pem") {
		t.Fatalf("a missing key file: %v", err)
	}
}
