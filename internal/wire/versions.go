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
