package wire

import (
	"cmp"
	"context"
	"slices"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/object"
)

// The bodies of CLONE, LINEAGE and DIFF (protocol.md section 3).

// minLineageEntry is the smallest encoding of a LineageEntry.
const minLineageEntry = minObjectInfo + 1

// AppendCloneRequest encodes a CloneRequest.
func AppendCloneRequest(b []byte, r *object.CloneRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = appendU64(b, r.Version)
	b = appendU64(b, r.AsOf)
	b = appendStr(b, r.DstSpace)
	b = appendStr(b, r.DstKey)
	return appendBool(b, r.IfNoneMatch)
}

// DecodeCloneRequest decodes a CloneRequest.
func DecodeCloneRequest(b []byte) (object.CloneRequest, error) {
	d := newDecoder(b)
	r := object.CloneRequest{Space: d.str("space"), Key: d.str("key"), Version: d.u64("version"), AsOf: d.u64("as of"),
		DstSpace: d.str("target space"), DstKey: d.str("target key"), IfNoneMatch: d.boolean("if none match")}
	if err := d.done(); err != nil {
		return object.CloneRequest{}, err
	}
	return r, nil
}

// AppendCloneResult encodes a CLONE answer: the clone's ObjectInfo and
// its origin.
func AppendCloneResult(b []byte, info *object.Info) []byte {
	b = AppendObjectInfo(b, info)
	var o object.VersionRef
	if info.Origin != nil {
		o = *info.Origin
	}
	return appendVersionRef(b, &o)
}

// DecodeCloneResult decodes a CLONE answer.
func DecodeCloneResult(b []byte) (object.Info, error) {
	d := newDecoder(b)
	info := d.objectInfo()
	o := d.versionRef()
	info.Origin = &o
	if err := d.done(); err != nil {
		return object.Info{}, err
	}
	return info, nil
}

func appendVersionRef(b []byte, r *object.VersionRef) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	return appendU64(b, r.Version)
}

func (d *decoder) versionRef() object.VersionRef {
	return object.VersionRef{Space: d.str("origin space"), Key: d.str("origin key"), Version: d.u64("origin version")}
}

// AppendLineageRequest encodes a LineageRequest.
func AppendLineageRequest(b []byte, r *object.LineageRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = appendU64(b, r.Version)
	return appendU32(b, uint32(max(r.Limit, 0)))
}

// DecodeLineageRequest decodes a LineageRequest.
func DecodeLineageRequest(b []byte) (object.LineageRequest, error) {
	d := newDecoder(b)
	r := object.LineageRequest{Space: d.str("space"), Key: d.str("key"), Version: d.u64("version"), Limit: int(d.u32("limit"))}
	if err := d.done(); err != nil {
		return object.LineageRequest{}, err
	}
	return r, nil
}

// Lineage entry flags.
const (
	lineageClone = 1 << 0
	lineageGone  = 1 << 1
)

func appendLineageEntries(b []byte, l []object.LineageEntry) []byte {
	b = appendUvarint(b, uint64(len(l)))
	for i := range l {
		b = AppendObjectInfo(b, &l[i].Info)
		var f byte
		if l[i].Clone {
			f |= lineageClone
		}
		if l[i].Gone {
			f |= lineageGone
		}
		b = append(b, f)
	}
	return b
}

func (d *decoder) lineageEntries() []object.LineageEntry {
	n := d.count(minLineageEntry, "lineage entry count")
	var l []object.LineageEntry
	for i := 0; i < n && d.Err() == nil; i++ {
		e := object.LineageEntry{Info: d.objectInfo()}
		f := d.u8("lineage flags")
		if f&^(lineageClone|lineageGone) != 0 {
			d.fail("lineage flags")
		}
		e.Clone, e.Gone = f&lineageClone != 0, f&lineageGone != 0
		l = append(l, e)
	}
	return l
}

// AppendLineage encodes a LINEAGE answer.
func AppendLineage(b []byte, l *object.Lineage) []byte {
	b = AppendObjectInfo(b, &l.Version)
	b = appendLineageEntries(b, l.Ancestors)
	b = appendLineageEntries(b, l.Children)
	return appendBool(b, l.Truncated)
}

// DecodeLineage decodes a LINEAGE answer.
func DecodeLineage(b []byte) (object.Lineage, error) {
	d := newDecoder(b)
	l := object.Lineage{Version: d.objectInfo(), Ancestors: d.lineageEntries(), Children: d.lineageEntries(), Truncated: d.boolean("truncated")}
	if err := d.done(); err != nil {
		return object.Lineage{}, err
	}
	return l, nil
}

