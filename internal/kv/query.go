package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/query"
)

// QueryOptions is one range's part of a query.
type QueryOptions struct {
	// RangeID names the range whose index entries are read.
	RangeID uint64
	// Lower and Upper bound the object keys (the range's part of the
	// query's span); StartAfter resumes after an object.
	Lower, Upper, StartAfter []byte
	// AsOf is the query's timestamp. Required.
	AsOf uint64
	// Limit caps the matches returned (default and most: QueryMaxLimit+1,
	// a page and whether more follow).
	Limit int
	// Examine caps the candidates looked at (default: QueryExamine); a
	// page that stops there says More, with Resume.
	Examine int
	// Docs keeps the bodies of JSON documents held in their records in
	// the answer; otherwise records come without Inline and Manifest.
	Docs bool
	// Query is the filter; its plan picks the candidates.
	Query *query.Query
}

// Query limits.
const (
	QueryMaxLimit = 10000
	QueryExamine  = 50000
	// queryCandidates bounds the candidates an index access that does
	// not read in object order (a prefix, a range, existence) keeps at
	// once: it keeps the first ones in key order and resumes after them.
	queryCandidates = 100000
)

// QueryPage is a range's answer to a query.
type QueryPage struct {
	Entries []mvcc.Entry
	// More says the range may hold more matches after Resume (the last
	// object looked at).
	More   bool
	Resume []byte
	// Examined counts the candidates looked at; Indexed says whether
	// they came from the index.
	Examined int
	Indexed  bool
	// Plan is the access the range used (query.Plan.String).
	Plan string
}

// RunQuery runs one range's part of a query on r, the node's committed
// state: the candidates the plan names, each one's visible version at
// AsOf, the filter on it. It reads no object body: only records.
func RunQuery(r pebble.Reader, o QueryOptions) (QueryPage, error) {
	if o.AsOf == 0 || o.Query == nil {
		return QueryPage{}, errors.New("kv: a query needs a timestamp and a filter")
	}
	if o.Limit <= 0 || o.Limit > QueryMaxLimit+1 {
		o.Limit = QueryMaxLimit + 1 // one past a page: whether more follow
	}
	if o.Examine <= 0 {
		o.Examine = QueryExamine
	}
	vlo, vhi := keys.VersionSpan(o.Lower, o.Upper)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: vlo, UpperBound: vhi})
	if err != nil {
		return QueryPage{}, err
	}
	decls, err := readDecls(r, o.RangeID)
	if err != nil {
		it.Close()
		return QueryPage{}, err
	}
	q := &querier{o: o, r: r, it: it}
	q.plan = o.Query.PlanFor(func(path string, typ byte) bool {
		return slices.ContainsFunc(decls, func(d FieldDecl) bool { return d.Ready && d.Path == path && d.Type == typ })
	})
	q.page.Plan = q.plan.String()
	defer it.Close()
	if q.plan.Access == query.Scan {
		err = q.scan()
	} else {
		err = q.index()
	}
	if err == nil {
		err = it.Error()
	}
	return q.page, err
}

type querier struct {
	o    QueryOptions
	plan query.Plan
	r    pebble.Reader
	it   *pebble.Iterator
	buf  []byte
	page QueryPage
}

// consider runs the filter on one candidate's visible version (nil: none
// at AsOf, or a delete marker) and reports whether the page is full.
func (q *querier) consider(obj []byte, rec *mvcc.Record) (full bool, err error) {
	q.page.Examined++
	q.page.Resume = obj
	if rec != nil && !rec.DeleteMarker {
		_, _, key, err := keys.DecodeObject(obj)
		if err != nil {
			return false, fmt.Errorf("%w: object key %x: %v", mvcc.ErrCorrupt, obj, err)
		}
		in := query.Input{Key: string(key), Rec: rec}
		if q.o.Query.UsesVersions() {
			in.Versions = func() (int, error) {
				recs, _, err := mvcc.Versions(Reader{R: q.r}, obj, q.o.AsOf+1, 0) // those at or before AsOf
				return len(recs), err
			}
		}
		ok, err := q.o.Query.Match(in)
		if err != nil {
			return false, err
		}
		if ok {
			if !q.o.Docs || !query.IsDocument(rec.ContentType) {
				rec.Inline = nil
			}
			rec.Manifest = nil
			q.page.Entries = append(q.page.Entries, mvcc.Entry{Obj: slices.Clone(obj), Rec: rec})
		}
	}
	if len(q.page.Entries) >= q.o.Limit || q.page.Examined >= q.o.Examine {
		q.page.More = true
		q.page.Resume = slices.Clone(q.page.Resume)
		return true, nil
	}
	return false, nil
}

