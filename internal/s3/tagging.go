package s3

import (
	"encoding/xml"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/cairn-db/cairn/internal/object"
)

// S3's tag limits.
const (
	maxObjectTags = 10
	maxBucketTags = 50
	maxTagKeyLen  = 128 // characters
	maxTagValLen  = 256
)

var errInvalidTag = &apiError{"InvalidTag", http.StatusBadRequest, "The tag provided was not a valid tag."}

type tag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	TagSet  []tag    `xml:"TagSet>Tag"`
}

// checkTags applies S3's rules to a tag set: at most max tags, unique
// keys of 1 to 128 characters, values of at most 256.
func checkTags(tags []tag, max int) (map[string]string, *apiError) {
	if len(tags) > max {
		return nil, errInvalidTag.with("Object tags cannot be greater than " + strconv.Itoa(max))
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		if t.Key == "" || utf8.RuneCountInString(t.Key) > maxTagKeyLen || !utf8.ValidString(t.Key) {
			return nil, errInvalidTag.with("The TagKey you have provided is invalid")
		}
		if utf8.RuneCountInString(t.Value) > maxTagValLen || !utf8.ValidString(t.Value) {
			return nil, errInvalidTag.with("The TagValue you have provided is invalid")
		}
		if _, dup := m[t.Key]; dup {
			return nil, errInvalidTag.with("Cannot provide multiple Tags with the same key")
		}
		m[t.Key] = t.Value
	}
	return m, nil
}

// readTags reads a <Tagging> document of at most max tags.
func readTags(q *request, max int) (map[string]string, *apiError) {
	var doc tagging
	if e := readXML(q, &doc, maxXMLBody); e != nil {
		return nil, e
	}
	if doc.XMLName.Local == "" {
		return nil, errMalformedXML
	}
	return checkTags(doc.TagSet, max)
}

// headerTags parses an x-amz-tagging header: a URL-encoded query string.
func headerTags(h http.Header) (map[string]string, *apiError) {
	s := h.Get("X-Amz-Tagging")
	if s == "" {
		return nil, nil
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return nil, errInvalidArgument.with("The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
	}
	var tags []tag
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if len(v[k]) != 1 {
			return nil, errInvalidTag.with("Cannot provide multiple Tags with the same key")
		}
		tags = append(tags, tag{k, v[k][0]})
	}
	return checkTags(tags, maxObjectTags)
}

func tagSet(m map[string]string) []tag {
	tags := []tag{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		tags = append(tags, tag{k, m[k]})
	}
	return tags
}

// objectTagging serves GET, PUT and DELETE ?tagging on an object (of the
// version named by versionId, else the latest). Tags change in place: the
// version keeps its id.
func (h *Handler) objectTagging(q *request) {
	v, e := h.version(q)
	if e != nil {
		q.fail(e)
		return
	}
	ctx := q.r.Context()
	switch q.r.Method {
	case http.MethodGet:
		info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: q.bucket, Key: q.key, Version: v, Length: -1})
		if err != nil {
			h.objectError(q, v, err)
			return
		}
		h.setVersionID(q.r.Context(), q.w.Header(), q.bucket, &info)
		writeXML(q.w, http.StatusOK, tagging{NS: s3NS, TagSet: tagSet(info.Tags)})
	case http.MethodPut, http.MethodDelete:
		var tags map[string]string
		if q.r.Method == http.MethodPut {
			if tags, e = readTags(q, maxObjectTags); e != nil {
				q.fail(e)
				return
			}
		}
		ts, ok := h.cfg.Service.(object.Tagger)
		if !ok {
			notImplemented(q, "object tagging")
			return
		}
		info, err := ts.SetTags(ctx, &object.TagRequest{Space: q.bucket, Key: q.key, Version: v, Tags: tags})
		if err != nil {
			if object.KindOf(err) == object.Deleted {
				q.fail(errMethodNotAllowed.with("The specified method is not allowed against a delete marker."))
				return
			}
			h.objectError(q, v, err)
			return
		}
		h.setVersionID(q.r.Context(), q.w.Header(), q.bucket, &info)
		if q.r.Method == http.MethodDelete {
			q.w.WriteHeader(http.StatusNoContent)
		} else {
			q.w.WriteHeader(http.StatusOK)
		}
	default:
		q.fail(errMethodNotAllowed)
	}
}

// Bucket settings live in the bucket's own space, under system keys that
// clients cannot reach: replicated and versioned like any object, and
// removed with the space.
const (
	bucketTaggingKey    = object.SystemKeyPrefix + "cfg/tagging"
	bucketVersioningKey = object.SystemKeyPrefix + "cfg/versioning"
	bucketLifecycleKey  = object.SystemKeyPrefix + "cfg/lifecycle"
)

var errNoSuchTagSet = &apiError{"NoSuchTagSet", http.StatusNotFound, "The TagSet does not exist"}

// bucketTagging serves GET, PUT and DELETE ?tagging on a bucket; the tags
// are those of the bucket's tagging key.
func (h *Handler) bucketTagging(q *request) {
	if !h.exists(q) {
		return
	}
	ctx := sysCtx(q)
	switch q.r.Method {
	case http.MethodGet:
		info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: q.bucket, Key: bucketTaggingKey, Length: -1})
		if object.KindOf(err) == object.NotFound || (err == nil && len(info.Tags) == 0) {
			q.fail(errNoSuchTagSet)
			return
		}
		if err != nil {
			h.serviceError(q, err)
			return
		}
		writeXML(q.w, http.StatusOK, tagging{NS: s3NS, TagSet: tagSet(info.Tags)})
	case http.MethodPut:
		tags, e := readTags(q, maxBucketTags)
		if e != nil {
			q.fail(e)
			return
		}
		if _, err := h.cfg.Service.Put(ctx, &object.PutRequest{Space: q.bucket, Key: bucketTaggingKey, Tags: tags}, http.NoBody); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		_, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: q.bucket, Key: bucketTaggingKey})
		if err != nil && object.KindOf(err) != object.NotFound {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	default:
		q.fail(errMethodNotAllowed)
	}
}
