package s3

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

const (
	s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"
	// maxXMLBody bounds a request's XML document.
	maxXMLBody = 1 << 20
	// maxListKeys is the most keys one listing returns.
	maxListKeys = 1000
)

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

func (q *request) owner() owner { return owner{ID: q.auth.accessKey, DisplayName: q.auth.accessKey} }

type listAllMyBucketsResult struct {
	XMLName xml.Name     `xml:"ListAllMyBucketsResult"`
	NS      string       `xml:"xmlns,attr"`
	Owner   owner        `xml:"Owner"`
	Buckets []bucketInfo `xml:"Buckets>Bucket"`
}

type bucketInfo struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

// maxKeys parses a max-keys (max-parts, max-uploads) parameter: at most
// 1000, the default.
func maxKeys(s string) (int, *apiError) {
	if s == "" {
		return maxListKeys, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, errInvalidArgument.with("max-keys, max-parts and max-uploads must be non-negative integers.")
	}
	return min(v, maxListKeys), nil
}

// isoLayout is how S3 writes times.
const isoLayout = "2006-01-02T15:04:05.000Z"

func isoTime(unixNanos int64) string {
	return string(appendISOTime(nil, unixNanos))
}

// appendISOTime appends the time unixNanos in UTC as isoLayout formats it,
// without parsing the layout for each time (a listing writes one per key).
// An int64 of nanoseconds spans the years 1677 to 2262: four digits.
func appendISOTime(b []byte, unixNanos int64) []byte {
	t := time.Unix(0, unixNanos).UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, 'T'), hour, 2)
	b = appendDigits(append(b, ':'), minute, 2)
	b = appendDigits(append(b, ':'), sec, 2)
	b = appendDigits(append(b, '.'), t.Nanosecond()/1e6, 3)
	return append(b, 'Z')
}

// appendDigits appends v, which has at most n digits, zero-padded to n.
func appendDigits(b []byte, v, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, 0)
	}
	for i := len(b) - 1; i >= len(b)-n; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

