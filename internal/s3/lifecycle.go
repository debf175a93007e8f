package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"strconv"

	"github.com/cairn-db/cairn/internal/object"
)

// A bucket's lifecycle configuration maps onto its space's retention,
// which the store applies to a key's history each time the key is written:
//
//	NoncurrentVersionExpiration{NoncurrentDays: D} -> retention "duration", D days
//	(no rule, or DeleteBucketLifecycle)            -> retention "all"
//
// Retention is one policy for the whole space, so Cairn takes one enabled
// rule for the whole bucket (an empty filter or prefix) whose only action
// is noncurrent-version expiry (with AbortIncompleteMultipartUpload
// accepted: uploads are aborted after --multipart-expiry whatever it
// says). Other actions (expiring current versions, transitions,
// NewerNoncurrentVersions, filtered rules) answer NotImplemented, so a
// client never believes a rule is in force that is not. The document as
// sent is kept under a system key for GetBucketLifecycleConfiguration.

type lifecycleConfiguration struct {
	XMLName xml.Name        `xml:"LifecycleConfiguration"`
	Rules   []lifecycleRule `xml:"Rule"`
}

type lifecycleRule struct {
	ID     string `xml:"ID"`
	Status string `xml:"Status"`
	Prefix *string
	Filter *struct {
		Prefix                string    `xml:"Prefix"`
		Tag                   *struct{} `xml:"Tag"`
		And                   *struct{} `xml:"And"`
		ObjectSizeGreaterThan *int64    `xml:"ObjectSizeGreaterThan"`
		ObjectSizeLessThan    *int64    `xml:"ObjectSizeLessThan"`
	} `xml:"Filter"`
	Expiration                     *struct{}  `xml:"Expiration"`
	Transitions                    []struct{} `xml:"Transition"`
	NoncurrentVersionTransitions   []struct{} `xml:"NoncurrentVersionTransition"`
	AbortIncompleteMultipartUpload *struct {
		DaysAfterInitiation int `xml:"DaysAfterInitiation"`
	} `xml:"AbortIncompleteMultipartUpload"`
	NoncurrentVersionExpiration *struct {
		NoncurrentDays          int  `xml:"NoncurrentDays"`
		NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions"`
	} `xml:"NoncurrentVersionExpiration"`
}

// maxLifecycleDays bounds a rule's days: a longer span does not fit the
// space's retention (nanoseconds in an int64, about 292 years).
const maxLifecycleDays = 100_000

var errNoSuchLifecycle = &apiError{"NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist."}

// retentionOfLifecycle is the space retention a configuration asks for.
func retentionOfLifecycle(c *lifecycleConfiguration) (object.SpaceSettings, *apiError) {
	set := object.SpaceSettings{Retention: "all"}
	expiring := 0
	for _, r := range c.Rules {
		switch {
		case r.Status != "Enabled" && r.Status != "Disabled":
			return set, errMalformedXML.with("A rule's Status must be Enabled or Disabled.")
		case r.Status == "Disabled":
			continue
		case (r.Prefix != nil && *r.Prefix != "") || (r.Filter != nil && (r.Filter.Prefix != "" || r.Filter.Tag != nil || r.Filter.And != nil ||
			r.Filter.ObjectSizeGreaterThan != nil || r.Filter.ObjectSizeLessThan != nil)):
			return set, errNotImplemented.with("Lifecycle rules apply to the whole bucket here (its history policy): use an empty filter.")
		case r.Expiration != nil || len(r.Transitions) > 0 || len(r.NoncurrentVersionTransitions) > 0:
			return set, errNotImplemented.with("Only noncurrent-version expiry (and AbortIncompleteMultipartUpload) is implemented.")
		case r.NoncurrentVersionExpiration != nil && r.NoncurrentVersionExpiration.NewerNoncurrentVersions != nil:
			return set, errNotImplemented.with("NewerNoncurrentVersions is not implemented.")
		case r.NoncurrentVersionExpiration != nil:
			days := r.NoncurrentVersionExpiration.NoncurrentDays
			if days < 1 || days > maxLifecycleDays {
				return set, errInvalidArgument.with("NoncurrentDays must be a positive integer of at most " + strconv.Itoa(maxLifecycleDays) + ".")
			}
			expiring++
			set = object.SpaceSettings{Retention: "duration", KeepForSeconds: uint64(days) * 86400}
		case r.AbortIncompleteMultipartUpload == nil:
			return set, errMalformedXML.with("A rule needs an action.")
		}
	}
	if expiring > 1 {
		return set, errNotImplemented.with("One noncurrent-version expiry rule per bucket: it is the bucket's history policy.")
	}
	return set, nil
}

