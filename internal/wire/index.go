package wire

import (
	"context"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// INDEX declares, drops and lists a space's field indexes
// (object.IndexManager).

// INDEX actions.
const (
	IndexAdd  = 1
	IndexDrop = 2
	IndexList = 3
)

// IndexRequest is an INDEX request.
type IndexRequest struct {
	Action      byte
	Space, Path string // Path: doc.PATH
	Type        string // IndexAdd: string, number or time
}

// AppendIndexRequest encodes an INDEX request: action (u8), space, path,
// type (strings).
func AppendIndexRequest(b []byte, r *IndexRequest) []byte {
	b = append(b, r.Action)
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Path)
	return appendStr(b, r.Type)
}

// DecodeIndexRequest decodes an INDEX request.
func DecodeIndexRequest(b []byte) (IndexRequest, error) {
	d := newDecoder(b)
	r := IndexRequest{Action: d.u8("action"), Space: d.str("space"), Path: d.str("path"), Type: d.str("type")}
	if err := d.done(); err != nil {
		return IndexRequest{}, err
	}
	if r.Action < IndexAdd || r.Action > IndexList {
		return IndexRequest{}, Errorf(CodeMalformed, "index action %d", r.Action)
	}
	return r, nil
}

// AppendIndexInfos encodes an INDEX answer (every action's: the space's
// indexes after it): a uvarint count, then each index's path, type,
// state (strings), created (i64), ranges done, ranges (u32), objects
// (u64), error (string).
func AppendIndexInfos(b []byte, ixs []object.IndexInfo) []byte {
	b = appendUvarint(b, uint64(len(ixs)))
	for _, ix := range ixs {
		b = appendStr(b, ix.Path)
		b = appendStr(b, ix.Type)
		b = appendStr(b, ix.State)
		b = appendI64(b, ix.Created)
		b = appendU32(b, uint32(ix.RangesDone))
		b = appendU32(b, uint32(ix.Ranges))
		b = appendU64(b, uint64(ix.Objects))
		b = appendStr(b, ix.Error)
	}
	return b
}

// DecodeIndexInfos decodes an INDEX answer.
func DecodeIndexInfos(b []byte) ([]object.IndexInfo, error) {
	d := newDecoder(b)
	n := d.count(32, "index count")
	out := make([]object.IndexInfo, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, object.IndexInfo{Path: d.str("path"), Type: d.str("type"), State: d.str("state"), Created: d.i64("created"),
			RangesDone: int(d.u32("ranges done")), Ranges: int(d.u32("ranges")), Objects: int64(d.u64("objects")), Error: d.str("error")})
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// indexOp serves INDEX: adding and dropping take the admin grant on the
// space, listing the read grant.
func (c *serverConn) indexOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	m, ok := c.s.svc.(object.IndexManager)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server keeps no field indexes")
	}
	r, err := DecodeIndexRequest(body)
	if err != nil {
		return nil, err
	}
	need := auth.Admin
	if r.Action == IndexList {
		need = auth.Read
	}
	if e := c.allow(r.Space, need); e != nil {
		return nil, e
	}
	switch r.Action {
	case IndexAdd:
		err = m.AddIndex(ctx, r.Space, r.Path, r.Type)
	case IndexDrop:
		err = m.DropIndex(ctx, r.Space, r.Path)
	}
	if err != nil {
		return nil, err
	}
	ixs, err := m.Indexes(ctx, r.Space)
	if err != nil {
		return nil, err
	}
	return AppendIndexInfos(buf, ixs), nil
}

// Index sends an INDEX request and returns the space's indexes after it.
func (c *Conn) Index(ctx context.Context, r *IndexRequest) ([]object.IndexInfo, error) {
	b, err := c.Call(ctx, OpIndex, AppendIndexRequest(nil, r))
	if err != nil {
		return nil, err
	}
	return DecodeIndexInfos(b)
}
