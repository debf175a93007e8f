package s3

import (
	"context"
	"encoding/xml"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Cairn keeps every version of every object, as the space's retention
// says. S3's view of a bucket depends on its versioning state:
//
//   - A space made through Cairn's own API answers Enabled from its
//     creation: S3 clients see its whole history.
//   - A bucket made through S3 starts unversioned (versioningOff), as in
//     S3: GetBucketVersioning answers no status, and each write, and each
//     delete without a version id, makes the key's "null" version.
//   - PutBucketVersioning may enable versioning (then writes get version
//     ids of their own) or suspend it (writes make null versions again).
//     An enabled or suspended bucket never returns to unversioned.
//
// A null version carries the nullHeader mark. A newer null version of
// the key replaces it in S3's view: listings, "versionId=null" and the
// lifecycle's version counts see only a key's newest null version. The
// replaced ones stay in Cairn's history (the native API lists them) until
// the space's retention prunes them, a lifecycle noncurrent rule expires
// them, or the null version is deleted by its id, which removes every
// null version of the key. A delete in an unversioned bucket makes a null
// delete marker marked nullRemoved: S3 has no delete markers there, so it
// is not listed, and the key has no null version while it is the newest.
const (
	versioningEnabled   = "Enabled"
	versioningSuspended = "Suspended"
	// versioningOff is the state of a bucket made through S3 whose
	// versioning was never set; GetBucketVersioning answers no status.
	versioningOff = "Off"
	// nullHeader marks a version (or delete marker) as its key's null
	// version. Not a content header: never sent to clients.
	nullHeader = "cairn-null"
	// nullRemoved is nullHeader's value on the delete marker of a delete
	// in an unversioned bucket ("1" on every other null version).
	nullRemoved = "removed"
	// nullVersionID is how S3 names the null version.
	nullVersionID = "null"
	// versioningTTL is how long a node trusts the versioning state it read
	// (S3 too applies a change of it after a delay).
	versioningTTL = 2 * time.Second
)

// versioningCache remembers each bucket's versioning state briefly, so
// that writes do not read it each time.
type versioningCache struct {
	mu sync.Mutex
	m  map[string]versioningEntry
}

type versioningEntry struct {
	status string
	at     time.Time
}

// versioning returns the bucket's versioning state.
func (h *Handler) versioning(ctx context.Context, bucket string) (string, error) {
	now := time.Now()
	c := &h.vcache
	c.mu.Lock()
	e, ok := c.m[bucket]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < versioningTTL {
		return e.status, nil
	}
	status := versioningEnabled
	info, err := h.cfg.Service.Stat(object.WithSystemKeys(ctx), &object.GetRequest{Space: bucket, Key: bucketVersioningKey, Length: -1})
	switch {
	case err == nil && (info.Meta["status"] == versioningSuspended || info.Meta["status"] == versioningOff):
		status = info.Meta["status"]
	case err != nil && object.KindOf(err) != object.NotFound:
		return "", err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]versioningEntry{}
	}
	c.m[bucket] = versioningEntry{status, now}
	c.mu.Unlock()
	return status, nil
}

