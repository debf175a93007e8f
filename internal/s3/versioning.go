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

// Cairn keeps every version of every object, so a bucket's versioning is
// Enabled from its creation. PutBucketVersioning may suspend it: S3's
// null-version semantics then hold. Each write (and each delete without a
// version id) makes the key's "null" version, replacing the one before:
// the new version carries the nullHeader mark, and once it is written the
// key's older marked versions are removed. Versions written while
// versioning was enabled keep their ids. Enabling again stops the
// replacing; the null version stays until deleted by its id, "null".
const (
	versioningEnabled   = "Enabled"
	versioningSuspended = "Suspended"
	// nullHeader marks a version (or delete marker) as its key's null
	// version. Not a content header: never sent to clients.
	nullHeader = "cairn-null"
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
	case err == nil && info.Meta["status"] == versioningSuspended:
		status = versioningSuspended
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
	_, err := h.cfg.Service.Put(sysCtx(q), &object.PutRequest{Space: q.bucket, Key: bucketVersioningKey,
		Meta: map[string]string{"status": doc.Status}}, http.NoBody)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	h.vcache.mu.Lock()
	delete(h.vcache.m, q.bucket) // this node applies it at once
	h.vcache.mu.Unlock()
	q.w.WriteHeader(http.StatusOK)
}

// isNull reports whether a version is its key's null version.
func isNull(o *object.Info) bool { return o.Headers[nullHeader] != "" }

// versionIDOf is how S3 names a version.
func versionIDOf(o *object.Info) string {
	if isNull(o) {
		return nullVersionID
	}
	return tstamp.String(o.Version)
}

// markNull makes a write in a suspended bucket its key's null version; it
// reports whether it did (then dropNull must follow the write).
func (h *Handler) markNull(q *request, req *object.PutRequest) (bool, *apiError) {
	status, err := h.versioning(q.r.Context(), req.Space)
	if err != nil {
		return false, fromService(err)
	}
	if status != versioningSuspended {
		return false, nil
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	req.Headers[nullHeader] = "1"
	return true, nil
}

// dropNull removes the null versions of key other than keep: those a new
// null version replaced. A failure is logged, not answered: the write
// itself is done, and readers take the newest null version.
func (h *Handler) dropNull(ctx context.Context, bucket, key string, keep uint64) {
	req := object.VersionsRequest{Space: bucket, Key: key}
	for {
		res, err := h.cfg.Service.Versions(ctx, &req)
		if err != nil {
			h.cfg.Logger.Warn("s3: replacing the null version", "bucket", bucket, "key", key, "err", err)
			return
		}
		for i := range res.Versions {
			v := &res.Versions[i]
			if v.Version != keep && isNull(v) {
				_, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: key, Version: v.Version})
				if err != nil && object.KindOf(err) != object.NotFound {
					h.cfg.Logger.Warn("s3: replacing the null version", "bucket", bucket, "key", key, "err", err)
				}
			}
		}
		if !res.Truncated || len(res.Versions) == 0 {
			return
		}
		req.Before = res.Versions[len(res.Versions)-1].Version
	}
}

// nullVersion finds key's null version: the newest marked one.
func (h *Handler) nullVersion(ctx context.Context, bucket, key string) (uint64, *apiError) {
	req := object.VersionsRequest{Space: bucket, Key: key}
	for {
		res, err := h.cfg.Service.Versions(ctx, &req)
		if err != nil {
			e := fromService(err)
			if e == errNoSuchKey {
				e = errNoSuchVersion
			}
			return 0, e
		}
		for i := range res.Versions {
			if isNull(&res.Versions[i]) {
				return res.Versions[i].Version, nil
			}
		}
		if !res.Truncated || len(res.Versions) == 0 {
			return 0, errNoSuchVersion
		}
		req.Before = res.Versions[len(res.Versions)-1].Version
	}
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
