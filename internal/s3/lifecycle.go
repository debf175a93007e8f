package s3

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

// Lifecycle rules, executed inside the cluster.
//
// A rule whose only action is noncurrent-version expiry over the whole
// bucket (an empty filter, no NewerNoncurrentVersions) becomes the
// space's retention, which the store applies to a key's history each time
// the key is written:
//
//	NoncurrentVersionExpiration{NoncurrentDays: D} -> retention "duration", D days
//	(no such rule, or DeleteBucketLifecycle)       -> retention "all"
//
// Every other rule is carried out by SweepLifecycle, which each node runs
// periodically over every bucket: expiration of current versions by days
// or date (a delete marker, as a DELETE without a version writes),
// removal of expired delete markers (a key's only version left),
// noncurrent-version expiry with NewerNoncurrentVersions, and abort of
// incomplete multipart uploads, each filtered by prefix, tags and size.
// Versions under object lock are left alone. Transitions answer
// NotImplemented: Cairn has one storage class. Rules are validated as S3
// validates them; the document as sent is kept under a system key for
// GetBucketLifecycleConfiguration.

type lifecycleConfiguration struct {
	XMLName xml.Name        `xml:"LifecycleConfiguration"`
	NS      string          `xml:"xmlns,attr,omitempty"`
	Rules   []lifecycleRule `xml:"Rule"`
}

type lifecycleFilter struct {
	Prefix                *string `xml:"Prefix"`
	Tag                   *tag    `xml:"Tag"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
	And                   *struct {
		Prefix                *string `xml:"Prefix"`
		Tags                  []tag   `xml:"Tag"`
		ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
		ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
	} `xml:"And"`
}

type lifecycleRule struct {
	ID         *string          `xml:"ID"`
	Status     string           `xml:"Status"`
	Prefix     *string          `xml:"Prefix"`
	Filter     *lifecycleFilter `xml:"Filter"`
	Expiration *struct {
		Days                      *int    `xml:"Days"`
		Date                      *string `xml:"Date"`
		ExpiredObjectDeleteMarker *bool   `xml:"ExpiredObjectDeleteMarker"`
	} `xml:"Expiration"`
	Transitions []struct {
		Days *int    `xml:"Days"`
		Date *string `xml:"Date"`
	} `xml:"Transition"`
	NoncurrentVersionTransitions   []struct{} `xml:"NoncurrentVersionTransition"`
	AbortIncompleteMultipartUpload *struct {
		DaysAfterInitiation int `xml:"DaysAfterInitiation"`
	} `xml:"AbortIncompleteMultipartUpload"`
	NoncurrentVersionExpiration *struct {
		NoncurrentDays          int  `xml:"NoncurrentDays"`
		NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions"`
	} `xml:"NoncurrentVersionExpiration"`
}

// lifecycleConfig is the bucket document of the rules (the system key
// bucketLifecycleKey).
const lifecycleConfig = "lifecycle"

// maxLifecycleDays bounds a rule's days: a longer span does not fit the
// space's retention (nanoseconds in an int64, about 292 years).
const maxLifecycleDays = 100_000

var errNoSuchLifecycle = &apiError{"NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist."}

// match is a rule's filter, resolved.
type lifecycleMatch struct {
	prefix   string
	tags     map[string]string
	min, max int64 // size bounds, exclusive; max -1: none
}

func (r *lifecycleRule) match() lifecycleMatch {
	m := lifecycleMatch{max: -1, min: -1}
	if r.Prefix != nil {
		m.prefix = *r.Prefix
	}
	f := r.Filter
	if f == nil {
		return m
	}
	if f.Prefix != nil {
		m.prefix = *f.Prefix
	}
	if f.Tag != nil {
		m.tags = map[string]string{f.Tag.Key: f.Tag.Value}
	}
	if f.ObjectSizeGreaterThan != nil {
		m.min = *f.ObjectSizeGreaterThan
	}
	if f.ObjectSizeLessThan != nil {
		m.max = *f.ObjectSizeLessThan
	}
	if a := f.And; a != nil {
		if a.Prefix != nil {
			m.prefix = *a.Prefix
		}
		for _, t := range a.Tags {
			if m.tags == nil {
				m.tags = map[string]string{}
			}
			m.tags[t.Key] = t.Value
		}
		if a.ObjectSizeGreaterThan != nil {
			m.min = *a.ObjectSizeGreaterThan
		}
		if a.ObjectSizeLessThan != nil {
			m.max = *a.ObjectSizeLessThan
		}
	}
	return m
}

