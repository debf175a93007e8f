package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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

// Txn is a transaction. Its small writes wait in the client until the
// commit, which sends them in one request; its first read (or a large
// write, a listing, or small writes that fill a frame) opens it on one
// node, over one connection, which then runs the rest of it; the request
// that opens it carries the writes kept so far. A transaction that only writes thus costs one
// round trip, and takes its snapshot at the commit. Its methods may be
// called concurrently.
type Txn struct {
	c    *Client
	opts txnOptions
	stop chan struct{} // closed when the transaction ends (keepAlive)

	mu      sync.Mutex
	cn      *wire.Conn // the connection it runs on, once open
	id      uint64     // its id there
	startTS uint64
	buf     []wire.BatchItem
	bufIdx  map[string]int // space/key -> index in buf of its whole write
	// ranged are the keys with byte-range writes in buf: what they read
	// as is the node's to say (buffered ones are sent first).
	ranged   map[string]bool
	bufBytes int
	// failed is why a write sent ahead failed: the node ran the others
	// sent with it, so the buffer cannot be sent again, nor the
	// transaction committed.
	failed   error
	done     bool
	commitTS uint64
}

// bufferedBody bounds the writes a transaction keeps in the client: a
// body over it goes to the node at once (stored there, not held in
// memory). The buffer goes when one more write would not fit one frame
// of the node (bufferFits): it holds the caller's slices, not copies.
const bufferedBody = 64 << 10

// bufferFits reports whether a write of size more bytes (BatchItemSize)
// still fits the buffer; tx.mu is held.
func (tx *Txn) bufferFits(size int) bool {
	return wire.BatchOverhead+tx.bufBytes+size <= tx.c.minSendMax() && len(tx.buf) < wire.MaxBatchItems
}

// Begin starts a transaction. Call Commit or Rollback when done.
func (c *Client) Begin(ctx context.Context, opts ...TxnOption) (*Txn, error) {
	select {
	case <-c.done:
		return nil, fmt.Errorf("%w: client closed", wire.ErrConnClosed)
	default:
	}
	return &Txn{c: c, opts: txnOpts(opts), stop: make(chan struct{}), bufIdx: map[string]int{}, ranged: map[string]bool{}}, nil
}

// send begins the transaction on a node if it has not been and sends it
// the buffered writes: one request for both (TXN_BEGIN carries them), or
// one BATCH once it is open. tx.mu is held.
func (tx *Txn) send(ctx context.Context) error {
	if tx.cn != nil {
		return tx.flush(ctx)
	}
	var rs []wire.BatchResult
	err := tx.c.do(ctx, true, nil, func(cn *wire.Conn) error {
		info, r, err := cn.TxnBeginBatch(ctx, tx.opts.serializable, tx.buf)
		if err != nil {
			if info.ID != 0 {
				// Begun, its answer not understood: end it there.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_ = cn.TxnRollback(rctx, info.ID)
				cancel()
			}
			return err
		}
		tx.cn, tx.id, tx.startTS, rs = cn, info.ID, info.StartTS, r
		return nil
	})
	if err != nil {
		return err
	}
	go tx.keepAlive(tx.cn)
	return tx.sent(rs)
}

// flush sends the buffered writes to the open transaction's node, in one
// request; tx.mu is held.
func (tx *Txn) flush(ctx context.Context) error {
	if len(tx.buf) == 0 {
		return nil
	}
	rs, err := tx.cn.Batch(wire.WithTxn(ctx, tx.id), tx.buf)
	if err != nil {
		// Some of the writes may have run there: they cannot be sent
		// again (an append would land twice).
		tx.sent(nil)
		tx.failed = err
		return err
	}
	return tx.sent(rs)
}

// sent empties the buffer once its writes reached the node and returns
// the first of their errors; after one, the transaction can only roll
// back.
func (tx *Txn) sent(rs []wire.BatchResult) error {
	tx.buf, tx.bufBytes = nil, 0
	clear(tx.bufIdx)
	clear(tx.ranged)
	for _, r := range rs {
		if r.Code != 0 {
			tx.failed = &wire.Error{Code: r.Code, Message: r.Message}
			return tx.failed
		}
	}
	return nil
}

// usable reports why the transaction takes no more requests: it is over,
// or a write sent ahead failed. tx.mu is held.
func (tx *Txn) usable() error {
	if tx.done {
		return ErrTxnDone
	}
	return tx.failed
}

// buffer keeps a write for the commit in place of an earlier one of the
// same key; tx.mu is held.
func (tx *Txn) buffer(k string, it wire.BatchItem, size int) {
	if i, ok := tx.bufIdx[k]; ok {
		tx.buf = slices.Delete(tx.buf, i, i+1)
		delete(tx.bufIdx, k)
		for j := i; j < len(tx.buf); j++ {
			tx.bufIdx[bufKey(&tx.buf[j])] = j
		}
	}
	tx.bufIdx[k] = len(tx.buf)
	tx.buf = append(tx.buf, it)
	tx.bufBytes += size
	delete(tx.ranged, k) // a whole write or a delete: what the key reads as is known again
}

