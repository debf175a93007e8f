package s3

import (
	"cmp"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/sse"
)

// Multipart uploads.
//
// An upload is a version under the system key mpuPrefix+ID in the bucket's
// space: its content type, user metadata and content headers are the ones
// the object will get, and its target key is kept in its headers
// (uploadKeyHeader). Each part is a version under partPrefix+ID/NNNNN,
// stored as any object is (chunked, replicated, its checksum verified).
// Complete composes the object from the parts' exact versions
// (object.Composer), so the parts' chunks become its manifest and no
// data is copied; then it removes the upload and its parts. System keys
// are not valid UTF-8, so no client key can name them, and listings leave
// them out. Uploads older than the expiry are aborted by SweepUploads.

const (
	mpuPrefix  = object.SystemKeyPrefix + "mpu/" // upload records
	partPrefix = object.SystemKeyPrefix + "mpp/" // parts
	// donePrefix holds a record of each completed upload (its object's
	// key, version and answer) for --multipart-expiry: a Complete sent
	// again, as clients do when the first answer was lost, gets the same
	// answer instead of NoSuchUpload.
	donePrefix = object.SystemKeyPrefix + "mpd/"

	maxParts    = 10000
	minPartSize = 5 << 20
	// maxCompleteBody bounds a CompleteMultipartUpload document (10,000
	// parts with checksums).
	maxCompleteBody = 8 << 20

	uploadKeyHeader = "cairn-upload-key"
	// partSizesHeader, kept with a completed upload's object, lists its
	// part sizes run-length encoded ("SIZE*COUNT,SIZE"), for partNumber
	// reads.
	partSizesHeader = "cairn-part-sizes"
	// partChecksumsHeader, kept with a completed upload's object whose
	// upload had a checksum algorithm, lists its parts' checksums (base64,
	// comma separated, in part order), for partNumber reads and
	// GetObjectAttributes.
	partChecksumsHeader = "cairn-part-checksums"
)

func uploadKey(id string) string        { return mpuPrefix + id }
func partKey(id string, n int) string   { return partPrefix + id + "/" + fmt.Sprintf("%05d", n) }
func sysCtx(q *request) context.Context { return object.WithSystemKeys(q.r.Context()) }
func validUploadID(id string) bool {
	_, err := hex.DecodeString(id)
	return err == nil && len(id) == 32
}
func partNumberOf(key string) (int, error) {
	return strconv.Atoi(key[strings.LastIndexByte(key, '/')+1:])
}

var errNoSuchUpload = &apiError{"NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."}

// createUpload is CreateMultipartUpload.
func (h *Handler) createUpload(q *request) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	req, e := objectRequest(q, uploadKey(id)) // the object's to be, kept with the upload
	if e != nil {
		q.fail(e)
		return
	}
	alg, typ, sums, e := uploadChecksum(q.r.Header)
	if e != nil {
		q.fail(e)
		return
	}
	req.IfNoneMatch = true
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	// The object's data key is made now: every part is encrypted under
	// it, each as a segment of its own (sse.go).
	seal, e := h.writeSealing(q)
	if e != nil {
		q.fail(e)
		return
	}
	if seal != nil {
		seal.record(req.Headers)
	}
	a, e := h.ownObject(q, req)
	if e != nil {
		q.fail(e)
		return
	}
	if a != nil {
		doc, _ := json.Marshal(a)
		req.Headers[uploadACLHeader] = string(doc)
	}
	lock, e := h.writeLock(q)
	if e != nil {
		q.fail(e)
		return
	}
	if lock != nil {
		doc, _ := json.Marshal(lock)
		req.Headers[uploadLockHeader] = string(doc)
	}
	req.Headers[uploadKeyHeader] = q.key
	if sums {
		req.Headers[uploadChecksumHeader] = alg.name
		req.Headers[checksumTypeHeader] = typ
	}
	if _, err := h.cfg.Service.Put(sysCtx(q), req, strings.NewReader("")); err != nil {
		h.serviceError(q, err)
		return
	}
	setUploadChecksumHeaders(q.w.Header(), req.Headers)
	if seal != nil {
		setEncryptionHeaders(q.w.Header(), seal.enc)
	}
	writeXML(q.w, http.StatusOK, struct {
		XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ InitiateMultipartUploadResult"`
		Bucket   string
		Key      string
		UploadID string `xml:"UploadId"`
	}{Bucket: q.bucket, Key: q.key, UploadID: id})
}