// scan considers every object of the span, in key order.
func (q *querier) scan() error {
	lo := q.o.Lower
	if q.o.StartAfter != nil && bytes.Compare(q.o.StartAfter, lo) >= 0 {
		lo = keys.PrefixEnd(q.o.StartAfter)
	}
	var prev []byte
	for ok := q.it.SeekGE(keys.VersionPrefix(lo)); ok; {
		obj, _, err := keys.DecodeVersion(q.it.Key())
		if err != nil {
			return fmt.Errorf("%w: version key %x: %v", mvcc.ErrCorrupt, q.it.Key(), err)
		}
		prev = append(prev[:0], obj...)
		rec, err := q.at(prev)
		if err != nil {
			return err
		}
		if full, err := q.consider(prev, rec); full || err != nil {
			return err
		}
		// The next object: past every version of this one.
		end, _ := keys.VersionPrefixEnd(q.buf[:0], keys.VersionPrefix(prev))
		q.buf = end
		ok = q.it.SeekGE(end)
	}
	return nil
}

// at reads obj's visible version at AsOf with the querier's iterator (nil
// if it has none).
func (q *querier) at(obj []byte) (*mvcc.Record, error) {
	q.buf = keys.AppendVersion(q.buf[:0], obj, q.o.AsOf)
	if !q.it.SeekGE(q.buf) {
		return nil, q.it.Error()
	}
	k := q.it.Key()
	if len(k) != 1+len(obj)+8 || !bytes.Equal(k[1:1+len(obj)], obj) {
		return nil, nil
	}
	rec, err := mvcc.Unmarshal(q.it.Value())
	if err != nil {
		return nil, fmt.Errorf("object %x: %w", obj, err)
	}
	rec.Version = ^binary.BigEndian.Uint64(k[len(k)-8:])
	return rec, nil
}

// index considers the objects the plan's index entries name.
func (q *querier) index() error {
	q.page.Indexed = true
	p := q.plan
	prefix := keys.AppendIndexPrefix(nil, q.o.RangeID, p.Kind, []byte(p.Tag))
	lo := append(slices.Clone(prefix), p.Lower...)
	hi := keys.PrefixEnd(prefix)
	if p.Upper != nil {
		hi = append(slices.Clone(prefix), p.Upper...)
	}
	ix, err := q.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer ix.Close()
	after := q.o.Lower
	if q.o.StartAfter != nil && bytes.Compare(q.o.StartAfter, after) >= 0 {
		after = keys.PrefixEnd(q.o.StartAfter)
	}
	inSpan := func(obj []byte) bool {
		return bytes.Compare(obj, after) >= 0 && (q.o.Upper == nil || bytes.Compare(obj, q.o.Upper) < 0)
	}
	if p.Access == query.TagEqual {
		// One value: the entries are in object order.
		var prev []byte
		for ok := ix.SeekGE(append(slices.Clone(lo), after...)); ok; ok = ix.Next() {
			e, err := keys.DecodeIndexEntry(ix.Key())
			if err != nil {
				return fmt.Errorf("%w: index entry %x: %v", mvcc.ErrCorrupt, ix.Key(), err)
			}
			if q.o.Upper != nil && bytes.Compare(e.Obj, q.o.Upper) >= 0 {
				break
			}
			if e.TS > q.o.AsOf || bytes.Equal(e.Obj, prev) || !inSpan(e.Obj) {
				continue
			}
			prev = append(prev[:0], e.Obj...)
			rec, err := q.at(prev)
			if err != nil {
				return err
			}
			if full, err := q.consider(prev, rec); full || err != nil {
				return err
			}
		}
		return ix.Error()
	}
	// Many values: gather the candidates, then take them in key order,
	// keeping at most queryCandidates (the first ones).
	var cands [][]byte
	cut := false
	trim := func() {
		slices.SortFunc(cands, bytes.Compare)
		cands = slices.CompactFunc(cands, bytes.Equal)
		if len(cands) > queryCandidates {
			cands, cut = cands[:queryCandidates], true
		}
	}
	for ok := ix.First(); ok; ok = ix.Next() {
		e, err := keys.DecodeIndexEntry(ix.Key())
		if err != nil {
			return fmt.Errorf("%w: index entry %x: %v", mvcc.ErrCorrupt, ix.Key(), err)
		}
		if e.TS > q.o.AsOf || !inSpan(e.Obj) {
			continue
		}
		if cut && bytes.Compare(e.Obj, cands[len(cands)-1]) > 0 {
			continue
		}
		cands = append(cands, slices.Clone(e.Obj))
		if len(cands) >= 2*queryCandidates {
			trim()
		}
	}
	if err := ix.Error(); err != nil {
		return err
	}
	trim()
	for _, obj := range cands {
		rec, err := q.at(obj)
		if err != nil {
			return err
		}
		if full, err := q.consider(obj, rec); full || err != nil {
			return err
		}
	}
	if cut {
		// More candidates lie after the last one kept.
		q.page.More, q.page.Resume = true, slices.Clone(cands[len(cands)-1])
	}
	return nil
}
