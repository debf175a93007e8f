package client

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/wire"
)

// The route table: for each space the client has used, its ranges and the
// node holding each one's lease (ROUTES). A request on one key goes
// straight to that node. The table is fetched again, in the background and
// at most every refreshEvery per space, when it is missing, when a node
// answers a keyed request with FlagForwarded (it did not hold the lease:
// a lease moved, or the table was read while one was moving), and when a
// routed request fails. Meanwhile requests follow the stale table or, where
// it does not know, go to a seed, which forwards them: a stale table costs
// a hop, never a wrong answer.

const (
	refreshEvery = 250 * time.Millisecond
	// skipFailedFor is how long routing avoids a node it could not dial.
	skipFailedFor = 2 * time.Second
	routesTimeout = 2 * time.Second
)

type router struct {
	c      *Client
	off    atomic.Bool // NoRouting, or a server that does not answer ROUTES
	wg     sync.WaitGroup
	tables sync.Map // space name -> *spaceRoutes; read on every keyed request
	mu     struct {
		sync.Mutex
		closed bool             // no more fetches start (wg is being waited on)
		nodes  map[string]*node // every address, seeds and leaseholders
	}
}

// spaceRoutes is one space's route table.
type spaceRoutes struct {
	table    atomic.Pointer[routeTable] // nil until first fetched
	stale    atomic.Bool
	fetching atomic.Bool
	fetched  atomic.Int64 // Unix ns of the last fetch attempt
}

// routeTable is a fetched table with each route's leaseholder resolved to
// its connection pool (nil where unknown), once per fetch.
type routeTable struct {
	wire.RouteTable
	leaseholders []*node
}

func (r *router) init(c *Client) {
	r.c = c
	r.off.Store(c.opts.NoRouting)
	r.mu.nodes = map[string]*node{}
}

// node returns the connection pool of addr, creating it.
func (r *router) node(addr string) *node {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.mu.nodes[addr]
	if n == nil {
		n = &node{addr: addr}
		n.mu.conns = make([]*wire.Conn, r.c.opts.Conns)
		r.mu.nodes[addr] = n
	}
	return n
}

func (r *router) allNodes() []*node {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*node, 0, len(r.mu.nodes))
	for _, n := range r.mu.nodes {
		out = append(out, n)
	}
	return out
}

func (r *router) space(name string) *spaceRoutes {
	if sr, ok := r.tables.Load(name); ok {
		return sr.(*spaceRoutes)
	}
	sr := &spaceRoutes{}
	sr.stale.Store(true)
	got, _ := r.tables.LoadOrStore(name, sr)
	return got.(*spaceRoutes)
}

// forwarded is the connections' OnForwarded: a node passed a keyed
// request on, so some table is stale. The answer does not say which
// space, so every table is fetched again on its next use.
func (r *router) forwarded(op wire.Op) {
	switch op {
	case wire.OpPut, wire.OpGet, wire.OpStat, wire.OpDelete, wire.OpVersions:
		r.tables.Range(func(_, sr any) bool {
			sr.(*spaceRoutes).stale.Store(true)
			return true
		})
	}
}

// target returns the node holding the lease of key's range as far as the
// table knows, or nil (no table yet, leaseholder unknown or recently
// unreachable, or routing off). A stale or missing table is fetched in the
// background.
func (r *router) target(space, key string) *node {
	if r.off.Load() {
		return nil
	}
	sr := r.space(space)
	if sr.stale.Load() {
		r.refresh(space, sr)
	}
	t := sr.table.Load()
	if t == nil || len(t.Routes) == 0 {
		return nil
	}
	var buf [128]byte
	obj := keys.AppendObject(buf[:0], t.Space, nil, []byte(key))
	i := sort.Search(len(t.Routes), func(i int) bool { return bytes.Compare(t.Routes[i].Start, obj) > 0 }) - 1
	if i < 0 {
		return nil
	}
	n := t.leaseholders[i]
	if n == nil || t.Routes[i].End != nil && bytes.Compare(obj, t.Routes[i].End) >= 0 || n.recentlyFailed() {
		return nil
	}
	return n
}

// refresh fetches space's table in the background unless a fetch is
// running or one started less than refreshEvery ago.
func (r *router) refresh(space string, sr *spaceRoutes) {
	last := sr.fetched.Load()
	if time.Since(time.Unix(0, last)) < refreshEvery || !sr.fetching.CompareAndSwap(false, true) {
		return
	}
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		sr.fetching.Store(false)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	sr.fetched.Store(time.Now().UnixNano())
	sr.stale.Store(false)
	go func() {
		defer r.wg.Done()
		defer sr.fetching.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), routesTimeout)
		defer cancel()
		go func() {
			select {
			case <-r.c.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		var t wire.RouteTable
		err := r.c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
			t, err = cn.Routes(ctx, space)
			return err
		})
		switch {
		case err == nil:
			rt := &routeTable{RouteTable: t, leaseholders: make([]*node, len(t.Routes))}
			for i, route := range t.Routes {
				if route.Leaseholder != "" {
					rt.leaseholders[i] = r.node(route.Leaseholder)
				}
			}
			sr.table.Store(rt)
		case wire.CodeOf(err) == wire.CodeUnknownOp:
			r.off.Store(true) // a server without routes: use the seeds
		default:
			sr.stale.Store(true) // try again on a later request
			r.c.log.Debug("client: fetch routes", "space", space, "err", err)
		}
	}()
}

// close stops fetches and waits for those running.
func (r *router) close() {
	r.mu.Lock()
	r.mu.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

// failed notes that a request sent by the table failed: fetch it again.
func (r *router) failed(space string) {
	r.space(space).stale.Store(true)
}

// routedAnswer reports whether err is an answer about the request itself
// (not found, precondition failed, ...), which says nothing of the route.
func routedAnswer(err error) bool {
	var we *wire.Error
	if !errors.As(err, &we) {
		return false
	}
	switch we.Code {
	case wire.CodeNotLeader, wire.CodeUnavailable, wire.CodeOutcomeUnknown, wire.CodeInternal, wire.CodeCanceled, wire.CodeRangeMoved:
		return false
	}
	return true
}

// doKey runs fn for a request on one key: first on the leaseholder the
// route table names, then, if that was not possible or failed in a way that
// may be retried, as do does through the seeds.
func (c *Client) doKey(ctx context.Context, space, key string, idempotent bool, mayRetry func() bool, fn func(*wire.Conn) error) error {
	if n := c.routes.target(space, key); n != nil {
		cn, err := c.connTo(ctx, n)
		if err == nil {
			err = fn(cn)
			if err == nil || routedAnswer(err) {
				return err
			}
			if suspect(err) {
				n.failed.Store(time.Now().UnixNano())
			}
		}
		c.routes.failed(space)
		if ctx.Err() != nil || !retryable(err, idempotent) || mayRetry != nil && !mayRetry() {
			return err
		}
		c.log.Debug("client: routed request failed; going through the seeds", "addr", n.addr, "err", err)
	}
	return c.do(ctx, idempotent, mayRetry, fn)
}
