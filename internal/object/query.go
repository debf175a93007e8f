package object

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/query"
	"github.com/cairn-db/cairn/internal/rangeclient"
)

// Querier is implemented by a Service that answers queries (Store).
type Querier interface {
	Query(ctx context.Context, req *QueryRequest) (QueryResult, error)
}

// QueryRequest asks for the live objects of a space whose visible
// version at AsOf passes Filter (a CEL expression: package query).
type QueryRequest struct {
	Space  string
	Filter string
	// AsOf reads the space as of a time; 0 reads it at a fresh
	// timestamp (one snapshot across every range). Pass a result's AsOf
	// back with its Next for pages of one snapshot.
	AsOf uint64
	// Limit caps the objects returned: default 1000, at most 10000.
	Limit uint32
	// After resumes after a key (a previous page's Next).
	After string
	// OrderBy orders the matches by a field ("key", "size", "modified",
	// "content_type", "version", "tags.NAME", "meta.NAME", "doc.PATH")
	// instead of by key; Desc reverses. An ordered query reads every match
	// (at most QueryOrderMax) and returns the first Limit; it has no Next.
	OrderBy string
	Desc    bool
	// Docs returns each JSON document's body (those kept in their
	// record) in QueryResult.Docs.
	Docs bool
}

// QueryOrderMax bounds the matches an ordered query sorts.
const QueryOrderMax = 100000

// QueryResult is a page of a query's matches, in key order (or OrderBy).
type QueryResult struct {
	Objects []Info
	// Docs holds the documents of Objects by key, when asked for.
	Docs map[string]json.RawMessage
	// Truncated says more matches may follow; Next is the key to resume
	// after.
	Truncated bool
	Next      string
	// AsOf is the timestamp the query read at.
	AsOf uint64
	// Plan describes how candidates were found; Ranges counts the ranges
	// asked, Examined the candidates they looked at.
	Plan     string
	Ranges   int
	Examined int
	// resume is the object key Next names (queryOnce).
	resume []byte
}

// queryDefault is a query page's default size.
const queryDefault = 1000

// Query implements Querier. The ranges of the space's span run the
// filter next to their data, each on the candidates its own index names,
// several at once; their pages are gathered in key order.
func (st *Store) Query(ctx context.Context, req *QueryRequest) (QueryResult, error) {
	q, err := query.Cached(req.Filter)
	if err != nil {
		return QueryResult{}, Errorf(InvalidArgument, "%v", err)
	}
	if len(req.After) > keys.MaxKeyLen {
		return QueryResult{}, Errorf(KeyTooLong, "after is over %d bytes", keys.MaxKeyLen)
	}
	if req.OrderBy != "" && req.OrderBy != "key" {
		ord, err := newOrderer(req.OrderBy, req.Desc)
		if err != nil {
			return QueryResult{}, err
		}
		return st.queryOrdered(ctx, req, ord)
	}
	s, release, err := st.cfg.Spaces.Acquire(ctx, req.Space)
	if err != nil {
		return QueryResult{}, err
	}
	defer release()
	limit := pageLimitQuery(req.Limit)
	asOf := req.AsOf
	if at := s.ReadAt(); at != 0 && (asOf == 0 || asOf > at) {
		asOf = at // a snapshot is its space as of its time
	}
	if asOf, err = st.clampAsOf(ctx, asOf); err != nil {
		return QueryResult{}, err
	}
	if asOf == 0 {
		ts, err := st.cfg.Timestamps.Next(ctx)
		if err != nil {
			return QueryResult{}, Unreachable("timestamp oracle", err)
		}
		asOf = ts
	}
	lower, upper := listBounds(ctx, s.ID(), q.Plan.KeyPrefix)
	var after []byte
	if req.After != "" {
		after = keys.Object(s.ID(), nil, []byte(req.After))
	}
	out := QueryResult{AsOf: asOf}
	for attempt := 0; ; attempt++ {
		err = st.cfg.Ranges.RetryMoved(ctx, func() (err error) {
			if b, at := s.Base(); b != nil {
				return st.queryBranch(ctx, s, b, at, req, q, limit, &out)
			}
			if s.Hashed() {
				return st.queryBuckets(ctx, s, req, q, limit, &out)
			}
			if name := s.PlacementTag(); name != "" {
				return st.queryTagged(ctx, s, req, q, name, limit, &out)
			}
			return st.queryOnce(ctx, s, req, q, lower, upper, after, limit, &out)
		}, func() bool { return true })
		again, serr := st.settle(ctx, err, attempt)
		if serr != nil {
			return QueryResult{}, serr
		}
		if !again {
			break
		}
	}
	if err != nil {
		return QueryResult{}, FromRange(err)
	}
	if !req.Docs {
		out.Docs = nil
	}
	if out.Plan == "" {
		out.Plan = q.Plan.String()
	}
	return out, nil
}