func (h *Handler) listBuckets(q *request) {
	spaces, err := h.cfg.Service.ListSpaces(q.r.Context())
	if err != nil {
		h.serviceError(q, err)
		return
	}
	res := listAllMyBucketsResult{NS: s3NS, Owner: q.owner(), Buckets: []bucketInfo{}}
	for _, s := range spaces {
		if h.allowed(q, s.Name, PermRead) { // a key sees the buckets it may read
			res.Buckets = append(res.Buckets, bucketInfo{Name: s.Name, CreationDate: isoTime(s.Created)})
		}
	}
	// Snapshots are read-only buckets.
	if sn, ok := h.cfg.Service.(object.Snapshotter); ok {
		snaps, err := sn.Snapshots(q.r.Context(), "")
		if err != nil {
			h.serviceError(q, err)
			return
		}
		for _, s := range snaps {
			if h.allowed(q, s.Name, PermRead) {
				res.Buckets = append(res.Buckets, bucketInfo{Name: s.Name, CreationDate: isoTime(s.Created)})
			}
		}
		slices.SortFunc(res.Buckets, func(a, b bucketInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	writeXML(q.w, http.StatusOK, res)
}

// serviceError answers with the S3 form of an object service error,
// logging those that are the server's.
func (h *Handler) serviceError(q *request, err error) {
	e := fromService(err)
	if e.Status >= 500 {
		h.cfg.Logger.Warn("s3 request failed", "method", q.r.Method, "path", q.r.URL.Path, "err", err)
	}
	q.fail(e)
}

func (h *Handler) bucketOp(q *request) {
	r := q.r
	query := q.query
	if query.Has("tagging") {
		h.bucketTagging(q)
		return
	}
	if query.Has("lifecycle") {
		h.bucketLifecycle(q)
		return
	}
	if query.Has("encryption") {
		h.bucketEncryption(q)
		return
	}
	if query.Has("cors") {
		h.configDoc(q, corsConfig, &apiError{"NoSuchCORSConfiguration", http.StatusNotFound, "The CORS configuration does not exist."}, parseCORS)
		return
	}
	if query.Has("policy") || query.Has("policyStatus") {
		h.bucketPolicyOp(q)
		return
	}
	if query.Has("publicAccessBlock") {
		h.bucketPublicAccessBlock(q)
		return
	}
	if query.Has("acl") {
		h.bucketACLOp(q)
		return
	}
	if query.Has("object-lock") {
		h.bucketObjectLock(q)
		return
	}
	if query.Has("ownershipControls") {
		h.bucketOwnershipOp(q)
		return
	}
	if h.bucketSetting(q) {
		return
	}
	switch r.Method {
	case http.MethodPut:
		if query.Has("versioning") {
			h.putVersioning(q)
			return
		}
		if s := unsupportedQuery(q); s != "" {
			notImplemented(q, "PUT ?"+s)
			return
		}
		h.createBucket(q)
	case http.MethodHead:
		if !h.exists(q) {
			return
		}
		q.w.Header().Set("x-amz-bucket-region", h.bucketRegion(q.r.Context(), q.bucket))
		q.w.WriteHeader(http.StatusOK)
	case http.MethodDelete:
		if s := unsupportedQuery(q); s != "" {
			notImplemented(q, "DELETE ?"+s)
			return
		}
		if err := h.CheckDropSpace(r.Context(), q.bucket); err != nil {
			h.serviceError(q, err)
			return
		}
		if err := h.cfg.Service.DeleteSpace(r.Context(), q.bucket); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		if !query.Has("delete") {
			q.fail(errMethodNotAllowed)
			return
		}
		h.deleteObjects(q)
	case http.MethodGet:
		switch {
		case query.Has("location"):
			h.bucketLocation(q)
		case query.Has("versioning"):
			h.getVersioning(q)
		case query.Has("versions"):
			h.listObjectVersions(q)
		case query.Has("uploads"):
			h.listUploads(q)
		default:
			if s := unsupportedQuery(q); s != "" {
				notImplemented(q, "GET ?"+s)
				return
			}
			h.listObjects(q, query.Get("list-type") == "2")
		}
	default:
		q.fail(errMethodNotAllowed)
	}
}

type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

// readXML decodes the request body, of at most limit bytes, into v; an
// empty body leaves v as is. The body is checked as a PUT's is (its signed
// SHA-256, Content-MD5, a checksum; aws-chunked decoded) before it is
// used.
func readXML(q *request, v any, limit int64) *apiError {
	b, e := readXMLBytes(q, limit)
	if e != nil || len(bytes.TrimSpace(b)) == 0 {
		return e
	}
	if err := xml.Unmarshal(b, v); err != nil {
		return errMalformedXML
	}
	return nil
}

// readXMLBytes is readXML's checked read of the document.
func readXMLBytes(q *request, limit int64) ([]byte, *apiError) {
	body, fault, e := putBody(q, &object.PutRequest{})
	if e != nil {
		return nil, e
	}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case fault.e != nil:
		return nil, fault.e
	case err != nil:
		return nil, errIncompleteBody
	case int64(len(b)) > limit:
		return nil, errMalformedXML.with("The XML document is over " + strconv.FormatInt(limit>>10, 10) + " KiB.")
	}
	return b, nil
}

func (h *Handler) createBucket(q *request) {
	var c createBucketConfiguration
	if e := readXML(q, &c, maxXMLBody); e != nil {
		q.fail(e)
		return
	}
	// A bucket may name another region than the store's: it is a label
	// (the data lives where the space's placement puts it), answered by
	// GetBucketLocation, and requests for the bucket may be signed for it,
	// as clients configured for that region sign them.
	location := c.LocationConstraint
	if location == "US" || location == h.cfg.Region {
		location = ""
	}
	switch {
	case location != "" && !validRegion(location):
		q.fail(&apiError{"InvalidLocationConstraint", http.StatusBadRequest,
			"The specified location-constraint is not valid: a region name is lower-case letters, digits and hyphens."})
		return
	case q.auth != nil && q.auth.sc.region != "" && q.auth.sc.region != h.cfg.Region && q.auth.sc.region != location:
		q.fail(errAuthHeaderMalformed.with("The authorization header is malformed; the region " + strconv.Quote(q.auth.sc.region) +
			" is wrong; expecting " + strconv.Quote(cmp.Or(location, h.cfg.Region)) + "."))
		return
	}
	// The creator owns the bucket; its ACL and object ownership may be
	// given with it.
	owner := q.auth.accessKey
	a, e := h.headerACL(q.r.Header, owner, owner)
	if e != nil {
		q.fail(e)
		return
	}
	own := q.r.Header.Get("X-Amz-Object-Ownership")
	switch {
	case own != "" && own != ownershipEnforced && own != ownershipPreferred && own != ownershipWriter:
		q.fail(errInvalidArgument.with("x-amz-object-ownership is BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter."))
		return
	case own == ownershipEnforced && a != nil && !a.ownerOnly(owner):
		q.fail(&apiError{"InvalidBucketAclWithObjectOwnership", http.StatusBadRequest, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting."})
		return
	}
	ctx := q.r.Context()
	if _, err := h.cfg.Service.CreateSpace(ctx, q.bucket, object.SpaceSettings{}); err != nil {
		h.serviceError(q, err)
		return
	}
	if err := h.putConfig(ctx, q.bucket, ownerConfig, []byte(owner)); err != nil {
		h.serviceError(q, err)
		return
	}
	if a != nil {
		doc, _ := json.Marshal(a)
		if err := h.putConfig(ctx, q.bucket, aclConfig, doc); err != nil {
			h.serviceError(q, err)
			return
		}
	}
	if own != "" {
		if e := h.setOwnership(ctx, q.bucket, own); e != nil {
			q.fail(e)
			return
		}
	}
	if location != "" {
		if err := h.putConfig(ctx, q.bucket, locationConfig, []byte(location)); err != nil {
			h.serviceError(q, err)
			return
		}
	}
	if strings.EqualFold(q.r.Header.Get("X-Amz-Bucket-Object-Lock-Enabled"), "true") {
		// A lock-enabled bucket is versioned from its creation.
		doc, _ := xml.Marshal(objectLockConfiguration{Enabled: "Enabled"})
		if err := h.putConfig(ctx, q.bucket, objectLockConfig, doc); err != nil {
			h.serviceError(q, err)
			return
		}
	} else if err := h.setVersioning(ctx, q.bucket, versioningOff); err != nil {
		// A bucket made through S3 starts unversioned, as in S3.
		h.serviceError(q, err)
		return
	}
	q.w.Header().Set("Location", "/"+q.bucket)
	q.w.WriteHeader(http.StatusOK)
}

// exists fails q with NoSuchBucket unless the bucket exists.
func (h *Handler) exists(q *request) bool {
	_, err := h.cfg.Service.List(q.r.Context(), &object.ListRequest{Space: q.bucket, Limit: 1})
	if err != nil {
		h.serviceError(q, err)
		return false
	}
	return true
}

func (h *Handler) bucketLocation(q *request) {
	if !h.exists(q) {
		return
	}
	type locationConstraint struct {
		XMLName xml.Name `xml:"LocationConstraint"`
		NS      string   `xml:"xmlns,attr"`
		Region  string   `xml:",chardata"`
	}
	region := h.bucketRegion(q.r.Context(), q.bucket)
	if region == "us-east-1" {
		region = "" // S3 reports the default region as empty
	}
	writeXML(q.w, http.StatusOK, locationConstraint{NS: s3NS, Region: region})
}

type listObject struct {
	Key          string       `xml:"Key"`
	LastModified isoTimestamp `xml:"LastModified"`
	ETag         quotedETag   `xml:"ETag"`
	Size         int64        `xml:"Size"`
	Owner        *owner       `xml:"Owner,omitempty"`
	StorageClass string       `xml:"StorageClass"`
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

type listBucketResult struct {
	XMLName               xml.Name       `xml:"ListBucketResult"`
	NS                    string         `xml:"xmlns,attr"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	Marker                *string        `xml:"Marker"`
	NextMarker            string         `xml:"NextMarker,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	KeyCount              *int           `xml:"KeyCount"`
	MaxKeys               int            `xml:"MaxKeys"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	IsTruncated           bool           `xml:"IsTruncated"`
	Contents              []listObject   `xml:"Contents"`
	CommonPrefixes        []commonPrefix `xml:"CommonPrefixes"`
	// emptyToken: the request sent an empty continuation token, which
	// is echoed (appendXML only).
	emptyToken bool
}

// listing is one page of a bucket listing: keys and common prefixes in key
// order, at most max of them together.
type listing struct {
	objects   []object.Info
	prefixes  []string
	truncated bool
	next      string // where the next page starts after
}

// listQuery is what ListObjects and ListObjectVersions take from the
// query alike.
type listQuery struct {
	prefix, delimiter string
	enc               string // encoding-type: "" or "url"
	max               int
}

func parseListQuery(q *request) (listQuery, *apiError) {
	query := q.query
	lq := listQuery{prefix: query.Get("prefix"), delimiter: query.Get("delimiter"), enc: query.Get("encoding-type")}
	if lq.enc != "" && lq.enc != "url" {
		return lq, errInvalidArgument.with("Invalid Encoding Method specified in Request")
	}
	var e *apiError
	lq.max, e = maxKeys(query.Get("max-keys"))
	return lq, e
}

// esc encodes a key or prefix as encoding-type asks: percent-encoded as
// S3 does it, "/" left as it is.
func (lq listQuery) esc(s string) string {
	if lq.enc == "url" {
		return strings.NewReplacer("+", "%20", "%2F", "/").Replace(url.QueryEscape(s))
	}
	return s
}

// commonPrefix is the common prefix key folds into: up to and including
// the first delimiter after the listing's prefix.
func (lq listQuery) commonPrefix(key string) (string, bool) {
	if lq.delimiter == "" || !strings.HasPrefix(key, lq.prefix) {
		return "", false
	}
	i := strings.Index(key[len(lq.prefix):], lq.delimiter)
	if i < 0 {
		return "", false
	}
	return key[:len(lq.prefix)+i+len(lq.delimiter)], true
}

// startAfter is where a listing from marker starts: a marker that is a
// common prefix resumes after all of it (no valid UTF-8 key holds the
// byte 0xff).
func (lq listQuery) startAfter(marker string) string {
	if cp, ok := lq.commonPrefix(marker); ok && cp == marker {
		return marker + "\xff"
	}
	return marker
}

// list pages through the bucket from after, folding keys that hold the
// delimiter after the prefix into common prefixes.
func (h *Handler) list(q *request, lq listQuery, after string) (listing, error) {
	var l listing
	if lq.max == 0 {
		return l, nil // max-keys=0: nothing, and not truncated (as S3)
	}
	n := 0
	after = lq.startAfter(after)
	for {
		res, err := h.cfg.Service.List(q.r.Context(), &object.ListRequest{
			Space: q.bucket, Prefix: lq.prefix, StartAfter: after, Limit: maxListKeys,
		})
		if err != nil {
			return l, err
		}
		if l.objects == nil {
			l.objects = make([]object.Info, 0, min(lq.max, len(res.Objects)))
		}
		for _, o := range res.Objects {
			if !strings.HasPrefix(o.Key, lq.prefix) || o.Key <= after {
				continue
			}
			if n == lq.max {
				l.truncated = true
				return l, nil
			}
			if cp, ok := lq.commonPrefix(o.Key); ok {
				l.prefixes = append(l.prefixes, cp)
				n++
				after = lq.startAfter(cp) // the rest of the prefix is skipped
				l.next = after
				continue
			}
			l.objects = append(l.objects, o)
			n++
			after = o.Key
			l.next = after
		}
		if !res.Truncated {
			return l, nil
		}
		if res.Next > after {
			after = res.Next
		}
	}
}

func (h *Handler) listObjects(q *request, v2 bool) {
	query := q.query
	lq, e := parseListQuery(q)
	if e != nil {
		q.fail(e)
		return
	}
	enc, esc := lq.enc, lq.esc
	res := listBucketResult{NS: s3NS, Name: q.bucket, Prefix: lq.prefix, Delimiter: lq.delimiter, MaxKeys: lq.max, EncodingType: enc}
	var after string
	if v2 {
		res.StartAfter = query.Get("start-after")
		after = res.StartAfter
		if query.Has("continuation-token") && query.Get("continuation-token") == "" {
			res.emptyToken = true // echoed as sent: an empty token starts at the beginning
		}
		if tok := query.Get("continuation-token"); tok != "" {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil {
				q.fail(errInvalidArgument.with("The continuation token provided is incorrect"))
				return
			}
			res.ContinuationToken, after = tok, string(b)
		}
	} else {
		m := query.Get("marker")
		res.Marker, after = &m, m
	}
	l, err := h.list(q, lq, after)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	var ow *owner
	if !v2 || query.Get("fetch-owner") == "true" {
		o := q.owner()
		ow = &o
	}
	res.Contents = make([]listObject, 0, len(l.objects))
	for _, o := range l.objects {
		res.Contents = append(res.Contents, listObject{Key: esc(o.Key), LastModified: isoTimestamp(o.Modified),
			ETag: quotedETag(o.ETag), Size: o.Size, Owner: ow, StorageClass: "STANDARD"})
	}
	for _, p := range l.prefixes {
		res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: esc(p)})
	}
	res.IsTruncated = l.truncated
	if enc == "url" {
		res.Prefix, res.Delimiter, res.StartAfter = esc(res.Prefix), esc(res.Delimiter), esc(res.StartAfter)
		if res.Marker != nil {
			m := esc(*res.Marker)
			res.Marker = &m
		}
	}
	if v2 {
		kc := len(res.Contents) + len(res.CommonPrefixes)
		res.KeyCount = &kc
		if l.truncated {
			res.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(l.next))
		}
	} else if l.truncated {
		res.NextMarker = esc(strings.TrimSuffix(l.next, "\xff"))
	}
	writeXMLBody(q.w, http.StatusOK, res.appendXML(make([]byte, 0, res.sizeHint())))
}

// locationConfig is the bucket document holding the region a bucket was
// created for, when that is not the store's.
const locationConfig = "location"

// bucketRegion is the region a bucket answers for: the location it was
// created with, else the store's.
func (h *Handler) bucketRegion(ctx context.Context, bucket string) string {
	if doc, err := h.config(ctx, bucket, locationConfig); err == nil && len(doc) > 0 {
		return string(doc)
	}
	return h.cfg.Region
}

// validRegion reports whether s may be a region name: 1 to 63 lower-case
// letters, digits and hyphens, starting with a letter.
func validRegion(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