// upload finds the upload of the request's uploadId, which must be for
// the request's key.
func (h *Handler) upload(q *request) (id string, info object.Info, e *apiError) {
	id = q.query.Get("uploadId")
	if !validUploadID(id) {
		return "", info, errNoSuchUpload
	}
	info, err := h.cfg.Service.Stat(sysCtx(q), &object.GetRequest{Space: q.bucket, Key: uploadKey(id), Length: -1})
	if object.KindOf(err) == object.NotFound {
		return "", info, errNoSuchUpload
	}
	if err != nil {
		return "", info, fromService(err)
	}
	if info.Headers[uploadKeyHeader] != q.key {
		return "", info, errNoSuchUpload
	}
	return id, info, nil
}

func parsePartNumber(s string) (int, *apiError) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxParts {
		return 0, errInvalidArgument.with("Part number must be an integer between 1 and 10000, inclusive.")
	}
	return n, nil
}

// uploadPart is UploadPart and UploadPartCopy.
func (h *Handler) uploadPart(q *request) {
	n, e := parsePartNumber(q.query.Get("partNumber"))
	if e != nil {
		q.fail(e)
		return
	}
	id, up, e := h.upload(q)
	if e != nil {
		q.fail(e)
		return
	}
	alg, sums := uploadAlg(up.Headers)
	// A part of an encrypted upload is encrypted under the upload's data
	// key; an SSE-C upload's parts each bring the customer's key again.
	dk, enc, e := h.opening(q.r.Context(), up.Headers, q.r.Header, ownSSEC)
	if e != nil {
		q.fail(e)
		return
	}
	var seal *sealing
	if dk != nil {
		seal = &sealing{enc: enc, dk: dk, wrapped: up.Headers[sseKeyHeader]}
	}
	if q.r.Header.Get("X-Amz-Copy-Source") != "" {
		h.uploadPartCopy(q, id, n, alg, sums, seal)
		return
	}
	if sums && !alg.sentIn(q.r.Header) {
		q.fail(errInvalidRequest.with("The upload was created with the " + strings.ToUpper(alg.name) + " checksum algorithm: every part must carry its " + alg.header() + " checksum."))
		return
	}
	info, ok := h.store(sysCtx(q), q, &object.PutRequest{Space: q.bucket, Key: partKey(id, n)}, seal)
	if !ok {
		return
	}
	w := q.w.Header()
	w.Set("ETag", `"`+info.ETag+`"`)
	setChecksumHeaders(w, info.Headers)
	if seal != nil {
		setEncryptionHeaders(w, seal.enc)
	}
	q.w.WriteHeader(http.StatusOK)
}

// uploadParts lists an upload's parts in part number order.
func (h *Handler) uploadParts(ctx context.Context, bucket, id string) ([]object.Info, error) {
	return h.listAll(ctx, bucket, partPrefix+id+"/")
}