// spaceSettings returns the settings of the space named bucket.
func (h *Handler) spaceSettings(ctx context.Context, bucket string) (object.SpaceSettings, error) {
	spaces, err := h.cfg.Service.ListSpaces(ctx)
	if err != nil {
		return object.SpaceSettings{}, err
	}
	for _, sp := range spaces {
		if sp.Name == bucket {
			return sp.Settings, nil
		}
	}
	return object.SpaceSettings{}, object.Errorf(object.SpaceNotFound, "space %q does not exist", bucket)
}

// bucketLifecycle serves GET, PUT and DELETE ?lifecycle on a bucket.
func (h *Handler) bucketLifecycle(q *request) {
	if !h.exists(q) {
		return
	}
	ctx := sysCtx(q)
	rs, ok := h.cfg.Service.(object.RetentionSetter)
	if !ok {
		notImplemented(q, "bucket lifecycle")
		return
	}
	switch q.r.Method {
	case http.MethodGet:
		info, rc, err := h.cfg.Service.Get(ctx, &object.GetRequest{Space: q.bucket, Key: bucketLifecycleKey, Length: -1})
		if object.KindOf(err) == object.NotFound {
			q.fail(errNoSuchLifecycle)
			return
		}
		if err != nil {
			h.serviceError(q, err)
			return
		}
		defer rc.Close()
		q.w.Header().Set("Content-Type", "application/xml")
		q.w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
		q.w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(q.w, rc)
	case http.MethodPut:
		var doc lifecycleConfiguration
		raw, e := readXMLBytes(q, maxXMLBody)
		if e == nil && xml.Unmarshal(raw, &doc) != nil {
			e = errMalformedXML
		}
		if e == nil && (doc.XMLName.Local == "" || len(doc.Rules) == 0) {
			e = errMalformedXML
		}
		if e != nil {
			q.fail(e)
			return
		}
		set, e := retentionOfLifecycle(&doc)
		if e != nil {
			q.fail(e)
			return
		}
		if set.Retention != "" && set.Retention != "all" {
			// The history's pruning does not read object locks.
			if c, err := h.lockConfig(ctx, q.bucket); err != nil || c != nil {
				q.fail(errInvalidRequest.with("Lifecycle rules that remove noncurrent versions are not supported on a bucket with object lock."))
				return
			}
		}
		// The policy first: it is what the store enforces, and it may be
		// refused. The document is kept only once the policy is in
		// force; if keeping it fails, the earlier policy comes back.
		prev, err := h.spaceSettings(ctx, q.bucket)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		if _, err := rs.SetRetention(ctx, q.bucket, set); err != nil {
			h.serviceError(q, err)
			return
		}
		if _, err := h.cfg.Service.Put(ctx, &object.PutRequest{Space: q.bucket, Key: bucketLifecycleKey, Size: int64(len(raw)),
			ContentType: "application/xml"}, bytes.NewReader(raw)); err != nil {
			if _, rerr := rs.SetRetention(ctx, q.bucket, prev); rerr != nil {
				h.cfg.Logger.Error("s3: lifecycle document not kept and the earlier retention not restored", "bucket", q.bucket, "err", rerr)
			}
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusOK)
	case http.MethodDelete:
		if _, err := rs.SetRetention(ctx, q.bucket, object.SpaceSettings{Retention: "all"}); err != nil {
			h.serviceError(q, err)
			return
		}
		if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: q.bucket, Key: bucketLifecycleKey}); err != nil && object.KindOf(err) != object.NotFound {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	default:
		q.fail(errMethodNotAllowed)
	}
}