func (m lifecycleMatch) whole() bool {
	return m.prefix == "" && m.tags == nil && m.min < 0 && m.max < 0
}

func (m lifecycleMatch) matches(o *object.Info) bool {
	if !strings.HasPrefix(o.Key, m.prefix) || (m.min >= 0 && o.Size <= m.min) || (m.max >= 0 && o.Size >= m.max) {
		return false
	}
	for k, v := range m.tags {
		if o.Tags[k] != v {
			return false
		}
	}
	return true
}

// lifecycleDate parses a rule's date: midnight UTC, ISO 8601.
func lifecycleDate(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t, err = time.Parse("2006-01-02", s)
	}
	return t, err == nil && t.Equal(t.UTC().Truncate(24*time.Hour))
}

// retentionOfLifecycle validates a configuration and returns the space
// retention it asks for.
func retentionOfLifecycle(c *lifecycleConfiguration) (object.SpaceSettings, *apiError) {
	set := object.SpaceSettings{Retention: "all"}
	if len(c.Rules) > 1000 {
		return set, errInvalidArgument.with("A lifecycle configuration has at most 1,000 rules.")
	}
	ids := map[string]bool{}
	expiring := 0
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.ID != nil {
			if len(*r.ID) > 255 {
				return set, errInvalidArgument.with("A rule's ID is at most 255 characters.")
			}
			if ids[*r.ID] {
				return set, errInvalidArgument.with("Rule ID " + *r.ID + " is used twice: IDs must be unique.")
			}
			ids[*r.ID] = true
		}
		if r.Status != "Enabled" && r.Status != "Disabled" {
			return set, errMalformedXML.with("A rule's Status must be Enabled or Disabled.")
		}
		if r.Prefix != nil && r.Filter != nil {
			return set, errMalformedXML.with("A rule has a Prefix or a Filter, not both.")
		}
		if e := r.Expiration; e != nil {
			n := 0
			for _, given := range []bool{e.Days != nil, e.Date != nil, e.ExpiredObjectDeleteMarker != nil} {
				if given {
					n++
				}
			}
			switch {
			case n != 1:
				return set, errMalformedXML.with("An Expiration has one of Days, Date and ExpiredObjectDeleteMarker.")
			case e.Days != nil && (*e.Days < 1 || *e.Days > maxLifecycleDays):
				return set, errInvalidArgument.with("Expiration Days must be a positive integer of at most " + strconv.Itoa(maxLifecycleDays) + ".")
			case e.Date != nil:
				if _, ok := lifecycleDate(*e.Date); !ok {
					return set, errInvalidArgument.with("Expiration Date must be midnight UTC in ISO 8601 format.")
				}
			}
		}
		for _, t := range r.Transitions {
			if t.Date != nil {
				if _, ok := lifecycleDate(*t.Date); !ok {
					return set, errInvalidArgument.with("Transition Date must be midnight UTC in ISO 8601 format.")
				}
			}
		}
		if len(r.Transitions) > 0 || len(r.NoncurrentVersionTransitions) > 0 {
			return set, errNotImplemented.with("Transitions are not implemented: Cairn has one storage class.")
		}
		if a := r.AbortIncompleteMultipartUpload; a != nil && (a.DaysAfterInitiation < 1 || a.DaysAfterInitiation > maxLifecycleDays) {
			return set, errInvalidArgument.with("DaysAfterInitiation must be a positive integer.")
		}
		if nv := r.NoncurrentVersionExpiration; nv != nil {
			if nv.NoncurrentDays < 1 || nv.NoncurrentDays > maxLifecycleDays {
				return set, errInvalidArgument.with("NoncurrentDays must be a positive integer of at most " + strconv.Itoa(maxLifecycleDays) + ".")
			}
			if nv.NewerNoncurrentVersions != nil && (*nv.NewerNoncurrentVersions < 1 || *nv.NewerNoncurrentVersions > 100) {
				return set, errInvalidArgument.with("NewerNoncurrentVersions must be 1 to 100.")
			}
		}
		if r.Expiration == nil && r.AbortIncompleteMultipartUpload == nil && r.NoncurrentVersionExpiration == nil {
			return set, errMalformedXML.with("A rule needs an action.")
		}
		// The whole bucket's plain noncurrent expiry is the history policy.
		if nv := r.NoncurrentVersionExpiration; r.Status == "Enabled" && nv != nil && nv.NewerNoncurrentVersions == nil && r.match().whole() {
			expiring++
			set = object.SpaceSettings{Retention: "duration", KeepForSeconds: uint64(nv.NoncurrentDays) * 86400}
		}
	}
	if expiring > 1 {
		return set, errInvalidArgument.with("Two rules expire the whole bucket's noncurrent versions: keep one.")
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
		// A rule without an ID gets one, as on S3; the document is then
		// kept as rewritten.
		named := false
		for i := range doc.Rules {
			if doc.Rules[i].ID == nil || *doc.Rules[i].ID == "" {
				id := requestID()
				doc.Rules[i].ID, named = &id, true
			}
		}
		if named {
			doc.NS = s3NS
			raw, _ = xml.Marshal(doc)
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
		if err := h.putConfig(ctx, q.bucket, lifecycleConfig, raw); err != nil {
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
		if err := h.putConfig(ctx, q.bucket, lifecycleConfig, nil); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// SweepLifecycle carries out every bucket's lifecycle rules as of now
// (those its retention does not) and returns how many versions and
// uploads it removed or expired. Every node runs it; doing a rule twice
// removes nothing more.
func (h *Handler) SweepLifecycle(ctx context.Context, now time.Time) (int, error) {
	sctx := object.WithSystemKeys(ctx)
	spaces, err := h.cfg.Service.ListSpaces(sctx)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, sp := range spaces {
		doc, err := h.config(sctx, sp.Name, lifecycleConfig)
		if err != nil || doc == nil {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		var c lifecycleConfiguration
		if xml.Unmarshal(doc, &c) != nil {
			continue
		}
		for i := range c.Rules {
			if c.Rules[i].Status != "Enabled" {
				continue
			}
			n, err := h.sweepRule(sctx, sp.Name, &c.Rules[i], now)
			done += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return done, errors.Join(errs...)
}

// sweepRule carries out one rule on one bucket.
func (h *Handler) sweepRule(ctx context.Context, bucket string, r *lifecycleRule, now time.Time) (int, error) {
	m := r.match()
	done := 0
	if a := r.AbortIncompleteMultipartUpload; a != nil {
		ups, err := h.allUploads(ctx, bucket)
		if err != nil {
			return done, err
		}
		before := now.Add(-time.Duration(a.DaysAfterInitiation) * 24 * time.Hour)
		for _, u := range ups {
			key := u.Headers[uploadKeyHeader]
			if !strings.HasPrefix(key, m.prefix) || !time.Unix(0, u.Modified).Before(before) {
				continue
			}
			id := strings.TrimPrefix(u.Key, mpuPrefix)
			parts, err := h.uploadParts(ctx, bucket, id)
			if err != nil {
				return done, err
			}
			h.removeUpload(ctx, bucket, id, u.Version, parts)
			done++
		}
	}
	e, nv := r.Expiration, r.NoncurrentVersionExpiration
	if e == nil && (nv == nil || (nv.NewerNoncurrentVersions == nil && m.whole())) {
		return done, nil // the rest is the space's retention
	}
	// Walk every version under the prefix, a key's versions together,
	// newest first.
	var key string
	var versions []object.Info
	flush := func() error {
		n, err := h.expireKey(ctx, bucket, versions, r, m, now)
		done += n
		versions = versions[:0]
		return err
	}
	err := h.eachVersion(ctx, bucket, m.prefix, func(o *object.Info) error {
		if o.Key != key && len(versions) > 0 {
			if err := flush(); err != nil {
				return err
			}
		}
		key = o.Key
		versions = append(versions, *o)
		return nil
	})
	if err == nil && len(versions) > 0 {
		err = flush()
	}
	return done, err
}

// expireKey applies a rule's expirations to one key's versions (newest
// first).
func (h *Handler) expireKey(ctx context.Context, bucket string, all []object.Info, r *lifecycleRule, m lifecycleMatch, now time.Time) (int, error) {
	// The rules see S3's view of the key (versioning.go): null versions a
	// newer one replaced are not in it. A noncurrent rule removes those
	// once they have been replaced for its days.
	vs, replaced := s3View(all)
	done := 0
	if nv := r.NoncurrentVersionExpiration; nv != nil {
		for _, v := range replaced {
			if now.Before(time.Unix(0, v.replacedAt).Add(time.Duration(nv.NoncurrentDays)*24*time.Hour)) || !h.removableByLifecycle(ctx, bucket, &v.Info) {
				continue
			}
			if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: v.Key, Version: v.Version}); err != nil && object.KindOf(err) != object.NotFound {
				return done, err
			}
			done++
		}
	}
	if len(vs) == 0 {
		return done, nil
	}
	cur := &vs[0]
	if e := r.Expiration; e != nil {
		switch {
		case e.ExpiredObjectDeleteMarker != nil && *e.ExpiredObjectDeleteMarker:
			if len(vs) == 1 && cur.DeleteMarker && h.removableByLifecycle(ctx, bucket, cur) {
				if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: cur.Key, Version: cur.Version}); err != nil && object.KindOf(err) != object.NotFound {
					return done, err
				}
				return done + 1, nil
			}
		case !cur.DeleteMarker && m.matches(cur):
			due := false
			if e.Days != nil {
				due = !now.Before(time.Unix(0, cur.Modified).Add(time.Duration(*e.Days) * 24 * time.Hour))
			} else if e.Date != nil {
				d, _ := lifecycleDate(*e.Date)
				due = !now.Before(d)
			}
			if due {
				if _, err := h.deleteKey(ctx, bucket, cur.Key, 0, false); err != nil && object.KindOf(err) != object.NotFound {
					return done, err
				}
				done++
			}
		}
	}
	nv := r.NoncurrentVersionExpiration
	if nv == nil {
		return done, nil
	}
	keep := 0
	if nv.NewerNoncurrentVersions != nil {
		keep = *nv.NewerNoncurrentVersions
	}
	for i := 1; i < len(vs); i++ {
		v := &vs[i]
		// A version became noncurrent when the next one was written.
		since := time.Unix(0, vs[i-1].Modified)
		if i-1 < keep || now.Before(since.Add(time.Duration(nv.NoncurrentDays)*24*time.Hour)) || (!v.DeleteMarker && !m.matches(v)) {
			continue
		}
		if !h.removableByLifecycle(ctx, bucket, v) {
			continue
		}
		if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: v.Key, Version: v.Version}); err != nil && object.KindOf(err) != object.NotFound {
			return done, err
		}
		done++
	}
	return done, nil
}

