package s3

import (
	"cmp"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairn-db/cairn/internal/object"
)

// CopyObject and UploadPartCopy compose the target from the source's
// chunks (object.Composer): no data is copied. A copy from or to an
// encrypted version is read and written again instead: the target is
// encrypted as its own request (or bucket) says, under a data key of its
// own.

// copySource parses x-amz-copy-source ("/bucket/key" or "bucket/key",
// URL-encoded, with an optional ?versionId=) and looks the source up,
// checking the x-amz-copy-source-if-* conditions.
func (h *Handler) copySource(q *request) (object.Info, *apiError) {
	raw := q.r.Header.Get("X-Amz-Copy-Source")
	path, query, _ := strings.Cut(raw, "?")
	path, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	bucket, key, ok := strings.Cut(path, "/")
	if err != nil || !ok || bucket == "" || key == "" {
		return object.Info{}, errInvalidArgument.with("Copy Source must mention the source bucket and key: sourcebucket/sourcekey.")
	}
	var v uint64
	versionID := ""
	if query != "" {
		qv, err := url.ParseQuery(query)
		if err != nil {
			return object.Info{}, errInvalidArgument.with("The copy source's query is malformed.")
		}
		versionID = qv.Get("versionId")
	}
	// Reading the source is GetObject (GetObjectVersion for a version),
	// decided on that version's ACL.
	act := "s3:GetObject"
	if versionID != "" {
		act = "s3:GetObjectVersion"
	}
	if e := h.authorization(q, bucket, key, versionID, act, PermRead); e != nil {
		return object.Info{}, e
	}
	if versionID != "" {
		var e *apiError
		if v, e = h.parseVersionID(q.r.Context(), bucket, key, versionID); e != nil {
			return object.Info{}, e
		}
	}
	info, err := h.cfg.Service.Stat(q.r.Context(), &object.GetRequest{Space: bucket, Key: key, Version: v, Length: -1})
	if err != nil {
		e := fromService(err)
		if e == errNoSuchKey && v != 0 {
			e = errNoSuchVersion
		}
		return info, e
	}
	// The copy-source conditions are the GET conditions under other names.
	cond := http.Header{}
	for _, c := range []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		if s := q.r.Header.Get("X-Amz-Copy-Source-" + c); s != "" {
			cond.Set(c, s)
		}
	}
	if e := checkConditions(&http.Request{Method: http.MethodGet, Header: cond}, info); e != nil {
		return info, errPreconditionFailed
	}
	return info, nil
}

type copyResult struct {
	ETag         string
	LastModified string
}

// copyObject is CopyObject.
func (h *Handler) copyObject(q *request) {
	r := q.r
	src, e := h.copySource(q)
	if e != nil {
		q.fail(e)
		return
	}
	srcKey, _, e := h.opening(r.Context(), src.Headers, r.Header, copySourceSSE)
	if e != nil {
		q.fail(e)
		return
	}
	if e := checkStorageClass(r.Header); e != nil {
		q.fail(e)
		return
	}
	seal, e := h.writeSealing(q)
	if e != nil {
		q.fail(e)
		return
	}
	req := &object.PutRequest{Space: q.bucket, Key: q.key}
	switch d := r.Header.Get("X-Amz-Metadata-Directive"); d {
	case "", "COPY":
		if src.Space == q.bucket && src.Key == q.key && seal == nil && srcKey == nil && r.Header.Get("X-Amz-Storage-Class") == "" {
			q.fail(errInvalidRequest.with("This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."))
			return
		}
		req.ContentType, req.Meta, req.Headers = src.ContentType, src.Meta, maps.Clone(src.Headers)
		delete(req.Headers, nullHeader) // the copy is null only if its own bucket makes it so
		dropSSEHeaders(req.Headers)
	case "REPLACE":
		req.ContentType, req.Meta, req.Headers = r.Header.Get("Content-Type"), userMeta(r.Header), contentHeaders(r.Header)
		if req.ContentType == "" {
			req.ContentType = "binary/octet-stream"
		}
		// The content is the source's: so are its checksum and parts.
		for k, v := range src.Headers {
			if strings.HasPrefix(k, checksumPrefix) || k == partSizesHeader || k == checksumTypeHeader || k == partChecksumsHeader {
				if req.Headers == nil {
					req.Headers = map[string]string{}
				}
				req.Headers[k] = v
			}
		}
	default:
		q.fail(errInvalidArgument.with("Unknown metadata directive " + d + ": COPY or REPLACE."))
		return
	}
	switch d := r.Header.Get("X-Amz-Tagging-Directive"); d {
	case "", "COPY":
		req.Tags = src.Tags
	case "REPLACE":
		if req.Tags, e = headerTags(r.Header); e != nil {
			q.fail(e)
			return
		}
	default:
		q.fail(errInvalidArgument.with("Unknown tagging directive " + d + ": COPY or REPLACE."))
		return
	}
	delete(req.Headers, objectOwnerHdr) // the copy is its writer's
	sumAlg, e := copyChecksum(r.Header, src, req)
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
	delete(req.Headers, versionLockHeader) // the copy's lock is its own
	lock.stamp(req)
	var info object.Info
	whole := object.ComposeSource{Space: src.Space, Key: src.Key, Version: src.Version, Length: -1}
	switch {
	case srcKey != nil || seal != nil:
		info, e = h.copyData(q, req, src, srcKey, 0, src.Size, seal, sumAlg)
	case sumAlg != nil:
		var sum string
		if sum, e = h.checksumOf(q, *sumAlg, whole); e == nil {
			req.Headers[sumAlg.header()] = sum
			info, e = h.compose(q, req, "", whole)
		}
	default:
		info, e = h.compose(q, req, "", whole)
	}
	if e != nil {
		q.fail(e)
		return
	}
	if seal != nil {
		setEncryptionHeaders(q.w.Header(), seal.enc)
	}
	if a != nil && !h.keepObjectACL(q, info, a) {
		return
	}
	if lock != nil {
		if err := h.saveLock(q.r.Context(), q.bucket, q.key, info.Version, lock); err != nil {
			h.serviceError(q, err)
			return
		}
	}
	w := q.w.Header()
	h.setVersionID(q.r.Context(), w, q.bucket, &info)
	w.Set("x-amz-copy-source-version-id", versionIDOf(&src))
	res := struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyObjectResult"`
		copyResult
		checksumXML
		ChecksumType string `xml:",omitempty"`
	}{copyResult: copyResult{ETag: `"` + info.ETag + `"`, LastModified: isoTime(info.Modified)}, checksumXML: storedChecksums(info.Headers)}
	if res.checksumXML != (checksumXML{}) {
		res.ChecksumType = cmp.Or(info.Headers[checksumTypeHeader], checksumFullObject)
	}
	writeXML(q.w, http.StatusOK, res)
}

