package s3

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/sse"
)

// Server-side encryption (package sse has the envelope).
//
// A version written with SSE-S3 (x-amz-server-side-encryption: AES256),
// SSE-KMS (aws:kms, with a key of the cluster's KMS) or SSE-C (the
// customer's key in x-amz-server-side-encryption-customer-*), or into a
// bucket whose default encryption says so, is stored encrypted under a
// data key of its own. What it takes to open that key is kept in the
// version's headers under sse* names, never sent to clients:
//
//	cairn-sse          AES256, aws:kms or SSE-C
//	cairn-sse-key      the data key, wrapped (base64)
//	cairn-sse-kms-key  the KMS key id (aws:kms)
//	cairn-sse-segments the body's segments: one, or one per part
//
// SSE-S3 wraps under the cluster's own SSE-S3 key, a KMS key that no
// client names; SSE-KMS under the named key; SSE-C under the customer's
// key, which is never stored, so a read must bring it again. An
// encrypted version's ETag is its plaintext's MD5, as an unencrypted
// one's: clients compare it with the Content-MD5 they sent, and a part
// uploaded again has the ETag it had. It tells whoever may read the
// version's metadata whether its content equals a content they know.

const (
	sseHeader         = object.EncryptedHeader
	sseKeyHeader      = "cairn-sse-key"
	sseKMSKeyHeader   = "cairn-sse-kms-key"
	sseSegmentsHeader = "cairn-sse-segments"

	sseS3  = "AES256"
	sseKMS = "aws:kms"
	sseC   = "SSE-C"

	hdrSSE       = "X-Amz-Server-Side-Encryption"
	hdrSSEKMSKey = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	// The SSE-C headers, after "X-Amz-" on the object's own and after
	// "X-Amz-Copy-Source-" on a copy's source.
	hdrSSECAlg    = "Server-Side-Encryption-Customer-Algorithm"
	hdrSSECKey    = "Server-Side-Encryption-Customer-Key"
	hdrSSECKeyMD5 = "Server-Side-Encryption-Customer-Key-Md5"
	ownSSEC       = "X-Amz-"
	copySourceSSE = "X-Amz-Copy-Source-"
)

// KMS gives the S3 API its key encryption keys. Without one in Config,
// SSE-S3 and SSE-KMS requests are refused.
type KMS interface {
	// KMSKey returns the material (32 bytes) of the KMS key id, or an
	// error wrapping ErrNoSuchKMSKey.
	KMSKey(ctx context.Context, id string) ([]byte, error)
	// ServerKey returns the material of the key SSE-S3 wraps under,
	// making it the first time.
	ServerKey(ctx context.Context) ([]byte, error)
}

// ErrNoSuchKMSKey is the error of a KMS key id that names no key.
var ErrNoSuchKMSKey = errors.New("s3: no such KMS key")

var (
	errSSEArgument   = errInvalidArgument.with("The encryption method specified is not supported: x-amz-server-side-encryption takes AES256 or aws:kms.")
	errSSENeedsKey   = &apiError{"InvalidRequest", http.StatusBadRequest, "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object."}
	errSSEWrongKey   = &apiError{"InvalidRequest", http.StatusBadRequest, "The provided customer key does not open this object: it was encrypted with another key."}
	errSSENotForThis = &apiError{"InvalidRequest", http.StatusBadRequest, "The encryption parameters are not applicable to this object."}
	errNoKMS         = errNotImplemented.with("Server-side encryption with server-managed keys needs the cluster's KMS, which this server does not have.")
)

// encryption is what a write asks to be encrypted with, or what opens a
// stored version.
type encryption struct {
	alg    string // sseS3, sseKMS, sseC
	kmsKey string
	// customer is the SSE-C key and keyMD5 its MD5 as the client sent it.
	customer []byte
	keyMD5   string
}

