package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signature Version 4 (the AWS SigV4 specification, S3 flavour: the
// canonical URI is encoded once, and the payload hash is the
// x-amz-content-sha256 header).

const (
	sigAlgorithm    = "AWS4-HMAC-SHA256"
	amzDateFormat   = "20060102T150405Z"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	// maxSkew is how far a request's time may be from the server's.
	maxSkew = 15 * time.Minute
	// maxPresignExpiry is the longest a presigned URL may be valid (7 days).
	maxPresignExpiry = 7 * 24 * time.Hour
)

// Credentials finds the secret of an access key.
type Credentials interface {
	// Secret returns accessKey's secret key, or false if there is no such key.
	Secret(accessKey string) (secret string, ok bool)
}

// StaticCredentials is a fixed set of access key -> secret key.
type StaticCredentials map[string]string

// Secret implements Credentials.
func (c StaticCredentials) Secret(accessKey string) (string, bool) {
	s, ok := c[accessKey]
	return s, ok
}

// auth is what a verified signature establishes.
type auth struct {
	accessKey string
	// payload is the declared payload hash: a hex SHA-256, unsignedPayload,
	// or a STREAMING-* encoding.
	payload string
	// What a signed streaming body's chunks are signed with (chunked.go):
	// the signing key, the credential scope, the request time and the
	// request's own signature (the first chunk's "previous" signature).
	key        []byte
	sc         scope
	date, seed string
}

// scope is a parsed credential: AK/yyyymmdd/region/service/aws4_request.
type scope struct {
	accessKey, date, region, service string
}

func (s scope) String() string {
	return s.date + "/" + s.region + "/" + s.service + "/aws4_request"
}

func parseCredential(v string) (scope, *apiError) {
	p := strings.Split(v, "/")
	if len(p) != 5 || p[0] == "" || len(p[1]) != 8 || p[2] == "" || p[4] != "aws4_request" {
		return scope{}, errAuthHeaderMalformed.with("the credential " + strconv.Quote(v) + " is not ACCESSKEY/YYYYMMDD/REGION/s3/aws4_request")
	}
	if p[3] != "s3" {
		return scope{}, errAuthHeaderMalformed.with("the credential's service is " + strconv.Quote(p[3]) + ", not s3")
	}
	return scope{accessKey: p[0], date: p[1], region: p[2], service: p[3]}, nil
}

// authenticate verifies q's signature against the handler's credentials.
// A request that carries no signature at all is anonymous (an auth with
// no access key): only a bucket policy can allow it anything.
func (h *Handler) authenticate(q *request) (*auth, *apiError) {
	r := q.r
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "AWS ") {
		return h.authV2(q, a)
	}
	if r.Header.Get("Authorization") == "" && q.query.Has("Signature") && q.query.Has("AWSAccessKeyId") {
		return h.authV2(q, "")
	}
	if r.Header.Get("Authorization") == "" && !q.query.Has("X-Amz-Signature") && !q.query.Has("X-Amz-Credential") {
		return &auth{payload: unsignedPayload}, nil
	}
	return authenticate(r, q.query, h.cfg.Credentials, h.requestRegion(q), h.cfg.Now(), &h.keys)
}

// requestRegion is the region q's signature may be scoped to: the store's;
// or the bucket's own, for a bucket created with another location; or,
// for CreateBucket, any region (createBucket holds it to the location
// constraint in the body, which is read after the signature is checked).
func (h *Handler) requestRegion(q *request) string {
	cred := q.query.Get("X-Amz-Credential")
	if a := q.r.Header.Get("Authorization"); a != "" {
		_, rest, _ := strings.Cut(a, "Credential=")
		cred, _, _ = strings.Cut(rest, ",")
	}
	sc, e := parseCredential(strings.TrimSpace(cred))
	switch {
	case e != nil || sc.region == h.cfg.Region || q.bucket == "" || !validRegion(sc.region):
		return h.cfg.Region // authenticate says what is wrong, if anything
	case q.r.Method == http.MethodPut && q.key == "" && len(q.query) == 0, // CreateBucket
		h.bucketRegion(q.r.Context(), q.bucket) == sc.region:
		return sc.region
	}
	return h.cfg.Region
}