// queryOrdered reads every match, page by page at one timestamp (at
// most QueryOrderMax), orders them and returns the first req.Limit.
func (st *Store) queryOrdered(ctx context.Context, req *QueryRequest, ord *orderer) (QueryResult, error) {
	page := *req
	page.OrderBy, page.Desc, page.Limit, page.Docs = "", false, kv.QueryMaxLimit, true
	var out QueryResult
	for {
		res, err := st.Query(ctx, &page)
		if err != nil {
			return QueryResult{}, err
		}
		if out.Plan == "" {
			out.Plan, out.AsOf = res.Plan, res.AsOf
		}
		out.Ranges += res.Ranges
		out.Examined += res.Examined
		out.Objects = append(out.Objects, res.Objects...)
		for k, d := range res.Docs {
			if out.Docs == nil {
				out.Docs = map[string]json.RawMessage{}
			}
			out.Docs[k] = d
		}
		if len(out.Objects) > QueryOrderMax {
			return QueryResult{}, Errorf(InvalidArgument, "more than %d objects match: narrow the filter to order them", QueryOrderMax)
		}
		if !res.Truncated || res.Next == "" {
			break
		}
		page.After, page.AsOf = res.Next, res.AsOf
	}
	ord.sort(out.Objects, out.Docs)
	if n := pageLimitQuery(req.Limit); len(out.Objects) > n {
		out.Objects, out.Truncated = out.Objects[:n], true
	}
	if !req.Docs {
		out.Docs = nil
	}
	return out, nil
}

func pageLimitQuery(n uint32) int {
	if n == 0 {
		return queryDefault
	}
	return min(int(n), kv.QueryMaxLimit)
}