// customerKey parses an SSE-C key given in the headers with prefix
// (ownSSEC or copySourceSSE). It returns nil if none is given.
func customerKey(hd http.Header, prefix string) (*encryption, *apiError) {
	alg, key, sum := hd.Get(prefix+hdrSSECAlg), hd.Get(prefix+hdrSSECKey), hd.Get(prefix+hdrSSECKeyMD5)
	if alg == "" && key == "" && sum == "" {
		return nil, nil
	}
	switch {
	case alg == "":
		return nil, errInvalidArgument.with("Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.")
	case alg != "AES256":
		return nil, errInvalidArgument.with("The encryption algorithm " + alg + " is not supported: SSE-C takes AES256.")
	case key == "":
		return nil, errInvalidArgument.with("Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.")
	case sum == "":
		return nil, errInvalidArgument.with("Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.")
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) != sse.KeySize {
		return nil, errInvalidArgument.with("The secret key was invalid for the specified algorithm: SSE-C takes a 256-bit key, base64-encoded.")
	}
	m := md5.Sum(k)
	if base64.StdEncoding.EncodeToString(m[:]) != sum {
		return nil, errInvalidArgument.with("The calculated MD5 hash of the key did not match the hash that was provided.")
	}
	return &encryption{alg: sseC, customer: k, keyMD5: sum}, nil
}

// requestedEncryption is the encryption a write's headers ask for, or
// the bucket's default, or nil.
func (h *Handler) requestedEncryption(q *request) (*encryption, *apiError) {
	hd := q.r.Header
	c, e := customerKey(hd, ownSSEC)
	if e != nil {
		return nil, e
	}
	alg, kmsKey := hd.Get(hdrSSE), hd.Get(hdrSSEKMSKey)
	switch {
	case c != nil && (alg != "" || kmsKey != ""):
		return nil, errInvalidArgument.with("Server Side Encryption with Customer provided key is incompatible with the encryption method specified.")
	case c != nil:
		return c, nil
	case alg == "" && kmsKey != "":
		return nil, errInvalidArgument.with("x-amz-server-side-encryption-aws-kms-key-id is only valid with x-amz-server-side-encryption: aws:kms.")
	case alg == sseS3 && kmsKey != "":
		return nil, errInvalidArgument.with("x-amz-server-side-encryption-aws-kms-key-id is only valid with x-amz-server-side-encryption: aws:kms, not AES256.")
	case alg == sseS3:
		return &encryption{alg: sseS3}, nil
	case alg == sseKMS:
		if kmsKey == "" {
			return nil, errInvalidArgument.with("SSE-KMS needs a key: name one in x-amz-server-side-encryption-aws-kms-key-id (make one with cairn kms key create).")
		}
		return &encryption{alg: sseKMS, kmsKey: kmsKey}, nil
	case alg != "":
		return nil, errSSEArgument
	}
	def, e := h.defaultEncryption(q.r.Context(), q.bucket)
	if e != nil {
		return nil, e
	}
	return def, nil
}

// sealing is a data key being written with, and how it is stored.
type sealing struct {
	enc     *encryption
	dk      []byte
	wrapped string // base64
}

// kek returns the key that wraps data keys for enc, and the additional
// data the wrap is bound to.
func (h *Handler) kek(ctx context.Context, enc *encryption) ([]byte, []byte, *apiError) {
	switch enc.alg {
	case sseC:
		return enc.customer, []byte("cairn-sse-c"), nil
	case sseS3, sseKMS:
		if h.cfg.KMS == nil {
			return nil, nil, errNoKMS
		}
		var k []byte
		var err error
		if enc.alg == sseS3 {
			k, err = h.cfg.KMS.ServerKey(ctx)
		} else {
			k, err = h.cfg.KMS.KMSKey(ctx, enc.kmsKey)
		}
		switch {
		case errors.Is(err, ErrNoSuchKMSKey):
			return nil, nil, &apiError{"KMS.NotFoundException", http.StatusBadRequest, "The KMS key " + enc.kmsKey + " does not exist: make it with cairn kms key create."}
		case err != nil:
			return nil, nil, fromService(err)
		}
		return k, []byte("cairn-sse-" + enc.alg + "/" + enc.kmsKey), nil
	}
	return nil, nil, errSSEArgument
}

