package rangeclient

import (
	"bytes"
	"context"
	"sync"

	"github.com/cairn-db/cairn/internal/mvcc"
)

// Scan lists o's span ([o.Lower, o.Upper) after o.StartAfter, at o.AsOf,
// one entry per key or every version) across the ranges of t, in key
// order: at most o.Limit entries (0: no limit), and whether more remain.
// It asks up to parallel ranges at once (scatter), each for up to the
// limit, and gathers their pages in key order; with parallel 1 it reads
// the ranges one after another and never reads past the page. A range
// whose key moved answers ErrRangeMoved and the scan fails with it (route
// again: RetryMoved). Keys locked by transactions that may cover the
// scan fail it with a *LockedError.
func (c *Client) Scan(ctx context.Context, t *Table, o mvcc.ListOptions, parallel int) ([]mvcc.Entry, bool, error) {
	parallel = max(parallel, 1)
	rs := t.Ranges()
	type part struct {
		r      *Range
		lo, hi []byte
	}
	var parts []part
	for i, r := range rs {
		// Each entry covers its start to the next one's, as keys are
		// routed (an entry's own end may be newer or older than the
		// table it is in; a range that no longer holds its part answers
		// ErrRangeMoved).
		end := End(rs, i, t.Space)
		start := r.Desc().Start
		switch {
		case bytes.Compare(end, o.Lower) <= 0:
			continue
		case o.Upper != nil && bytes.Compare(start, o.Upper) >= 0:
		case o.StartAfter != nil && bytes.Compare(end, o.StartAfter) <= 0:
			continue
		default:
			parts = append(parts, part{r: r, lo: maxKey(o.Lower, start), hi: minKey(o.Upper, end)})
			continue
		}
		break
	}
	var out []mvcc.Entry
	for len(parts) > 0 {
		window := parts[:min(parallel, len(parts))]
		parts = parts[len(window):]
		limit := o.Limit
		if limit > 0 {
			limit -= len(out)
		}
		pages := make([]page, len(window))
		ask := func(i int) {
			po := o
			po.Lower, po.Upper, po.Limit = window[i].lo, window[i].hi, limit
			pages[i].ents, pages[i].more, pages[i].err = c.List(ctx, window[i].r, po)
		}
		if len(window) == 1 {
			ask(0) // one range at a time: no goroutine
		} else {
			var wg sync.WaitGroup
			for i := range window {
				wg.Go(func() { ask(i) })
			}
			wg.Wait()
		}
		var more, full bool
		var err error
		out, more, full, err = gather(out, pages, o.Limit)
		if err != nil || more {
			return out, more, err
		}
		if full {
			// The page is full: it is truncated if any later range of the
			// span holds an entry.
			for _, p := range parts {
				po := o
				po.Lower, po.Upper, po.Limit = p.lo, p.hi, 1
				ents, _, err := c.List(ctx, p.r, po)
				if err != nil {
					return out, false, err
				}
				if len(ents) > 0 {
					return out, true, nil
				}
			}
			return out, false, nil
		}
	}
	return out, false, nil
}

// page is one range's answer to a scan.
type page struct {
	ents []mvcc.Entry
	more bool
	err  error
}

// gather appends the pages of consecutive ranges to out in key order, up
// to limit entries in all (0: none). more says the scan ends truncated
// here: a range had entries beyond its page (later ranges' entries come
// after them, so they are left out), or the limit cut entries off. full
// says out reached the limit with nothing cut: later ranges decide
// whether more remain.
func gather(out []mvcc.Entry, pages []page, limit int) (_ []mvcc.Entry, more, full bool, err error) {
	for i, p := range pages {
		if p.err != nil {
			return out, false, false, p.err
		}
		if limit > 0 && len(out)+len(p.ents) > limit {
			return append(out, p.ents[:limit-len(out)]...), true, false, nil
		}
		out = append(out, p.ents...)
		if p.more {
			return out, true, false, nil
		}
		if limit > 0 && len(out) == limit {
			// Full: more remain if a later range of the window holds an
			// entry; if none does, the ranges after the window decide.
			for _, q := range pages[i+1:] {
				if q.err == nil && len(q.ents) > 0 {
					return out, true, false, nil
				}
			}
			for _, q := range pages[i+1:] {
				if q.err != nil {
					return out, false, false, q.err
				}
			}
			return out, false, true, nil
		}
	}
	return out, false, false, nil
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// minKey treats nil as +infinity.
func minKey(a, b []byte) []byte {
	if a == nil {
		return b
	}
	if b == nil || bytes.Compare(a, b) <= 0 {
		return a
	}
	return b
}