// authenticate verifies r's signature, in the Authorization header or in
// the query q (a presigned URL), against creds at time now, for region.
// keys caches signing keys; nil derives each one afresh.
func authenticate(r *http.Request, q url.Values, creds Credentials, region string, now time.Time, keys *keyCache) (*auth, *apiError) {
	if h := r.Header.Get("Authorization"); h != "" {
		return authHeader(r, q, h, creds, region, now, keys)
	}
	if q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") {
		return authQuery(r, q, creds, region, now, keys)
	}
	return nil, errAccessDenied.with("Anonymous access is not allowed: sign requests with an access key.")
}

// wrongRegion says why a credential scope's region is refused, or "".
func wrongRegion(sc scope, region string, q url.Values) string {
	if sc.region == region || sc.region == "us-east-1" && q.Has("location") {
		return ""
	}
	return "the region " + strconv.Quote(sc.region) + " is wrong; expecting " + strconv.Quote(region)
}

func authHeader(r *http.Request, q url.Values, h string, creds Credentials, region string, now time.Time, keys *keyCache) (*auth, *apiError) {
	rest, ok := strings.CutPrefix(h, sigAlgorithm+" ")
	if !ok {
		if strings.HasPrefix(h, "AWS ") {
			return nil, errInvalidRequest.with("Signature Version 2 is not supported: use AWS4-HMAC-SHA256.")
		}
		return nil, errAuthHeaderMalformed.with("the authorization header does not start with " + sigAlgorithm)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return nil, errAuthHeaderMalformed
		}
		fields[k] = v
	}
	cred, signed, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signed == "" || sig == "" {
		return nil, errAuthHeaderMalformed.with("the authorization header needs Credential, SignedHeaders and Signature")
	}
	sc, e := parseCredential(cred)
	if e != nil {
		return nil, e
	}
	if why := wrongRegion(sc, region, q); why != "" {
		return nil, errAuthHeaderMalformed.with("The authorization header is malformed; " + why + ".")
	}
	date := r.Header.Get("X-Amz-Date")
	if date == "" {
		return nil, errMissingSecurityHeader.with("Your request is missing the x-amz-date header.")
	}
	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return nil, errAccessDenied.with("x-amz-date " + strconv.Quote(date) + " is not in the form 20060102T150405Z.")
	}
	if d := now.Sub(t); d > maxSkew || d < -maxSkew {
		return nil, errTimeTooSkewed
	}
	if !strings.HasPrefix(date, sc.date) {
		return nil, errAuthHeaderMalformed.with("the credential's date " + sc.date + " is not the date of x-amz-date " + date)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return nil, errMissingSecurityHeader.with("Your request is missing the x-amz-content-sha256 header.")
	}
	if !validPayloadHash(payload) {
		return nil, errInvalidArgument.with("x-amz-content-sha256 must be a hex SHA-256, UNSIGNED-PAYLOAD or a STREAMING-* encoding.")
	}
	return verify(r, q, creds, keys, sc, date, signed, sig, payload, "")
}