// newSealing makes a fresh data key for a write with enc.
func (h *Handler) newSealing(ctx context.Context, enc *encryption) (*sealing, *apiError) {
	kek, ad, e := h.kek(ctx, enc)
	if e != nil {
		return nil, e
	}
	dk := sse.NewKey()
	w, err := sse.Wrap(kek, dk, ad)
	if err != nil {
		return nil, errInternal
	}
	return &sealing{enc: enc, dk: dk, wrapped: base64.StdEncoding.EncodeToString(w)}, nil
}

// record writes the sealing's headers into hd.
func (s *sealing) record(hd map[string]string) {
	hd[sseHeader] = s.enc.alg
	hd[sseKeyHeader] = s.wrapped
	if s.enc.kmsKey != "" {
		hd[sseKMSKeyHeader] = s.enc.kmsKey
	}
}

// encryptBody wraps a write's body: the bytes are encrypted as one
// segment, recorded in req.Headers; the version's ETag is the
// plaintext's MD5, set when the body ends.
func (s *sealing) encryptBody(req *object.PutRequest, body io.Reader) io.Reader {
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	s.record(req.Headers)
	nonce := sse.NewNonce()
	req.Headers[sseSegmentsHeader] = sse.EncodeSegments([]sse.Segment{{Nonce: nonce, Size: req.Size}})
	body = &hashTail{r: body, h: md5.New(), end: func(sum []byte) error { req.ETag = hex.EncodeToString(sum); return nil }}
	req.CallerETag = true // the plaintext's MD5, not the ciphertext's
	r, _ := sse.Encrypt(body, s.dk, nonce)
	return r
}

// hashTail hashes what it reads and, at the end, hands the sum to end;
// an error from end fails the read (and with it the write).
type hashTail struct {
	r   io.Reader
	h   hash.Hash
	end func(sum []byte) error
}

func (t *hashTail) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.h.Write(p[:n])
	if err == io.EOF {
		if e := t.end(t.h.Sum(nil)); e != nil {
			return n, e
		}
	}
	return n, err
}

// storedEncryption returns how a stored version is encrypted, or nil.
func storedEncryption(hd map[string]string) *encryption {
	switch a := hd[sseHeader]; a {
	case sseS3, sseKMS, sseC:
		return &encryption{alg: a, kmsKey: hd[sseKMSKeyHeader]}
	}
	return nil
}

// opening returns the data key of a stored version (nil if it is not
// encrypted), given the request's SSE-C headers under prefix (ownSSEC,
// or copySourceSSE for a copy's source): an SSE-C version needs its key,
// and a key given for any other is an error.
func (h *Handler) opening(ctx context.Context, stored map[string]string, hd http.Header, prefix string) ([]byte, *encryption, *apiError) {
	c, e := customerKey(hd, prefix)
	if e != nil {
		return nil, nil, e
	}
	enc := storedEncryption(stored)
	switch {
	case enc == nil && c != nil:
		return nil, nil, errSSENotForThis
	case enc == nil:
		return nil, nil, nil
	case enc.alg == sseC && c == nil:
		return nil, nil, errSSENeedsKey
	case enc.alg != sseC && c != nil:
		return nil, nil, errSSENotForThis
	case enc.alg == sseC:
		enc = c
	}
	kek, ad, e := h.kek(ctx, enc)
	if e != nil {
		return nil, nil, e
	}
	w, err := base64.StdEncoding.DecodeString(stored[sseKeyHeader])
	if err != nil {
		return nil, nil, errInternal
	}
	dk, err := sse.Unwrap(kek, w, ad)
	switch {
	case err != nil && enc.alg == sseC:
		return nil, nil, errSSEWrongKey
	case err != nil:
		return nil, nil, errInternal
	}
	return dk, enc, nil
}

// decryptBody returns the plaintext of a stored version's bytes from
// offset off on, which rc yields.
func decryptBody(rc io.ReadCloser, stored map[string]string, dk []byte, off int64) (io.ReadCloser, error) {
	segs, err := sse.ParseSegments(stored[sseSegmentsHeader])
	if err != nil {
		return nil, err
	}
	r, err := sse.Decrypt(rc, dk, segs, off)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{r, rc}, nil
}