// listAll lists every live key of bucket under prefix, page by page.
func (h *Handler) listAll(ctx context.Context, bucket, prefix string) ([]object.Info, error) {
	var out []object.Info
	after := ""
	for {
		l, err := h.cfg.Service.List(ctx, &object.ListRequest{Space: bucket, Prefix: prefix, StartAfter: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, l.Objects...)
		if !l.Truncated || len(l.Objects) == 0 {
			return out, nil
		}
		after = l.Objects[len(l.Objects)-1].Key
	}
}

type completePart struct {
	PartNumber int
	ETag       string
	checksumXML
}

// completeUpload is CompleteMultipartUpload.
func (h *Handler) completeUpload(q *request) {
	id, up, e := h.upload(q)
	if e == errNoSuchUpload && h.completedAgain(q) {
		return
	}
	if e != nil {
		q.fail(e)
		return
	}
	var doc struct {
		XMLName xml.Name       `xml:"CompleteMultipartUpload"`
		Parts   []completePart `xml:"Part"`
	}
	// An x-amz-checksum-* header on Complete is the whole object's
	// expected checksum, not the document's: the document is read through
	// a copy of the request without them.
	want := map[string]string{}
	dq := *q
	dq.r = q.r.Clone(q.r.Context())
	dq.r.Header.Del("X-Amz-Sdk-Checksum-Algorithm")
	for _, a := range checksumAlgs {
		if v := q.r.Header.Get(a.header()); v != "" {
			want[a.name] = v
			dq.r.Header.Del(a.header())
		}
	}
	if e := readXML(&dq, &doc, maxCompleteBody); e != nil {
		q.fail(e)
		return
	}
	if len(doc.Parts) == 0 {
		q.fail(errMalformedXML.with("You must specify at least one part."))
		return
	}
	ctx := sysCtx(q)
	stored, err := h.uploadParts(ctx, q.bucket, id)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	byNumber := map[int]object.Info{}
	for _, p := range stored {
		if n, err := partNumberOf(p.Key); err == nil {
			byNumber[n] = p
		}
	}
	alg, sums := uploadAlg(up.Headers)
	// An SSE-C upload's parts each brought the customer's key; completing
	// it needs none, as in S3 (whose awscli completes without it: the
	// parts are not read), but a key given must be the upload's.
	enc := storedEncryption(up.Headers)
	switch c, e := customerKey(q.r.Header, ownSSEC); {
	case e != nil:
		q.fail(e)
		return
	case c != nil:
		if _, enc, e = h.opening(q.r.Context(), up.Headers, q.r.Header, ownSSEC); e != nil {
			q.fail(e)
			return
		}
	}
	encrypted := enc != nil
	var segs []sse.Segment
	var digests [][]byte
	sources := make([]object.ComposeSource, 0, len(doc.Parts))
	sizes := make([]int64, 0, len(doc.Parts))
	md := md5.New()
	for i, p := range doc.Parts {
		if i > 0 && p.PartNumber <= doc.Parts[i-1].PartNumber {
			q.fail(&apiError{"InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order. The parts list must be specified in order by part number."})
			return
		}
		sp, ok := byNumber[p.PartNumber]
		if !ok || strings.Trim(p.ETag, `"`) != sp.ETag {
			q.fail(&apiError{"InvalidPart", http.StatusBadRequest, fmt.Sprintf("Part %d could not be found, or its ETag does not match the part's.", p.PartNumber)})
			return
		}
		for _, a := range checksumAlgs {
			if v := *p.field(a); v != "" && sp.Headers[a.header()] != v {
				q.fail(&apiError{"InvalidPart", http.StatusBadRequest, fmt.Sprintf("Part %d's %s checksum does not match the part's.", p.PartNumber, strings.ToUpper(a.name))})
				return
			}
		}
		if sums {
			d, err := base64.StdEncoding.DecodeString(sp.Headers[alg.header()])
			if err != nil || len(d) != alg.digestSize() {
				q.fail(errInvalidRequest.with(fmt.Sprintf("Part %d has no %s checksum, which the upload's algorithm needs.", p.PartNumber, strings.ToUpper(alg.name))))
				return
			}
			digests = append(digests, d)
		}
		if encrypted {
			ps, err := sse.ParseSegments(sp.Headers[sseSegmentsHeader])
			if err != nil || sp.Headers[sseKeyHeader] != up.Headers[sseKeyHeader] {
				q.fail(&apiError{"InvalidPart", http.StatusBadRequest, fmt.Sprintf("Part %d was not encrypted as its upload is.", p.PartNumber)})
				return
			}
			segs = append(segs, ps...)
		}
		sum, _ := hex.DecodeString(sp.ETag)
		md.Write(sum)
		sources = append(sources, object.ComposeSource{Space: q.bucket, Key: sp.Key, Version: sp.Version, Length: -1})
		sizes = append(sizes, sp.Size)
	}
	for i, size := range sizes[:len(sizes)-1] {
		if size < minPartSize {
			q.fail(&apiError{"EntityTooSmall", http.StatusBadRequest, fmt.Sprintf("Part %d is %d bytes; every part but the last must be at least 5 MiB.", doc.Parts[i].PartNumber, size)})
			return
		}
	}
	headers := map[string]string{}
	for k, v := range up.Headers {
		if k != uploadKeyHeader && k != uploadChecksumHeader && k != uploadACLHeader && k != uploadLockHeader {
			headers[k] = v
		}
	}
	headers[partSizesHeader] = encodePartSizes(sizes)
	if encrypted {
		headers[sseSegmentsHeader] = sse.EncodeSegments(segs)
	}
	var checksum string
	if sums {
		checksum = multipartChecksum(alg, up.Headers[checksumTypeHeader], digests, sizes)
		headers[alg.header()] = checksum
		partSums := make([]string, len(digests))
		for i, d := range digests {
			partSums[i] = base64.StdEncoding.EncodeToString(d)
		}
		headers[partChecksumsHeader] = strings.Join(partSums, ",")
	}
	if e := checkCompleteChecksum(q.r.Header, want, alg, sums, up.Headers[checksumTypeHeader], checksum, len(doc.Parts)); e != nil {
		q.fail(e)
		return
	}
	etag := hex.EncodeToString(md.Sum(nil)) + "-" + strconv.Itoa(len(doc.Parts))
	req := &object.PutRequest{Space: q.bucket, Key: q.key, ContentType: up.ContentType, Meta: up.Meta, Headers: headers, Tags: up.Tags}
	if !h.writeConditions(q, req) {
		return
	}
	if e := h.markNull(q, req); e != nil {
		q.fail(e)
		return
	}
	if doc := up.Headers[uploadLockHeader]; doc != "" {
		req.Headers[versionLockHeader] = doc // the lock goes with the version
	}
	info, e := h.compose(q, req, etag, sources...)
	if e != nil {
		q.fail(e)
		return
	}
	if doc := up.Headers[uploadLockHeader]; doc != "" {
		var l objectLock
		if json.Unmarshal([]byte(doc), &l) != nil || h.saveLock(ctx, q.bucket, q.key, info.Version, &l) != nil {
			q.fail(errInternal)
			return
		}
	}
	if doc := up.Headers[uploadACLHeader]; doc != "" {
		var a acl
		if json.Unmarshal([]byte(doc), &a) != nil || !h.keepObjectACL(q, info, &a) {
			q.fail(errInternal)
			return
		}
	}
	done := map[string]string{uploadKeyHeader: q.key, "etag": etag}
	if sums {
		done[alg.header()], done[checksumTypeHeader] = checksum, up.Headers[checksumTypeHeader]
	}
	if _, err := h.cfg.Service.Put(ctx, &object.PutRequest{Space: q.bucket, Key: donePrefix + id, Headers: done,
		Meta: map[string]string{"version": versionIDOf(&info)}}, http.NoBody); err != nil {
		h.cfg.Logger.Warn("s3: recording a completed upload", "bucket", q.bucket, "upload", id, "err", err)
	}
	h.removeUpload(ctx, q.bucket, id, up.Version, stored)
	h.setVersionID(q.r.Context(), q.w.Header(), q.bucket, &info)
	setEncryptionHeaders(q.w.Header(), enc)
	writeCompleted(q, done)
}

// writeCompleted answers a CompleteMultipartUpload from its record.
func writeCompleted(q *request, done map[string]string) {
	res := struct {
		XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
		Location string
		Bucket   string
		Key      string
		ETag     string
		checksumXML
		ChecksumType string `xml:",omitempty"`
	}{Location: "/" + q.bucket + "/" + q.key, Bucket: q.bucket, Key: q.key, ETag: `"` + done["etag"] + `"`, checksumXML: storedChecksums(done)}
	if res.checksumXML != (checksumXML{}) {
		res.ChecksumType = done[checksumTypeHeader]
	}
	writeXML(q.w, http.StatusOK, res)
}

// completedAgain answers a Complete of an upload that was completed
// already (its record in donePrefix) as the first one was answered, and
// reports whether it did.
func (h *Handler) completedAgain(q *request) bool {
	id := q.query.Get("uploadId")
	if !validUploadID(id) {
		return false
	}
	info, err := h.cfg.Service.Stat(sysCtx(q), &object.GetRequest{Space: q.bucket, Key: donePrefix + id, Length: -1})
	if err != nil || info.Headers[uploadKeyHeader] != q.key {
		return false
	}
	if v := info.Meta["version"]; v != "" && v != nullVersionID {
		q.w.Header().Set("x-amz-version-id", v)
	}
	writeCompleted(q, info.Headers)
	return true
}

// removeUpload deletes an upload's record and parts (their exact
// versions: nothing is left behind). Failures are logged: the sweep
// removes what is left.
func (h *Handler) removeUpload(ctx context.Context, bucket, id string, version uint64, parts []object.Info) {
	for _, p := range parts {
		if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: p.Key, Version: p.Version}); err != nil && object.KindOf(err) != object.NotFound {
			h.cfg.Logger.Warn("s3: removing a part", "bucket", bucket, "upload", id, "err", err)
		}
	}
	if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: uploadKey(id), Version: version}); err != nil && object.KindOf(err) != object.NotFound {
		h.cfg.Logger.Warn("s3: removing an upload", "bucket", bucket, "upload", id, "err", err)
	}
}

