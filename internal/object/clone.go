package object

import (
	"bytes"
	"context"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Versioner is implemented by a Service that works with versions as
// values (VOSD's primitives): clone one, trace where one came from and
// what came of it, and compare two.
type Versioner interface {
	// Clone writes a new version of req.DstSpace/req.DstKey whose content
	// and metadata are those of the source version, sharing its chunks:
	// no data is copied. The new version's Origin names the source.
	Clone(ctx context.Context, req *CloneRequest) (Info, error)
	// Lineage returns the ancestors and children of a version.
	Lineage(ctx context.Context, req *LineageRequest) (Lineage, error)
	// Diff compares two versions from their records and manifests.
	Diff(ctx context.Context, req *DiffRequest) (Diff, error)
}

// CloneRequest names a source version and the object to clone it into.
type CloneRequest struct {
	Space, Key string
	Version    uint64 // exact source version; 0: the latest (or as of AsOf)
	AsOf       uint64
	// DstSpace and DstKey name the clone; DstSpace "" is Space.
	DstSpace, DstKey string
	// IfNoneMatch requires that the clone's key have no live version.
	IfNoneMatch bool
}

// LineageRequest names a version whose lineage is wanted.
type LineageRequest struct {
	Space, Key string
	Version    uint64 // 0: the latest
	// Limit bounds the ancestors returned (0: 100, at most 1000).
	Limit int
}

// Lineage is where a version came from and what was made of it.
type Lineage struct {
	Version Info
	// Ancestors are the versions it descends from, nearest first: each
	// one's origin if it is a clone, else the key's version before it.
	Ancestors []LineageEntry
	// Children are the versions made from it: the key's next version
	// (whose Parent it is) and its clones, in any space.
	Children []LineageEntry
	// Truncated says the ancestors went on past Limit.
	Truncated bool
}

// LineageEntry is one version in a lineage.
type LineageEntry struct {
	// Info describes the version; when Gone, only Space, Key and
	// Version are set.
	Info
	// Clone says the relation crosses objects: a clone of its
	// successor in the chain (ancestors) or of the version asked about
	// (children), not a later version of the same key.
	Clone bool
	// Gone says the version no longer exists (pruned by the retention
	// policy, deleted, or its space dropped).
	Gone bool
}

// DiffRequest names two versions to compare: From of Space/Key and To of
// ToSpace/ToKey ("" for the same object). Version 0 is the latest.
type DiffRequest struct {
	Space, Key     string
	From           uint64
	ToSpace, ToKey string
	To             uint64
	// Exact narrows the changed ranges to the bytes that differ by
	// reading both versions over them.
	Exact bool
}

// Diff is what changed from one version to another.
type Diff struct {
	From, To Info
	// Changes are the metadata fields that differ, by name.
	Changes []FieldChange
	// Ranges are the byte ranges where To's content differs from From's
	// at the same offsets (bytes past the shorter content included), in
	// order. Unless Exact, a range may hold equal bytes: it is where the
	// two manifests hold different chunks (chunk-granular).
	Ranges []chunk.Extent
	// Exact says Ranges are exactly the differing bytes.
	Exact bool
}

// FieldChange is one metadata field that differs between two versions:
// size, content_type, etag, hash, delete_marker, meta.NAME, tags.NAME
// or headers.NAME. Added and Removed say the field is only in To or
// only in From.
type FieldChange struct {
	Field, From, To string
	Added, Removed  bool
}

// Lineage bounds.
const (
	lineageDefault = 100
	lineageMax     = 1000
	// lineageVersionsMax bounds the versions of one key read to find a
	// version's successor or a clone's versions.
	lineageVersionsMax = 10000
	// diffExactMax bounds the bytes an exact diff reads from each side.
	diffExactMax = 1 << 30
)

// name fills in the space name of info's origin.
func (st *Store) name(ctx context.Context, info *Info) { st.namer()(ctx, info) }

// namer returns name for a page of infos: each space id is looked up
// once (a deleted space's costs a read of the catalog).
func (st *Store) namer() func(context.Context, *Info) {
	var names map[uint32]string
	return func(ctx context.Context, info *Info) {
		o := info.Origin
		if o == nil || o.Space != "" || o.spaceID == 0 {
			return
		}
		n, ok := names[o.spaceID]
		if !ok {
			var err error
			if n, err = st.cfg.Spaces.Name(ctx, o.spaceID); err != nil {
				return
			}
			if names == nil {
				names = map[uint32]string{}
			}
			names[o.spaceID] = n
		}
		o.Space = n
	}
}

// Clone implements Versioner. The children index entry on the source's
// range is written first, then the clone's version: a crash in between
// leaves an entry that Lineage skips (no clone of that origin in its
// object), never a clone missing from the index.
func (st *Store) Clone(ctx context.Context, req *CloneRequest) (Info, error) {
	dstSpace := req.DstSpace
	if dstSpace == "" {
		dstSpace = req.Space
	}
	if err := validKey(ctx, req.DstKey); err != nil {
		return Info{}, err
	}
	rec, srcID, srcReplicas, err := st.cloneSource(ctx, req, dstSpace)
	if err != nil {
		return Info{}, err
	}
	s, obj, release, err := st.writeTarget(ctx, dstSpace, req.DstKey, cloneRecPlacing(rec))
	if err != nil {
		return Info{}, err
	}
	defer release()
	if s.Replicas() > srcReplicas && rec.Manifest != nil {
		// The clone's space keeps more copies of each chunk than the
		// source's: store the missing ones (the nodes that hold a chunk
		// already keep theirs).
		m, err := st.manifestOf(ctx, rec, srcReplicas)
		if err != nil {
			return Info{}, err
		}
		for _, r := range m.Chunks {
			b, err := st.cfg.Chunks.GetChunk(ctx, r.Hash, nil, srcReplicas)
			if err != nil {
				return Info{}, err
			}
			if _, err := st.storeChunk(ctx, s.Replicas())(b); err != nil {
				return Info{}, err
			}
		}
	}
	if rec.Manifest != nil {
		m, err := chunk.UnmarshalManifest(rec.Manifest)
		if err != nil {
			return Info{}, Errorf(Corrupt, "the manifest of %s/%s: %v", req.Space, req.Key, err)
		}
		if err := st.touchShared(ctx, m); err != nil {
			return Info{}, err
		}
	}
	c := &mvcc.Record{
		Size: rec.Size, Hash: rec.Hash, ETag: rec.ETag, ContentType: rec.ContentType,
		Meta: rec.Meta, Tags: rec.Tags, Headers: rec.Headers, Inline: rec.Inline, Manifest: rec.Manifest,
		Origin: &mvcc.Origin{SpaceID: srcID, Key: req.Key, Version: rec.Version},
	}
	info, err := st.commit(ctx, s, obj, dstSpace, req.DstKey, &kv.PutCmd{Rec: c, IfNoneMatch: req.IfNoneMatch})
	if err != nil {
		return Info{}, err
	}
	info.Origin.Space = "" // the source's space by id: a snapshot's is the space it shows
	st.name(ctx, &info)
	return info, nil
}

// cloneRecPlacing places a clone of rec (it keeps rec's tags).
func cloneRecPlacing(rec *mvcc.Record) placing {
	return placing{tags: rec.Tags, create: true}
}

// cloneSource reads the source version of a clone and records the clone
// in its children index.
func (st *Store) cloneSource(ctx context.Context, req *CloneRequest, dstSpace string) (*mvcc.Record, uint32, int, error) {
	s, obj, release, err := st.target(ctx, req.Space, req.Key)
	if err != nil {
		return nil, 0, 0, err
	}
	defer release()
	rec, err := st.readRecord(ctx, s, obj, req.Version, req.AsOf)
	if err != nil {
		return nil, 0, 0, err
	}
	if rec.DeleteMarker {
		return nil, 0, 0, Errorf(Deleted, "version %s of %q is a delete marker", tstamp.String(rec.Version), req.Key)
	}
	// The target is checked before the index entry is written: a clone
	// refused for its target leaves no entry.
	d, drelease := s, func() {}
	if dstSpace != req.Space {
		if d, drelease, err = st.cfg.Spaces.Acquire(ctx, dstSpace); err != nil {
			return nil, 0, 0, err
		}
	}
	err = readOnly(d, dstSpace)
	var child []byte
	if err == nil {
		child, err = st.writePlace(ctx, d, req.DstKey, cloneRecPlacing(rec))
	}
	drelease()
	if err != nil {
		return nil, 0, 0, err
	}
	if _, err := st.propose(ctx, s, obj, (&kv.ChildCmd{Obj: obj, Version: rec.Version, Child: child}).Encode()); err != nil {
		return nil, 0, 0, err
	}
	return rec, s.ID(), s.Replicas(), nil
}

// Lineage implements Versioner.
func (st *Store) Lineage(ctx context.Context, req *LineageRequest) (Lineage, error) {
	limit := req.Limit
	if limit <= 0 {
		limit = lineageDefault
	}
	limit = min(limit, lineageMax)
	info, err := st.Stat(ctx, &GetRequest{Space: req.Space, Key: req.Key, Version: req.Version})
	if err != nil && !(KindOf(err) == Deleted && info.Version != 0) {
		return Lineage{}, err
	}
	out := Lineage{Version: info}
	// Ancestors: follow origins across objects, parents within one.
	cur := info
	for {
		next, clone := cur.Parent, false
		space, key := cur.Space, cur.Key
		if o := cur.Origin; o != nil {
			next, clone, space, key = o.Version, true, o.Space, o.Key
		}
		if next == 0 && !clone {
			// A branch's first version of the key: its parent is what the
			// branch showed before, its base's version at the point.
			if next, err = st.branchParent(ctx, space, key, cur.Version); err != nil {
				return Lineage{}, err
			}
		}
		if next == 0 {
			break
		}
		if len(out.Ancestors) == limit {
			out.Truncated = true
			break
		}
		e := LineageEntry{Info: Info{Space: space, Key: key, Version: next}, Clone: clone}
		if space == "" { // the origin's space was deleted
			e.Gone = true
			out.Ancestors = append(out.Ancestors, e)
			break
		}
		a, err := st.Stat(ctx, &GetRequest{Space: space, Key: key, Version: next})
		switch {
		case err == nil || KindOf(err) == Deleted && a.Version != 0:
			e.Info = a
		case KindOf(err) == NotFound || KindOf(err) == SpaceNotFound:
			e.Gone = true
		default:
			return Lineage{}, err
		}
		out.Ancestors = append(out.Ancestors, e)
		if e.Gone {
			break
		}
		cur = a
	}
	out.Children, err = st.children(ctx, info)
	return out, err
}

// children returns the versions made from info: the key's next version,
// the clones the children index names, and the first version of the key
// in each branch of the space that showed info at its point.
func (st *Store) children(ctx context.Context, info Info) ([]LineageEntry, error) {
	out, readAt, err := st.ownChildren(ctx, info)
	if err != nil || readAt != 0 {
		return out, err // (through a snapshot: a branch is no part of it)
	}
	bs, err := st.cfg.Spaces.Branches(ctx, info.Space)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		if b.At == 0 || b.At < info.Version {
			continue // being made, or branched before this version
		}
		kid, err := st.branchChild(ctx, b.Name, info)
		if err != nil {
			return nil, err
		}
		if kid != nil {
			out = append(out, LineageEntry{Info: *kid})
		}
	}
	return out, nil
}

