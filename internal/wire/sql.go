package wire

import (
	"context"

	"github.com/cairn-db/cairn/internal/object"
)

// SQL runs a read-only statement over the spaces as tables, with the
// connection's key's view (object.SQLRunner).

// AppendSQLResult encodes a SQL answer: a uvarint count of columns and
// their names (strings), then a uvarint count of rows, each with one cell
// per column: u8 1 and a string, or u8 0 for NULL.
func AppendSQLResult(b []byte, res *object.SQLResult) []byte {
	b = appendUvarint(b, uint64(len(res.Columns)))
	for _, c := range res.Columns {
		b = appendStr(b, c)
	}
	b = appendUvarint(b, uint64(len(res.Rows)))
	for _, row := range res.Rows {
		for _, cell := range row {
			if cell == nil {
				b = append(b, 0)
				continue
			}
			b = appendStr(append(b, 1), *cell)
		}
	}
	return b
}

// DecodeSQLResult decodes a SQL answer.
func DecodeSQLResult(b []byte) (object.SQLResult, error) {
	d := newDecoder(b)
	var res object.SQLResult
	nc := d.count(4, "column count")
	for i := 0; i < nc && d.Err() == nil; i++ {
		res.Columns = append(res.Columns, d.str("column"))
	}
	nr := d.count(max(nc, 1), "row count")
	for i := 0; i < nr && d.Err() == nil; i++ {
		row := make([]*string, nc)
		for j := range row {
			if d.u8("cell") == 1 {
				s := d.str("cell")
				row[j] = &s
			}
		}
		res.Rows = append(res.Rows, row)
	}
	if err := d.done(); err != nil {
		return object.SQLResult{}, err
	}
	return res, nil
}

// sqlOp serves SQL: the answer fills at most half a frame.
func (c *serverConn) sqlOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	r, ok := c.s.svc.(object.SQLRunner)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server runs no SQL")
	}
	d := newDecoder(body)
	stmt := d.str("statement")
	if err := d.done(); err != nil {
		return nil, err
	}
	if _, e := c.key(); e != nil {
		return nil, e
	}
	res, err := r.SQL(ctx, c.auth.access, stmt, int(c.s.opts.MaxFrame/2))
	if err != nil {
		return nil, err
	}
	return AppendSQLResult(buf, &res), nil
}

// SQL sends a SQL request.
func (c *Conn) SQL(ctx context.Context, stmt string) (object.SQLResult, error) {
	b, err := c.Call(ctx, OpSQL, appendStr(nil, stmt))
	if err != nil {
		return object.SQLResult{}, err
	}
	return DecodeSQLResult(b)
}
