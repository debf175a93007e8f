package object

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// The watch: a space's committed changes in commit order.
//
// Every range keeps a change feed (keys.AppendChangeEntry): one entry per
// version it commits, written in the Raft command that writes the
// version. A watch reads the feeds of every range of the space after a
// cursor up to a fresh timestamp, each past its range's timestamp guard,
// and merges them: what it returns is every version committed in
// (cursor, closed], in (timestamp, key) order, and nothing committed at
// or before closed can appear later. A range with a lock of a transaction
// still pending is read only below that transaction's start (its
// versions will all be committed after it), so a long transaction holds
// back the watch's closed timestamp, not the watch.

// Watcher is implemented by a Service that serves watches (Store).
type Watcher interface {
	Watch(ctx context.Context, req *WatchRequest) (WatchResult, error)
}

// WatchRequest asks for the changes of Space after Cursor (the empty
// cursor: after From, a timestamp; both empty: from now).
type WatchRequest struct {
	Space  string
	Cursor string
	From   uint64
	// Limit bounds the events (0: WatchPage).
	Limit int
	// Wait, if positive, waits up to it for a first event (a long poll).
	Wait time.Duration
}

// WatchPage is the default and largest Limit.
const WatchPage = 1000

// WatchEvent is one committed version.
type WatchEvent struct {
	Key          string
	Version      uint64
	DeleteMarker bool
}

// WatchResult is a page of changes. Every version committed after the
// request's cursor up to Closed is in Events or a page that follows
// (More); Next resumes after the page.
type WatchResult struct {
	Events []WatchEvent
	Next   string
	Closed uint64
	More   bool
}

// watchPoll is how often a long poll looks again.
const watchPoll = 20 * time.Millisecond

// watchCursor is a position in a space's changes: every version (ts, obj)
// at or before it has been delivered; obj nil stands after every object
// of ts.
type watchCursor struct {
	ts  uint64
	obj []byte
}

func (c watchCursor) String() string {
	if c.obj == nil {
		return tstamp.String(c.ts)
	}
	return tstamp.String(c.ts) + "." + base64.RawURLEncoding.EncodeToString(c.obj)
}

func (c watchCursor) less(d watchCursor) bool {
	if c.ts != d.ts {
		return c.ts < d.ts
	}
	if c.obj == nil || d.obj == nil {
		return c.obj != nil && d.obj == nil
	}
	return bytes.Compare(c.obj, d.obj) < 0
}

func parseCursor(s string, space uint32) (watchCursor, error) {
	ts, rest, _ := strings.Cut(s, ".")
	t, err := tstamp.Parse(ts)
	if err != nil || t == 0 {
		return watchCursor{}, Errorf(InvalidArgument, "cursor %q is not one a watch returned", s)
	}
	c := watchCursor{ts: t}
	if rest != "" {
		obj, err := base64.RawURLEncoding.DecodeString(rest)
		id, _, _, derr := keys.DecodeObject(obj)
		if err != nil || derr != nil || id != space {
			return watchCursor{}, Errorf(InvalidArgument, "cursor %q is not one a watch of this space returned", s)
		}
		c.obj = obj
	}
	return c, nil
}

// Watch returns the changes of a space after a cursor: see the top of
// this file.
func (st *Store) Watch(ctx context.Context, req *WatchRequest) (WatchResult, error) {
	s, release, err := st.cfg.Spaces.Acquire(ctx, req.Space)
	if err != nil {
		return WatchResult{}, err
	}
	defer release()
	if s.ReadAt() != 0 {
		return WatchResult{}, Errorf(InvalidArgument, "%s is a snapshot: it never changes", req.Space)
	}
	limit := req.Limit
	if limit <= 0 || limit > WatchPage {
		limit = WatchPage
	}
	var cur watchCursor
	switch {
	case req.Cursor != "":
		if cur, err = parseCursor(req.Cursor, s.ID()); err != nil {
			return WatchResult{}, err
		}
	case req.From != 0:
		cur.ts = req.From
	}
	deadline := st.cfg.Clock().Add(req.Wait)
	fromNow := req.Cursor == "" && req.From == 0
	for {
		to, err := st.cfg.Timestamps.Next(ctx)
		if err != nil {
			return WatchResult{}, Unreachable("timestamp oracle", err)
		}
		if cur.ts == 0 {
			cur.ts = to // from now: nothing before
		}
		if cur.ts > to {
			return WatchResult{}, Errorf(InvalidArgument, "cursor %s is in the future", cur)
		}
		var res WatchResult
		err = st.cfg.Ranges.RetryMoved(ctx, func() error {
			var err error
			res, err = st.watchOnce(ctx, s, cur, to, limit, fromNow)
			return err
		}, func() bool { return true })
		if err != nil {
			return WatchResult{}, FromRange(err)
		}
		if len(res.Events) > 0 || res.More || !st.cfg.Clock().Before(deadline) {
			return res, nil
		}
		// Nothing yet: look again from where this look closed.
		if cur, err = parseCursor(res.Next, s.ID()); err != nil {
			return WatchResult{}, err
		}
		fromNow = false
		if err := clock.Sleep(ctx, watchPoll); err != nil {
			return WatchResult{}, err
		}
	}
}