// abortUpload is AbortMultipartUpload.
func (h *Handler) abortUpload(q *request) {
	id, up, e := h.upload(q)
	if e != nil {
		q.fail(e)
		return
	}
	ctx := sysCtx(q)
	parts, err := h.uploadParts(ctx, q.bucket, id)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	h.removeUpload(ctx, q.bucket, id, up.Version, parts)
	q.w.WriteHeader(http.StatusNoContent)
}

type partXML struct {
	PartNumber   int
	LastModified string
	ETag         string
	Size         int64
	checksumXML
}

// listParts is ListParts.
func (h *Handler) listParts(q *request) {
	id, up, e := h.upload(q)
	if e != nil {
		q.fail(e)
		return
	}
	query := q.query
	max, e := maxKeys(query.Get("max-parts"))
	if e != nil {
		q.fail(e)
		return
	}
	marker := 0
	if s := query.Get("part-number-marker"); s != "" {
		if marker, _ = strconv.Atoi(s); marker < 0 {
			marker = 0
		}
	}
	parts, err := h.uploadParts(sysCtx(q), q.bucket, id)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	type result struct {
		XMLName              xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListPartsResult"`
		Bucket               string
		Key                  string
		UploadID             string `xml:"UploadId"`
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		Parts                []partXML `xml:"Part"`
		StorageClass         string
		ChecksumAlgorithm    string `xml:",omitempty"`
		ChecksumType         string `xml:",omitempty"`
	}
	out := result{Bucket: q.bucket, Key: q.key, UploadID: id, PartNumberMarker: marker, MaxParts: max, StorageClass: "STANDARD"}
	if a := up.Headers[uploadChecksumHeader]; a != "" {
		out.ChecksumAlgorithm, out.ChecksumType = strings.ToUpper(a), up.Headers[checksumTypeHeader]
	}
	for _, p := range parts {
		n, err := partNumberOf(p.Key)
		if err != nil || n <= marker {
			continue
		}
		if len(out.Parts) == max {
			out.IsTruncated = true
			break
		}
		out.Parts = append(out.Parts, partXML{PartNumber: n, LastModified: isoTime(p.Modified), ETag: `"` + p.ETag + `"`, Size: p.Size,
			checksumXML: storedChecksums(p.Headers)})
		out.NextPartNumberMarker = n
	}
	writeXML(q.w, http.StatusOK, out)
}