func bufKey(it *wire.BatchItem) string {
	if it.Op == wire.BatchPut {
		return it.Put.Space + "/" + it.Put.Key
	}
	return it.Delete.Space + "/" + it.Delete.Key
}

// StartTS is the transaction's snapshot timestamp: 0 until it reads (a
// transaction that only writes takes its snapshot at the commit).
func (tx *Txn) StartTS() uint64 {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.startTS
}

// CommitTS is the commit timestamp once Commit succeeded: the version of
// every object the transaction wrote.
func (tx *Txn) CommitTS() uint64 {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.commitTS
}

// keepAlive pings the transaction's connection while it is open, so that
// neither end closes it as idle (it carries the transaction).
func (tx *Txn) keepAlive(cn *wire.Conn) {
	every := cn.ServerIdle() / 3
	if every <= 0 {
		every = 20 * time.Second
	}
	t := time.NewTicker(max(every, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-tx.stop:
			return
		case <-cn.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), every)
			_, _ = cn.Ping(ctx)
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

// begun opens the transaction and sends it the buffered writes, for a
// request the node must run inside it; it returns the request's context
// and connection.
func (tx *Txn) begun(ctx context.Context) (context.Context, *wire.Conn, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.usable(); err != nil {
		return nil, nil, err
	}
	if err := tx.send(ctx); err != nil {
		return nil, nil, err
	}
	return wire.WithTxn(ctx, tx.id), tx.cn, nil
}

// buffered returns the buffered write of space/key, if any.
func (tx *Txn) buffered(space, key string) (wire.BatchItem, bool, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.usable(); err != nil {
		return wire.BatchItem{}, false, err
	}
	i, ok := tx.bufIdx[space+"/"+key]
	if !ok || tx.ranged[space+"/"+key] {
		return wire.BatchItem{}, false, nil
	}
	return tx.buf[i], true, nil
}

// Get reads key as the transaction sees it: its own write, else the
// version current at its snapshot. ErrNotFound if there is none. The
// info of a key the transaction wrote has Version 0.
func (tx *Txn) Get(ctx context.Context, space, key string) ([]byte, ObjectInfo, error) {
	it, ok, err := tx.buffered(space, key)
	switch {
	case err != nil:
		return nil, ObjectInfo{}, err
	case ok && it.Op == wire.BatchDelete:
		return nil, ObjectInfo{}, &wire.Error{Code: wire.CodeNotFound, Message: space + "/" + key + " is deleted in this transaction"}
	case ok:
		return it.Body, ObjectInfo{Space: space, Key: key, Size: int64(len(it.Body)), ContentType: it.Put.ContentType,
			Meta: it.Put.Meta, Tags: it.Put.Tags}, nil
	}
	tctx, cn, err := tx.begun(ctx)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	req := object.GetRequest{Space: space, Key: key, Length: -1}
	info, b, err := cn.GetBytes(tctx, &req)
	return b, info, err
}

// Stat is Get without the body.
func (tx *Txn) Stat(ctx context.Context, space, key string) (ObjectInfo, error) {
	if _, ok, err := tx.buffered(space, key); err != nil || ok {
		if err != nil {
			return ObjectInfo{}, err
		}
		_, info, err := tx.Get(ctx, space, key)
		return info, err
	}
	tctx, cn, err := tx.begun(ctx)
	if err != nil {
		return ObjectInfo{}, err
	}
	return cn.Stat(tctx, &object.GetRequest{Space: space, Key: key, Length: -1})
}

// Put writes data as key's new version at commit. IfMatch and IfNoneMatch
// hold against the version current at the snapshot, checked at commit.
// data is not copied: it must not change until the commit (a body over
// 64 KiB goes to the node at once, and may change once Put returns).
func (tx *Txn) Put(ctx context.Context, space, key string, data []byte, opts ...PutOption) error {
	req := putRequest(space, key, int64(len(data)), opts)
	it := wire.BatchItem{Op: wire.BatchPut, Put: req, Body: data}
	size := wire.BatchItemSize(&it)
	tx.mu.Lock()
	if err := tx.usable(); err != nil {
		tx.mu.Unlock()
		return err
	}
	if len(data) <= bufferedBody && tx.bufferFits(size) {
		tx.buffer(space+"/"+key, it, size)
		tx.mu.Unlock()
		return nil
	}
	tx.mu.Unlock()
	tctx, cn, err := tx.begun(ctx)
	if err != nil {
		return err
	}
	_, err = cn.PutBytes(tctx, &req, data)
	return err
}

// WriteAt writes data at offset off of key as the transaction sees it
// (its own earlier writes, else the version at its snapshot; a key with
// none is empty, and a gap past its end reads as zeros). Any number of
// WriteAt and Append calls to one key make one version at commit, sharing
// the untouched chunks of the key's version: VOSD's set of many ranges at
// once. Options apply as for Client.WriteAt. The data goes to the node at
// once (the transaction begins there if it has not).
func (tx *Txn) WriteAt(ctx context.Context, space, key string, off int64, data []byte, opts ...PutOption) error {
	req := putRequest(space, key, int64(len(data)), opts)
	req.Mode, req.Offset = object.PutWriteAt, off
	return tx.rangeWrite(ctx, &req, data)
}

// Append appends data to key as the transaction sees it (see WriteAt).
func (tx *Txn) Append(ctx context.Context, space, key string, data []byte, opts ...PutOption) error {
	req := putRequest(space, key, int64(len(data)), opts)
	req.Mode = object.PutAppend
	return tx.rangeWrite(ctx, &req, data)
}

// rangeWrite keeps a small byte-range write for the commit, after the
// writes before it (many of them go to the node in one request: VOSD's
// set of many ranges at once); a large one goes at once. data is not
// copied: it must not change until the commit.
func (tx *Txn) rangeWrite(ctx context.Context, req *object.PutRequest, data []byte) error {
	if len(data) > bufferedBody {
		return tx.sendNow(ctx, req, data)
	}
	it := wire.BatchItem{Op: wire.BatchPut, Put: *req, Body: data}
	size := wire.BatchItemSize(&it)
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.usable(); err != nil {
		return err
	}
	if !tx.bufferFits(size) {
		// Make room: what is buffered goes to the node in one request.
		if err := tx.send(ctx); err != nil {
			return err
		}
	}
	k := req.Space + "/" + req.Key
	tx.buf = append(tx.buf, it)
	tx.bufBytes += size
	tx.ranged[k] = true
	return nil
}

// sendNow sends a write to the transaction's node, after the writes
// buffered before it.
func (tx *Txn) sendNow(ctx context.Context, req *object.PutRequest, data []byte) error {
	tctx, cn, err := tx.begun(ctx)
	if err != nil {
		return err
	}
	_, err = cn.PutBytes(tctx, req, data)
	return err
}

// Delete deletes key at commit.
func (tx *Txn) Delete(ctx context.Context, space, key string) error {
	tx.mu.Lock()
	if err := tx.usable(); err != nil {
		tx.mu.Unlock()
		return err
	}
	it := wire.BatchItem{Op: wire.BatchDelete, Delete: object.DeleteRequest{Space: space, Key: key}}
	size := wire.BatchItemSize(&it)
	if tx.bufferFits(size) {
		tx.buffer(space+"/"+key, it, size)
		tx.mu.Unlock()
		return nil
	}
	tx.mu.Unlock()
	tctx, cn, err := tx.begun(ctx)
	if err != nil {
		return err
	}
	_, err = cn.Delete(tctx, &object.DeleteRequest{Space: space, Key: key})
	return err
}

// List lists a page of the keys the transaction sees (its own writes in
// place, their Version 0). AsOf and AllVersions are not allowed.
func (tx *Txn) List(ctx context.Context, space string, o ListOptions) (ListResult, error) {
	tctx, cn, err := tx.begun(ctx)
	if err != nil {
		return ListResult{}, err
	}
	return cn.List(tctx, &object.ListRequest{Space: space, Prefix: o.Prefix, StartAfter: o.StartAfter, Limit: o.Limit,
		AsOf: o.AsOf, AllVersions: o.AllVersions})
}

// Commit applies every write of the transaction, or none. Retryable
// errors (ErrTxnConflict, ErrTxnAborted) say it did nothing; ErrConnLost
// says it may have committed.
func (tx *Txn) Commit(ctx context.Context) error {
	tx.mu.Lock()
	ahead := tx.failed
	if !tx.done && ahead == nil && len(tx.buf) > 0 && wire.BatchOverhead+tx.bufBytes > tx.c.minSendMax() {
		// The writes do not fit one frame of this server: send them
		// ahead, inside the transaction.
		ahead = tx.send(ctx)
	}
	cn, id, writes := tx.cn, tx.id, tx.buf
	tx.mu.Unlock()
	if ahead != nil {
		// Nothing of it commits.
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return ahead
	}
	if !tx.end() {
		return ErrTxnDone
	}
	var ts uint64
	var err error
	switch {
	case cn != nil:
		if ts, err = cn.TxnCommitWrites(ctx, id, false, writes); err != nil {
			// A commit that never left (or was canceled before the node
			// took it) leaves the transaction open there; one the node
			// took is no longer there to roll back, and this is a no-op.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = cn.TxnRollback(rctx, id)
			cancel()
		}
	case len(writes) == 0:
		return nil // nothing read, nothing written
	default:
		// Nothing read: the node begins it at the commit. A commit that
		// never reached a node may be sent again to another.
		err = tx.c.do(ctx, false, nil, func(cn *wire.Conn) (err error) {
			ts, err = cn.TxnCommitWrites(ctx, 0, tx.opts.serializable, writes)
			return err
		})
	}
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
	tx.mu.Lock()
	cn, id := tx.cn, tx.id
	tx.mu.Unlock()
	if !tx.end() || cn == nil {
		return nil
	}
	err := cn.TxnRollback(ctx, id)
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