// branchChild is the first version of info's key in branch name, if the
// branch showed info at its point (the branch's first version of a key
// has the base's version at the point as its parent: branchParent), or
// nil.
func (st *Store) branchChild(ctx context.Context, name string, info Info) (*Info, error) {
	s, obj, release, err := st.target(ctx, name, info.Key)
	if KindOf(err) == SpaceNotFound {
		return nil, nil // deleted meanwhile
	}
	if err != nil {
		return nil, err
	}
	defer release()
	b, at := s.Base()
	if b == nil {
		return nil, nil
	}
	shown, err := st.readOwn(ctx, b, rebase(obj, b.ID()), 0, at)
	if KindOf(err) == NotFound || err == nil && shown.Version != info.Version {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var first *mvcc.Record
	var before uint64
	for read := 0; read < lineageVersionsMax; {
		recs, more, err := st.versionsOwn(ctx, s, obj, before, listDefault)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			first = recs[len(recs)-1] // newest first: the oldest so far
			before = first.Version
		}
		read += len(recs)
		if !more || len(recs) == 0 {
			break
		}
	}
	if first == nil {
		return nil, nil // the branch has not written the key
	}
	kid := objectInfo(name, info.Key, first)
	return &kid, nil
}

// ownChildren is children within the space and its clones; it also
// returns the timestamp the space is read at (a snapshot's).
func (st *Store) ownChildren(ctx context.Context, info Info) ([]LineageEntry, uint64, error) {
	s, obj, release, err := st.target(ctx, info.Space, info.Key)
	if err != nil {
		return nil, 0, err
	}
	var out []LineageEntry
	next, err := st.versionsWhere(ctx, s, obj, info.Space, info.Key, info.Version, func(r *mvcc.Record) bool { return r.Parent == info.Version })
	if err != nil {
		release()
		return nil, 0, err
	}
	for _, n := range next {
		out = append(out, LineageEntry{Info: n})
	}
	kids, err := st.cfg.Ranges.Children(ctx, s.Table(), obj, info.Version)
	srcID, readAt := s.ID(), s.ReadAt()
	release()
	if err != nil {
		return nil, 0, FromRange(err)
	}
	for _, kid := range kids {
		id, _, key, err := keys.DecodeObject(kid)
		if err != nil {
			return nil, 0, Errorf(Corrupt, "children index of %q: %v", info.Key, err)
		}
		name, err := st.cfg.Spaces.Name(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if name == "" {
			continue // the clone's space was dropped
		}
		cs, cobj, crelease, err := st.target(ctx, name, string(key))
		if KindOf(err) == SpaceNotFound {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		clones, err := st.versionsWhere(ctx, cs, cobj, name, string(key), 0, func(r *mvcc.Record) bool {
			o := r.Origin
			return o != nil && o.SpaceID == srcID && o.Key == info.Key && o.Version == info.Version
		})
		crelease()
		if err != nil {
			return nil, 0, err
		}
		for _, c := range clones {
			if readAt != 0 && c.Version > readAt {
				continue // made after the snapshot the lineage is read through
			}
			c.Origin.Space = info.Space
			out = append(out, LineageEntry{Info: c, Clone: true})
		}
	}
	return out, readAt, nil
}

// versionsWhere returns the versions of obj newer than after (0: every
// one) that match, newest first, reading at most lineageVersionsMax.
func (st *Store) versionsWhere(ctx context.Context, s OpenSpace, obj []byte, space, key string, after uint64, match func(*mvcc.Record) bool) ([]Info, error) {
	var out []Info
	var before uint64
	for read := 0; read < lineageVersionsMax; {
		recs, more, err := st.versions(ctx, s, obj, before, listDefault)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Version <= after {
				return out, nil
			}
			if match(r) {
				out = append(out, objectInfo(space, key, r))
			}
		}
		read += len(recs)
		if !more || len(recs) == 0 {
			break
		}
		before = recs[len(recs)-1].Version
	}
	return out, nil
}

// Diff implements Versioner.
func (st *Store) Diff(ctx context.Context, req *DiffRequest) (Diff, error) {
	toSpace, toKey := req.ToSpace, req.ToKey
	if toSpace == "" {
		toSpace = req.Space
	}
	if toKey == "" {
		toKey = req.Key
	}
	from, fm, freplicas, err := st.diffSide(ctx, req.Space, req.Key, req.From)
	if err != nil {
		return Diff{}, err
	}
	to, tm, treplicas, err := st.diffSide(ctx, toSpace, toKey, req.To)
	if err != nil {
		return Diff{}, err
	}
	out := Diff{From: objectInfo(req.Space, req.Key, from), To: objectInfo(toSpace, toKey, to)}
	st.name(ctx, &out.From)
	st.name(ctx, &out.To)
	out.Changes = fieldChanges(from, to)
	switch {
	case from.Manifest == nil && to.Manifest == nil:
		// Both inline (or empty): the bytes are in the records.
		out.Ranges, out.Exact = chunk.DiffBytes(from.Inline, to.Inline, 0), true
	case from.Hash == to.Hash && from.Size == to.Size:
		out.Exact = true // the same content
	default:
		out.Ranges = chunk.Diff(fm, tm)
		if req.Exact {
			if out.Ranges, err = st.narrow(ctx, out.Ranges, from, fm, freplicas, to, tm, treplicas); err != nil {
				return Diff{}, err
			}
			out.Exact = true
		}
	}
	return out, nil
}

// diffSide reads one version of a diff, and its manifest (the inline
// bytes as a manifest of one chunk's description, not stored: Diff of an
// inline and a chunked version compares them as different chunks).
func (st *Store) diffSide(ctx context.Context, space, key string, version uint64) (*mvcc.Record, chunk.Manifest, int, error) {
	s, obj, release, err := st.target(ctx, space, key)
	if err != nil {
		return nil, chunk.Manifest{}, 0, err
	}
	defer release()
	rec, err := st.readRecord(ctx, s, obj, version, 0)
	if err != nil && !(KindOf(err) == Deleted && rec != nil) {
		return nil, chunk.Manifest{}, 0, err
	}
	var m chunk.Manifest
	switch {
	case rec.Manifest != nil:
		if m, err = chunk.UnmarshalManifest(rec.Manifest); err != nil {
			return nil, m, 0, Errorf(Corrupt, "manifest of version %s: %v", tstamp.String(rec.Version), err)
		}
	case len(rec.Inline) > 0:
		m = chunk.Manifest{Chunks: []chunk.Ref{{Hash: chunk.Sum(rec.Inline), Size: uint32(len(rec.Inline))}}}
	}
	return rec, m, s.Replicas(), nil
}

// narrow reads both versions over each range and keeps the bytes that
// differ.
func (st *Store) narrow(ctx context.Context, ranges []chunk.Extent, from *mvcc.Record, fm chunk.Manifest, fr int, to *mvcc.Record, tm chunk.Manifest, tr int) ([]chunk.Extent, error) {
	var total int64
	for _, e := range ranges {
		total += e.Len
	}
	if total > diffExactMax {
		return nil, Errorf(TooLarge, "an exact diff would read %d bytes of each version; the limit is %d", total, int64(diffExactMax))
	}
	var out []chunk.Extent
	for _, e := range ranges {
		a, err := st.readExtent(ctx, from, fm, fr, e)
		if err != nil {
			return nil, err
		}
		b, err := st.readExtent(ctx, to, tm, tr, e)
		if err != nil {
			return nil, err
		}
		out = append(out, chunk.DiffBytes(a, b, e.Off)...)
	}
	return out, nil
}

// readExtent reads the part of rec's content within e, verified.
func (st *Store) readExtent(ctx context.Context, rec *mvcc.Record, m chunk.Manifest, replicas int, e chunk.Extent) ([]byte, error) {
	if rec.Manifest == nil {
		lo, hi := min(e.Off, int64(len(rec.Inline))), min(e.Off+e.Len, int64(len(rec.Inline)))
		return rec.Inline[lo:hi], nil
	}
	var buf bytes.Buffer
	for _, p := range m.Span(e.Off, e.Len) {
		c, err := st.cfg.Chunks.GetChunk(ctx, p.Hash, nil, replicas)
		if err != nil {
			return nil, err
		}
		b, err := p.Of(c)
		if err != nil {
			return nil, Errorf(Corrupt, "%v", err)
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// fieldChanges lists the metadata that differs between two versions.
func fieldChanges(a, b *mvcc.Record) []FieldChange {
	var out []FieldChange
	field := func(name, x, y string) {
		if x != y {
			out = append(out, FieldChange{Field: name, From: x, To: y})
		}
	}
	field("delete_marker", strconv.FormatBool(a.DeleteMarker), strconv.FormatBool(b.DeleteMarker))
	field("size", strconv.FormatInt(a.Size, 10), strconv.FormatInt(b.Size, 10))
	field("content_type", a.ContentType, b.ContentType)
	field("etag", a.ETag, b.ETag)
	field("hash", hex.EncodeToString(a.Hash[:]), hex.EncodeToString(b.Hash[:]))
	for _, m := range []struct {
		prefix string
		x, y   map[string]string
	}{{"meta.", a.Meta, b.Meta}, {"tags.", a.Tags, b.Tags}, {"headers.", a.Headers, b.Headers}} {
		for _, k := range sortedKeys(m.x, m.y) {
			x, inX := m.x[k]
			y, inY := m.y[k]
			switch {
			case inX && !inY:
				out = append(out, FieldChange{Field: m.prefix + k, From: x, Removed: true})
			case !inX && inY:
				out = append(out, FieldChange{Field: m.prefix + k, To: y, Added: true})
			case x != y:
				out = append(out, FieldChange{Field: m.prefix + k, From: x, To: y})
			}
		}
	}
	return out
}

// sortedKeys returns the keys of both maps, sorted, once each.
func sortedKeys(a, b map[string]string) []string {
	ks := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// Snapshotter is implemented by a Service that makes snapshots: read-only
// spaces that show another as of one timestamp.
type Snapshotter interface {
	// CreateSnapshot makes name a snapshot of space as of a fresh
	// timestamp: SpaceExists if the name is taken, Unavailable if a node
	// of the cluster could not be told (nothing is made then).
	CreateSnapshot(ctx context.Context, space, name string) (SnapshotInfo, error)
	// Snapshots lists the snapshots of space ("": of every space) in name
	// order.
	Snapshots(ctx context.Context, space string) ([]SnapshotInfo, error)
	// DeleteSnapshot removes snapshot name (SpaceNotFound if none).
	DeleteSnapshot(ctx context.Context, name string) error
}

// SnapshotInfo describes a snapshot.
type SnapshotInfo struct {
	Name, Space string
	At          uint64 // the timestamp it shows Space as of
	Created     int64  // Unix nanoseconds
}

// readOnly refuses a write to a snapshot.
func readOnly(s OpenSpace, space string) error {
	if at := s.ReadAt(); at != 0 {
		return Errorf(AccessDenied, "%q is a snapshot (as of %s): it is read-only", space, tstamp.String(at))
	}
	return nil
}

// heldError refuses the removal (or retagging) of version v that a
// snapshot holds.
func heldError(s OpenSpace, v uint64) error {
	switch held := s.Held(); {
	case held == HeldPending:
		return Errorf(Unavailable, "a snapshot of the space is being made; remove version %s after it", tstamp.String(v))
	case held != 0 && v <= held:
		return Errorf(PreconditionFailed, "version %s is held by a snapshot of the space (as of %s); remove the snapshot first", tstamp.String(v), tstamp.String(held))
	}
	return nil
}

// branchParent is the version of key that space, a branch, showed from
// its base before writing version v of its own: the base's at the branch
// point (0 if none, or if space is no branch or v is the base's).
func (st *Store) branchParent(ctx context.Context, space, key string, v uint64) (uint64, error) {
	s, obj, release, err := st.target(ctx, space, key)
	if err != nil {
		return 0, err
	}
	defer release()
	b, at := s.Base()
	if b == nil || v <= at {
		return 0, nil
	}
	rec, err := st.readOwn(ctx, b, rebase(obj, b.ID()), 0, at)
	if KindOf(err) == NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return rec.Version, nil
}