// listUploads is ListMultipartUploads: the bucket's uploads in key order,
// then by when they started.
func (h *Handler) listUploads(q *request) {
	query := q.query
	max, e := maxKeys(query.Get("max-uploads"))
	if e != nil {
		q.fail(e)
		return
	}
	prefix, delim := query.Get("prefix"), query.Get("delimiter")
	keyMarker, idMarker := query.Get("key-marker"), query.Get("upload-id-marker")
	ups, err := h.allUploads(sysCtx(q), q.bucket)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	// encoding-type=url encodes the keys and common prefixes of the
	// answer and the next key marker (not the prefix or the markers sent,
	// which come back as sent).
	lq := listQuery{enc: query.Get("encoding-type")}
	if lq.enc != "" && lq.enc != "url" {
		q.fail(errInvalidArgument.with("Invalid Encoding Method specified in Request"))
		return
	}
	type uploadXML struct {
		Key       string
		UploadID  string `xml:"UploadId"`
		Initiated string
	}
	type prefixXML struct{ Prefix string }
	out := struct {
		XMLName            xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListMultipartUploadsResult"`
		Bucket             string
		KeyMarker          string
		UploadIDMarker     string `xml:"UploadIdMarker"`
		NextKeyMarker      string
		NextUploadIDMarker string `xml:"NextUploadIdMarker"`
		Delimiter          string `xml:",omitempty"`
		Prefix             string
		EncodingType       string `xml:",omitempty"`
		MaxUploads         int
		IsTruncated        bool
		Uploads            []uploadXML `xml:"Upload"`
		CommonPrefixes     []prefixXML `xml:"CommonPrefixes"`
	}{Bucket: q.bucket, KeyMarker: keyMarker, UploadIDMarker: idMarker, Delimiter: delim, Prefix: prefix, EncodingType: lq.enc, MaxUploads: max}
	lastPrefix := ""
	for _, u := range ups {
		key := u.Headers[uploadKeyHeader]
		id := strings.TrimPrefix(u.Key, mpuPrefix)
		if !strings.HasPrefix(key, prefix) || key < keyMarker || (key == keyMarker && (idMarker == "" || !uploadAfter(u, id, ups, idMarker))) {
			continue
		}
		if delim != "" {
			if i := strings.Index(key[len(prefix):], delim); i >= 0 {
				cp := key[:len(prefix)+i+len(delim)]
				if cp == lastPrefix {
					continue
				}
				if len(out.Uploads)+len(out.CommonPrefixes) == max {
					out.IsTruncated = true
					break
				}
				lastPrefix = cp
				out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{lq.esc(cp)})
				out.NextKeyMarker, out.NextUploadIDMarker = lq.esc(key), id
				continue
			}
		}
		if len(out.Uploads)+len(out.CommonPrefixes) == max {
			out.IsTruncated = true
			break
		}
		out.Uploads = append(out.Uploads, uploadXML{Key: lq.esc(key), UploadID: id, Initiated: isoTime(u.Modified)})
		out.NextKeyMarker, out.NextUploadIDMarker = lq.esc(key), id
	}
	if !out.IsTruncated {
		out.NextKeyMarker, out.NextUploadIDMarker = "", ""
	}
	writeXML(q.w, http.StatusOK, out)
}

