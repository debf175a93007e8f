package api

import (
	"cmp"
	"encoding/hex"
	"net/http"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Version is one version of an object as the version endpoints describe
// it.
type Version struct {
	Ref
	Version      string            `json:"version"`
	Parent       string            `json:"parent,omitempty"`
	Origin       *VersionName      `json:"origin,omitempty"`
	Size         int64             `json:"size"`
	ETag         string            `json:"etag,omitempty"`
	Hash         string            `json:"hash,omitempty"`
	ContentType  string            `json:"content_type,omitempty"`
	Modified     string            `json:"modified,omitempty"`
	DeleteMarker bool              `json:"delete_marker,omitempty"`
	Meta         map[string]string `json:"meta,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// VersionName names a version: a space ("" if deleted), a key and a
// version id.
type VersionName struct {
	Ref
	Version string `json:"version"`
}

func versionOf(i *object.Info) Version {
	v := Version{Ref: Ref{Space: i.Space, Key: i.Key}, Version: tstamp.String(i.Version), Size: i.Size, ETag: i.ETag,
		ContentType: i.ContentType, DeleteMarker: i.DeleteMarker, Meta: i.Meta, Tags: i.Tags}
	if i.Parent != 0 {
		v.Parent = tstamp.String(i.Parent)
	}
	if i.Hash != ([32]byte{}) {
		v.Hash = hex.EncodeToString(i.Hash[:])
	}
	if i.Modified != 0 {
		v.Modified = time.Unix(0, i.Modified).UTC().Format(time.RFC3339Nano)
	}
	if o := i.Origin; o != nil {
		v.Origin = &VersionName{Ref: Ref{Space: o.Space, Key: o.Key}, Version: tstamp.String(o.Version)}
	}
	return v
}

// optTS parses an optional version id ("" is 0).
func optTS(field, s string) (uint64, *ErrorBody) {
	if s == "" {
		return 0, nil
	}
	return parseTS(field, s)
}

// CloneRequest clones a version (the latest unless Version) of Space/Key
// into To.
type CloneRequest struct {
	Ref
	Version     string `json:"version,omitempty"`
	To          Ref    `json:"to"`
	IfNoneMatch bool   `json:"if_none_match,omitempty"`
}

func (q *call) clone(req *CloneRequest) (any, *ErrorBody) {
	v, e := optTS("version", req.Version)
	if e != nil {
		return nil, e
	}
	dst := cmp.Or(req.To.Space, req.Space)
	if e := q.allow(req.Space, auth.Read); e != nil {
		return nil, e
	}
	if e := q.allow(dst, auth.Write); e != nil {
		return nil, e
	}
	info, err := q.versioner().Clone(q.ctx, &object.CloneRequest{Space: req.Space, Key: req.Key, Version: v, DstSpace: dst, DstKey: req.To.Key, IfNoneMatch: req.IfNoneMatch})
	if err != nil {
		return nil, serviceError(err)
	}
	return versionOf(&info), nil
}

// LineageRequest asks for a version's lineage (the latest unless
// Version); Limit bounds the ancestors (0: 100).
type LineageRequest struct {
	Ref
	Version string `json:"version,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// LineageResponse is a version, its ancestors nearest first and its
// children.
type LineageResponse struct {
	Version   Version        `json:"version"`
	Ancestors []LineageEntry `json:"ancestors"`
	Children  []LineageEntry `json:"children"`
	Truncated bool           `json:"truncated,omitempty"`
}

// LineageEntry is one version of a lineage: Clone when the relation
// crosses objects, Gone when the version no longer exists.
type LineageEntry struct {
	Version
	Clone bool `json:"clone,omitempty"`
	Gone  bool `json:"gone,omitempty"`
}

func (q *call) lineage(req *LineageRequest) (any, *ErrorBody) {
	v, e := optTS("version", req.Version)
	if e != nil {
		return nil, e
	}
	if e := q.allow(req.Space, auth.Read); e != nil {
		return nil, e
	}
	l, err := q.versioner().Lineage(q.ctx, &object.LineageRequest{Space: req.Space, Key: req.Key, Version: v, Limit: req.Limit})
	if err != nil {
		return nil, serviceError(err)
	}
	out := LineageResponse{Version: versionOf(&l.Version), Ancestors: []LineageEntry{}, Children: []LineageEntry{}, Truncated: l.Truncated}
	for _, a := range l.Ancestors {
		if a.Space != "" && !q.h.cfg.Keys.Allowed(q.access, a.Space, auth.Read) {
			out.Truncated = true // the rest of the chain is in a space the key may not read
			break
		}
		out.Ancestors = append(out.Ancestors, lineageEntry(&a))
	}
	for _, c := range l.Children {
		if q.h.cfg.Keys.Allowed(q.access, c.Space, auth.Read) {
			out.Children = append(out.Children, lineageEntry(&c))
		}
	}
	return out, nil
}

func lineageEntry(e *object.LineageEntry) LineageEntry {
	le := LineageEntry{Version: versionOf(&e.Info), Clone: e.Clone, Gone: e.Gone}
	if e.Gone {
		le.Version = Version{Ref: Ref{Space: e.Space, Key: e.Key}, Version: tstamp.String(e.Version)}
	}
	return le
}

// DiffRequest compares version From of Space/Key with version To of the
// same object or of ToRef ("" versions: the latest).
type DiffRequest struct {
	Ref
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	ToRef *Ref   `json:"to_object,omitempty"`
	Exact bool   `json:"exact,omitempty"`
}

// DiffResponse is what changed: metadata fields and byte ranges.
type DiffResponse struct {
	From    Version        `json:"from"`
	To      Version        `json:"to"`
	Changes []FieldChange  `json:"changes"`
	Ranges  []ChangedRange `json:"ranges"`
	Exact   bool           `json:"exact"`
}

// FieldChange is one metadata field that differs.
type FieldChange struct {
	Field   string `json:"field"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Added   bool   `json:"added,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

// ChangedRange is a byte range of To's content that differs from From's.
type ChangedRange struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

func (q *call) diff(req *DiffRequest) (any, *ErrorBody) {
	from, e := optTS("from", req.From)
	if e != nil {
		return nil, e
	}
	to, e := optTS("to", req.To)
	if e != nil {
		return nil, e
	}
	dr := &object.DiffRequest{Space: req.Space, Key: req.Key, From: from, To: to, Exact: req.Exact}
	if req.ToRef != nil {
		dr.ToSpace, dr.ToKey = req.ToRef.Space, req.ToRef.Key
	}
	for _, sp := range []string{req.Space, cmp.Or(dr.ToSpace, req.Space)} {
		if e := q.allow(sp, auth.Read); e != nil {
			return nil, e
		}
	}
	d, err := q.versioner().Diff(q.ctx, dr)
	if err != nil {
		return nil, serviceError(err)
	}
	out := DiffResponse{From: versionOf(&d.From), To: versionOf(&d.To), Changes: []FieldChange{}, Ranges: []ChangedRange{}, Exact: d.Exact}
	for _, c := range d.Changes {
		out.Changes = append(out.Changes, FieldChange(c))
	}
	for _, r := range d.Ranges {
		out.Ranges = append(out.Ranges, ChangedRange{Offset: r.Off, Length: r.Len})
	}
	return out, nil
}

func (q *call) versioner() object.Versioner { return q.h.vs }

// SnapshotRequest names a snapshot to make (Space and Name), the space
// whose snapshots to list (Space; "" for every space), or one to remove
// (Name).
type SnapshotRequest struct {
	Space string `json:"space,omitempty"`
	Name  string `json:"name,omitempty"`
}

// Snapshot describes a snapshot: At is the version id (timestamp) it
// shows Space as of.
type Snapshot struct {
	Name    string `json:"name"`
	Space   string `json:"space"`
	At      string `json:"at"`
	Created string `json:"created"`
}

// SnapshotList answers snapshot/list.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

func snapshotOf(s object.SnapshotInfo) Snapshot {
	return Snapshot{Name: s.Name, Space: s.Space, At: tstamp.String(s.At), Created: time.Unix(0, s.Created).UTC().Format(time.RFC3339Nano)}
}

func (q *call) snapshot(op string, req *SnapshotRequest) (any, *ErrorBody) {
	sn, ok := q.h.cfg.Service.(object.Snapshotter)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server makes no snapshots"}
	}
	switch op {
	case "create":
		if e := q.allow(req.Space, auth.Admin); e != nil {
			return nil, e
		}
		s, err := sn.CreateSnapshot(q.ctx, req.Space, req.Name)
		if err != nil {
			return nil, serviceError(err)
		}
		return snapshotOf(s), nil
	case "list":
		if req.Space != "" {
			if e := q.allow(req.Space, auth.Read); e != nil {
				return nil, e
			}
		}
		l, err := sn.Snapshots(q.ctx, req.Space)
		if err != nil {
			return nil, serviceError(err)
		}
		out := SnapshotList{Snapshots: []Snapshot{}}
		for _, s := range l {
			if q.h.cfg.Keys.Allowed(q.access, s.Name, auth.Read) || q.h.cfg.Keys.Allowed(q.access, s.Space, auth.Read) {
				out.Snapshots = append(out.Snapshots, snapshotOf(s))
			}
		}
		return out, nil
	default:
		// The admin of the snapshot's name, or of the space it shows.
		if e := q.allow(req.Name, auth.Admin); e != nil {
			all, err := sn.Snapshots(q.ctx, "")
			if err != nil {
				return nil, serviceError(err)
			}
			i := slices.IndexFunc(all, func(s object.SnapshotInfo) bool { return s.Name == req.Name })
			if i < 0 || !q.h.cfg.Keys.Allowed(q.access, all[i].Space, auth.Admin) {
				return nil, e
			}
		}
		if err := sn.DeleteSnapshot(q.ctx, req.Name); err != nil {
			return nil, serviceError(err)
		}
		return struct{}{}, nil
	}
}

// FollowRequest reads a document and what its references reach (Depth
// references deep), as of one snapshot: the latest, AsOf, or the time of
// the document's Version.
type FollowRequest struct {
	Ref
	Version string `json:"version,omitempty"`
	AsOf    string `json:"as_of,omitempty"`
	Depth   int    `json:"depth,omitempty"`
}

// FollowResponse is what a follow read, breadth first, each object once.
type FollowResponse struct {
	At        string           `json:"at"`
	Objects   []FollowedObject `json:"objects"`
	Truncated bool             `json:"truncated,omitempty"`
}

// FollowedObject is one object of a follow: as txn/read answers it, and
// how many references away from the document it is. Error says why one
// is absent (NotFound, AccessDenied, TooLarge: over MaxReadData in all).
type FollowedObject struct {
	ReadResult
	Depth int `json:"depth"`
}

func (q *call) follow(req *FollowRequest) (any, *ErrorBody) {
	v, e := optTS("version", req.Version)
	if e != nil {
		return nil, e
	}
	asOf, e := optTS("as_of", req.AsOf)
	if e != nil {
		return nil, e
	}
	f, ok := q.h.cfg.Service.(object.Follower)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server follows no references"}
	}
	allow := func(space string) error {
		if e := q.allow(space, auth.Read); e != nil {
			return &object.Error{Kind: object.AccessDenied, Message: e.Message}
		}
		return nil
	}
	res, err := f.Follow(q.ctx, &object.FollowRequest{Space: req.Space, Key: req.Key, Version: v, AsOf: asOf, Depth: req.Depth, Budget: MaxReadData}, allow)
	if err != nil {
		return nil, serviceError(err)
	}
	out := FollowResponse{At: tstamp.String(res.At), Objects: []FollowedObject{}, Truncated: res.Truncated}
	for _, o := range res.Objects {
		r := FollowedObject{ReadResult: ReadResult{Ref: Ref{Space: o.Space, Key: o.Key}}, Depth: o.Depth}
		switch {
		case object.KindOf(o.Err) == object.NotFound:
		case o.Err != nil:
			r.Error = serviceError(o.Err)
		default:
			info := o.Info
			r.Found, r.Version, r.Size, r.ETag, r.ContentType = true, tstamp.String(info.Version), info.Size, info.ETag, info.ContentType
			r.Modified = time.Unix(0, info.Modified).UTC().Format(time.RFC3339Nano)
			r.Meta, r.Tags, r.Data = info.Meta, info.Tags, o.Data
		}
		out.Objects = append(out.Objects, r)
	}
	return out, nil
}
