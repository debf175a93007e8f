package tso

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/meta"
)

// MaxBatch bounds the timestamps one call to the oracle's leader reserves.
const MaxBatch = 1024

// CallTimeout bounds one call to the oracle's leader. A live oracle
// answers within milliseconds; a dead one (killed, frozen, cut off) would
// otherwise hold every waiting request for a whole dial timeout.
const CallTimeout = 500 * time.Millisecond

// recheck is how long a call to the oracle's leader runs before the meta
// service is asked, and asked again, whether another node leads it.
const recheck = 100 * time.Millisecond

// errMoved ends a call to a node that no longer leads the oracle.
var errMoved = errors.New("the timestamp oracle has a new leader")

// Options configure a Client.
type Options struct {
	// Self is this node's id. Required.
	Self uint64
	// Oracle is this node's oracle. Required.
	Oracle *meta.Oracle
	// Meta is the meta service, where the oracle's leader is named.
	// Required.
	Meta meta.Store
	// Reserve reserves k consecutive timestamps on node and returns the
	// first (a call to that node's Serve, over the peer service).
	// Required.
	Reserve func(ctx context.Context, node uint64, k int) (uint64, error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Client gets timestamps for one node. Its methods may be called
// concurrently.
type Client struct {
	o      Options
	leader atomic.Uint64 // the oracle's leader as last found; 0 unknown
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  sync.Once
	stop   sync.Once

	mu struct {
		sync.Mutex
		waiting []chan result
		running bool // a goroutine is serving the queue
	}
}

type result struct {
	ts  uint64
	err error
}

// New returns a Client. It does not campaign until Start.
func New(o Options) *Client {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Client{o: o}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Next returns a timestamp above every one handed out before in the
// cluster: from this node's oracle while it leads, else from the leader's.
func (c *Client) Next(ctx context.Context) (uint64, error) {
	ts, err := c.o.Oracle.Next(ctx)
	if err == nil || !errors.Is(err, meta.ErrNotLeader) {
		return ts, err
	}
	return c.remote(ctx)
}

// Serve reserves k consecutive timestamps for another node and returns
// the first. Only the oracle's leader can (meta.ErrNotLeader otherwise).
func (c *Client) Serve(ctx context.Context, k int) (uint64, error) {
	if k < 1 || k > MaxBatch {
		return 0, fmt.Errorf("a batch of %d timestamps is outside [1, %d]", k, MaxBatch)
	}
	return c.o.Oracle.NextN(ctx, k)
}

// Leader is the id of the node leading the oracle, as the meta service
// names it.
func (c *Client) Leader(ctx context.Context) (uint64, error) {
	name, err := meta.Leader(ctx, c.o.Meta, "tso")
	if err != nil {
		return 0, fmt.Errorf("find the timestamp oracle's leader: %w", err)
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(name, "node-"), 10, 64)
	if err != nil || !strings.HasPrefix(name, "node-") {
		return 0, fmt.Errorf("the timestamp oracle's leader is %q, not a node", name)
	}
	return id, nil
}

// Start campaigns for the oracle in the background whenever this node
// does not lead it. Calls after the first do nothing.
func (c *Client) Start() {
	c.start.Do(func() {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.campaign(c.ctx)
		}()
	})
}

// Stop ends the campaign and any batch in flight (its waiters get an
// error) and returns when they have exited. It does not close the
// oracle. It may be called more than once.
func (c *Client) Stop() {
	c.stop.Do(c.cancel)
	c.wg.Wait()
}

// campaign runs for the oracle's leadership whenever this node does not
// hold it, until ctx ends.
func (c *Client) campaign(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.o.Oracle.TermDone():
		}
		if err := c.o.Oracle.Start(ctx); err != nil {
			if ctx.Err() != nil || errors.Is(err, meta.ErrClosed) {
				return
			}
			c.o.Logger.Warn("timestamp oracle campaign failed", "err", err, "retry", backoff)
			if clock.Sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// remote gets a timestamp from the oracle's leader, in a batch with the
// other requests waiting for one: while a call is out, requests queue;
// the next call fetches as many timestamps as are waiting and hands one
// to each. Every waiter queued before that call was sent, so its
// timestamp is above every one handed out before its request began.
func (c *Client) remote(ctx context.Context) (uint64, error) {
	ch := make(chan result, 1)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return 0, errors.New("the timestamp client is stopped")
	}
	c.mu.waiting = append(c.mu.waiting, ch)
	if !c.mu.running {
		c.mu.running = true
		c.wg.Add(1)
		go c.serveBatches()
	}
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r.ts, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// serveBatches fetches timestamps for the queue until it is empty.
func (c *Client) serveBatches() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		batch := c.mu.waiting
		c.mu.waiting = nil
		if len(batch) == 0 {
			c.mu.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		for len(batch) > 0 {
			k := min(len(batch), MaxBatch)
			ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
			first, err := c.fetch(ctx, k)
			cancel()
			for i, ch := range batch[:k] {
				ch <- result{ts: first + uint64(i), err: err}
			}
			batch = batch[k:]
		}
	}
}

// fetch reserves k consecutive timestamps on the oracle's leader and
// returns the first, trying until ctx ends. The leader's id is cached;
// the meta service is read again only when the cached leader fails to
// answer. While the meta service still names a leader that does not
// answer (a dead oracle's lease has not run out yet) or names this node
// (its own term is starting or ending), it waits a little and reads it
// again.
func (c *Client) fetch(ctx context.Context, k int) (uint64, error) {
	for {
		cached := c.leader.Load()
		ts, called, err := c.reserveFrom(ctx, cached, k)
		if err == nil {
			return ts, nil
		}
		// A dead or frozen leader must not stay first in line.
		c.leader.CompareAndSwap(called, 0)
		if ctx.Err() != nil {
			return 0, err
		}
		if cached == 0 && clock.Sleep(ctx, 50*time.Millisecond) != nil {
			return 0, err // the meta service's choice failed too: wait before asking again
		}
	}
}

// reserveFrom reserves k timestamps on node id, or on the oracle's leader
// as the meta service names it when id is 0 (and caches it). It returns
// the first and the node it asked.
func (c *Client) reserveFrom(ctx context.Context, id uint64, k int) (uint64, uint64, error) {
	if id == 0 {
		var err error
		if id, err = c.Leader(ctx); err != nil {
			return 0, 0, err
		}
		if id == c.o.Self {
			// Our own term is starting (or ending): ask it directly.
			ts, err := c.o.Oracle.NextN(ctx, k)
			return ts, 0, err
		}
		c.leader.Store(id)
	}
	var ts uint64
	err := callUnlessMoved(ctx, id, c.Leader, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, CallTimeout)
		defer cancel()
		var err error
		ts, err = c.o.Reserve(ctx, id, k)
		return err
	})
	return ts, id, err
}

// callUnlessMoved runs call, meant for node id as the oracle's leader.
// While it runs longer than recheck it reads the oracle's leader every
// recheck, and ends the call with errMoved as soon as another node leads:
// a frozen or cut-off leader holds a call until its timeout, while its
// successor (once its lease ran out) answers at once. A live leader
// answers within milliseconds and costs no reads.
func callUnlessMoved(ctx context.Context, id uint64, leader func(context.Context) (uint64, error), call func(context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil) // also ends the check below
	check := time.AfterFunc(recheck, func() {
		for {
			if lead, err := leader(cctx); err == nil && lead != id {
				cancel(errMoved)
				return
			}
			if clock.Sleep(cctx, recheck) != nil {
				return
			}
		}
	})
	defer check.Stop()
	err := call(cctx)
	if err != nil && errors.Is(context.Cause(cctx), errMoved) {
		return errMoved
	}
	return err
}
