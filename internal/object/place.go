package object

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/query"
	"github.com/cairn-db/cairn/internal/rangeclient"
)

// Tag placement ("tag:NAME"). An object of a tag space lives under
// keys.TagPrefix(v), v its tag NAME's value, so the objects that share v
// are neighbours and a query on tags.NAME == v reads one range. A key's
// place is fixed by its first write: the space's directory (under
// keys.DirPrefix, one record per key, holding v) is written once, before
// the key's first version, and never changes. So a write may not change
// an object's NAME tag (write it under a new key instead), a reader finds
// any key with one directory read (cached: an entry never changes), and a
// listing reads the directory in key order.

// A directory record: its content type, and the metadata that holds the
// value placing its key (metadata, which listings return, unlike content).
const (
	dirContentType = "application/x-cairn-placement"
	dirValueMeta   = "value"
)

// errUnplaced is a write that keeps a key's tags (a delete, a retag) to a
// key a tag space has never placed: the key has no version.
var errUnplaced = errors.New("object: key never written")

// placing is how a write places its key in a tag space.
type placing struct {
	// tags are the version's tags; with keep, nil means the parent's.
	tags map[string]string
	keep bool
	// create places a key never written by tags (otherwise the write
	// gets errUnplaced).
	create bool
}

// placeValue is the value of the placement tag a write sets, and whether
// it sets one (false: it keeps the parent's).
func (p placing) placeValue(name string) (string, bool) {
	if p.keep && p.tags == nil {
		return "", false
	}
	return p.tags[name], true
}

// dirCache remembers directory entries (they never change) by space id
// and key; it is emptied when full.
type dirCache struct {
	mu sync.Mutex
	m  map[dirKey]string
}

type dirKey struct {
	space uint32
	key   string
}

const dirCacheMax = 1 << 18

func (c *dirCache) get(space uint32, key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[dirKey{space, key}]
	return v, ok
}

func (c *dirCache) put(space uint32, key, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= dirCacheMax {
		c.m = make(map[dirKey]string)
	}
	c.m[dirKey{space, key}] = v
}

// dirObj is the directory record's object key of key in tag space s.
func dirObj(s OpenSpace, key string) []byte {
	return keys.Object(s.ID(), keys.DirPrefix, []byte(key))
}

// tagObj is the object key of key placed by value v in tag space s.
func tagObj(s OpenSpace, key, v string) []byte {
	return keys.Object(s.ID(), keys.TagPrefix(v), []byte(key))
}

