package object

import (
	"context"
	"slices"

	"github.com/cairn-db/cairn/internal/mvcc"
)

// SpaceDiffer is implemented by a Service that compares spaces.
type SpaceDiffer interface {
	// DiffSpaces lists the keys whose objects differ between two views
	// of one space (SpaceDiffRequest).
	DiffSpaces(ctx context.Context, req *SpaceDiffRequest) (SpaceDiff, error)
}

// SpaceDiffRequest compares what From and To show: each a space, one of
// its snapshots or one of its branches (any two views of one space).
type SpaceDiffRequest struct {
	From, To   string
	Prefix     string // only keys under it
	StartAfter string // the page after this key (SpaceDiff.Next)
	Limit      uint32 // 0: the server's default (1000)
}

// Key changes.
const (
	KeyAdded   = "added"   // in To, not in From
	KeyRemoved = "removed" // in From, not in To
	KeyChanged = "changed" // in both, different (another version, other content or metadata)
)

// SpaceDiff is one page of a space diff, in key order.
type SpaceDiff struct {
	Changes   []KeyChange
	Truncated bool
	Next      string // pass as StartAfter for the next page
}

// KeyChange is one key that differs.
type KeyChange struct {
	Key    string
	Change string // KeyAdded, KeyRemoved or KeyChanged
	// From and To are the key's object on each side (nil where absent).
	From, To *Info
}

// diffSide is one side of a space diff: what it shows is its root
// space's keys as of at, overlaid (a branch) with overlay's own.
type diffSide struct {
	name    string
	s       OpenSpace // what it reads through
	root    OpenSpace // the space whose history it shows
	at      uint64    // as of when
	overlay OpenSpace // a branch: its own keys (nil otherwise)
	readAt  uint64    // the time its objects are read as of (0: its own)
}

// DiffSpaces implements SpaceDiffer. Its cost follows the change, not the
// spaces: the keys that can differ are the root space's keys written
// between the two sides' times — found by a listing that reads only the
// parts of the store holding versions that new (mvcc.ListOptions.Since)
// — and the keys a branch side wrote; only those are read on both sides.
func (st *Store) DiffSpaces(ctx context.Context, req *SpaceDiffRequest) (SpaceDiff, error) {
	limit := pageLimit(req.Limit)
	if req.From == req.To {
		if err := validSpace(ctx, st, req.From); err != nil {
			return SpaceDiff{}, err
		}
		return SpaceDiff{Changes: []KeyChange{}}, nil
	}
	now, err := st.cfg.Timestamps.Next(ctx)
	if err != nil {
		return SpaceDiff{}, Unreachable("timestamp oracle", err)
	}
	a, release, err := st.spaceSide(ctx, req.From, now)
	if err != nil {
		return SpaceDiff{}, err
	}
	defer release()
	b, release2, err := st.spaceSide(ctx, req.To, now)
	if err != nil {
		return SpaceDiff{}, err
	}
	defer release2()
	if a.root.Hashed() || a.root.PlacementTag() != "" {
		return SpaceDiff{}, Errorf(InvalidArgument, "%q has hash or tag placement: comparing views of such a space is not supported yet", req.From)
	}
	if a.root.ID() != b.root.ID() {
		return SpaceDiff{}, Errorf(InvalidArgument, "%q and %q are not views of one space: a space, its snapshots and its branches compare", req.From, req.To)
	}
	type stream struct {
		s           OpenSpace
		asOf, since uint64
	}
	var streams []stream
	if a.at != b.at {
		streams = append(streams, stream{s: a.root, asOf: max(a.at, b.at), since: min(a.at, b.at)})
	}
	for _, sd := range []diffSide{a, b} {
		if sd.overlay != nil {
			streams = append(streams, stream{s: sd.overlay, asOf: now})
		}
	}
	out := SpaceDiff{Changes: []KeyChange{}}
	list := &ListRequest{Prefix: req.Prefix}
	after := req.StartAfter
	for {
		// The candidates every stream's page covers (up to the end of a
		// page that stopped short), once each, in key order.
		var cands []string
		var bound *string
		for _, sm := range streams {
			page, more, err := st.scanChanged(ctx, sm.s, list, after, sm.asOf, sm.since, limit)
			if err != nil {
				return SpaceDiff{}, err
			}
			for _, e := range page {
				cands = append(cands, e.key)
			}
			if more && len(page) > 0 && (bound == nil || page[len(page)-1].key < *bound) {
				k := page[len(page)-1].key
				bound = &k
			}
		}
		slices.Sort(cands)
		cands = slices.Compact(cands)
		for _, k := range cands {
			if bound != nil && k > *bound {
				break
			}
			if len(out.Changes) == limit {
				out.Truncated = true
				return out, nil
			}
			after = k
			ch, err := st.diffKey(ctx, a, b, k)
			if err != nil {
				return SpaceDiff{}, err
			}
			if ch != nil {
				out.Changes = append(out.Changes, *ch)
				out.Next = k
			}
		}
		if bound == nil {
			out.Next = ""
			return out, nil
		}
		after = *bound
	}
}

// validSpace checks that name opens.
func validSpace(ctx context.Context, st *Store, name string) error {
	_, release, err := st.cfg.Spaces.Acquire(ctx, name)
	if err == nil {
		release()
	}
	return err
}

// spaceSide opens name as a side of a space diff taken at now.
func (st *Store) spaceSide(ctx context.Context, name string, now uint64) (diffSide, func(), error) {
	s, release, err := st.cfg.Spaces.Acquire(ctx, name)
	if err != nil {
		return diffSide{}, nil, err
	}
	d := diffSide{name: name, s: s, root: s, at: now, readAt: now}
	if b, at := s.Base(); b != nil {
		d.root, d.at, d.overlay = b, at, s
	} else if at := s.ReadAt(); at != 0 {
		d.at, d.readAt = at, 0 // a snapshot reads as of its own time
	}
	return d, release, nil
}

// scanChanged lists the keys of space sp under list's prefix after
// startAfter whose visible version as of asOf is newer than since (0:
// every key with a version, delete markers too).
func (st *Store) scanChanged(ctx context.Context, sp OpenSpace, list *ListRequest, startAfter string, asOf, since uint64, limit int) ([]sideEntry, bool, error) {
	return st.scanSide(ctx, sp, list.Prefix, startAfter, mvcc.ListOptions{Limit: limit, AsOf: asOf, Markers: true, Since: since})
}

// diffKey compares key on the two sides: nil if they show the same.
func (st *Store) diffKey(ctx context.Context, a, b diffSide, key string) (*KeyChange, error) {
	read := func(d diffSide) (*Info, *mvcc.Record, error) {
		rec, err := st.readRecord(ctx, d.s, objKey(d.s, []byte(key)), 0, d.readAt)
		if KindOf(err) == NotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		info := objectInfo(d.name, key, rec)
		st.name(ctx, &info)
		return &info, rec, nil
	}
	fi, fr, err := read(a)
	if err != nil {
		return nil, err
	}
	ti, tr, err := read(b)
	if err != nil {
		return nil, err
	}
	switch {
	case fr == nil && tr == nil, sameContent(fr, tr):
		return nil, nil
	case fr == nil:
		return &KeyChange{Key: key, Change: KeyAdded, To: ti}, nil
	case tr == nil:
		return &KeyChange{Key: key, Change: KeyRemoved, From: fi}, nil
	}
	return &KeyChange{Key: key, Change: KeyChanged, From: fi, To: ti}, nil
}
