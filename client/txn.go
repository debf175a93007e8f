package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// Transactions: every read of a transaction sees one snapshot (and the
// transaction's own writes); its writes are buffered on the node that
// runs it — bodies are stored as they are written, so a transaction is
// not bounded by memory — and Commit applies all of them or none. Nothing
// is locked before Commit, so a transaction may stay open for as long as
// its connection does. Update runs a function as a transaction and runs
// it again when it loses a conflict.

// ErrTxnConflict: the transaction lost a conflict (a key it wrote, or
// when serializable read, changed after it began) and did nothing; run it
// again from the start. Update does.
var ErrTxnConflict = wire.ErrTxnConflict

// ErrTxnAborted: the transaction was rolled back (its commit took longer
// than its locks' lifetime) and did nothing; run it again. Update does.
var ErrTxnAborted = wire.ErrTxnAborted

// ErrTxnDone: the transaction has committed or rolled back.
var ErrTxnDone = errors.New("client: the transaction is over")

// Retryable reports whether err says a transaction did nothing and may
// run again from its start.
func Retryable(err error) bool {
	return errors.Is(err, ErrTxnConflict) || errors.Is(err, ErrTxnAborted)
}

// TxnOption modifies a transaction (Begin, Update).
type TxnOption func(*txnOptions)

type txnOptions struct {
	serializable bool
	attempts     int
	backoff      time.Duration
}

// Serializable makes the transaction serializable: its commit fails with
// ErrTxnConflict if anything it read changed after it began (without it,
// transactions are snapshot isolated, which allows write skew).
func Serializable() TxnOption { return func(o *txnOptions) { o.serializable = true } }

// MaxAttempts bounds how often Update runs its function (default 10).
func MaxAttempts(n int) TxnOption { return func(o *txnOptions) { o.attempts = n } }

// RetryBackoff is Update's first wait before running again, doubled
// (with jitter) each time up to 1s (default 10ms).
func RetryBackoff(d time.Duration) TxnOption { return func(o *txnOptions) { o.backoff = d } }

func txnOpts(opts []TxnOption) txnOptions {
	o := txnOptions{attempts: 10, backoff: 10 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Txn is a transaction on one connection to one node. Its methods may be
// called concurrently.
type Txn struct {
	cn      *wire.Conn
	id      uint64
	startTS uint64

	stop chan struct{} // closed when the transaction ends

	mu       sync.Mutex
	done     bool
	commitTS uint64
}

// Begin starts a transaction. Call Commit or Rollback when done.
func (c *Client) Begin(ctx context.Context, opts ...TxnOption) (*Txn, error) {
	o := txnOpts(opts)
	var tx *Txn
	err := c.do(ctx, true, nil, func(cn *wire.Conn) error {
		info, err := cn.TxnBegin(ctx, o.serializable)
		if err != nil {
			return err
		}
		tx = &Txn{cn: cn, id: info.ID, startTS: info.StartTS, stop: make(chan struct{})}
		return nil
	})
	if err == nil {
		go tx.keepAlive()
	}
	return tx, err
}

// keepAlive pings the transaction's connection while it is open, so that
// neither end closes it as idle (it carries the transaction).
func (tx *Txn) keepAlive() {
	every := tx.cn.ServerIdle() / 3
	if every <= 0 {
		every = 20 * time.Second
	}
	t := time.NewTicker(max(every, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-tx.stop:
			return
		case <-tx.cn.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), every)
			_, _ = tx.cn.Ping(ctx)
			cancel()
		}
	}
}

// end marks the transaction over; it reports false if it was already.
func (tx *Txn) end() bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return false
	}
	tx.done = true
	close(tx.stop)
	return true
}

// StartTS is the transaction's snapshot timestamp.
func (tx *Txn) StartTS() uint64 { return tx.startTS }

// CommitTS is the commit timestamp once Commit succeeded: the version of
// every object the transaction wrote.
func (tx *Txn) CommitTS() uint64 {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.commitTS
}

func (tx *Txn) ctx(ctx context.Context) (context.Context, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return nil, ErrTxnDone
	}
	return wire.WithTxn(ctx, tx.id), nil
}

