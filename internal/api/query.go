package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// QueryRequest asks for the live objects of Space whose visible version
// passes Filter (a CEL expression; docs/api.md, "Queries").
type QueryRequest struct {
	Space   string `json:"space"`
	Filter  string `json:"filter"`
	AsOf    string `json:"as_of,omitempty"`
	Limit   uint32 `json:"limit,omitempty"`
	After   string `json:"after,omitempty"`
	OrderBy string `json:"order_by,omitempty"`
	Desc    bool   `json:"desc,omitempty"`
	Docs    bool   `json:"docs,omitempty"`
}

// QueryResponse is a page of matches; a truncated one continues with
// after = next and as_of = as_of.
type QueryResponse struct {
	AsOf      string       `json:"as_of"`
	Objects   []QueryMatch `json:"objects"`
	Truncated bool         `json:"truncated,omitempty"`
	Next      string       `json:"next,omitempty"`
	Plan      string       `json:"plan"`
	Ranges    int          `json:"ranges"`
	Examined  int          `json:"examined"`
}

// QueryMatch is one matching object, with its document when asked for.
type QueryMatch struct {
	Version
	Doc json.RawMessage `json:"doc,omitempty"`
}

func (q *call) query(req *QueryRequest) (any, *ErrorBody) {
	asOf, e := optTS("as_of", req.AsOf)
	if e != nil {
		return nil, e
	}
	if e := q.allow(req.Space, auth.Read); e != nil {
		return nil, e
	}
	qs, ok := q.h.cfg.Service.(object.Querier)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server answers no queries"}
	}
	res, err := qs.Query(q.ctx, &object.QueryRequest{Space: req.Space, Filter: req.Filter, AsOf: asOf, Limit: req.Limit,
		After: req.After, OrderBy: req.OrderBy, Desc: req.Desc, Docs: req.Docs})
	if err != nil {
		return nil, serviceError(err)
	}
	out := QueryResponse{AsOf: tstamp.String(res.AsOf), Objects: []QueryMatch{}, Truncated: res.Truncated, Next: res.Next,
		Plan: res.Plan, Ranges: res.Ranges, Examined: res.Examined}
	for i := range res.Objects {
		o := &res.Objects[i]
		out.Objects = append(out.Objects, QueryMatch{Version: versionOf(o), Doc: res.Docs[o.Key]})
	}
	return out, nil
}

// IndexRequest adds, drops or lists a space's field indexes: index/add
// (field and type), index/drop (field), index/list.
type IndexRequest struct {
	Space string `json:"space"`
	Field string `json:"field,omitempty"` // doc.PATH
	Type  string `json:"type,omitempty"`  // string, number or time
}

// IndexList is a space's field indexes after the request.
type IndexList struct {
	Indexes []Index `json:"indexes"`
}

// Index is one field index and its build.
type Index struct {
	Field      string `json:"field"`
	Type       string `json:"type"`
	State      string `json:"state"`
	Created    string `json:"created"`
	RangesDone int    `json:"ranges_done"`
	Ranges     int    `json:"ranges"`
	Error      string `json:"error,omitempty"`
}

func (q *call) index(action string, req *IndexRequest) (any, *ErrorBody) {
	need := auth.Admin
	if action == "list" {
		need = auth.Read
	}
	if e := q.allow(req.Space, need); e != nil {
		return nil, e
	}
	m, ok := q.h.cfg.Service.(object.IndexManager)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server keeps no field indexes"}
	}
	var err error
	switch action {
	case "add":
		err = m.AddIndex(q.ctx, req.Space, req.Field, req.Type)
	case "drop":
		err = m.DropIndex(q.ctx, req.Space, req.Field)
	}
	if err != nil {
		return nil, serviceError(err)
	}
	ixs, err := m.Indexes(q.ctx, req.Space)
	if err != nil {
		return nil, serviceError(err)
	}
	out := IndexList{Indexes: []Index{}}
	for _, ix := range ixs {
		out.Indexes = append(out.Indexes, Index{Field: ix.Path, Type: ix.Type, State: ix.State,
			Created: time.Unix(0, ix.Created).UTC().Format(time.RFC3339Nano), RangesDone: ix.RangesDone, Ranges: ix.Ranges, Error: ix.Error})
	}
	return out, nil
}

// SQLRequest runs a read-only SQL statement over the spaces as tables
// (database cairn), with the signing key's view.
type SQLRequest struct {
	Statement string `json:"statement"`
}

// SQLResponse is a statement's columns and rows (null for NULL).
type SQLResponse struct {
	Columns []string    `json:"columns"`
	Rows    [][]*string `json:"rows"`
}

func (q *call) sql(req *SQLRequest) (any, *ErrorBody) {
	r, ok := q.h.cfg.Service.(object.SQLRunner)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server runs no SQL"}
	}
	res, err := r.SQL(q.ctx, q.access, req.Statement, MaxReadData)
	if err != nil {
		return nil, serviceError(err)
	}
	out := SQLResponse{Columns: res.Columns, Rows: res.Rows}
	if out.Columns == nil {
		out.Columns = []string{}
	}
	if out.Rows == nil {
		out.Rows = [][]*string{}
	}
	return out, nil
}
