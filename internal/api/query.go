package api

import (
	"encoding/json"
	"net/http"

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