// Get reads key as the transaction sees it: its own write, else the
// version current at its snapshot. ErrNotFound if there is none.
func (tx *Txn) Get(ctx context.Context, space, key string) ([]byte, ObjectInfo, error) {
	tctx, err := tx.ctx(ctx)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	req := object.GetRequest{Space: space, Key: key, Length: -1}
	info, b, err := tx.cn.GetBytes(tctx, &req)
	return b, info, err
}

// Stat is Get without the body.
func (tx *Txn) Stat(ctx context.Context, space, key string) (ObjectInfo, error) {
	tctx, err := tx.ctx(ctx)
	if err != nil {
		return ObjectInfo{}, err
	}
	return tx.cn.Stat(tctx, &object.GetRequest{Space: space, Key: key, Length: -1})
}

// Put writes data as key's new version at commit. IfMatch and IfNoneMatch
// hold against the version current at the snapshot, checked at commit.
func (tx *Txn) Put(ctx context.Context, space, key string, data []byte, opts ...PutOption) error {
	tctx, err := tx.ctx(ctx)
	if err != nil {
		return err
	}
	req := putRequest(space, key, int64(len(data)), opts)
	_, err = tx.cn.PutBytes(tctx, &req, data)
	return err
}

// Delete deletes key at commit.
func (tx *Txn) Delete(ctx context.Context, space, key string) error {
	tctx, err := tx.ctx(ctx)
	if err != nil {
		return err
	}
	_, err = tx.cn.Delete(tctx, &object.DeleteRequest{Space: space, Key: key})
	return err
}

// List lists a page of the keys the transaction sees (its own writes in
// place, their Version 0). AsOf and AllVersions are not allowed.
func (tx *Txn) List(ctx context.Context, space string, o ListOptions) (ListResult, error) {
	tctx, err := tx.ctx(ctx)
	if err != nil {
		return ListResult{}, err
	}
	return tx.cn.List(tctx, &object.ListRequest{Space: space, Prefix: o.Prefix, StartAfter: o.StartAfter, Limit: o.Limit,
		AsOf: o.AsOf, AllVersions: o.AllVersions})
}

// Commit applies every write of the transaction, or none. Retryable
// errors (ErrTxnConflict, ErrTxnAborted) say it did nothing; ErrConnLost
// says it may have committed.
func (tx *Txn) Commit(ctx context.Context) error {
	if !tx.end() {
		return ErrTxnDone
	}
	ts, err := tx.cn.TxnCommit(ctx, tx.id)
	if err != nil {
		return err
	}
	tx.mu.Lock()
	tx.commitTS = ts
	tx.mu.Unlock()
	return nil
}

// Rollback ends the transaction without a write. It is safe to call after
// Commit (it does nothing then).
func (tx *Txn) Rollback(ctx context.Context) error {
	if !tx.end() {
		return nil
	}
	err := tx.cn.TxnRollback(ctx, tx.id)
	if errors.Is(err, wire.ErrConnClosed) || errors.Is(err, wire.ErrConnLost) {
		return nil // the connection's end ended the transaction too
	}
	return err
}

// Update runs fn in a transaction and commits it if fn returns nil; it
// rolls back if fn returns an error or panics (the panic goes on). When
// the commit, or a call of fn, fails with a retryable error (a conflict),
// Update runs fn again in a new transaction, after a backoff, up to
// MaxAttempts times; fn must therefore have no effect outside the
// transaction. It returns the transaction that committed.
func (c *Client) Update(ctx context.Context, fn func(tx *Txn) error, opts ...TxnOption) (*Txn, error) {
	o := txnOpts(opts)
	delay := o.backoff
	for attempt := 1; ; attempt++ {
		tx, err := c.Begin(ctx, opts...)
		if err != nil {
			return nil, err
		}
		err = runTxn(ctx, tx, fn)
		if err == nil {
			return tx, nil
		}
		if !Retryable(err) || attempt >= o.attempts {
			if Retryable(err) {
				return nil, fmt.Errorf("client: the transaction lost a conflict %d times: %w", attempt, err)
			}
			return nil, err
		}
		// Jitter keeps conflicting clients from meeting again in step.
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay)))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// runTxn runs fn in tx and commits, rolling back on an error or a panic.
func runTxn(ctx context.Context, tx *Txn, fn func(tx *Txn) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}