type versioningConfiguration struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	NS        string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:"Status,omitempty"`
	MfaDelete string   `xml:"MfaDelete,omitempty"`
}

// getVersioning is GetBucketVersioning.
func (h *Handler) getVersioning(q *request) {
	if !h.exists(q) {
		return
	}
	status, err := h.versioning(q.r.Context(), q.bucket)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	if status == versioningOff {
		status = "" // never set: S3 answers no status
	}
	writeXML(q.w, http.StatusOK, versioningConfiguration{NS: s3NS, Status: status})
}

// putVersioning is PutBucketVersioning: Enabled or Suspended.
func (h *Handler) putVersioning(q *request) {
	if !h.exists(q) {
		return
	}
	var doc versioningConfiguration
	if e := readXML(q, &doc, maxXMLBody); e != nil {
		q.fail(e)
		return
	}
	if doc.XMLName.Local == "" || (doc.Status != versioningEnabled && doc.Status != versioningSuspended) {
		q.fail(errMalformedXML)
		return
	}
	if doc.Status == versioningSuspended {
		if c, err := h.lockConfig(q.r.Context(), q.bucket); err != nil || c != nil {
			q.fail(&apiError{"InvalidBucketState", http.StatusConflict, "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed."})
			return
		}
	}
	if doc.MfaDelete == "Enabled" {
		notImplemented(q, "MFA delete")
		return
	}
	if err := h.setVersioning(q.r.Context(), q.bucket, doc.Status); err != nil {
		h.serviceError(q, err)
		return
	}
	q.w.WriteHeader(http.StatusOK)
}

// setVersioning records a bucket's versioning state; this node applies it
// at once, the others within versioningTTL.
func (h *Handler) setVersioning(ctx context.Context, bucket, status string) error {
	_, err := h.cfg.Service.Put(object.WithSystemKeys(ctx), &object.PutRequest{Space: bucket, Key: bucketVersioningKey,
		Meta: map[string]string{"status": status}}, http.NoBody)
	if err != nil {
		return err
	}
	h.vcache.mu.Lock()
	delete(h.vcache.m, bucket)
	h.vcache.mu.Unlock()
	return nil
}

// isNull reports whether a version is a null version (its key's, unless
// a newer null version replaced it).
func isNull(o *object.Info) bool { return o.Headers[nullHeader] != "" }

// isRemoval reports whether a version is the delete marker of a delete in
// an unversioned bucket.
func isRemoval(o *object.Info) bool { return o.DeleteMarker && o.Headers[nullHeader] == nullRemoved }

// nullShadow follows one key's versions, newest first, and tells which
// of them S3's view leaves out: a null version a newer null version
// replaced, and the marker of a delete in an unversioned bucket.
type nullShadow struct {
	seen  bool  // a null version of the key went by: older ones are replaced
	newer int64 // when the last null version that went by was written
}

// next takes the key's next version: hidden if S3's view leaves it out,
// replaced if it is a null version a newer one (written at s.newer
// before the call) replaced.
func (s *nullShadow) next(v *object.Info) (hidden, replaced bool) {
	if !isNull(v) {
		return false, false
	}
	replaced = s.seen
	s.seen, s.newer = true, v.Modified
	return replaced || isRemoval(v), replaced
}

// versionIDOf is how S3 names a version.
func versionIDOf(o *object.Info) string {
	if isNull(o) {
		return nullVersionID
	}
	return tstamp.String(o.Version)
}

// setVersionID sets x-amz-version-id for a version of bucket; S3 sends
// none for the null versions of an unversioned bucket.
func (h *Handler) setVersionID(ctx context.Context, hd http.Header, bucket string, o *object.Info) {
	if isNull(o) {
		if status, err := h.versioning(ctx, bucket); err == nil && status == versioningOff {
			hd.Del("x-amz-version-id")
			return
		}
	}
	hd.Set("x-amz-version-id", versionIDOf(o))
}

// markNull makes a write in an unversioned or suspended bucket its key's
// null version.
func (h *Handler) markNull(q *request, req *object.PutRequest) *apiError {
	status, err := h.versioning(q.r.Context(), req.Space)
	if err != nil {
		return fromService(err)
	}
	if status != versioningSuspended && status != versioningOff {
		return nil
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	req.Headers[nullHeader] = "1"
	return nil
}

// nullVersion finds key's null version: the newest null one, unless that
// is the marker of a delete in an unversioned bucket.
func (h *Handler) nullVersion(ctx context.Context, bucket, key string) (uint64, *apiError) {
	var found uint64
	err := h.eachNull(ctx, bucket, key, func(v *object.Info) bool {
		if !isRemoval(v) {
			found = v.Version
		}
		return false
	})
	switch {
	case err != nil:
		e := fromService(err)
		if e == errNoSuchKey {
			e = errNoSuchVersion
		}
		return 0, e
	case found == 0:
		return 0, errNoSuchVersion
	}
	return found, nil
}

// eachNull calls f with each null version of key, newest first, while f
// returns true.
func (h *Handler) eachNull(ctx context.Context, bucket, key string, f func(*object.Info) bool) error {
	req := object.VersionsRequest{Space: bucket, Key: key}
	for {
		res, err := h.cfg.Service.Versions(ctx, &req)
		if err != nil {
			return err
		}
		for i := range res.Versions {
			if isNull(&res.Versions[i]) && !f(&res.Versions[i]) {
				return nil
			}
		}
		if !res.Truncated || len(res.Versions) == 0 {
			return nil
		}
		req.Before = res.Versions[len(res.Versions)-1].Version
	}
}

// deleteNull removes every null version of key: the null version and
// those it replaced, which would otherwise take its place. It returns the
// info of the newest one removed; NotFound if there was none.
func (h *Handler) deleteNull(ctx context.Context, bucket, key string) (object.Info, error) {
	var nulls []object.Info
	if err := h.eachNull(ctx, bucket, key, func(v *object.Info) bool { nulls = append(nulls, *v); return true }); err != nil {
		return object.Info{}, err
	}
	if len(nulls) == 0 {
		return object.Info{}, &object.Error{Kind: object.NotFound, Message: "no null version"}
	}
	for _, v := range nulls {
		if _, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: key, Version: v.Version}); err != nil && object.KindOf(err) != object.NotFound {
			return nulls[0], err
		}
	}
	return nulls[0], nil
}

// parseVersionID resolves a version id of key: a Cairn version, or
// "null" (the key's null version). The empty id is 0.
func (h *Handler) parseVersionID(ctx context.Context, bucket, key, id string) (uint64, *apiError) {
	switch id {
	case "":
		return 0, nil
	case nullVersionID:
		return h.nullVersion(ctx, bucket, key)
	}
	v, err := tstamp.Parse(id)
	if err != nil || v == 0 {
		return 0, errInvalidArgument.with("Invalid version id specified")
	}
	return v, nil
}
