package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Object lock (WORM).
//
// A bucket created with x-amz-bucket-object-lock-enabled: true keeps the
// bucket document "object-lock" (its ObjectLockConfiguration, with an
// optional default retention). Each version of it may carry a retention
// (GOVERNANCE or COMPLIANCE, until a date) and a legal hold, kept as the
// system key olockPrefix+HASH(key)/VERSION: set when the version is
// written (x-amz-object-lock-* headers, or the bucket's default) and
// changed with PutObjectRetention and PutObjectLegalHold. A version under
// a legal hold, or retained until a later date, cannot be removed
// through S3: DELETE with its versionId and DeleteObjects refuse it with
// AccessDenied, except a GOVERNANCE retention by a key with admin on the
// bucket that sends x-amz-bypass-governance-retention: true. COMPLIANCE
// retention can only be extended. A delete without a versionId writes a
// delete marker and removes nothing, as S3's. Versioning cannot be
// suspended on such a bucket, and lifecycle rules that remove versions
// are refused there (the history's pruning does not read locks).

const (
	objectLockConfig = "object-lock"
	olockPrefix      = object.SystemKeyPrefix + "olock/"
	uploadLockHeader = "cairn-upload-lock"
	// versionLockHeader carries the lock a version was written with, in
	// the version itself: the write and its lock are one. The version's
	// lock document, saved after it, is what PutObjectRetention and
	// PutObjectLegalHold change, and wins when present.
	versionLockHeader = "cairn-lock"
	lockGovernance    = "GOVERNANCE"
	lockCompliance    = "COMPLIANCE"
)