// removableByLifecycle reports whether a version is free of object lock.
func (h *Handler) removableByLifecycle(ctx context.Context, bucket string, v *object.Info) bool {
	c, err := h.lockConfig(ctx, bucket)
	if err != nil {
		return false
	}
	if c == nil {
		return true
	}
	l, err := h.versionLock(ctx, bucket, v.Key, v.Version)
	return err == nil && (l == nil || (!l.Hold && !l.retained(h.cfg.Now())))
}

// replacedNull is a null version a newer one replaced, and when.
type replacedNull struct {
	object.Info
	replacedAt int64
}

// s3View splits a key's versions (newest first) into those S3's view
// holds (versioning.go), and the null versions a newer null version
// replaced.
func s3View(vs []object.Info) (view []object.Info, replaced []replacedNull) {
	var shadow nullShadow
	for i := range vs {
		at := shadow.newer
		switch hidden, repl := shadow.next(&vs[i]); {
		case repl:
			replaced = append(replaced, replacedNull{vs[i], at})
		case !hidden:
			view = append(view, vs[i])
		}
	}
	return view, replaced
}

// eachVersion calls f with every version of the bucket's keys under
// prefix (system keys left out), in key order, a key's newest first,
// until f fails.
func (h *Handler) eachVersion(ctx context.Context, bucket, prefix string, f func(*object.Info) error) error {
	req := &object.ListRequest{Space: bucket, Prefix: prefix, AllVersions: true, Limit: 1000}
	for {
		l, err := h.cfg.Service.List(ctx, req)
		if err != nil {
			return err
		}
		for i := range l.Objects {
			if o := &l.Objects[i]; !strings.HasPrefix(o.Key, object.SystemKeyPrefix) {
				if err := f(o); err != nil {
					return err
				}
			}
		}
		if !l.Truncated || len(l.Objects) == 0 {
			return nil
		}
		last := l.Objects[len(l.Objects)-1]
		req.StartAfter, req.AfterVersion = last.Key, cmp.Or(l.NextVersion, last.Version)
	}
}