// AppendDiffRequest encodes a DiffRequest.
func AppendDiffRequest(b []byte, r *object.DiffRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = appendU64(b, r.From)
	b = appendStr(b, r.ToSpace)
	b = appendStr(b, r.ToKey)
	b = appendU64(b, r.To)
	return appendBool(b, r.Exact)
}

// DecodeDiffRequest decodes a DiffRequest.
func DecodeDiffRequest(b []byte) (object.DiffRequest, error) {
	d := newDecoder(b)
	r := object.DiffRequest{Space: d.str("space"), Key: d.str("key"), From: d.u64("from"),
		ToSpace: d.str("to space"), ToKey: d.str("to key"), To: d.u64("to"), Exact: d.boolean("exact")}
	if err := d.done(); err != nil {
		return object.DiffRequest{}, err
	}
	return r, nil
}

// Field change flags.
const (
	fieldAdded   = 1 << 0
	fieldRemoved = 1 << 1
)

// AppendDiff encodes a DIFF answer.
func AppendDiff(b []byte, df *object.Diff) []byte {
	b = AppendObjectInfo(b, &df.From)
	b = AppendObjectInfo(b, &df.To)
	b = appendUvarint(b, uint64(len(df.Changes)))
	for _, c := range df.Changes {
		b = appendStr(b, c.Field)
		b = appendStr(b, c.From)
		b = appendStr(b, c.To)
		var f byte
		if c.Added {
			f |= fieldAdded
		}
		if c.Removed {
			f |= fieldRemoved
		}
		b = append(b, f)
	}
	b = appendUvarint(b, uint64(len(df.Ranges)))
	for _, e := range df.Ranges {
		b = appendI64(b, e.Off)
		b = appendI64(b, e.Len)
	}
	return appendBool(b, df.Exact)
}

// DecodeDiff decodes a DIFF answer.
func DecodeDiff(b []byte) (object.Diff, error) {
	d := newDecoder(b)
	df := object.Diff{From: d.objectInfo(), To: d.objectInfo()}
	n := d.count(4, "change count")
	for i := 0; i < n && d.Err() == nil; i++ {
		c := object.FieldChange{Field: d.str("field"), From: d.str("from value"), To: d.str("to value")}
		f := d.u8("change flags")
		if f&^(fieldAdded|fieldRemoved) != 0 || f == fieldAdded|fieldRemoved {
			d.fail("change flags")
		}
		c.Added, c.Removed = f&fieldAdded != 0, f&fieldRemoved != 0
		df.Changes = append(df.Changes, c)
	}
	n = d.count(16, "range count")
	for i := 0; i < n && d.Err() == nil; i++ {
		e := chunk.Extent{Off: d.i64("range offset"), Len: d.i64("range length")}
		if e.Off < 0 || e.Len <= 0 {
			d.fail("range")
		}
		df.Ranges = append(df.Ranges, e)
	}
	df.Exact = d.boolean("exact")
	if err := d.done(); err != nil {
		return object.Diff{}, err
	}
	return df, nil
}

// versionsOp serves CLONE, LINEAGE and DIFF. A clone needs the read grant
// on its source's space and the write grant on its own; lineage and diff,
// read on the spaces they name. A lineage leaves out what the key may not
// read: the chain stops before a version in such a space, and such
// children are not listed.
func (c *serverConn) versionsOp(ctx context.Context, op Op, tx *object.Txn, buf, body []byte) ([]byte, error) {
	vs, ok := c.s.svc.(object.Versioner)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server does not clone, trace or compare versions")
	}
	if tx != nil {
		return nil, Errorf(CodeInvalidArgument, "%s is not a transaction operation; send it outside the transaction", op)
	}
	switch op {
	case OpClone:
		req, err := DecodeCloneRequest(body)
		if err != nil {
			return nil, err
		}
		if e := c.allow(req.Space, auth.Read); e != nil {
			return nil, e
		}
		if e := c.allow(cmp.Or(req.DstSpace, req.Space), auth.Write); e != nil {
			return nil, e
		}
		info, err := vs.Clone(ctx, &req)
		if err != nil {
			return nil, err
		}
		return AppendCloneResult(buf, &info), nil
	case OpLineage:
		req, err := DecodeLineageRequest(body)
		if err != nil {
			return nil, err
		}
		if e := c.allow(req.Space, auth.Read); e != nil {
			return nil, e
		}
		l, err := vs.Lineage(ctx, &req)
		if err != nil {
			return nil, err
		}
		for i, a := range l.Ancestors {
			if a.Space != "" && c.allow(a.Space, auth.Read) != nil {
				l.Ancestors, l.Truncated = l.Ancestors[:i], true
				break
			}
		}
		l.Children = slices.DeleteFunc(l.Children, func(e object.LineageEntry) bool { return c.allow(e.Space, auth.Read) != nil })
		return AppendLineage(buf, &l), nil
	case OpDiff:
		req, err := DecodeDiffRequest(body)
		if err != nil {
			return nil, err
		}
		if e := c.allow(req.Space, auth.Read); e != nil {
			return nil, e
		}
		if e := c.allow(cmp.Or(req.ToSpace, req.Space), auth.Read); e != nil {
			return nil, e
		}
		df, err := vs.Diff(ctx, &req)
		if err != nil {
			return nil, err
		}
		return AppendDiff(buf, &df), nil
	}
	return nil, Errorf(CodeUnknownOp, "opcode 0x%02x", uint8(op))
}

