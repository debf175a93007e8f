package rangeclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// The failures of transactions, and the commands a coordinator sends to
// the ranges of its keys.

// LockedError says that keys a request needed are locked by
// transactions: resolve the locks (package txn) and ask again. Nothing
// was done. For a read of one key, Under is what the read found beneath
// the lock (nil: no version), to be returned if the lock's transaction
// turns out not to cover the read.
type LockedError struct {
	Locks []mvcc.LockEntry
	Read  bool
	Under *mvcc.Record
}

func (e *LockedError) Error() string {
	if len(e.Locks) == 1 {
		return fmt.Sprintf("range: locked: object %x is locked by the transaction started at %d", e.Locks[0].Obj, e.Locks[0].Lock.StartTS)
	}
	return fmt.Sprintf("range: locked: %d objects are locked by transactions", len(e.Locks))
}

// Is matches ErrLocked.
func (e *LockedError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == CodeLocked
}

// ConflictError says that a transaction lost a write-write (or, when
// serializable, a read-write) conflict: Obj has Version, committed after
// the transaction started. Nothing was done; the transaction must start
// again.
type ConflictError struct {
	Obj     []byte
	Version uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("range: transaction conflict: object %x has version %d, committed after the transaction started", e.Obj, e.Version)
}

// Is matches ErrTxnConflict.
func (e *ConflictError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == CodeTxnConflict
}

// appendLocked is the reply payload of a LockedError.
func appendLocked(b []byte, e *LockedError) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Locks)))
	for _, l := range e.Locks {
		b = AppendBytes(b, l.Obj)
		b = AppendBytes(b, l.Lock.Marshal())
	}
	switch {
	case !e.Read:
		b = append(b, 0)
	case e.Under == nil:
		b = append(b, 1)
	default:
		b = AppendRecord(append(b, 2), e.Under)
	}
	return b
}

func decodeLocked(b []byte) (*LockedError, error) {
	d := NewDecoder(b)
	e := &LockedError{Locks: make([]mvcc.LockEntry, d.Count32(8))}
	for i := range e.Locks {
		e.Locks[i].Obj = d.Bytes()
		lb := d.Bytes()
		if d.Err() != nil {
			break
		}
		l, err := mvcc.UnmarshalLock(lb)
		if err != nil {
			return nil, errorf(CodeCorrupt, "lock from a peer: %v", err)
		}
		e.Locks[i].Lock = l
	}
	switch d.U8() {
	case 0:
	case 1:
		e.Read = true
	case 2:
		e.Read, e.Under = true, d.Record()
	default:
		d.Fail("bad locked reply")
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return e, nil
}

func appendConflict(b []byte, e *ConflictError) []byte {
	return binary.BigEndian.AppendUint64(AppendBytes(b, e.Obj), e.Version)
}

func decodeConflict(b []byte, msg string) (*ConflictError, error) {
	d := NewDecoder(b)
	e := &ConflictError{Obj: d.Bytes(), Version: d.U64()}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("%s (reply: %w)", msg, err)
	}
	return e, nil
}

// txnApplyErr classes the transaction failures of a command's apply.
func txnApplyErr(v error) (error, bool) {
	var le *mvcc.LockedError
	var ce *mvcc.ConflictError
	switch {
	case errors.As(v, &le):
		return &LockedError{Locks: []mvcc.LockEntry{{Obj: le.Obj, Lock: le.Lock}}}, true
	case errors.As(v, &ce):
		return &ConflictError{Obj: ce.Obj, Version: ce.Version}, true
	case errors.Is(v, mvcc.ErrTxnAborted):
		return errorf(CodeTxnAborted, "%v", v), true
	case errors.Is(v, mvcc.ErrPrecondition):
		return errorf(CodePrecondition, "%v", v), true
	}
	return nil, false
}

// ProposeAt runs cmd, a command over keys that the range r held when they
// were routed, on r's leaseholder. Unlike Propose it does not route again
// when r no longer holds them (ErrRangeMoved): a command over many keys
// must be split anew, which is the caller's to do.
func (c *Client) ProposeAt(ctx context.Context, r *Range, cmd []byte) (*kv.Result, error) {
	return c.proposeOn(ctx, r, nil, cmd)
}

// TxnStatus reads, on the leaseholder of primary's range in t, what the
// primary says of the transaction that started at startTS, changing
// nothing (a rollback is a command: kv.CheckTxnCmd).
func (c *Client) TxnStatus(ctx context.Context, t *Table, primary []byte, startTS uint64) (st mvcc.TxnStatus, err error) {
	err = c.OnRange(ctx, t, primary, func(r *Range) error {
		if r.LeaseHere(ctx) {
			st, err = c.txnStatusOwned(r, primary, startTS)
			return err
		}
		req := binary.BigEndian.AppendUint64(nil, startTS)
		req = append(req, primary...)
		b, err := c.forward(ctx, r, "TxnStatus", req)
		if errors.Is(err, errLeaseHere) {
			st, err = c.txnStatusOwned(r, primary, startTS)
			return err
		}
		if err != nil {
			return err
		}
		st, err = decodeTxnStatus(b)
		return err
	})
	return st, err
}

func (c *Client) handleTxnStatus(_ context.Context, r *Range, req []byte) ([]byte, error) {
	if len(req) < 8 {
		return nil, errorf(CodeMalformed, "txn status request of %d bytes", len(req))
	}
	st, err := c.txnStatusOwned(r, req[8:], binary.BigEndian.Uint64(req))
	if err != nil {
		return nil, err
	}
	return appendTxnStatus(nil, st), nil
}

func (c *Client) txnStatusOwned(r *Range, primary []byte, startTS uint64) (mvcc.TxnStatus, error) {
	rep := r.Replica()
	if !rep.Contains(primary) {
		return mvcc.TxnStatus{}, errMoved(rep.Descriptor().ID)
	}
	st, err := mvcc.CheckTxn(readOnly{kv.Reader{R: c.cfg.DB}}, primary, startTS, mvcc.CheckPolicy{})
	return st, c.corrupt(err)
}

// readOnly is a ReadWriter whose writes fail: mvcc.CheckTxn without a
// rollback policy writes nothing.
type readOnly struct{ kv.Reader }

func (readOnly) Set(k, v []byte) error {
	return errors.New("rangeclient: a status read tried to write")
}
func (readOnly) Delete(k []byte) error {
	return errors.New("rangeclient: a status read tried to write")
}

func appendTxnStatus(b []byte, st mvcc.TxnStatus) []byte {
	b = append(b, byte(st.State))
	b = binary.BigEndian.AppendUint64(b, st.CommitTS)
	return binary.BigEndian.AppendUint64(b, uint64(st.Expires))
}

func decodeTxnStatus(b []byte) (mvcc.TxnStatus, error) {
	d := NewDecoder(b)
	st := mvcc.TxnStatus{State: mvcc.TxnState(d.U8()), CommitTS: d.U64(), Expires: int64(d.U64())}
	return st, d.Done()
}