// queryBuckets is queryOnce over each bucket of hash space s, at once,
// merged in key order: a bucket whose page was cut bounds the merged
// page (keys past where it stopped may still lie in it).
func (st *Store) queryBuckets(ctx context.Context, s OpenSpace, req *QueryRequest, q *query.Query, limit int, out *QueryResult) error {
	buckets := make([]int, 0, keys.HashBuckets)
	if q.Plan.KeyExact {
		buckets = append(buckets, int(keys.HashPrefix([]byte(q.Plan.KeyPrefix))[0]))
	} else {
		for b := range keys.HashBuckets {
			buckets = append(buckets, b)
		}
	}
	res := make([]QueryResult, len(buckets))
	errs := make([]error, len(buckets))
	var wg sync.WaitGroup
	for i, b := range buckets {
		wg.Go(func() {
			bucket := []byte{byte(b)}
			lower := keys.ObjectPrefix(s.ID(), bucket, []byte(q.Plan.KeyPrefix))
			upper := keys.PrefixEnd(lower)
			if !strings.HasPrefix(q.Plan.KeyPrefix, SystemKeyPrefix) || !SystemKeys(ctx) {
				upper = minBytes(upper, keys.ObjectPrefix(s.ID(), bucket, []byte(SystemKeyPrefix)))
			}
			var after []byte
			if req.After != "" {
				after = keys.Object(s.ID(), bucket, []byte(req.After))
			}
			res[i].AsOf = out.AsOf
			errs[i] = st.queryOnce(ctx, s, req, q, lower, upper, after, limit, &res[i])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	mergePages(out, res, limit, nil)
	return nil
}

// mergePages gathers pages of disjoint keys into out in key order,
// leaving out the matches keep refuses (nil: none). A page that stopped
// short bounds the merged page: keys past where it stopped may still lie
// in its part.
func mergePages(out *QueryResult, pages []QueryResult, limit int, keep func(page, i int) bool) {
	out.Objects, out.Docs, out.Truncated, out.Next, out.Ranges, out.Examined, out.Plan, out.resume = nil, nil, false, "", 0, 0, "", nil
	bound, bounded := "", false
	for p, r := range pages {
		for i, o := range r.Objects {
			if keep != nil && !keep(p, i) {
				continue
			}
			out.Objects = append(out.Objects, o)
			if d, ok := r.Docs[o.Key]; ok {
				if out.Docs == nil {
					out.Docs = map[string]json.RawMessage{}
				}
				out.Docs[o.Key] = d
			}
		}
		out.Ranges += r.Ranges
		out.Examined += r.Examined
		if r.Plan != "" && (out.Plan == "" || r.Plan != "scan") {
			out.Plan = r.Plan
		}
		if r.Truncated && (!bounded || r.Next < bound) {
			bound, bounded = r.Next, true
		}
	}
	slices.SortFunc(out.Objects, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
	if bounded {
		n := len(out.Objects)
		for n > 0 && out.Objects[n-1].Key > bound {
			n--
		}
		out.Objects, out.Truncated, out.Next = out.Objects[:n], true, bound
	}
	if len(out.Objects) > limit {
		out.Objects, out.Truncated = out.Objects[:limit], true
	}
	if out.Truncated && len(out.Objects) > 0 && len(out.Objects) == limit {
		out.Next = out.Objects[len(out.Objects)-1].Key
	}
}

// queryBranch is a query of branch s (base b, branch point at) as of
// out.AsOf: the branch's own matches merged in key order with the base's
// as of the point, leaving out each base match whose key the branch has
// written (the branch shows its own version, or its delete marker,
// instead). version_count counts one side's versions.
func (st *Store) queryBranch(ctx context.Context, s, b OpenSpace, at uint64, req *QueryRequest, q *query.Query, limit int, out *QueryResult) error {
	asOf := out.AsOf
	side := func(sp OpenSpace, t uint64, res *QueryResult) error {
		lower, upper := listBounds(ctx, sp.ID(), q.Plan.KeyPrefix)
		var after []byte
		if req.After != "" {
			after = keys.Object(sp.ID(), nil, []byte(req.After))
		}
		res.AsOf = t
		return st.queryOnce(ctx, sp, req, q, lower, upper, after, limit, res)
	}
	var own, base QueryResult
	if asOf > at { // as of the point or before, the branch had nothing
		if err := side(s, asOf, &own); err != nil {
			return err
		}
	}
	if err := side(b, min(asOf, at), &base); err != nil {
		return err
	}
	hidden := make([]bool, len(base.Objects))
	if asOf > at {
		errs := make([]error, len(base.Objects))
		sem := make(chan struct{}, tagListParallel)
		var wg sync.WaitGroup
		for i, o := range base.Objects {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				recs, _, err := st.versionsOwn(ctx, s, objKey(s, []byte(o.Key)), asOf+1, 1)
				hidden[i], errs[i] = len(recs) > 0, err
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	// The base's matches of keys the branch wrote are left out.
	mergePages(out, []QueryResult{own, base}, limit, func(page, i int) bool { return page == 0 || !hidden[i] })
	return nil
}

// queryParallel is how many ranges a query asks at once.
const queryParallel = 8

// queryOnce runs the query over the ranges of [lower, upper) after
// after, queryParallel at a time, gathering their pages in key order into
// out (reset first).
func (st *Store) queryOnce(ctx context.Context, s OpenSpace, req *QueryRequest, q *query.Query, lower, upper, after []byte, limit int, out *QueryResult) error {
	out.Objects, out.Docs, out.Truncated, out.Next, out.Ranges, out.Examined, out.Plan, out.resume = nil, nil, false, "", 0, 0, "", nil
	t := s.Table()
	rs := t.Ranges()
	type part struct {
		r      *rangeclient.Range
		lo, hi []byte
	}
	var parts []part
	for i, r := range rs {
		end := rangeclient.End(rs, i, t.Space)
		start := r.Desc().Start
		if (end != nil && bytes.Compare(end, lower) <= 0) || (after != nil && end != nil && bytes.Compare(end, after) <= 0) {
			continue
		}
		if upper != nil && bytes.Compare(start, upper) >= 0 {
			break
		}
		parts = append(parts, part{r: r, lo: maxBytes(lower, start), hi: minBytes(upper, end)})
	}
	name := st.namer()
	for len(parts) > 0 {
		window := parts[:min(queryParallel, len(parts))]
		parts = parts[len(window):]
		pages := make([]kv.QueryPage, len(window))
		errs := make([]error, len(window))
		remaining := limit - len(out.Objects)
		var wg sync.WaitGroup
		for i := range window {
			ask := func() {
				var sa []byte
				if after != nil && bytes.Compare(after, window[i].lo) >= 0 {
					sa = after
				}
				pages[i], errs[i] = st.cfg.Ranges.Query(ctx, window[i].r, rangeclient.QueryRequest{
					Lower: window[i].lo, Upper: window[i].hi, StartAfter: sa, AsOf: out.AsOf,
					Limit: remaining + 1, Docs: req.Docs || req.OrderBy != "", Filter: q.Source})
			}
			if len(window) == 1 {
				ask()
			} else {
				wg.Go(ask)
			}
		}
		wg.Wait()
		for i, p := range pages {
			if errs[i] != nil {
				return errs[i]
			}
			out.Ranges++
			out.Examined += p.Examined
			if p.Plan != "" && (out.Plan == "" || p.Indexed) {
				out.Plan = p.Plan // the ranges' own plans (field indexes are theirs)
			}
			took := 0
			var last []byte
			for _, e := range p.Entries {
				if len(out.Objects) == limit {
					break
				}
				last = e.Obj
				_, _, key, err := keys.DecodeObject(e.Obj)
				if err != nil {
					return Errorf(Corrupt, "object key: %v", err)
				}
				info := objectInfo(req.Space, string(key), e.Rec)
				name(ctx, &info)
				out.Objects = append(out.Objects, info)
				if len(e.Rec.Inline) > 0 {
					if out.Docs == nil {
						out.Docs = map[string]json.RawMessage{}
					}
					out.Docs[info.Key] = json.RawMessage(e.Rec.Inline)
				}
				took++
			}
			switch {
			case len(out.Objects) == limit:
				// Full: more follow if this range had more (each is
				// asked for one more than the page needs), a later one
				// of the window has any, or ranges remain unasked.
				more := took < len(p.Entries) || p.More || len(parts) > 0
				for j, later := range pages[i+1:] {
					more = more || later.More || len(later.Entries) > 0 || errs[i+1+j] != nil
				}
				if more {
					out.Truncated = true
					out.Next = out.Objects[len(out.Objects)-1].Key
					out.resume = last
				}
				return nil
			case p.More:
				// This range stopped early (it examined as many
				// candidates as one request may): the next page resumes
				// inside it; later ranges' matches come after.
				_, _, key, err := keys.DecodeObject(p.Resume)
				if err != nil {
					return Errorf(Corrupt, "object key: %v", err)
				}
				out.Truncated, out.Next, out.resume = true, string(key), p.Resume
				return nil
			}
		}
	}
	return nil
}

func maxBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// orderer sorts matches by a field.
type orderer struct {
	field string
	desc  bool
}

func newOrderer(field string, desc bool) (*orderer, error) {
	switch {
	case field == "size", field == "modified", field == "content_type", field == "version",
		strings.HasPrefix(field, "tags.") && len(field) > 5,
		strings.HasPrefix(field, "meta.") && len(field) > 5,
		strings.HasPrefix(field, "doc.") && len(field) > 4:
		return &orderer{field: field, desc: desc}, nil
	}
	return nil, Errorf(InvalidArgument, "cannot order by %q: use key, size, modified, content_type, version, tags.NAME, meta.NAME or doc.PATH", field)
}

// value returns an object's value of the field: a float64, a string, or
// nil (missing: sorts last).
func (o *orderer) value(info *Info, docs map[string]json.RawMessage) any {
	switch f := o.field; {
	case f == "size":
		return float64(info.Size)
	case f == "modified", f == "version":
		return float64(info.Version)
	case f == "content_type":
		return info.ContentType
	case strings.HasPrefix(f, "tags."):
		if v, ok := info.Tags[f[5:]]; ok {
			return v
		}
	case strings.HasPrefix(f, "meta."):
		if v, ok := info.Meta[f[5:]]; ok {
			return v
		}
	case strings.HasPrefix(f, "doc."):
		var d any
		if json.Unmarshal(docs[info.Key], &d) != nil {
			return nil
		}
		for _, p := range strings.Split(f[4:], ".") {
			m, ok := d.(map[string]any)
			if !ok {
				return nil
			}
			d = m[p]
		}
		switch v := d.(type) {
		case float64, string:
			return v
		case bool:
			return fmt.Sprint(v)
		}
	}
	return nil
}

func (o *orderer) sort(objs []Info, docs map[string]json.RawMessage) {
	vals := make(map[string]any, len(objs))
	for i := range objs {
		vals[objs[i].Key] = o.value(&objs[i], docs)
	}
	slices.SortStableFunc(objs, func(a, b Info) int {
		va, vb := vals[a.Key], vals[b.Key]
		switch {
		case va == nil && vb == nil:
			return cmp.Compare(a.Key, b.Key)
		case va == nil:
			return 1
		case vb == nil:
			return -1
		}
		c := compareValues(va, vb)
		if o.desc {
			c = -c
		}
		if c == 0 {
			return cmp.Compare(a.Key, b.Key)
		}
		return c
	})
}

// compareValues orders numbers before strings, each by value.
func compareValues(a, b any) int {
	fa, aNum := a.(float64)
	fb, bNum := b.(float64)
	switch {
	case aNum && bNum:
		return cmp.Compare(fa, fb)
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return cmp.Compare(a.(string), b.(string))
}

// IndexManager is implemented by a Service that keeps field indexes (a
// cluster node).
type IndexManager interface {
	// AddIndex declares a field index on doc.PATH (path, with its doc.
	// prefix) of type "string", "number" or "time" on every range of
	// space, then fills it in the background; Indexes shows the
	// progress. Adding an index that exists with the same type resumes
	// its build if it is not ready; with another type it is refused.
	AddIndex(ctx context.Context, space, path, typ string) error
	// DropIndex removes a field index and its entries.
	DropIndex(ctx context.Context, space, path string) error
	// Indexes lists a space's field indexes.
	Indexes(ctx context.Context, space string) ([]IndexInfo, error)
}

// IndexInfo describes a field index and its build.
type IndexInfo struct {
	Path, Type, State  string // State: "building" or "ready"
	Created            int64  // Unix nanoseconds
	RangesDone, Ranges int
	Objects            int64
	Error              string
}

// SQLRunner is implemented by a Service that runs SQL statements (a
// node): read-only, over its spaces as tables, with an access key's view
// (docs/api.md, "SQL").
type SQLRunner interface {
	SQL(ctx context.Context, access, stmt string, maxBytes int) (SQLResult, error)
}

// SQLResult is a statement's answer: its columns and its rows as text (a
// nil cell is NULL).
type SQLResult struct {
	Columns []string
	Rows    [][]*string
}