// placed returns the value that places key in tag space s, from the
// directory (ok false: the key was never written).
func (st *Store) placed(ctx context.Context, s OpenSpace, key string) (string, bool, error) {
	if v, ok := st.dir.get(s.ID(), key); ok {
		return v, true, nil
	}
	// A directory entry is written before its key's first version and
	// never changes: the latest read is right at every time (a snapshot
	// reads its space's). Tag spaces have no branches.
	rec, err := st.readOwn(ctx, liveView{s}, dirObj(s, key), 0, 0)
	switch {
	case KindOf(err) == NotFound:
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	v := rec.Meta[dirValueMeta]
	st.dir.put(s.ID(), key, v)
	return v, true, nil
}

// liveView is a space read at the latest (a snapshot's directory is its
// space's).
type liveView struct{ OpenSpace }

func (liveView) ReadAt() uint64 { return 0 }

// readPlace is the object key a read of key in s uses. A key a tag space
// never placed reads as absent under the empty value (nothing is kept
// there without a directory entry).
func (st *Store) readPlace(ctx context.Context, s OpenSpace, key string) ([]byte, error) {
	name := s.PlacementTag()
	if name == "" {
		return objKey(s, []byte(key)), nil
	}
	v, _, err := st.placed(ctx, s, key)
	if err != nil {
		return nil, err
	}
	return tagObj(s, key, v), nil
}

// writePlace is the object key a write of key in s uses: in a tag space
// the key's place, checked against the tag the write sets, and made (the
// directory entry written) for a key never written when p.create.
func (st *Store) writePlace(ctx context.Context, s OpenSpace, key string, p placing) ([]byte, error) {
	name := s.PlacementTag()
	if name == "" {
		return objKey(s, []byte(key)), nil
	}
	want, sets := p.placeValue(name)
	for attempt := 0; ; attempt++ {
		v, ok, err := st.placed(ctx, s, key)
		if err != nil {
			return nil, err
		}
		if ok {
			if sets && want != v {
				return nil, Errorf(InvalidArgument, "%q is placed by its tag %s=%q: in a space placed by tag %s that tag cannot change (write the object under a new key)", key, name, v, name)
			}
			return tagObj(s, key, v), nil
		}
		if !p.create {
			return nil, errUnplaced
		}
		if attempt > maxPlanRetries {
			return nil, Errorf(Unavailable, "the directory entry of %q was not written; retry", key)
		}
		// Place it: a directory record that only the first write makes.
		// A concurrent first write may win; then its value is read.
		ts, err := st.cfg.Timestamps.Next(ctx)
		if err != nil {
			return nil, Unreachable("timestamp oracle", err)
		}
		obj := dirObj(s, key)
		c := &kv.PutCmd{Obj: obj, IfNoneMatch: true, Retention: s.Retention(),
			Rec: &mvcc.Record{Version: ts, StartTS: ts, ContentType: dirContentType, Meta: map[string]string{dirValueMeta: want}}}
		_, err = st.propose(ctx, s, obj, c.Encode())
		switch {
		case err == nil:
			st.dir.put(s.ID(), key, want)
			return tagObj(s, key, want), nil
		case KindOf(err) == PreconditionFailed:
			continue // placed by another first write: read it
		case errors.Is(err, rangeclient.ErrConflict):
			continue // a later read or write went first: a new timestamp
		default:
			return nil, err
		}
	}
}

// tagListParallel is how many keys a tag space's listing reads at once.
const tagListParallel = 16

// listTagged is listOnce of tag space s at o.AsOf (non-zero): its
// directory, read in key order, names each key's place, where its record
// (or, for AllVersions, its versions) at that time is read. Keys without
// one then (deleted, or first written later) are left out, and the
// directory is read on until the page is full.
func (st *Store) listTagged(ctx context.Context, s OpenSpace, req *ListRequest, o mvcc.ListOptions) (ListResult, error) {
	d := o
	d.Lower = keys.ObjectPrefix(s.ID(), keys.DirPrefix, []byte(req.Prefix))
	d.Upper = keys.PrefixEnd(d.Lower)
	if !strings.HasPrefix(req.Prefix, SystemKeyPrefix) || !SystemKeys(ctx) {
		d.Upper = minBytes(d.Upper, keys.ObjectPrefix(s.ID(), keys.DirPrefix, []byte(SystemKeyPrefix)))
	}
	d.StartAfter, d.AllVersions, d.AfterVersion, d.Snapshot = nil, false, 0, false
	var resume *Info // AllVersions: StartAfter's older versions come first
	if req.StartAfter != "" {
		d.StartAfter = keys.Object(s.ID(), keys.DirPrefix, []byte(req.StartAfter))
		inSpan := strings.HasPrefix(req.StartAfter, req.Prefix) &&
			(!strings.HasPrefix(req.StartAfter, SystemKeyPrefix) || strings.HasPrefix(req.Prefix, SystemKeyPrefix) && SystemKeys(ctx))
		if req.AllVersions && req.AfterVersion != 0 && inSpan {
			resume = &Info{Key: req.StartAfter, Version: req.AfterVersion}
		}
	}
	limit := o.Limit
	out := ListResult{}
	name := st.namer()
	// appendKey adds key's part of the listing; full says
	// the page filled before the key's versions ended.
	appendKey := func(key string, recs []*mvcc.Record, more bool) (full bool) {
		for _, r := range recs {
			if len(out.Objects) == limit {
				return true
			}
			out.Objects = append(out.Objects, objectInfo(req.Space, key, r))
			name(ctx, &out.Objects[len(out.Objects)-1])
		}
		return more
	}
	type found struct {
		key  string
		recs []*mvcc.Record
		more bool
		err  error
	}
	read := func(key, v string, before uint64) found {
		f := found{key: key}
		obj := tagObj(s, key, v)
		if !req.AllVersions {
			rec, err := st.readOwn(ctx, s, obj, 0, o.AsOf)
			switch {
			case KindOf(err) == NotFound:
			case err != nil:
				f.err = err
			case !rec.DeleteMarker:
				f.recs = []*mvcc.Record{rec}
			}
			return f
		}
		// Versions at or before the listing's time, newest first.
		if before == 0 || before > o.AsOf+1 {
			before = o.AsOf + 1
		}
		for {
			recs, more, err := st.versionsOwn(ctx, s, obj, before, limit+1)
			if err != nil {
				f.err = err
				return f
			}
			for _, r := range recs {
				if r.Version <= o.AsOf {
					f.recs = append(f.recs, r)
				}
			}
			if len(f.recs) > limit || !more || len(recs) == 0 {
				f.more = len(f.recs) > limit || more
				return f
			}
			before = recs[len(recs)-1].Version
		}
	}
	if resume != nil {
		v, ok, err := st.placed(ctx, s, resume.Key)
		if err != nil {
			return ListResult{}, err
		}
		if ok {
			f := read(resume.Key, v, resume.Version)
			if f.err != nil {
				return ListResult{}, f.err
			}
			if appendKey(f.key, f.recs, f.more) {
				return st.truncated(out, req), nil
			}
		}
	}
	for {
		d.Limit = limit - len(out.Objects) + 1
		ents, more, err := st.cfg.Ranges.Scan(ctx, s.Table(), d, 1)
		if err != nil {
			return ListResult{}, err
		}
		fs := make([]found, len(ents))
		sem := make(chan struct{}, tagListParallel)
		var wg sync.WaitGroup
		for i, e := range ents {
			_, _, k, err := keys.DecodeObject(e.Obj)
			if err != nil {
				return ListResult{}, Errorf(Corrupt, "directory key: %v", err)
			}
			key, v := string(k), e.Rec.Meta[dirValueMeta]
			st.dir.put(s.ID(), key, v)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				fs[i] = read(key, v, 0)
			})
		}
		wg.Wait()
		for _, f := range fs {
			if f.err != nil {
				return ListResult{}, f.err
			}
			if len(out.Objects) == limit && len(f.recs) > 0 {
				return st.truncated(out, req), nil
			}
			if appendKey(f.key, f.recs, f.more) {
				return st.truncated(out, req), nil
			}
		}
		if !more || len(ents) == 0 {
			return out, nil
		}
		d.StartAfter = ents[len(ents)-1].Obj
	}
}

