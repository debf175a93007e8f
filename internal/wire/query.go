package wire

import (
	"context"
	"encoding/json"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// QUERY answers a CEL filter over a space's live objects at one
// timestamp (object.Store.Query), a page at a time.

// Query flags.
const (
	queryDesc = 1 << 0
	queryDocs = 1 << 1
)

// AppendQueryRequest encodes a QUERY request: space, filter (strings),
// as-of (u64), limit (u32), after, order-by (strings), flags (u8: 1
// descending, 2 documents).
func AppendQueryRequest(b []byte, r *object.QueryRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Filter)
	b = appendU64(b, r.AsOf)
	b = appendU32(b, r.Limit)
	b = appendStr(b, r.After)
	b = appendStr(b, r.OrderBy)
	var f byte
	if r.Desc {
		f |= queryDesc
	}
	if r.Docs {
		f |= queryDocs
	}
	return append(b, f)
}

// DecodeQueryRequest decodes a QUERY request.
func DecodeQueryRequest(b []byte) (object.QueryRequest, error) {
	d := newDecoder(b)
	r := object.QueryRequest{Space: d.str("space"), Filter: d.str("filter"), AsOf: d.u64("as of"), Limit: d.u32("limit"),
		After: d.str("after"), OrderBy: d.str("order by")}
	f := d.u8("flags")
	r.Desc, r.Docs = f&queryDesc != 0, f&queryDocs != 0
	if err := d.done(); err != nil {
		return object.QueryRequest{}, err
	}
	return r, nil
}

// AppendQueryResult encodes a QUERY answer: as-of (u64), truncated (u8),
// next, plan (strings), ranges, examined (u32), then each object: its
// ObjectInfo and its document (bytes, empty if none).
func AppendQueryResult(b []byte, res *object.QueryResult) []byte {
	b = appendU64(b, res.AsOf)
	b = appendBool(b, res.Truncated)
	b = appendStr(b, res.Next)
	b = appendStr(b, res.Plan)
	b = appendU32(b, uint32(res.Ranges))
	b = appendU32(b, uint32(res.Examined))
	b = appendUvarint(b, uint64(len(res.Objects)))
	for i := range res.Objects {
		o := &res.Objects[i]
		b = AppendObjectInfo(b, o)
		b = appendBytes(b, res.Docs[o.Key])
	}
	return b
}

// DecodeQueryResult decodes a QUERY answer.
func DecodeQueryResult(b []byte) (object.QueryResult, error) {
	d := newDecoder(b)
	res := object.QueryResult{AsOf: d.u64("as of"), Truncated: d.boolean("truncated"), Next: d.str("next"), Plan: d.str("plan"),
		Ranges: int(d.u32("ranges")), Examined: int(d.u32("examined"))}
	n := d.count(8, "object count")
	res.Objects = make([]object.Info, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		info := d.objectInfo()
		if doc := d.bytes("document"); len(doc) > 0 {
			if res.Docs == nil {
				res.Docs = map[string]json.RawMessage{}
			}
			res.Docs[info.Key] = doc
		}
		res.Objects = append(res.Objects, info)
	}
	if err := d.done(); err != nil {
		return object.QueryResult{}, err
	}
	return res, nil
}

// queryOp serves QUERY, under the read grant on the space.
func (c *serverConn) queryOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	q, ok := c.s.svc.(object.Querier)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server answers no queries")
	}
	r, err := DecodeQueryRequest(body)
	if err != nil {
		return nil, err
	}
	if e := c.allow(r.Space, auth.Read); e != nil {
		return nil, e
	}
	res, err := q.Query(ctx, &r)
	if err != nil {
		return nil, err
	}
	return AppendQueryResult(buf, &res), nil
}

// Query sends a QUERY request.
func (c *Conn) Query(ctx context.Context, r *object.QueryRequest) (object.QueryResult, error) {
	b, err := c.Call(ctx, OpQuery, AppendQueryRequest(nil, r))
	if err != nil {
		return object.QueryResult{}, err
	}
	return DecodeQueryResult(b)
}