// uploadAfter reports whether upload u (id) comes after the upload
// idMarker of the same key in ups' order.
func uploadAfter(u object.Info, id string, ups []object.Info, idMarker string) bool {
	for _, o := range ups {
		if strings.TrimPrefix(o.Key, mpuPrefix) == idMarker {
			return u.Modified > o.Modified || (u.Modified == o.Modified && id > idMarker)
		}
	}
	return true
}

// allUploads lists a bucket's uploads in key order, then by start time.
func (h *Handler) allUploads(ctx context.Context, bucket string) ([]object.Info, error) {
	ups, err := h.listAll(ctx, bucket, mpuPrefix)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ups, func(a, b object.Info) int {
		return cmp.Or(strings.Compare(a.Headers[uploadKeyHeader], b.Headers[uploadKeyHeader]),
			cmp.Compare(a.Modified, b.Modified), strings.Compare(a.Key, b.Key))
	})
	return ups, nil
}

// SweepUploads aborts the uploads of every bucket that started before
// before, and removes parts whose upload is gone (a part written while its
// upload was aborted). It returns how many uploads it aborted.
func (h *Handler) SweepUploads(ctx context.Context, before time.Time) (int, error) {
	ctx = object.WithSystemKeys(ctx)
	spaces, err := h.cfg.Service.ListSpaces(ctx)
	if err != nil {
		return 0, err
	}
	aborted := 0
	var errs []error
	for _, sp := range spaces {
		ups, err := h.allUploads(ctx, sp.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		live := map[string]bool{}
		for _, u := range ups {
			id := strings.TrimPrefix(u.Key, mpuPrefix)
			if time.Unix(0, u.Modified).After(before) {
				live[id] = true
				continue
			}
			parts, err := h.uploadParts(ctx, sp.Name, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			h.removeUpload(ctx, sp.Name, id, u.Version, parts)
			aborted++
		}
		// Records of completed uploads go once they are as old as an
		// upload may stay open.
		dones, err := h.listAll(ctx, sp.Name, donePrefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range dones {
			if !time.Unix(0, d.Modified).After(before) {
				if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: sp.Name, Key: d.Key, Version: d.Version}); err != nil && object.KindOf(err) != object.NotFound {
					errs = append(errs, err)
				}
			}
		}
		// Orphan parts: listed after the uploads, so a part of an upload
		// started since is not taken for one.
		parts, err := h.listAll(ctx, sp.Name, partPrefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range parts {
			id, _, _ := strings.Cut(strings.TrimPrefix(p.Key, partPrefix), "/")
			if !live[id] && time.Unix(0, p.Modified).Before(before) {
				_, _ = h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: sp.Name, Key: p.Key, Version: p.Version})
			}
		}
	}
	return aborted, errors.Join(errs...)
}