type objectLockConfiguration struct {
	XMLName xml.Name `xml:"ObjectLockConfiguration"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Enabled string   `xml:"ObjectLockEnabled,omitempty"`
	Rule    *struct {
		Mode  string `xml:"DefaultRetention>Mode,omitempty"`
		Days  *int   `xml:"DefaultRetention>Days,omitempty"`
		Years *int   `xml:"DefaultRetention>Years,omitempty"`
	} `xml:"Rule,omitempty"`
}

// objectLock is one version's lock.
type objectLock struct {
	Mode  string    `json:"mode,omitempty"`
	Until time.Time `json:"until,omitempty"`
	Hold  bool      `json:"hold,omitempty"`
}

// Retention dates are kept and shown to the millisecond, rounded up: a
// retention is never shortened, and a client that waits until the date
// it reads finds the version free.
const lockTimeFormat = "2006-01-02T15:04:05.000Z07:00"

func lockTime(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

func (l *objectLock) retained(now time.Time) bool { return l.Mode != "" && l.Until.After(now) }

var (
	errLockNotEnabled = &apiError{"InvalidRequest", http.StatusBadRequest, "Bucket is missing Object Lock Configuration: create it with x-amz-bucket-object-lock-enabled: true."}
	errLocked         = &apiError{"AccessDenied", http.StatusForbidden, "The version is protected by object lock (a legal hold or an unexpired retention)."}
	errNoObjectLock   = &apiError{"NoSuchObjectLockConfiguration", http.StatusNotFound, "The specified object does not have a ObjectLock configuration."}
)

// lockConfig is the bucket's object lock configuration, or nil if the
// bucket has none.
func (h *Handler) lockConfig(ctx context.Context, bucket string) (*objectLockConfiguration, error) {
	doc, err := h.config(ctx, bucket, objectLockConfig)
	if err != nil || doc == nil {
		return nil, err
	}
	var c objectLockConfiguration
	if err := xml.Unmarshal(doc, &c); err != nil {
		return nil, object.Errorf(object.Internal, "the object lock configuration of %s does not parse: %v", bucket, err)
	}
	return &c, nil
}

func (h *Handler) versionLock(ctx context.Context, bucket, key string, version uint64) (*objectLock, error) {
	doc, err := h.readSystemDoc(ctx, bucket, versionDocKey(olockPrefix, key, version))
	if err != nil {
		return nil, err
	}
	if doc == nil {
		// No document (yet): the lock the version was written with.
		info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: bucket, Key: key, Version: version, Length: -1})
		switch k := object.KindOf(err); {
		case k == object.NotFound || k == object.Deleted:
			return nil, nil
		case err != nil:
			return nil, err
		}
		return writtenLock(&info)
	}
	var l objectLock
	if err := json.Unmarshal(doc, &l); err != nil {
		return nil, object.Errorf(object.Internal, "the lock of %s/%s does not parse: %v", bucket, key, err)
	}
	if l.Mode == "" && !l.Hold {
		return nil, nil // lifted
	}
	return &l, nil
}

// writtenLock is the lock a version was written with, or nil.
func writtenLock(info *object.Info) (*objectLock, error) {
	s := info.Headers[versionLockHeader]
	if s == "" {
		return nil, nil
	}
	var l objectLock
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, object.Errorf(object.Internal, "the lock of %s/%s does not parse: %v", info.Space, info.Key, err)
	}
	return &l, nil
}

// stamp writes l into the version req will write (versionLockHeader).
func (l *objectLock) stamp(req *object.PutRequest) {
	if l == nil || (l.Mode == "" && !l.Hold) {
		return
	}
	doc, _ := json.Marshal(l)
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	req.Headers[versionLockHeader] = string(doc)
}

func (h *Handler) saveLock(ctx context.Context, bucket, key string, version uint64, l *objectLock) error {
	// Even no lock is saved as a document: it overrides the lock the
	// version was written with.
	if l == nil {
		l = &objectLock{}
	}
	doc, _ := json.Marshal(l)
	return h.writeSystemDoc(ctx, bucket, versionDocKey(olockPrefix, key, version), doc)
}

// bucketObjectLock serves GET and PUT ?object-lock.
func (h *Handler) bucketObjectLock(q *request) {
	if !h.exists(q) {
		return
	}
	ctx := q.r.Context()
	cur, err := h.lockConfig(ctx, q.bucket)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	switch q.r.Method {
	case http.MethodGet:
		if cur == nil {
			q.fail(&apiError{"ObjectLockConfigurationNotFoundError", http.StatusNotFound, "Object Lock configuration does not exist for this bucket."})
			return
		}
		cur.NS = s3NS
		writeXML(q.w, http.StatusOK, cur)
	case http.MethodPut:
		if cur == nil {
			// An existing bucket may take object lock if its versioning
			// is enabled, as on S3.
			status, err := h.versioning(ctx, q.bucket)
			if err != nil {
				h.serviceError(q, err)
				return
			}
			if status != versioningEnabled {
				q.fail(&apiError{"InvalidBucketState", http.StatusConflict, "Object Lock needs versioning Enabled on the bucket."})
				return
			}
		}
		var c objectLockConfiguration
		if e := readXML(q, &c, maxXMLBody); e != nil {
			q.fail(e)
			return
		}
		if c.Enabled != "Enabled" {
			q.fail(errMalformedXML.with("ObjectLockEnabled must be Enabled."))
			return
		}
		if r := c.Rule; r != nil {
			switch {
			case r.Mode != lockGovernance && r.Mode != lockCompliance:
				q.fail(errMalformedXML.with("The default retention's Mode is GOVERNANCE or COMPLIANCE."))
				return
			case (r.Days == nil) == (r.Years == nil):
				q.fail(errMalformedXML.with("The default retention has Days or Years, not both."))
				return
			case r.Days != nil && *r.Days <= 0, r.Years != nil && *r.Years <= 0:
				q.fail(&apiError{"InvalidRetentionPeriod", http.StatusBadRequest, "The default retention period must be a positive number of days or years."})
				return
			}
		}
		c.NS = ""
		doc, _ := xml.Marshal(c)
		if err := h.putConfig(ctx, q.bucket, objectLockConfig, doc); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusOK)
	default:
		q.fail(errMethodNotAllowed)
	}
}

// writeLock is the lock a write asks for (x-amz-object-lock-* headers)
// or the bucket's default retention gives, or nil.
func (h *Handler) writeLock(q *request) (*objectLock, *apiError) {
	hd := q.r.Header
	mode, until, hold := hd.Get("X-Amz-Object-Lock-Mode"), hd.Get("X-Amz-Object-Lock-Retain-Until-Date"), hd.Get("X-Amz-Object-Lock-Legal-Hold")
	c, err := h.lockConfig(q.r.Context(), q.bucket)
	if err != nil {
		return nil, fromService(err)
	}
	if c == nil {
		if mode != "" || until != "" || hold != "" {
			return nil, errLockNotEnabled
		}
		return nil, nil
	}
	l := &objectLock{}
	switch {
	case (mode == "") != (until == ""):
		return nil, errInvalidArgument.with("x-amz-object-lock-mode and x-amz-object-lock-retain-until-date go together.")
	case mode != "":
		if mode != lockGovernance && mode != lockCompliance {
			return nil, errInvalidArgument.with("x-amz-object-lock-mode is GOVERNANCE or COMPLIANCE.")
		}
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return nil, errInvalidArgument.with("x-amz-object-lock-retain-until-date is an ISO 8601 time.")
		}
		if !t.After(h.cfg.Now()) {
			return nil, errInvalidArgument.with("The retain until date must be in the future.")
		}
		l.Mode, l.Until = mode, lockTime(t)
	case c.Rule != nil:
		now := h.cfg.Now().UTC()
		l.Mode = c.Rule.Mode
		if c.Rule.Days != nil {
			l.Until = lockTime(now.AddDate(0, 0, *c.Rule.Days))
		} else {
			l.Until = lockTime(now.AddDate(*c.Rule.Years, 0, 0))
		}
	}
	switch hold {
	case "", "OFF":
	case "ON":
		l.Hold = true
	default:
		return nil, errInvalidArgument.with("x-amz-object-lock-legal-hold is ON or OFF.")
	}
	if l.Mode == "" && !l.Hold {
		return nil, nil
	}
	return l, nil
}

// setLockHeaders tells a reader a version's lock.
func setLockHeaders(hd http.Header, l *objectLock) {
	if l == nil {
		return
	}
	if l.Mode != "" {
		hd.Set("X-Amz-Object-Lock-Mode", l.Mode)
		hd.Set("X-Amz-Object-Lock-Retain-Until-Date", l.Until.UTC().Format(lockTimeFormat))
	}
	if l.Hold {
		hd.Set("X-Amz-Object-Lock-Legal-Hold", "ON")
	} else {
		hd.Set("X-Amz-Object-Lock-Legal-Hold", "OFF")
	}
}

// checkRemovable refuses the removal of a locked version.
func (h *Handler) checkRemovable(q *request, bucket, key string, version uint64) *apiError {
	ctx := q.r.Context()
	c, err := h.lockConfig(ctx, bucket)
	if err != nil {
		return fromService(err)
	}
	if c == nil || version == 0 {
		return nil
	}
	l, err := h.versionLock(ctx, bucket, key, version)
	if err != nil {
		return fromService(err)
	}
	switch {
	case l == nil:
		return nil
	case l.Hold:
		return errLocked
	case !l.retained(h.cfg.Now()):
		return nil
	case l.Mode == lockGovernance && h.bypass(q, bucket, key, version):
		return nil
	}
	return errLocked
}

// bypass reports whether the request asks to bypass GOVERNANCE retention
// and may: s3:BypassGovernanceRetention is allowed it (admin on the
// bucket, or a policy's grant) and no policy denies it.
func (h *Handler) bypass(q *request, bucket, key string, version uint64) bool {
	if !strings.EqualFold(q.r.Header.Get("X-Amz-Bypass-Governance-Retention"), "true") || q.auth == nil {
		return false
	}
	return h.authorization(q, bucket, key, tstamp.String(version), "s3:BypassGovernanceRetention", PermAdmin) == nil
}

// objectLockOp serves GET and PUT ?retention and ?legal-hold.
func (h *Handler) objectLockOp(q *request) {
	ctx := q.r.Context()
	c, err := h.lockConfig(ctx, q.bucket)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	if c == nil {
		q.fail(errLockNotEnabled)
		return
	}
	v, e := h.version(q)
	if e != nil {
		q.fail(e)
		return
	}
	info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: q.bucket, Key: q.key, Version: v, Length: -1})
	if err != nil {
		h.objectError(q, v, err)
		return
	}
	l, err := h.versionLock(ctx, q.bucket, q.key, info.Version)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	retention := q.query.Has("retention")
	type retentionXML struct {
		XMLName xml.Name `xml:"Retention"`
		NS      string   `xml:"xmlns,attr,omitempty"`
		Mode    string   `xml:"Mode"`
		Until   string   `xml:"RetainUntilDate"`
	}
	type holdXML struct {
		XMLName xml.Name `xml:"LegalHold"`
		NS      string   `xml:"xmlns,attr,omitempty"`
		Status  string   `xml:"Status"`
	}
	switch q.r.Method {
	case http.MethodGet:
		switch {
		case retention && (l == nil || l.Mode == ""):
			q.fail(errNoObjectLock)
		case retention:
			writeXML(q.w, http.StatusOK, retentionXML{NS: s3NS, Mode: l.Mode, Until: l.Until.UTC().Format(lockTimeFormat)})
		case l == nil || !l.Hold:
			writeXML(q.w, http.StatusOK, holdXML{NS: s3NS, Status: "OFF"})
		default:
			writeXML(q.w, http.StatusOK, holdXML{NS: s3NS, Status: "ON"})
		}
		return
	case http.MethodPut:
	default:
		q.fail(errMethodNotAllowed)
		return
	}
	if l == nil {
		l = &objectLock{}
	}
	now := h.cfg.Now()
	if retention {
		var doc retentionXML
		if e := readXML(q, &doc, maxXMLBody); e != nil {
			q.fail(e)
			return
		}
		if doc.Mode != lockGovernance && doc.Mode != lockCompliance {
			q.fail(errMalformedXML.with("Mode is GOVERNANCE or COMPLIANCE."))
			return
		}
		until, err := time.Parse(time.RFC3339, doc.Until)
		if err != nil {
			q.fail(errMalformedXML.with("RetainUntilDate is an ISO 8601 time."))
			return
		}
		if !until.After(now) {
			q.fail(errInvalidArgument.with("The retain until date must be in the future."))
			return
		}
		if l.retained(now) {
			weaker := until.Before(l.Until) || doc.Mode != l.Mode // a change of mode needs a bypass too
			switch {
			case weaker && l.Mode == lockCompliance:
				q.fail(errLocked.with("A COMPLIANCE retention can only be extended."))
				return
			case weaker && !h.bypass(q, q.bucket, q.key, info.Version):
				q.fail(errLocked.with("Shortening a GOVERNANCE retention needs x-amz-bypass-governance-retention: true and s3:BypassGovernanceRetention (admin on the bucket, or a policy that allows it)."))
				return
			}
		}
		l.Mode, l.Until = doc.Mode, lockTime(until)
	} else {
		var doc holdXML
		if e := readXML(q, &doc, maxXMLBody); e != nil {
			q.fail(e)
			return
		}
		if doc.Status != "ON" && doc.Status != "OFF" {
			q.fail(errMalformedXML.with("The legal hold's Status is ON or OFF."))
			return
		}
		l.Hold = doc.Status == "ON"
	}
	if err := h.saveLock(ctx, q.bucket, q.key, info.Version, l); err != nil {
		h.serviceError(q, err)
		return
	}
	q.w.WriteHeader(http.StatusOK)
}

// Object lock for every other way a version can go. The native protocol,
// the JSON API and the console remove versions, drop spaces and change a
// space's retention through the node's service, which the node wraps
// with these checks (internal/node); S3's own DeleteBucket takes the
// space check too. Those paths have no GOVERNANCE bypass: a version under
// a legal hold or an unexpired retention of either mode stays.

// CheckRemoveVersion fails with AccessDenied if object lock holds the
// version.
func (h *Handler) CheckRemoveVersion(ctx context.Context, bucket, key string, version uint64) error {
	c, err := h.lockConfig(ctx, bucket)
	if err != nil || c == nil || version == 0 {
		return err
	}
	l, err := h.versionLock(ctx, bucket, key, version)
	if err != nil || l == nil {
		return err
	}
	if why := l.holds(h.cfg.Now()); why != "" {
		return object.Errorf(object.AccessDenied, "version %s of %s/%s is under object lock (%s): it cannot be removed", tstamp.String(version), bucket, key, why)
	}
	return nil
}

// CheckDropSpace fails with AccessDenied if the space is a bucket with
// object lock holding any of its versions. A version's lock is its lock
// document, else the lock it was written with (versionLock); the
// documents are read once, up front.
func (h *Handler) CheckDropSpace(ctx context.Context, bucket string) error {
	c, err := h.lockConfig(ctx, bucket)
	if err != nil || c == nil {
		return err
	}
	docs, err := h.listAll(object.WithSystemKeys(ctx), bucket, olockPrefix)
	if err != nil {
		return err
	}
	locks := make(map[string]*objectLock, len(docs))
	for _, d := range docs {
		doc, err := h.readSystemDoc(ctx, bucket, d.Key)
		if err != nil {
			return err
		}
		var l objectLock
		if doc != nil && json.Unmarshal(doc, &l) == nil {
			locks[d.Key] = &l
		}
	}
	now := h.cfg.Now()
	return h.eachVersion(ctx, bucket, "", func(v *object.Info) error {
		l, ok := locks[versionDocKey(olockPrefix, v.Key, v.Version)]
		if !ok {
			if l, _ = writtenLock(v); l == nil {
				return nil
			}
		}
		if why := l.holds(now); why != "" {
			return object.Errorf(object.AccessDenied, "space %s holds versions under object lock (%s): it cannot be deleted until every retention ends and every legal hold is lifted", bucket, why)
		}
		return nil
	})
}

// CheckRetention fails with AccessDenied if a bucket with object lock
// would get a retention that prunes history (anything but all): the
// pruning does not read locks.
func (h *Handler) CheckRetention(ctx context.Context, bucket string, s object.SpaceSettings) error {
	if s.Retention == "" || s.Retention == "all" {
		return nil
	}
	c, err := h.lockConfig(ctx, bucket)
	if err != nil || c == nil {
		return err
	}
	return object.Errorf(object.AccessDenied, "space %s has object lock: its retention stays all (a pruning retention would remove locked versions)", bucket)
}

// holds says what keeps a version, or "" if nothing does now.
func (l *objectLock) holds(now time.Time) string {
	switch {
	case l.Hold:
		return "a legal hold"
	case l.retained(now):
		return strings.ToLower(l.Mode) + " retention until " + l.Until.UTC().Format(time.RFC3339)
	}
	return ""
}