// setEncryptionHeaders tells the client how a version is encrypted.
func setEncryptionHeaders(hd http.Header, enc *encryption) {
	switch {
	case enc == nil:
	case enc.alg == sseC:
		hd.Set(ownSSEC+hdrSSECAlg, "AES256")
		if enc.keyMD5 != "" {
			hd.Set(ownSSEC+hdrSSECKeyMD5, enc.keyMD5)
		}
	default:
		hd.Set(hdrSSE, enc.alg)
		if enc.kmsKey != "" {
			hd.Set(hdrSSEKMSKey, enc.kmsKey)
		}
	}
}

// dropSSEHeaders removes a version's encryption headers from hd (a copy
// is encrypted as its own request says, not as its source).
func dropSSEHeaders(hd map[string]string) {
	for _, k := range []string{sseHeader, sseKeyHeader, sseKMSKeyHeader, sseSegmentsHeader} {
		delete(hd, k)
	}
}

// readDeclaresSSE reports whether a read carries the headers that only a
// write may (S3 refuses them on GET and HEAD).
func readDeclaresSSE(hd http.Header) bool {
	return hd.Get(hdrSSE) != "" || hd.Get(hdrSSEKMSKey) != ""
}

// Bucket default encryption (PUT ?encryption).

const encryptionConfig = "encryption"

type sseRule struct {
	Algorithm string `xml:"ApplyServerSideEncryptionByDefault>SSEAlgorithm"`
	KMSKey    string `xml:"ApplyServerSideEncryptionByDefault>KMSMasterKeyID,omitempty"`
	BucketKey *bool  `xml:"BucketKeyEnabled,omitempty"`
}

type sseConfiguration struct {
	XMLName xml.Name  `xml:"ServerSideEncryptionConfiguration"`
	NS      string    `xml:"xmlns,attr,omitempty"`
	Rules   []sseRule `xml:"Rule"`
}

var errNoEncryptionConfig = &apiError{"ServerSideEncryptionConfigurationNotFoundError", http.StatusNotFound, "The server side encryption configuration was not found."}

// bucketEncryption serves GET, PUT and DELETE ?encryption.
func (h *Handler) bucketEncryption(q *request) {
	h.configDoc(q, encryptionConfig, errNoEncryptionConfig, func(body []byte) ([]byte, *apiError) {
		var c sseConfiguration
		if err := xml.Unmarshal(body, &c); err != nil || len(c.Rules) != 1 {
			return nil, errMalformedXML.with("A ServerSideEncryptionConfiguration has exactly one Rule.")
		}
		r := &c.Rules[0]
		switch {
		case r.Algorithm == sseS3 && r.KMSKey != "":
			return nil, errInvalidArgument.with("KMSMasterKeyID is only valid with SSEAlgorithm aws:kms.")
		case r.Algorithm == sseKMS && r.KMSKey == "":
			return nil, errInvalidArgument.with("SSEAlgorithm aws:kms needs a KMSMasterKeyID (make one with cairn kms key create).")
		case r.Algorithm != sseS3 && r.Algorithm != sseKMS:
			return nil, errInvalidArgument.with("SSEAlgorithm must be AES256 or aws:kms.")
		}
		if h.cfg.KMS == nil {
			return nil, errNoKMS
		}
		c.NS = s3NS
		out, _ := xml.Marshal(c)
		return out, nil
	})
}

// defaultEncryption is the bucket's default encryption, or nil.
func (h *Handler) defaultEncryption(ctx context.Context, bucket string) (*encryption, *apiError) {
	doc, err := h.config(ctx, bucket, encryptionConfig)
	if err != nil {
		return nil, fromService(err)
	}
	if doc == nil {
		return nil, nil
	}
	var c sseConfiguration
	if err := xml.Unmarshal(doc, &c); err != nil || len(c.Rules) != 1 {
		return nil, errInternal
	}
	return &encryption{alg: c.Rules[0].Algorithm, kmsKey: strings.TrimSpace(c.Rules[0].KMSKey)}, nil
}

// writeSealing is the data key a write of the request's object is to be
// encrypted with, or nil.
func (h *Handler) writeSealing(q *request) (*sealing, *apiError) {
	enc, e := h.requestedEncryption(q)
	if enc == nil || e != nil {
		return nil, e
	}
	return h.newSealing(q.r.Context(), enc)
}