func authQuery(r *http.Request, q url.Values, creds Credentials, region string, now time.Time, keys *keyCache) (*auth, *apiError) {
	if q.Get("X-Amz-Algorithm") != sigAlgorithm {
		return nil, errAuthHeaderMalformed.with("X-Amz-Algorithm must be " + sigAlgorithm)
	}
	sc, e := parseCredential(q.Get("X-Amz-Credential"))
	if e != nil {
		return nil, e
	}
	if why := wrongRegion(sc, region, q); why != "" {
		return nil, errAuthQueryMalformed.with("Error parsing the X-Amz-Credential parameter; " + why + ".")
	}
	date := q.Get("X-Amz-Date")
	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return nil, errAccessDenied.with("X-Amz-Date " + strconv.Quote(date) + " is not in the form 20060102T150405Z.")
	}
	if !strings.HasPrefix(date, sc.date) {
		return nil, errAuthHeaderMalformed.with("the credential's date is not the date of X-Amz-Date")
	}
	secs, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > maxPresignExpiry {
		return nil, errAuthHeaderMalformed.with("X-Amz-Expires must be a number of seconds from 1 to 604800")
	}
	if now.Before(t.Add(-maxSkew)) {
		return nil, errTimeTooSkewed
	}
	if now.After(t.Add(time.Duration(secs) * time.Second)) {
		return nil, errRequestExpired
	}
	signed, sig := q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature")
	if signed == "" || sig == "" {
		return nil, errAuthHeaderMalformed.with("a presigned URL needs X-Amz-SignedHeaders and X-Amz-Signature")
	}
	payload := unsignedPayload
	if p := q.Get("X-Amz-Content-Sha256"); p != "" {
		payload = p
	}
	return verify(r, q, creds, keys, sc, date, signed, sig, payload, "X-Amz-Signature")
}

// verify checks signature sig of r (query q without the parameter skip,
// the headers named in signed, the declared payload) with the secret of
// the credential's access key.
func verify(r *http.Request, q url.Values, creds Credentials, keys *keyCache, sc scope, date, signed, sig, payload, skip string) (*auth, *apiError) {
	secret, ok := creds.Secret(sc.accessKey)
	if !ok {
		return nil, errInvalidAccessKey
	}
	creq := canonicalRequest(r, q, strings.Split(signed, ";"), payload, skip)
	key := keys.get(secret, sc)
	if !hmac.Equal([]byte(sig), []byte(signature(key, sc, date, creq))) {
		return nil, errSignatureMismatch
	}
	return &auth{accessKey: sc.accessKey, payload: payload, key: key, sc: sc, date: date, seed: sig}, nil
}

func validPayloadHash(p string) bool {
	if p == unsignedPayload || strings.HasPrefix(p, "STREAMING-") {
		return true
	}
	if len(p) != 64 {
		return false
	}
	_, err := hex.DecodeString(p)
	return err == nil
}

// canonicalRequest builds SigV4's canonical request of r. skip names a
// query parameter left out (the signature itself, for presigned URLs).
func canonicalRequest(r *http.Request, q url.Values, signed []string, payload, skip string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	b.WriteString(uriEncode(path, false))
	b.WriteByte('\n')

	type pair struct{ k, v string }
	var ps []pair
	for k, vs := range q {
		if k == skip {
			continue
		}
		for _, v := range vs {
			ps = append(ps, pair{uriEncode(k, true), uriEncode(v, true)})
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].k != ps[j].k {
			return ps[i].k < ps[j].k
		}
		return ps[i].v < ps[j].v
	})
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	b.WriteByte('\n')

	for _, h := range signed {
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(headerValue(r, h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payload)
	return b.String()
}

// headerValue is the canonical value of header name (lower case) of r:
// values joined by commas, each trimmed, inner runs of spaces collapsed.
func headerValue(r *http.Request, name string) string {
	var vs []string
	switch name {
	case "host":
		vs = []string{r.Host}
	case "content-length":
		if v := r.Header.Values("Content-Length"); len(v) > 0 {
			vs = v
		} else if r.ContentLength >= 0 {
			vs = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	case "transfer-encoding":
		vs = r.TransferEncoding
	default:
		vs = r.Header.Values(name)
	}
	if len(vs) == 1 && !needsFolding(vs[0]) {
		return vs[0]
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// needsFolding reports whether v has leading or trailing white space, or
// anything but single spaces inside: whether canonicalising changes it.
func needsFolding(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ' ':
			if i == 0 || i == len(v)-1 || v[i+1] == ' ' {
				return true
			}
		case c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c >= 0x80:
			return true
		}
	}
	return false
}

// signature is the hex signature of the canonical request creq, with the
// signing key of the credential scope.
func signature(key []byte, sc scope, date, creq string) string {
	return hex.EncodeToString(hmacSHA256(key, stringToSign(sc, date, sha256Hex([]byte(creq)))))
}

func stringToSign(sc scope, date, hashed string) string {
	return sigAlgorithm + "\n" + date + "\n" + sc.String() + "\n" + hashed
}

// keyCache keeps derived signing keys. A key depends on the secret and
// the credential scope, whose date changes once a day, so nearly every
// request of a client reuses the key of its previous one instead of four
// HMAC-SHA256 derivations.
type keyCache struct {
	mu sync.Mutex
	m  map[keyCacheKey][]byte
}

type keyCacheKey struct {
	secret string
	sc     scope
}

// maxCachedKeys bounds the cache; it is emptied when full (a day's keys
// for this many access keys).
const maxCachedKeys = 4096

// get returns the signing key of secret for sc. The key's bytes are
// shared: callers must not change them.
func (c *keyCache) get(secret string, sc scope) []byte {
	if c == nil {
		return signingKey(secret, sc)
	}
	k := keyCacheKey{secret, sc}
	c.mu.Lock()
	key, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return key
	}
	key = signingKey(secret, sc)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = make(map[keyCacheKey][]byte)
	}
	c.m[k] = key
	c.mu.Unlock()
	return key
}

