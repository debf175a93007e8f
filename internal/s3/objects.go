package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

const metaPrefix = "x-amz-meta-"

func (h *Handler) objectOp(q *request) {
	r := q.r
	query := q.query
	if query.Has("uploadId") || query.Has("uploads") {
		h.uploadOp(q)
		return
	}
	allowed := []string{}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		allowed = append(allowed, "partNumber")
	}
	if query.Has("tagging") {
		h.objectTagging(q)
		return
	}
	if query.Has("acl") {
		h.objectACLOp(q)
		return
	}
	if query.Has("retention") || query.Has("legal-hold") {
		h.objectLockOp(q)
		return
	}
	if query.Has("attributes") && r.Method == http.MethodGet {
		h.getObjectAttributes(q)
		return
	}
	if s := unsupportedQuery(q, allowed...); s != "" {
		notImplemented(q, r.Method+" ?"+s)
		return
	}
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			h.copyObject(q)
			return
		}
		h.putObject(q)
	case http.MethodGet, http.MethodHead:
		h.getObject(q)
	case http.MethodDelete:
		h.deleteObject(q)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// uploadOp routes the multipart upload calls on an object.
func (h *Handler) uploadOp(q *request) {
	r := q.r
	query := q.query
	switch {
	case r.Method == http.MethodPost && query.Has("uploads"):
		h.createUpload(q)
	case r.Method == http.MethodPost:
		h.completeUpload(q)
	case r.Method == http.MethodPut && query.Has("partNumber"):
		h.uploadPart(q)
	case r.Method == http.MethodDelete:
		h.abortUpload(q)
	case r.Method == http.MethodGet:
		h.listParts(q)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// version resolves the versionId query parameter (0: none given).
func (h *Handler) version(q *request) (uint64, *apiError) {
	return h.parseVersionID(q.r.Context(), q.bucket, q.key, q.query.Get("versionId"))
}

func (h *Handler) putObject(q *request) {
	r := q.r
	req, e := objectRequest(q, q.key)
	if e != nil {
		q.fail(e)
		return
	}
	if !h.writeConditions(q, req) {
		return
	}
	seal, e := h.writeSealing(q)
	if e != nil {
		q.fail(e)
		return
	}
	a, e := h.ownObject(q, req)
	if e != nil {
		q.fail(e)
		return
	}
	lock, e := h.writeLock(q)
	if e != nil {
		q.fail(e)
		return
	}
	if e := h.markNull(q, req); e != nil {
		q.fail(e)
		return
	}
	lock.stamp(req)
	info, ok := h.store(r.Context(), q, req, seal)
	if !ok {
		return
	}
	if a != nil && !h.keepObjectACL(q, info, a) {
		return
	}
	if lock != nil {
		if err := h.saveLock(r.Context(), q.bucket, q.key, info.Version, lock); err != nil {
			h.serviceError(q, err)
			return
		}
	}
	w := q.w.Header()
	w.Set("ETag", `"`+info.ETag+`"`)
	h.setVersionID(q.r.Context(), w, q.bucket, &info)
	setChecksumHeaders(w, info.Headers)
	if seal != nil {
		setEncryptionHeaders(w, seal.enc)
	}
	q.w.WriteHeader(http.StatusOK)
}

// objectRequest is a write of key with what the request's headers say of
// the object: its content type (S3's default when none), x-amz-meta-*,
// the content headers S3 keeps, and x-amz-tagging.
func objectRequest(q *request, key string) (*object.PutRequest, *apiError) {
	h := q.r.Header
	req := &object.PutRequest{Space: q.bucket, Key: key, ContentType: h.Get("Content-Type"), Meta: userMeta(h), Headers: contentHeaders(h)}
	if req.ContentType == "" {
		req.ContentType = "binary/octet-stream"
	}
	if e := checkStorageClass(h); e != nil {
		return nil, e
	}
	var e *apiError
	req.Tags, e = headerTags(h)
	return req, e
}

// storageClasses are the classes S3 names. Cairn keeps every object one
// way (the space's copies and placement say how): any of them is taken,
// and objects are reported STANDARD.
var storageClasses = []string{"STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
	"GLACIER", "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE"}

// checkStorageClass refuses an x-amz-storage-class S3 does not know.
func checkStorageClass(h http.Header) *apiError {
	if c := h.Get("X-Amz-Storage-Class"); c != "" && !slices.Contains(storageClasses, c) {
		return &apiError{"InvalidStorageClass", http.StatusBadRequest, "The storage class you specified is not valid: " + strings.Join(storageClasses, ", ") + "."}
	}
	return nil
}

// writeConditions turns a write's If-None-Match: * (create only),
// If-Match: ETag (replace only that version) and If-None-Match: ETag
// (write unless the current version has that ETag) into the service's
// preconditions, which hold atomically with the write: an ETag condition
// names the version it was checked against now, so a write that lands in
// between fails the PUT with 412 as a mismatch would. It answers a
// failure itself: 412, or NoSuchKey for If-Match on a missing key.
func (h *Handler) writeConditions(q *request, req *object.PutRequest) bool {
	im, inm := q.r.Header.Get("If-Match"), q.r.Header.Get("If-None-Match")
	if inm == "*" {
		req.IfNoneMatch = true
		inm = ""
	}
	if im == "" && inm == "" {
		return true
	}
	info, err := h.cfg.Service.Stat(q.r.Context(), &object.GetRequest{Space: req.Space, Key: req.Key, Length: -1})
	switch {
	case err != nil && im == "" && object.KindOf(err) == object.NotFound:
		req.IfNoneMatch = true // no version has the ETag; none may appear meanwhile
		return true
	case err != nil:
		h.serviceError(q, err) // a missing key is NoSuchKey, as S3 answers
		return false
	}
	if im != "" && checkConditions(&http.Request{Header: http.Header{"If-Match": {im}}}, info) != nil ||
		inm != "" && checkConditions(&http.Request{Method: http.MethodGet, Header: http.Header{"If-None-Match": {inm}}}, info) != nil {
		q.fail(errPreconditionFailed)
		return false
	}
	req.IfMatch = info.Version
	return true
}

// store writes req with the request's body, read through putBody's
// checks, and encrypted with seal if it is not nil. It answers a failure
// itself: a failed check with its own S3 error, not the service's
// account of the short body.
func (h *Handler) store(ctx context.Context, q *request, req *object.PutRequest, seal *sealing) (object.Info, bool) {
	body, fault, e := putBody(q, req)
	if e != nil {
		q.fail(e)
		return object.Info{}, false
	}
	if seal != nil {
		body = seal.encryptBody(req, body)
	}
	info, err := h.cfg.Service.Put(ctx, req, body)
	switch {
	case err != nil && fault.e != nil:
		q.fail(fault.e)
	case err != nil:
		h.serviceError(q, err)
	}
	return info, err == nil
}

// putBody sets up the reading of a PUT's body: its decoding (aws-chunked
// for the STREAMING-* payloads) and every check the request asks for (the
// signed SHA-256, Content-MD5, an x-amz-checksum-* header or trailer). It
// sets req.Size, and records the verified checksum in req.Headers (a
// trailing one once the body is read: Put takes Headers after the body).
// The readers report a failed check in the returned fault.
func putBody(q *request, req *object.PutRequest) (io.Reader, *bodyFault, *apiError) {
	r, payload := q.r, q.auth.payload
	fault := &bodyFault{}
	signed, trailer, chunked := streaming(payload)
	if strings.HasPrefix(payload, "STREAMING-") && !chunked {
		return nil, nil, errNotImplemented.with("The payload encoding " + payload + " is not implemented.")
	}
	size := r.ContentLength
	if chunked {
		d := r.Header.Get("X-Amz-Decoded-Content-Length")
		n, err := strconv.ParseInt(d, 10, 64)
		if d == "" || err != nil || n < 0 {
			return nil, nil, errMissingContentLength.with("A " + payload + " body needs x-amz-decoded-content-length, the length of its data.")
		}
		size = n
	}
	if size < 0 {
		return nil, nil, errMissingContentLength
	}
	req.Size = size
	sum, hasSum, e := parseChecksum(r.Header, trailer)
	if e != nil {
		return nil, nil, e
	}
	var body io.Reader = r.Body
	check := func(h hash.Hash, want []byte, fail *apiError) *apiError {
		c, e := newHashCheck(body, h, want, size, fail, fault)
		body = c
		return e
	}
	switch {
	case chunked:
		var a *auth
		if signed {
			a = q.auth
		}
		var ts *checksumRequest
		if hasSum && sum.trailer {
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			ts = &sum
		}
		c, e := newChunkedReader(body, size, a, trailer, ts, req.Headers, fault)
		if e != nil {
			return nil, nil, e
		}
		body = c
	case payload != unsignedPayload:
		want, _ := hex.DecodeString(payload)
		if e := check(sha256.New(), want, errContentSHA256Mismatch); e != nil {
			return nil, nil, e
		}
	}
	if s := r.Header.Get("Content-MD5"); s != "" {
		want, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(want) != md5.Size {
			return nil, nil, errInvalidDigest
		}
		if e := check(md5.New(), want, errBadDigest); e != nil {
			return nil, nil, e
		}
	}
	if hasSum && !sum.trailer {
		if e := check(sum.alg.new(), sum.want, sum.alg.mismatch()); e != nil {
			return nil, nil, e
		}
		if req.Headers == nil {
			req.Headers = map[string]string{}
		}
		req.Headers[sum.alg.header()] = base64.StdEncoding.EncodeToString(sum.want)
	}
	return body, fault, nil
}

// contentHeaderNames are the standard headers S3 keeps with an object.
var contentHeaderNames = []string{"cache-control", "content-disposition", "content-encoding", "content-language", "expires"}

// overridable are the headers a GET's response-* parameters set.
var overridable = append([]string{"content-type"}, contentHeaderNames...)

// contentHeaders collects the content headers to keep with a version
// (Content-Encoding without the aws-chunked transfer coding).
func contentHeaders(h http.Header) map[string]string {
	var m map[string]string
	for _, name := range contentHeaderNames {
		v := h.Get(name)
		if name == "content-encoding" {
			// Kept as sent ("deflate, gzip"), the transfer coding taken out.
			var keep []string
			chunked := false
			for _, c := range strings.Split(v, ",") {
				switch c = strings.TrimSpace(c); {
				case strings.EqualFold(c, "aws-chunked"):
					chunked = true
				case c != "":
					keep = append(keep, c)
				}
			}
			if chunked {
				v = strings.Join(keep, ", ")
			}
		}
		if v == "" {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[name] = v
	}
	return m
}

// setChecksumHeaders sets the stored checksums of a version, and their
// type: a completed multipart upload's may be COMPOSITE (mpchecksum.go).
func setChecksumHeaders(hd http.Header, stored map[string]string) {
	for k, v := range stored {
		if strings.HasPrefix(k, checksumPrefix) {
			hd[http.CanonicalHeaderKey(k)] = []string{v}
			typ := stored[checksumTypeHeader]
			if typ == "" {
				typ = checksumFullObject
			}
			hd.Set("x-amz-checksum-type", typ)
		}
	}
}

// userMeta collects the x-amz-meta-* headers, by their names in lower
// case without the prefix.
func userMeta(h http.Header) map[string]string {
	var m map[string]string
	for k, vs := range h {
		lk := strings.ToLower(k)
		if name, ok := strings.CutPrefix(lk, metaPrefix); ok && name != "" {
			if m == nil {
				m = map[string]string{}
			}
			m[name] = strings.Join(vs, ",")
		}
	}
	return m
}

// byteRange is a parsed Range header: start and end inclusive, or the last
// suffix bytes.
type byteRange struct {
	start, end int64 // end -1: to the end
	suffix     int64 // > 0: the last suffix bytes
}

// parseRange parses "bytes=a-b", "bytes=a-" or "bytes=-n". ok false means
// the header is absent or not understood, which S3 treats as absent.
func parseRange(s string) (byteRange, bool) {
	spec, found := strings.CutPrefix(s, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return byteRange{}, false
		}
		return byteRange{suffix: n, end: -1}, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return byteRange{}, false
	}
	if b == "" {
		return byteRange{start: start, end: -1}, true
	}
	end, err := strconv.ParseInt(b, 10, 64)
	if err != nil || end < start {
		return byteRange{}, false
	}
	return byteRange{start: start, end: end}, true
}

// resolve fits the range to an object of size bytes: offset and length,
// or false if it is not satisfiable.
func (br byteRange) resolve(size int64) (off, n int64, ok bool) {
	if br.suffix > 0 {
		n = min(br.suffix, size)
		return size - n, n, size > 0
	}
	if br.start >= size {
		return 0, 0, false
	}
	end := size - 1
	if br.end >= 0 && br.end < end {
		end = br.end
	}
	return br.start, end - br.start + 1, true
}

// checkConditions evaluates the conditional headers of a GET or HEAD
// against the version info (RFC 9110 §13.2.2 order, as S3 does).
func checkConditions(r *http.Request, info object.Info) *apiError {
	etag := `"` + info.ETag + `"`
	mod := time.Unix(0, info.Modified).Truncate(time.Second)
	matches := func(list string) bool {
		for _, t := range strings.Split(list, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || t == etag || `"`+t+`"` == etag {
				return true
			}
		}
		return false
	}
	im, inm := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	if im != "" && !matches(im) {
		return errPreconditionFailed
	}
	if im == "" {
		if t, err := http.ParseTime(r.Header.Get("If-Unmodified-Since")); err == nil && mod.After(t) {
			return errPreconditionFailed
		}
	}
	if inm != "" && matches(inm) {
		return errNotModified
	}
	if inm == "" {
		if t, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !mod.After(t) {
			return errNotModified
		}
	}
	return nil
}

func (h *Handler) getObject(q *request) {
	r := q.r
	if readDeclaresSSE(r.Header) {
		q.fail(errInvalidArgument.with("x-amz-server-side-encryption is for writes: a read of an object encrypted with SSE-S3 or SSE-KMS needs no header."))
		return
	}
	v, e := h.version(q)
	if e != nil {
		q.fail(e)
		return
	}
	ctx := r.Context()
	req := &object.GetRequest{Space: q.bucket, Key: q.key, Version: v, Length: -1}
	br, ranged := parseRange(r.Header.Get("Range"))
	part := 0
	if s := q.query.Get("partNumber"); s != "" {
		if part, e = parsePartNumber(s); e != nil {
			q.fail(e)
			return
		}
		if ranged {
			q.fail(errInvalidRequest.with("Cannot specify both Range header and partNumber query parameter."))
			return
		}
	}
	// A whole-object GET opens the body in the same lookup; HEAD and
	// ranged GETs need the size (and the conditions) first.
	var info object.Info
	var rc io.ReadCloser
	var err error
	if r.Method == http.MethodGet && !ranged && part == 0 {
		info, rc, err = h.cfg.Service.Get(ctx, req)
	} else {
		info, err = h.cfg.Service.Stat(ctx, req)
	}
	if err != nil {
		h.objectError(q, v, err)
		return
	}
	if rc != nil {
		defer rc.Close()
	}
	if e := checkConditions(r, info); e != nil {
		if e == errNotModified {
			setObjectHeaders(q.w.Header(), info)
		}
		q.fail(e)
		return
	}
	off, n := int64(0), info.Size
	if part > 0 {
		count := 1
		if s := info.Headers[partSizesHeader]; s != "" {
			var ok bool
			if off, n, count, ok = partRange(s, part); !ok && part <= count {
				q.fail(errInternal)
				return
			}
		}
		if part > count {
			q.fail(&apiError{"InvalidPart", http.StatusBadRequest, "The requested part number is past the object's last part."})
			return
		}
		q.w.Header().Set("x-amz-mp-parts-count", strconv.Itoa(count))
		if count > 1 {
			ranged = true // answered as the range of the part
		}
	} else if ranged {
		var ok bool
		if off, n, ok = br.resolve(info.Size); !ok {
			q.w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
			q.fail(errInvalidRange)
			return
		}
	}
	dk, enc, e := h.opening(ctx, info.Headers, r.Header, ownSSEC)
	if e != nil {
		q.fail(e)
		return
	}
	hd := q.w.Header()
	setObjectHeaders(hd, info)
	h.setVersionID(ctx, hd, q.bucket, &info)
	setEncryptionHeaders(hd, enc)
	if c, err := h.lockConfig(ctx, q.bucket); err == nil && c != nil {
		if l, err := h.versionLock(ctx, q.bucket, q.key, info.Version); err == nil {
			setLockHeaders(hd, l)
		}
	}
	if strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		switch {
		case part > 0 && info.Headers[partChecksumsHeader] != "":
			// A part of a completed upload: that part's checksum.
			if a, sums, ok := partChecksums(info.Headers); ok && part <= len(sums) {
				hd[http.CanonicalHeaderKey(a.header())] = []string{sums[part-1]}
			}
		case !ranged:
			setChecksumHeaders(hd, info.Headers) // checksums are of the whole object
		}
	}
	for _, p := range overridable {
		if s := q.query.Get("response-" + p); s != "" {
			hd.Set(p, s)
		}
	}
	hd.Set("Content-Length", strconv.FormatInt(n, 10))
	status := http.StatusOK
	if ranged {
		hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, info.Size))
		status = http.StatusPartialContent
	}
	if r.Method == http.MethodHead || n == 0 {
		q.w.WriteHeader(status)
		return
	}
	if rc == nil {
		req.Version, req.Offset, req.Length = info.Version, off, n
		if _, rc, err = h.cfg.Service.Get(ctx, req); err != nil {
			hd.Del("Content-Length")
			hd.Del("Content-Range")
			h.objectError(q, v, err)
			return
		}
		defer rc.Close()
	}
	if dk != nil {
		if rc, err = decryptBody(rc, info.Headers, dk, off); err != nil {
			h.cfg.Logger.Error("s3 GET: an encrypted version's segments are damaged", "bucket", q.bucket, "key", q.key, "err", err)
			q.fail(errInternal)
			return
		}
	}
	q.w.WriteHeader(status)
	if _, err := io.Copy(q.w, rc); err != nil {
		// The status is out: all that is left is to cut the body short,
		// which the client sees as a length mismatch.
		h.cfg.Logger.Warn("s3 GET body failed", "bucket", q.bucket, "key", q.key, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// objectError answers a failed read of a key or one of its versions.
func (h *Handler) objectError(q *request, v uint64, err error) {
	switch k := object.KindOf(err); {
	case k == object.Deleted:
		q.w.Header().Set("x-amz-delete-marker", "true")
		if v != 0 {
			q.fail(errMethodNotAllowed)
			return
		}
	case k == object.NotFound && v != 0:
		q.fail(errNoSuchVersion)
		return
	case k == object.NotFound:
		// Tell a key whose latest version is a delete marker from one
		// that never was (S3 sends the header either way).
		marked := "false"
		vs, verr := h.cfg.Service.Versions(q.r.Context(), &object.VersionsRequest{Space: q.bucket, Key: q.key, Limit: 1})
		if verr == nil && len(vs.Versions) > 0 && vs.Versions[0].DeleteMarker && !isRemoval(&vs.Versions[0]) {
			marked = "true"
		}
		q.w.Header().Set("x-amz-delete-marker", marked)
	}
	h.serviceError(q, err)
}

func setObjectHeaders(hd http.Header, info object.Info) {
	hd.Set("ETag", `"`+info.ETag+`"`)
	hd.Set("Last-Modified", time.Unix(0, info.Modified).UTC().Format(http.TimeFormat))
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("x-amz-version-id", versionIDOf(&info))
	if info.ContentType != "" {
		hd.Set("Content-Type", info.ContentType)
	}
	for k, v := range info.Meta {
		hd[metaPrefix+k] = []string{v} // lower case as stored and as S3 sends them: clients keep the case
	}
	if len(info.Tags) > 0 {
		hd.Set("x-amz-tagging-count", strconv.Itoa(len(info.Tags)))
	}
	for _, k := range contentHeaderNames {
		if v := info.Headers[k]; v != "" {
			hd[http.CanonicalHeaderKey(k)] = []string{v}
		}
	}
}

func (h *Handler) deleteObject(q *request) {
	v, e := h.version(q)
	if e == errNoSuchVersion {
		q.w.WriteHeader(http.StatusNoContent) // no null version: nothing to delete
		return
	}
	if e != nil {
		q.fail(e)
		return
	}
	if e := h.checkRemovable(q, q.bucket, q.key, v); e != nil {
		q.fail(e)
		return
	}
	info, err := h.deleteKey(q.r.Context(), q.bucket, q.key, v, q.query.Get("versionId") == nullVersionID)
	switch {
	case object.KindOf(err) == object.NotFound:
		// S3 answers a delete of what is not there as done.
	case err != nil:
		h.serviceError(q, err)
		return
	case isRemoval(&info):
		// An unversioned bucket's delete: S3 says nothing of a marker.
	default:
		if info.DeleteMarker {
			q.w.Header().Set("x-amz-delete-marker", "true")
		}
		if info.Version != 0 {
			h.setVersionID(q.r.Context(), q.w.Header(), q.bucket, &info)
		}
	}
	q.w.WriteHeader(http.StatusNoContent)
}

// deleteKey deletes version v of key (every null version, when null: the
// null version was named) or, when v is 0, writes a delete marker: in an
// unversioned or suspended bucket, the key's null version.
func (h *Handler) deleteKey(ctx context.Context, bucket, key string, v uint64, null bool) (object.Info, error) {
	req := &object.DeleteRequest{Space: bucket, Key: key, Version: v}
	switch {
	case null:
		return h.deleteNull(ctx, bucket, key)
	case v != 0:
		return h.cfg.Service.Delete(ctx, req)
	}
	headers, err := h.nullMarker(ctx, bucket)
	if err != nil {
		return object.Info{}, err
	}
	ms, ok := h.cfg.Service.(object.MarkedDeleter)
	if headers == nil || !ok {
		return h.cfg.Service.Delete(ctx, req)
	}
	return ms.DeleteMarked(ctx, req, headers)
}

// nullMarker is the headers of a delete marker written in bucket now: nil
// while versioning is enabled; the null mark while it is suspended, or
// nullRemoved while the bucket is unversioned.
func (h *Handler) nullMarker(ctx context.Context, bucket string) (map[string]string, error) {
	status, err := h.versioning(ctx, bucket)
	switch {
	case err != nil:
		return nil, err
	case status == versioningSuspended:
		return map[string]string{nullHeader: "1"}, nil
	case status == versioningOff:
		return map[string]string{nullHeader: nullRemoved}, nil
	}
	return nil, nil
}

// maxDeleteObjects is the most keys one DeleteObjects names.
const maxDeleteObjects = 1000

// deleteObjects is DeleteObjects: each key (or version) is deleted as by
// DeleteObject, and the answer lists what was deleted and what failed.
func (h *Handler) deleteObjects(q *request) {
	if q.r.Header.Get("Content-Md5") == "" && !hasChecksumHeader(q.r.Header) && !strings.HasPrefix(q.auth.payload, "STREAMING-") {
		q.fail(errInvalidRequest.with("Missing required header for this request: Content-MD5 or x-amz-checksum-*."))
		return
	}
	var doc struct {
		XMLName xml.Name `xml:"Delete"`
		Quiet   bool
		Objects []struct {
			Key       string
			VersionID string `xml:"VersionId"`
		} `xml:"Object"`
	}
	if e := readXML(q, &doc, maxXMLBody); e != nil {
		q.fail(e)
		return
	}
	if len(doc.Objects) == 0 || len(doc.Objects) > maxDeleteObjects {
		q.fail(errMalformedXML.with("A Delete names 1 to 1000 objects."))
		return
	}
	type deleted struct {
		Key                   string
		VersionID             string `xml:"VersionId,omitempty"`
		DeleteMarker          bool   `xml:",omitempty"`
		DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
	}
	type failed struct {
		Key       string
		VersionID string `xml:"VersionId,omitempty"`
		Code      string
		Message   string
	}
	out := struct {
		XMLName xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
		Deleted []deleted `xml:"Deleted"`
		Errors  []failed  `xml:"Error"`
	}{}
	// The keys deleted as a whole (a delete marker each) go in one
	// transaction: all of them or none, and no reader sees some gone and
	// others not. Versions are removed one by one, as DeleteObject does.
	ctx := q.r.Context()
	// Each key is authorized as its own DeleteObject (or
	// DeleteObjectVersion), with its own resource.
	refused := map[int]*apiError{}
	for i, o := range doc.Objects {
		act := "s3:DeleteObject"
		if o.VersionID != "" {
			act = "s3:DeleteObjectVersion"
		}
		if e := h.authorization(q, q.bucket, o.Key, o.VersionID, act, PermWrite); e != nil {
			refused[i] = e
		}
	}
	whole := map[string]bool{}
	for i, o := range doc.Objects {
		if o.VersionID == "" && refused[i] == nil {
			whole[o.Key] = true
		}
	}
	var txnInfo object.Info
	var txnErr error
	txnDone := false
	if tr, ok := h.cfg.Service.(object.Transactor); ok && len(whole) > 1 {
		txnInfo, txnErr = h.deleteInTxn(ctx, tr, q.bucket, whole)
		txnDone = true
	}
	for i, o := range doc.Objects {
		if e := refused[i]; e != nil {
			out.Errors = append(out.Errors, failed{o.Key, o.VersionID, e.Code, e.Message})
			continue
		}
		if txnDone && o.VersionID == "" {
			if txnErr != nil {
				e := fromService(txnErr)
				out.Errors = append(out.Errors, failed{o.Key, "", e.Code, e.Message})
			} else if !doc.Quiet && isRemoval(&txnInfo) {
				out.Deleted = append(out.Deleted, deleted{Key: o.Key})
			} else if !doc.Quiet {
				out.Deleted = append(out.Deleted, deleted{Key: o.Key, DeleteMarker: true, DeleteMarkerVersionID: versionIDOf(&txnInfo)})
			}
			continue
		}
		v, e := h.parseVersionID(q.r.Context(), q.bucket, o.Key, o.VersionID)
		if e == errNoSuchVersion && o.VersionID == nullVersionID {
			if !doc.Quiet {
				out.Deleted = append(out.Deleted, deleted{Key: o.Key, VersionID: o.VersionID})
			}
			continue
		}
		if e != nil {
			out.Errors = append(out.Errors, failed{o.Key, o.VersionID, "NoSuchVersion", "The specified version does not exist."})
			continue
		}
		if e := h.checkRemovable(q, q.bucket, o.Key, v); e != nil {
			out.Errors = append(out.Errors, failed{o.Key, o.VersionID, e.Code, e.Message})
			continue
		}
		info, err := h.deleteKey(q.r.Context(), q.bucket, o.Key, v, o.VersionID == nullVersionID)
		if err != nil && object.KindOf(err) != object.NotFound {
			e := fromService(err)
			out.Errors = append(out.Errors, failed{o.Key, o.VersionID, e.Code, e.Message})
			continue
		}
		if doc.Quiet {
			continue
		}
		d := deleted{Key: o.Key, VersionID: o.VersionID}
		if err == nil && info.DeleteMarker && !isRemoval(&info) {
			d.DeleteMarker = true
			if v == 0 {
				d.DeleteMarkerVersionID = versionIDOf(&info)
			}
		}
		out.Deleted = append(out.Deleted, d)
	}
	writeXML(q.w, http.StatusOK, out)
}

// deleteInTxn writes a delete marker on every key of keys in one
// transaction, run again while it loses conflicts, and returns the info
// of the markers (one version: the commit's).
func (h *Handler) deleteInTxn(ctx context.Context, tr object.Transactor, bucket string, keys map[string]bool) (object.Info, error) {
	headers, err := h.nullMarker(ctx, bucket)
	if err != nil {
		return object.Info{}, err
	}
	for attempt := 0; ; attempt++ {
		tx, err := tr.Begin(ctx, object.TxnOptions{})
		if err != nil {
			return object.Info{}, err
		}
		for k := range keys {
			if err = tx.DeleteMarked(ctx, &object.DeleteRequest{Space: bucket, Key: k}, headers); err != nil {
				tx.Rollback()
				return object.Info{}, err
			}
		}
		ts, err := tx.Commit(ctx)
		if object.ClassOf(err) == object.ClassTxn && attempt < 8 {
			continue
		}
		if err != nil {
			return object.Info{}, err
		}
		return object.Info{Space: bucket, Version: ts, DeleteMarker: true, Headers: headers}, nil
	}
}

func hasChecksumHeader(h http.Header) bool {
	for _, a := range checksumAlgs {
		if a.sentIn(h) {
			return true
		}
	}
	return false
}