// encodePartSizes run-length encodes part sizes: "SIZE*COUNT" or "SIZE",
// comma separated.
func encodePartSizes(sizes []int64) string {
	var b strings.Builder
	for i := 0; i < len(sizes); {
		j := i
		for j < len(sizes) && sizes[j] == sizes[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(sizes[i], 10))
		if j-i > 1 {
			b.WriteString("*" + strconv.Itoa(j-i))
		}
		i = j
	}
	return b.String()
}

// partRange returns the byte range of part n (1-based) of an object with
// the encoded part sizes s, and the number of parts.
func partRange(s string, n int) (off, length int64, count int, ok bool) {
	sizes, valid := partSizes(s)
	if !valid {
		return 0, 0, 0, false
	}
	if n < 1 || n > len(sizes) {
		return 0, 0, len(sizes), false
	}
	for _, size := range sizes[:n-1] {
		off += size
	}
	return off, sizes[n-1], len(sizes), true
}

// partChecksums returns the algorithm and the checksums of the parts
// (in part order) of a completed upload's object; ok is false if its
// upload kept none.
func partChecksums(stored map[string]string) (alg checksumAlg, sums []string, ok bool) {
	list := stored[partChecksumsHeader]
	if list == "" {
		return alg, nil, false
	}
	if a, ok := storedAlg(stored); ok {
		return a, strings.Split(list, ","), true
	}
	return alg, nil, false
}

// partSizes expands a partSizesHeader value; ok is false if it is
// damaged.
func partSizes(s string) (sizes []int64, ok bool) {
	for run := range strings.SplitSeq(s, ",") {
		sz, cnt, hasCnt := strings.Cut(run, "*")
		size, err := strconv.ParseInt(sz, 10, 64)
		if err != nil || size < 0 {
			return nil, false
		}
		c := 1
		if hasCnt {
			if c, err = strconv.Atoi(cnt); err != nil || c < 1 || c > maxParts-len(sizes) {
				return nil, false
			}
		}
		for range c {
			sizes = append(sizes, size)
		}
	}
	return sizes, true
}