// truncated marks a full page of a listing as one that more follow.
func (st *Store) truncated(out ListResult, req *ListRequest) ListResult {
	out.Truncated = true
	if n := len(out.Objects); n > 0 {
		out.Next = out.Objects[n-1].Key
		if req.AllVersions {
			out.NextVersion = out.Objects[n-1].Version
		}
	}
	return out
}

// queryTagged is a query of tag space s. A filter that names one value
// of the placement tag (tags.NAME == "v" among its top-level conjuncts)
// reads that value's place alone, in key order: one range, unless the
// value's objects outgrew one. Any other filter reads every place, whose
// keys are in no overall order: every match (at most QueryOrderMax) is
// gathered and ordered by key.
func (st *Store) queryTagged(ctx context.Context, s OpenSpace, req *QueryRequest, q *query.Query, name string, limit int, out *QueryResult) error {
	v, ok := q.TagEquals(name)
	if !ok && q.Plan.KeyExact {
		// One key: its place is in the directory.
		var placed bool
		var err error
		if v, placed, err = st.placed(ctx, s, q.Plan.KeyPrefix); err != nil {
			return err
		}
		if !placed {
			out.Plan = q.Plan.String()
			return nil
		}
		ok = true
	}
	if ok {
		pp := keys.TagPrefix(v)
		lower := keys.ObjectPrefix(s.ID(), pp, []byte(q.Plan.KeyPrefix))
		upper := keys.PrefixEnd(lower)
		if !strings.HasPrefix(q.Plan.KeyPrefix, SystemKeyPrefix) || !SystemKeys(ctx) {
			upper = minBytes(upper, keys.ObjectPrefix(s.ID(), pp, []byte(SystemKeyPrefix)))
		}
		var after []byte
		if req.After != "" {
			after = keys.Object(s.ID(), pp, []byte(req.After))
		}
		return st.queryOnce(ctx, s, req, q, lower, upper, after, limit, out)
	}
	lower, upper := keys.TagSpan(s.ID())
	var after []byte
	var all QueryResult
	for {
		var page QueryResult
		page.AsOf = out.AsOf
		if err := st.queryOnce(ctx, s, req, q, lower, upper, after, kv.QueryMaxLimit, &page); err != nil {
			return err
		}
		all.Ranges += page.Ranges
		all.Examined += page.Examined
		if all.Plan == "" || page.Plan != "scan" {
			all.Plan = page.Plan
		}
		for _, o := range page.Objects {
			if o.Key > req.After && (SystemKeys(ctx) || !strings.HasPrefix(o.Key, SystemKeyPrefix)) && strings.HasPrefix(o.Key, q.Plan.KeyPrefix) {
				all.Objects = append(all.Objects, o)
				if d, ok := page.Docs[o.Key]; ok {
					if all.Docs == nil {
						all.Docs = map[string]json.RawMessage{}
					}
					all.Docs[o.Key] = d
				}
			}
		}
		if len(all.Objects) > QueryOrderMax {
			return Errorf(InvalidArgument, "more than %d objects match: a query of a space placed by tag %s orders its matches by key; narrow the filter, or name one value with tags.%s == \"...\"", QueryOrderMax, name, name)
		}
		if !page.Truncated {
			break
		}
		after = page.resume
	}
	slices.SortFunc(all.Objects, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
	out.Objects, out.Docs, out.Ranges, out.Examined, out.Plan = all.Objects, all.Docs, all.Ranges, all.Examined, all.Plan
	out.Truncated, out.Next = false, ""
	if len(out.Objects) > limit {
		out.Objects, out.Truncated = out.Objects[:limit], true
		out.Next = out.Objects[limit-1].Key
	}
	return nil
}
