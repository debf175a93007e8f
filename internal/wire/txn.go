package wire

import (
	"context"
	"encoding/binary"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// Transactions on the native protocol: TXN_BEGIN opens one on the
// connection and names it by an id; GET, STAT, PUT, DELETE and LIST
// requests flagged FlagTxn carry the id first in their body and run
// inside it; TXN_COMMIT applies every write or none; TXN_ROLLBACK, or the
// connection's end, drops it. Nothing is locked before the commit, so an
// open transaction costs the server only its buffered write set.

// MaxTxnsPerConn bounds the transactions open on one connection.
const MaxTxnsPerConn = 256

// TxnBegin flags.
const (
	// TxnSerializable validates every read at commit.
	TxnSerializable byte = 1 << 0
)

// TxnBeginInfo is TXN_BEGIN's answer: the transaction's id on the
// connection and its snapshot timestamp.
type TxnBeginInfo struct {
	ID      uint64
	StartTS uint64
}

type txnCtx struct{}

// WithTxn returns a context whose GET, STAT, PUT, DELETE and LIST
// requests on a Conn run inside transaction id of that Conn.
func WithTxn(ctx context.Context, id uint64) context.Context {
	return context.WithValue(ctx, txnCtx{}, id)
}

func txnOf(ctx context.Context) uint64 {
	id, _ := ctx.Value(txnCtx{}).(uint64)
	return id
}

// txnOverhead is how many bytes a request's first frame gives to the
// transaction id.
func txnOverhead(ctx context.Context) int {
	if txnOf(ctx) != 0 {
		return 8
	}
	return 0
}

// inTxn reports whether op may run inside a transaction.
func inTxn(op Op) bool {
	switch op {
	case OpGet, OpStat, OpPut, OpDelete, OpList, OpBatch:
		return true
	}
	return false
}

// TxnBegin starts a transaction on the connection.
func (c *Conn) TxnBegin(ctx context.Context, serializable bool) (TxnBeginInfo, error) {
	info, _, err := c.TxnBeginBatch(ctx, serializable, nil)
	return info, err
}

// TxnBeginBatch starts a transaction on the connection and runs items in
// it, in order, as a BATCH flagged TXN would: the round trip a separate
// TXN_BEGIN costs is saved. The transaction is open once the call
// returns an id, even when items failed (their results say so) or, with
// an error, when the batch's answer did not decode: roll it back then.
func (c *Conn) TxnBeginBatch(ctx context.Context, serializable bool, items []BatchItem) (TxnBeginInfo, []BatchResult, error) {
	var flags byte
	if serializable {
		flags |= TxnSerializable
	}
	body := []byte{flags}
	if len(items) > 0 {
		body = AppendBatchRequest(body, items)
		if len(body) > c.sendMax {
			return TxnBeginInfo{}, nil, Errorf(CodeTooLarge, "TXN_BEGIN with a batch of %d bytes over the %d frame limit", len(body), c.sendMax)
		}
	}
	b, err := c.Call(ctx, OpTxnBegin, body)
	if err != nil {
		return TxnBeginInfo{}, nil, err
	}
	if len(b) < 16 || len(items) == 0 && len(b) != 16 {
		return TxnBeginInfo{}, nil, Errorf(CodeMalformed, "TXN_BEGIN answer of %d bytes", len(b))
	}
	info := TxnBeginInfo{ID: binary.BigEndian.Uint64(b), StartTS: binary.BigEndian.Uint64(b[8:])}
	if len(items) == 0 {
		return info, nil, nil
	}
	rs, err := DecodeBatchResponse(b[16:])
	if err == nil && len(rs) != len(items) {
		err = Errorf(CodeMalformed, "TXN_BEGIN's batch answered %d of %d items", len(rs), len(items))
	}
	return info, rs, err
}

// TxnCommit commits transaction id and returns its commit timestamp.
func (c *Conn) TxnCommit(ctx context.Context, id uint64) (uint64, error) {
	return c.TxnCommitWrites(ctx, id, false, nil)
}

// TxnCommitWrites commits transaction id with writes (put and delete
// items) applied in it first, in order; with id 0 the server begins the
// transaction itself, at the commit (a transaction that read nothing),
// serializable or not.
func (c *Conn) TxnCommitWrites(ctx context.Context, id uint64, serializable bool, writes []BatchItem) (uint64, error) {
	body := binary.BigEndian.AppendUint64(nil, id)
	if id == 0 || len(writes) > 0 {
		var flags byte
		if serializable {
			flags |= TxnSerializable
		}
		body = AppendBatchRequest(append(body, flags), writes)
		if len(body) > c.sendMax {
			return 0, Errorf(CodeTooLarge, "TXN_COMMIT with writes of %d bytes over the %d frame limit", len(body), c.sendMax)
		}
	}
	b, err := c.Call(ctx, OpTxnCommit, body)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, Errorf(CodeMalformed, "TXN_COMMIT answer of %d bytes", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// TxnRollback ends transaction id without a write.
func (c *Conn) TxnRollback(ctx context.Context, id uint64) error {
	_, err := c.Call(ctx, OpTxnRollback, binary.BigEndian.AppendUint64(nil, id))
	return err
}

// txn returns the connection's open transaction id.
func (c *serverConn) txn(id uint64) (*object.Txn, error) {
	c.txns.Lock()
	defer c.txns.Unlock()
	if tx := c.txns.m[id]; tx != nil {
		return tx, nil
	}
	return nil, Errorf(CodeInvalidArgument, "no transaction %d on this connection (it ended, or was begun on another connection)", id)
}

// txnOp answers TXN_BEGIN, TXN_COMMIT and TXN_ROLLBACK.
func (c *serverConn) txnOp(ctx context.Context, op Op, buf, body []byte) ([]byte, error) {
	tr, ok := c.s.svc.(object.Transactor)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server runs no transactions")
	}
	if op == OpTxnBegin {
		if len(body) < 1 || body[0]&^TxnSerializable != 0 {
			return nil, Errorf(CodeMalformed, "TXN_BEGIN takes one flags byte (then, optionally, a batch)")
		}
		var items []BatchItem
		if len(body) > 1 {
			var err error
			if items, err = DecodeBatchRequest(body[1:]); err != nil {
				return nil, err
			}
		}
		c.txns.Lock()
		n := len(c.txns.m)
		c.txns.Unlock()
		if n >= MaxTxnsPerConn {
			return nil, Errorf(CodeTooLarge, "%d transactions open on this connection; commit or roll one back first", n)
		}
		tx, err := tr.Begin(ctx, object.TxnOptions{Serializable: body[0]&TxnSerializable != 0})
		if err != nil {
			return nil, err
		}
		c.txns.Lock()
		if c.txns.closed {
			// The connection ended while it began: nothing would end it.
			c.txns.Unlock()
			tx.Rollback()
			return nil, Errorf(CodeCanceled, "the connection is closing")
		}
		if c.txns.m == nil {
			c.txns.m = map[uint64]*object.Txn{}
		}
		c.txns.next++
		id := c.txns.next
		c.txns.m[id] = tx
		c.txns.Unlock()
		buf = binary.BigEndian.AppendUint64(buf, id)
		buf = binary.BigEndian.AppendUint64(buf, tx.StartTS())
		if items != nil {
			buf = c.batch(ctx, buf, items, tx)
		}
		if err := ctx.Err(); err != nil {
			// The client gave up on the answer and will never learn the
			// id: an open transaction it cannot end would hold the
			// collector's safe point (for txn.DefaultMaxHold).
			c.txns.Lock()
			delete(c.txns.m, id)
			c.txns.Unlock()
			tx.Rollback()
			return nil, err
		}
		return buf, nil
	}
	if len(body) < 8 || op == OpTxnRollback && len(body) != 8 {
		return nil, Errorf(CodeMalformed, "%s takes a transaction id (u64)", op)
	}
	id := binary.BigEndian.Uint64(body)
	// TXN_COMMIT may carry writes (and, for id 0, begin the transaction).
	var items []BatchItem
	var flags byte
	if len(body) > 8 {
		flags = body[8]
		var err error
		if items, err = DecodeBatchRequest(body[9:]); err != nil {
			return nil, err
		}
		if flags&^TxnSerializable != 0 {
			return nil, Errorf(CodeMalformed, "TXN_COMMIT flags 0x%02x", flags)
		}
		for _, it := range items {
			space := it.Put.Space
			switch it.Op {
			case BatchPut:
			case BatchDelete:
				space = it.Delete.Space
			default:
				return nil, Errorf(CodeInvalidArgument, "a commit's writes are puts and deletes, not %s", it.Op)
			}
			if e := c.allow(space, auth.Write); e != nil {
				return nil, e
			}
		}
	} else if id == 0 {
		return nil, Errorf(CodeMalformed, "TXN_COMMIT of transaction 0 (begun at the commit) takes its flags and writes")
	}
	var tx *object.Txn
	if id == 0 {
		var err error
		if tx, err = tr.Begin(ctx, object.TxnOptions{Serializable: flags&TxnSerializable != 0}); err != nil {
			return nil, err
		}
	} else {
		c.txns.Lock()
		tx = c.txns.m[id]
		delete(c.txns.m, id)
		c.txns.Unlock()
	}
	if tx == nil {
		return nil, Errorf(CodeInvalidArgument, "no transaction %d on this connection (it ended, or was begun on another connection)", id)
	}
	if op == OpTxnRollback {
		tx.Rollback()
		return buf, nil
	}
	for i := range items {
		it := &items[i]
		var err error
		if it.Op == BatchPut {
			_, err = tx.Put(ctx, &it.Put, object.MemBody(it.Body))
		} else {
			err = tx.Delete(ctx, &it.Delete)
		}
		if err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	ts, err := tx.Commit(ctx)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(buf, ts), nil
}