func signingKey(secret string, sc scope) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), sc.date)
	k = hmacSHA256(k, sc.region)
	k = hmacSHA256(k, sc.service)
	return hmacSHA256(k, "aws4_request")
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// uriEncode is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~
// (and '/' unless encodeSlash) as %XX.
func uriEncode(s string, encodeSlash bool) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}

// newHashCheck returns a hashCheck of size bytes of r, or with fail if
// the body is empty and want is not the digest of nothing (no read would
// come to check it).
func newHashCheck(r io.Reader, h hash.Hash, want []byte, size int64, fail *apiError, fault *bodyFault) (*hashCheck, *apiError) {
	c := &hashCheck{r: r, h: h, want: want, left: size, fail: fail, fault: fault}
	if size == 0 && !hmac.Equal(h.Sum(nil), want) {
		return c, fault.set(fail)
	}
	return c, nil
}

// hashCheck passes a body through and checks its size bytes against a
// digest. The read that would complete the body is checked before its
// bytes are handed on, and on a mismatch they are not: the reader sees a
// short body and the error (io.ReadFull drops an error that comes with
// the last bytes), so the upload fails before it is committed.
type hashCheck struct {
	r     io.Reader
	h     hash.Hash
	want  []byte
	left  int64
	fail  *apiError
	fault *bodyFault // where a mismatch is reported
}

func (c *hashCheck) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.left -= int64(n)
	if c.left == 0 && !hmac.Equal(c.h.Sum(nil), c.want) {
		return 0, c.fault.set(c.fail)
	}
	if err == io.EOF && c.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// Authenticate verifies r's SigV4 signature, in its header or its query
// (a presigned URL), and returns its access key: the check other HTTP
// endpoints on the same port (/_cairn/...) share with the S3 API. The
// request's payload is not read.
//
// Unlike S3, a request without a body need not send x-amz-content-sha256:
// its payload hash is that of nothing, as generic SigV4 clients (curl
// --aws-sigv4) sign it.
func (h *Handler) Authenticate(r *http.Request) (string, error) {
	if r.Header.Get("X-Amz-Content-Sha256") == "" && r.ContentLength <= 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	}
	a, e := authenticate(r, r.URL.Query(), h.cfg.Credentials, h.cfg.Region, h.cfg.Now(), &h.keys)
	if e != nil {
		return "", e
	}
	return a.accessKey, nil
}

// WriteError answers an HTTP request with an S3-style XML error of the
// given code and status.
func WriteError(w http.ResponseWriter, r *http.Request, code string, status int, msg string) {
	writeError(w, r, &apiError{Code: code, Status: status, Message: msg})
}
