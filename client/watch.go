package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
)

// WatchPage returns a page of req.Space's committed changes after
// req.Cursor (or after req.From, a timestamp; both empty: from now), in
// commit order: every version committed after that position up to
// Closed is in Events or in the pages that follow (More), and nothing at
// or before Closed appears later. Next resumes after the page. With
// req.Wait (at most 30 s) it waits for a first event: a long poll.
func (c *Client) WatchPage(ctx context.Context, req WatchRequest) (WatchResult, error) {
	var res WatchResult
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		res, err = cn.Watch(ctx, &req)
		return err
	})
	return res, err
}

// Watch calls fn with every change committed to space after cursor (""
// for from now), in commit order, until ctx ends or fn returns an error
// (which Watch returns). Changes come in pages; the last change of a page
// comes with the cursor that resumes after it (the others with ""): a
// consumer that saves cursors resumes without a gap. It long-polls: a
// change reaches fn within a few tens of milliseconds of its commit.
func (c *Client) Watch(ctx context.Context, space, cursor string, fn func(ev WatchEvent, cursor string) error) error {
	for {
		res, err := c.WatchPage(ctx, WatchRequest{Space: space, Cursor: cursor, Wait: 25 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		for i, ev := range res.Events {
			c := ""
			if i == len(res.Events)-1 {
				c = res.Next
			}
			if err := fn(ev, c); err != nil {
				return err
			}
		}
		cursor = res.Next
	}
}

// Cache keeps the latest version of the objects of one space that Get
// read, and drops each one when the space's watch says it changed. A Get
// of a cached key costs no round trip. Sync catches up with the watch: a
// Get after Sync returns no version older than one committed before Sync
// began. Between Syncs, the watch running in the background drops a
// changed object within a few tens of milliseconds of its commit (the
// watch's lag; docs/benchmarks.md). Safe for concurrent use.
type Cache struct {
	c     *Client
	space string
	max   int

	mu      sync.Mutex
	objs    map[string]cached
	order   []string // insertion order, for eviction
	cursor  string
	dropped int
	syncMu  sync.Mutex // one catch-up at a time
	cancel  context.CancelFunc
	done    chan struct{}
}

type cached struct {
	data []byte
	info ObjectInfo
}

// NewCache starts a cache of at most max objects (0: 10,000) of space
// and its watch, from now.
func (c *Client) NewCache(ctx context.Context, space string, max int) (*Cache, error) {
	if max <= 0 {
		max = 10000
	}
	first, err := c.WatchPage(ctx, WatchRequest{Space: space})
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	k := &Cache{c: c, space: space, max: max, objs: map[string]cached{}, cursor: first.Next, cancel: cancel, done: make(chan struct{})}
	go k.run(bg)
	return k, nil
}

// Close stops the cache's watch.
func (k *Cache) Close() {
	k.cancel()
	<-k.done
}

// Dropped reports how many cached objects the watch dropped.
func (k *Cache) Dropped() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dropped
}

// Get returns key's latest content and version: from the cache, or read
// and kept.
func (k *Cache) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	k.mu.Lock()
	if o, ok := k.objs[key]; ok {
		k.mu.Unlock()
		return o.data, o.info, nil
	}
	cursor := k.cursor
	k.mu.Unlock()
	data, info, err := k.c.Get(ctx, k.space, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// Keep it only if no page of the watch went by meanwhile: that page
	// may have dropped an older version than the one read, or the one
	// read may be older than a change that page reported.
	if k.cursor == cursor {
		if len(k.order) >= k.max {
			delete(k.objs, k.order[0])
			k.order = k.order[1:]
		}
		if _, ok := k.objs[key]; !ok {
			k.order = append(k.order, key)
		}
		k.objs[key] = cached{data: data, info: info}
	}
	return data, info, nil
}

// Sync reads the watch up to now and drops what changed: a Get after it
// sees every commit acknowledged before Sync began.
func (k *Cache) Sync(ctx context.Context) error {
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	for {
		k.mu.Lock()
		cursor := k.cursor
		k.mu.Unlock()
		res, err := k.c.WatchPage(ctx, WatchRequest{Space: k.space, Cursor: cursor})
		if errors.Is(err, ErrCursorExpired) {
			err = k.restart(ctx, cursor)
		}
		if err != nil {
			return err
		}
		// A page the background watch applied first (from the same
		// cursor) may have been read before Sync began: read again.
		if k.apply(cursor, res) && !res.More {
			return nil
		}
	}
}

// restart forgets every cached object and watches from now: the watch
// fell further behind than the cluster keeps changes (cursor expired).
func (k *Cache) restart(ctx context.Context, after string) error {
	res, err := k.c.WatchPage(ctx, WatchRequest{Space: k.space})
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cursor == after {
		k.dropped += len(k.objs)
		k.objs, k.order, k.cursor = map[string]cached{}, nil, res.Next
	}
	return nil
}

// apply drops the objects a page says changed and moves the cursor, if
// the page follows the cursor it was read after.
func (k *Cache) apply(after string, res WatchResult) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cursor != after {
		return false // another reader of the watch applied it (or a later page)
	}
	for _, ev := range res.Events {
		if o, ok := k.objs[ev.Key]; ok && o.info.Version != ev.Version {
			delete(k.objs, ev.Key)
			k.dropped++
		}
	}
	k.cursor = res.Next
	return true
}

func (k *Cache) run(ctx context.Context) {
	defer close(k.done)
	for ctx.Err() == nil {
		k.mu.Lock()
		cursor := k.cursor
		k.mu.Unlock()
		res, err := k.c.WatchPage(ctx, WatchRequest{Space: k.space, Cursor: cursor, Wait: 10 * time.Second})
		if errors.Is(err, ErrCursorExpired) {
			if err = k.restart(ctx, cursor); err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Not knowing what changed, forget everything.
			k.mu.Lock()
			k.objs, k.order = map[string]cached{}, nil
			k.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-k.c.done: // the client closed
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		k.apply(cursor, res)
	}
}