// watchOnce reads every range's feed after cur up to to and merges them.
//
// With fromNow, cur is only the fresh timestamp a watch "from now"
// started at: a range held back below it by a pending transaction makes
// the page close there, below cur, since that transaction may still
// commit under cur (its versions must not be lost to the watch).
func (st *Store) watchOnce(ctx context.Context, s OpenSpace, cur watchCursor, to uint64, limit int, fromNow bool) (WatchResult, error) {
	t := s.Table()
	rs := t.Ranges()
	type part struct {
		changes []kv.Change
		cut     watchCursor // what the part closes
		err     error
	}
	parts := make([]part, len(rs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, queryParallel)
	for i, r := range rs {
		lo, hi := r.Desc().Start, rangeclient.End(rs, i, t.Space)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := &parts[i]
			rto := to
			for attempt := 0; ; attempt++ {
				// Nothing after the cursor up to rto: the part closes at
				// rto (held back below a pending transaction), except that
				// a watch from now reads once anyway, for the locks.
				if (rto <= cur.ts && cur.obj == nil || rto < cur.ts) && !(fromNow && attempt == 0) {
					p.cut = watchCursor{ts: rto}
					return
				}
				page, err := st.cfg.Ranges.Changes(ctx, r, rangeclient.ChangesRequest{Lower: lo, Upper: hi,
					AfterTS: cur.ts, AfterObj: cur.obj, To: rto, Limit: limit})
				var le *rangeclient.LockedError
				if errors.As(err, &le) && attempt < 16 {
					pending, err := st.cfg.Txns.SettleDecided(ctx, le.Locks)
					if err != nil {
						p.err = err
						return
					}
					if pending != 0 {
						rto = min(rto, pending-1)
					}
					continue
				}
				if err != nil {
					p.err = err
					return
				}
				p.changes, p.cut = page.Changes, watchCursor{ts: rto}
				if page.More && len(page.Changes) > 0 {
					last := page.Changes[len(page.Changes)-1]
					p.cut = watchCursor{ts: last.TS, obj: last.Obj}
				}
				return
			}
		})
	}
	wg.Wait()
	cut := watchCursor{ts: to}
	more := false
	for _, p := range parts {
		if p.err != nil {
			return WatchResult{}, p.err
		}
		if p.cut.less(cut) {
			cut = p.cut
		}
		more = more || p.cut.obj != nil
	}
	if cut.less(cur) && !fromNow {
		cut = cur // a range held back below the cursor: no step this time
	}
	var all []kv.Change
	for _, p := range parts {
		for _, c := range p.changes {
			if !cut.less(watchCursor{ts: c.TS, obj: c.Obj}) {
				all = append(all, c)
			}
		}
	}
	slices.SortFunc(all, func(a, b kv.Change) int { return cmp.Or(cmp.Compare(a.TS, b.TS), bytes.Compare(a.Obj, b.Obj)) })
	if len(all) > limit {
		last := all[limit-1]
		all, cut, more = all[:limit], watchCursor{ts: last.TS, obj: last.Obj}, true
	}
	res := WatchResult{Next: cut.String(), More: more, Closed: cut.ts}
	if cut.obj != nil {
		res.Closed = cut.ts - 1
	}
	system := SystemKeys(ctx)
	for _, c := range all {
		_, pp, key, err := keys.DecodeObject(c.Obj)
		if err != nil {
			return WatchResult{}, Errorf(Corrupt, "change of object %x: %v", c.Obj, err)
		}
		if bytes.Equal(pp, keys.DirPrefix) || (!system && strings.HasPrefix(string(key), SystemKeyPrefix)) {
			continue // a tag space's directory; the store's own keys
		}
		res.Events = append(res.Events, WatchEvent{Key: string(key), Version: c.TS, DeleteMarker: c.DeleteMarker})
	}
	return res, nil
}