// copyChecksum sets the checksum of a copy in its headers. A copy is not
// a multipart object: its checksum is of the whole content, as S3 gives
// it. x-amz-checksum-algorithm names the algorithm; without it the
// source's algorithm is kept, and a source without checksums gives a copy
// without (a copy shares the source's chunks and reads none of them; S3
// would give it a CRC64NVME checksum). The whole-content checksum is the
// source's when it has it, is combined from the parts' CRCs of a
// composite one, or else is to be computed as the bytes are read: then
// the algorithm is returned.
func copyChecksum(hd http.Header, src object.Info, req *object.PutRequest) (*checksumAlg, *apiError) {
	whole := cmp.Or(src.Headers[checksumTypeHeader], checksumFullObject) == checksumFullObject
	var alg checksumAlg
	if name := hd.Get("X-Amz-Checksum-Algorithm"); name != "" {
		a, ok := findChecksum(name)
		if !ok {
			return nil, errInvalidRequest.with("Checksum algorithm " + name + " is not supported (" + checksumNames() + ").")
		}
		alg = a
	} else {
		a, ok := storedAlg(src.Headers)
		if !ok || whole {
			return nil, nil
		}
		alg = a
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	for k := range req.Headers {
		if strings.HasPrefix(k, checksumPrefix) || k == checksumTypeHeader || k == partChecksumsHeader {
			delete(req.Headers, k)
		}
	}
	if v := src.Headers[alg.header()]; v != "" && whole {
		req.Headers[alg.header()] = v
		return nil, nil
	}
	if _, isCRC := crcs[alg.name]; isCRC && src.Headers[alg.header()] != "" {
		pa, sums, ok := partChecksums(src.Headers)
		sizes, sizesOK := partSizes(src.Headers[partSizesHeader])
		if ok && sizesOK && pa.name == alg.name && len(sums) == len(sizes) {
			digests := make([][]byte, len(sums))
			for i, s := range sums {
				if digests[i], _ = base64.StdEncoding.DecodeString(s); len(digests[i]) != alg.digestSize() {
					return &alg, nil
				}
			}
			req.Headers[alg.header()] = multipartChecksum(alg, checksumFullObject, digests, sizes)
			return nil, nil
		}
	}
	return &alg, nil
}

// storedAlg is the algorithm of a version's stored checksum.
func storedAlg(stored map[string]string) (checksumAlg, bool) {
	for _, a := range checksumAlgs {
		if stored[a.header()] != "" {
			return a, true
		}
	}
	return checksumAlg{}, false
}

// uploadPartCopy is UploadPartCopy: part n of upload id from a range of
// the source.
// A copied part of an upload with a checksum algorithm gets its checksum
// from the data, read once here (S3 computes it too).
func (h *Handler) uploadPartCopy(q *request, id string, n int, alg checksumAlg, sums bool, seal *sealing) {
	src, e := h.copySource(q)
	if e != nil {
		q.fail(e)
		return
	}
	srcKey, _, e := h.opening(q.r.Context(), src.Headers, q.r.Header, copySourceSSE)
	if e != nil {
		q.fail(e)
		return
	}
	cs := object.ComposeSource{Space: src.Space, Key: src.Key, Version: src.Version, Length: -1}
	if s := q.r.Header.Get("X-Amz-Copy-Source-Range"); s != "" {
		br, ok := parseRange(s)
		off, length, fits := br.resolve(src.Size)
		switch {
		case !ok || br.suffix > 0 || br.end < 0:
			q.fail(errInvalidArgument.with("The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy."))
			return
		case br.end >= src.Size || !fits:
			q.fail(errInvalidRange.with(fmt.Sprintf("The x-amz-copy-source-range %s is not within the source's %d bytes.", s, src.Size)))
			return
		}
		cs.Offset, cs.Length = off, length
	}
	req := &object.PutRequest{Space: q.bucket, Key: partKey(id, n)}
	var sum string
	var info object.Info
	if srcKey != nil || seal != nil {
		var sumAlg *checksumAlg
		if sums {
			sumAlg = &alg
		}
		length := cs.Length
		if length < 0 {
			length = src.Size
		}
		if info, e = h.copyData(q, req, src, srcKey, cs.Offset, length, seal, sumAlg); e != nil {
			q.fail(e)
			return
		}
		sum = info.Headers[alg.header()]
	} else {
		if sums {
			var e *apiError
			if sum, e = h.checksumOf(q, alg, cs); e != nil {
				q.fail(e)
				return
			}
			req.Headers = map[string]string{alg.header(): sum}
		}
		if info, e = h.compose(q, req, "", cs); e != nil {
			q.fail(e)
			return
		}
	}
	if seal != nil {
		setEncryptionHeaders(q.w.Header(), seal.enc)
	}
	q.w.Header().Set("x-amz-copy-source-version-id", versionIDOf(&src))
	res := struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyPartResult"`
		copyResult
		checksumXML
	}{copyResult: copyResult{ETag: `"` + info.ETag + `"`, LastModified: isoTime(info.Modified)}}
	if sums {
		*res.field(alg) = sum
	}
	writeXML(q.w, http.StatusOK, res)
}