// SNAPSHOT actions.
const (
	SnapshotCreate = 1
	SnapshotList   = 2
	SnapshotDelete = 3
)

// AppendSnapshotRequest encodes a SNAPSHOT request: the action, then the
// space and the snapshot's name (create), the space ("" for all: list) or
// the name (delete).
func AppendSnapshotRequest(b []byte, action byte, space, name string) []byte {
	b = append(b, action)
	switch action {
	case SnapshotCreate:
		b = appendStr(b, space)
		return appendStr(b, name)
	case SnapshotList:
		return appendStr(b, space)
	}
	return appendStr(b, name)
}

// DecodeSnapshotRequest decodes a SNAPSHOT request.
func DecodeSnapshotRequest(b []byte) (action byte, space, name string, err error) {
	d := newDecoder(b)
	action = d.u8("action")
	switch action {
	case SnapshotCreate:
		space, name = d.str("space"), d.str("name")
	case SnapshotList:
		space = d.str("space")
	case SnapshotDelete:
		name = d.str("name")
	default:
		d.fail("snapshot action")
	}
	if e := d.done(); e != nil {
		return 0, "", "", e
	}
	return action, space, name, nil
}

func appendSnapshotInfo(b []byte, s *object.SnapshotInfo) []byte {
	b = appendStr(b, s.Name)
	b = appendStr(b, s.Space)
	b = appendU64(b, s.At)
	return appendI64(b, s.Created)
}

func (d *decoder) snapshotInfo() object.SnapshotInfo {
	return object.SnapshotInfo{Name: d.str("name"), Space: d.str("space"), At: d.u64("at"), Created: d.i64("created")}
}

// AppendSnapshotInfos encodes a SNAPSHOT answer: the snapshot made
// (create, one) or listed.
func AppendSnapshotInfos(b []byte, l []object.SnapshotInfo) []byte {
	b = appendUvarint(b, uint64(len(l)))
	for i := range l {
		b = appendSnapshotInfo(b, &l[i])
	}
	return b
}

// DecodeSnapshotInfos decodes a SNAPSHOT answer.
func DecodeSnapshotInfos(b []byte) ([]object.SnapshotInfo, error) {
	d := newDecoder(b)
	n := d.count(1+1+8+8, "snapshot count")
	out := []object.SnapshotInfo{}
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, d.snapshotInfo())
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// snapshotOp serves SNAPSHOT: create needs the admin grant on the space
// (a snapshot holds its history), a list of one space's the read grant on
// it (and lists what the key may read), delete the admin grant on the
// snapshot's name or on the space it shows.
func (c *serverConn) snapshotOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	sn, ok := c.s.svc.(object.Snapshotter)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server makes no snapshots")
	}
	action, space, name, err := DecodeSnapshotRequest(body)
	if err != nil {
		return nil, err
	}
	switch action {
	case SnapshotCreate:
		if e := c.allow(space, auth.Admin); e != nil {
			return nil, e
		}
		s, err := sn.CreateSnapshot(ctx, space, name)
		if err != nil {
			return nil, err
		}
		return AppendSnapshotInfos(buf, []object.SnapshotInfo{s}), nil
	case SnapshotList:
		if space != "" { // whether a space exists is for keys that may read it
			if e := c.allow(space, auth.Read); e != nil {
				return nil, e
			}
		}
		l, err := sn.Snapshots(ctx, space)
		if err != nil {
			return nil, err
		}
		// Only what the key may read.
		l = slices.DeleteFunc(l, func(s object.SnapshotInfo) bool {
			return c.allow(s.Name, auth.Read) != nil && c.allow(s.Space, auth.Read) != nil
		})
		return AppendSnapshotInfos(buf, l), nil
	default:
		// The admin of the snapshot's name, or of the space it shows.
		if e := c.allow(name, auth.Admin); e != nil {
			all, err := sn.Snapshots(ctx, "")
			if err != nil {
				return nil, err
			}
			i := slices.IndexFunc(all, func(s object.SnapshotInfo) bool { return s.Name == name })
			if i < 0 || c.allow(all[i].Space, auth.Admin) != nil {
				return nil, e
			}
		}
		return buf, sn.DeleteSnapshot(ctx, name)
	}
}
