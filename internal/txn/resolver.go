package txn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/rangeclient"
)

// The background half of two-phase commits, batched: once a primary has
// committed, its secondaries' locks are committed and then its record
// cleared; many transactions' resolutions of one range go in one command
// (kv.ResolveCmd). A loop takes what has queued, proposes it per range,
// and meanwhile the next batch queues. What does not fit the queue is left
// to the next reader that meets it (the primary's record says how).

// resolveQueue bounds the resolutions waiting.
const resolveQueue = 1 << 16

type resolution struct {
	obj           []byte // the lock's key, or the primary whose record to clear
	start, commit uint64
	clear         bool
	done          func(error) // called once with its outcome
}

type resolver struct {
	m *Manager
	q chan resolution
}

func (m *Manager) startResolver() {
	m.res = &resolver{m: m, q: make(chan resolution, resolveQueue)}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.res.loop()
	}()
}

// add queues r; false if the queue is full.
func (r *resolver) add(x resolution) bool {
	select {
	case r.q <- x:
		return true
	default:
		return false
	}
}

func (r *resolver) loop() {
	for {
		var batch []resolution
		select {
		case <-r.m.ctx.Done():
			return
		case x := <-r.q:
			batch = append(batch, x)
		}
	drain:
		for len(batch) < 4*kv.MaxTxnKeys {
			select {
			case x := <-r.q:
				batch = append(batch, x)
			default:
				break drain
			}
		}
		r.flush(batch)
	}
}

// flush proposes batch, one command per range, the ranges in parallel.
func (r *resolver) flush(batch []resolution) {
	ctx, cancel := context.WithTimeout(r.m.ctx, rangeclient.Patience)
	defer cancel()
	groups := map[*rangeclient.Range][]resolution{}
	for _, x := range batch {
		t, err := r.m.table(ctx, x.obj)
		if err != nil {
			x.done(err)
			continue
		}
		rg := t.Route(x.obj)
		groups[rg] = append(groups[rg], x)
	}
	var wg sync.WaitGroup
	for rg, xs := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := &kv.ResolveCmd{}
			for _, x := range xs {
				if x.clear {
					cmd.Clears = append(cmd.Clears, kv.ResolveClear{Primary: x.obj, StartTS: x.start})
				} else {
					cmd.Commits = append(cmd.Commits, kv.ResolveCommit{Obj: x.obj, StartTS: x.start, CommitTS: x.commit})
				}
			}
			_, err := r.m.cfg.Ranges.ProposeAt(ctx, rg, cmd.Encode())
			if errors.Is(err, rangeclient.ErrRangeMoved) {
				// The range split or merged: each alone, routed anew.
				for _, x := range xs {
					one := &kv.ResolveCmd{}
					if x.clear {
						one.Clears = []kv.ResolveClear{{Primary: x.obj, StartTS: x.start}}
					} else {
						one.Commits = []kv.ResolveCommit{{Obj: x.obj, StartTS: x.start, CommitTS: x.commit}}
					}
					_, err := r.m.propose(ctx, x.obj, one.Encode())
					x.done(err)
				}
				return
			}
			for _, x := range xs {
				x.done(err)
			}
		}()
	}
	wg.Wait()
}

// resolveSecondaries commits a committed transaction's secondary locks,
// then clears its record, in the background.
func (m *Manager) resolveSecondaries(primary []byte, startTS, commitTS uint64, objs [][]byte) {
	left := atomic.Int64{}
	left.Store(int64(len(objs)))
	var failed atomic.Bool
	done := func(err error) {
		if err != nil {
			failed.Store(true)
			m.logResolve(err)
		}
		if left.Add(-1) == 0 && !failed.Load() {
			m.res.add(resolution{obj: primary, start: startTS, clear: true, done: m.logResolve})
		}
	}
	for _, o := range objs {
		if !m.res.add(resolution{obj: o, start: startTS, commit: commitTS, done: done}) {
			failed.Store(true) // left to readers; the record stays
			left.Add(-1)
		}
	}
}