// checksumOf reads the source's bytes and returns their checksum.
func (h *Handler) checksumOf(q *request, alg checksumAlg, cs object.ComposeSource) (string, *apiError) {
	_, rc, err := h.cfg.Service.Get(sysCtx(q), &object.GetRequest{Space: cs.Space, Key: cs.Key, Version: cs.Version, Offset: cs.Offset, Length: cs.Length})
	if err != nil {
		return "", fromService(err)
	}
	defer rc.Close()
	hs := alg.new()
	if _, err := io.Copy(hs, rc); err != nil {
		return "", errInternal
	}
	return base64.StdEncoding.EncodeToString(hs.Sum(nil)), nil
}

// compose writes req from the sources, with etag ("": the MD5 of the
// content). The context allows system keys: parts are sources and
// targets; client keys were checked to be UTF-8 when routed.
func (h *Handler) compose(q *request, req *object.PutRequest, etag string, sources ...object.ComposeSource) (object.Info, *apiError) {
	cs, ok := h.cfg.Service.(object.Composer)
	if !ok {
		return object.Info{}, errNotImplemented.with("Copying and multipart uploads are not implemented by this service.")
	}
	info, err := cs.Compose(sysCtx(q), req, etag, sources)
	if err != nil {
		return info, fromService(err)
	}
	return info, nil
}

// copyData writes req with length bytes of the source from off, read
// (and decrypted with srcKey, if the source is encrypted) and written
// again (encrypted with seal, if not nil). With sum, the part's checksum
// of that algorithm is computed as the bytes pass and kept with it.
func (h *Handler) copyData(q *request, req *object.PutRequest, src object.Info, srcKey []byte, off, length int64, seal *sealing, sum *checksumAlg) (object.Info, *apiError) {
	ctx := sysCtx(q)
	if length == 0 {
		off = 0 // an empty source is read whole
	}
	_, rc, err := h.cfg.Service.Get(ctx, &object.GetRequest{Space: src.Space, Key: src.Key, Version: src.Version, Offset: off, Length: length})
	if err != nil {
		return object.Info{}, fromService(err)
	}
	defer rc.Close()
	if srcKey != nil {
		if rc, err = decryptBody(rc, src.Headers, srcKey, off); err != nil {
			return object.Info{}, errInternal
		}
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	req.Size = length
	var body io.Reader = rc
	if sum != nil {
		hd, name := req.Headers, sum.header()
		body = &hashTail{r: body, h: sum.new(), end: func(d []byte) error { hd[name] = base64.StdEncoding.EncodeToString(d); return nil }}
	}
	if seal != nil {
		body = seal.encryptBody(req, body)
	}
	info, err := h.cfg.Service.Put(ctx, req, body)
	if err != nil {
		return info, fromService(err)
	}
	return info, nil
}
