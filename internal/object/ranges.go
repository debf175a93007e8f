package object

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cairn-db/cairn/internal/txn"
)

// The range client's failures in the object service's kinds.

// rangeKinds maps the range client's classes to kinds;
// rangeclient.ErrConflict stays itself (commit retries on it).
var rangeKinds = map[rangeclient.Code]Kind{
	rangeclient.CodeInternal:       Internal,
	rangeclient.CodeMalformed:      Malformed,
	rangeclient.CodeNotFound:       NotFound,
	rangeclient.CodePrecondition:   PreconditionFailed,
	rangeclient.CodeCorrupt:        Corrupt,
	rangeclient.CodeNotLeader:      NotLeader,
	rangeclient.CodeUnavailable:    Unavailable,
	rangeclient.CodeCanceled:       Canceled,
	rangeclient.CodeDeleted:        Deleted,
	rangeclient.CodeOutcomeUnknown: OutcomeUnknown,
	rangeclient.CodeRangeMoved:     RangeMoved,
	rangeclient.CodeTxnConflict:    TxnConflict,
	rangeclient.CodeTxnAborted:     TxnAborted,
	rangeclient.CodeCursorExpired:  CursorExpired,
}

// FromRange maps a range client failure to the kind it stands for.
func FromRange(err error) error {
	if err == nil {
		return nil // before the targets of errors.As, which escape
	}
	var e *rangeclient.Error
	var ce *txn.ConflictError
	var rce *rangeclient.ConflictError
	switch {
	case errors.As(err, &ce):
		return &Error{Kind: TxnConflict, Message: ce.Reason}
	case errors.As(err, &rce):
		return &Error{Kind: TxnConflict, Message: rce.Error()}
	case errors.Is(err, txn.ErrDone):
		return &Error{Kind: InvalidArgument, Message: "the transaction is over (committed or rolled back)"}
	case errors.As(err, &e) && e.Code == rangeclient.CodeHistoryPruned:
		return &Error{Kind: NotFound, Message: e.Msg}
	}
	if errors.As(err, &e) {
		if k, ok := rangeKinds[e.Code]; ok {
			return &Error{Kind: k, Message: e.Msg}
		}
	}
	return err
}

// RangeCodes lists the range client's codes this package maps, with the
// kind of each (for the protocols' tests that their codes agree).
func RangeCodes() map[rangeclient.Code]Kind {
	m := make(map[rangeclient.Code]Kind, len(rangeKinds))
	for c, k := range rangeKinds {
		m[c] = k
	}
	return m
}

// propose runs cmd, a command on object key obj of space s, on the
// leaseholder of the range holding obj.
func (st *Store) propose(ctx context.Context, s OpenSpace, obj, cmd []byte) (*kv.Result, error) {
	res, err := st.cfg.Ranges.Propose(ctx, s.Table(), obj, cmd)
	return res, FromRange(err)
}

// readRecord reads the selected version of obj in space s from the
// leaseholder of its range (version != 0: that version; asOf != 0: the
// newest at or before it; else the latest). A delete marker as the
// latest version reads as not found; an exact one as Deleted, with its
// record.
//
// A read of the latest version, or as of a time, that meets a
// transaction's lock asks the transaction's primary: committed, the
// lock's version is read (if it committed in time); pending, a read of the
// latest reads past it, one as of a time waits for the outcome.
func (st *Store) readRecord(ctx context.Context, s OpenSpace, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	if b, at := s.Base(); b != nil {
		return st.readBranch(ctx, s, b, at, obj, version, asOf)
	}
	return st.readOwn(ctx, s, obj, version, asOf)
}

// readOwn is readRecord of s's own versions (a branch's, without its
// base).
func (st *Store) readOwn(ctx context.Context, s OpenSpace, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	if at := s.ReadAt(); at != 0 {
		// A snapshot: versions after it do not exist, and the latest is
		// the newest at or before it.
		if version > at {
			return nil, Errorf(NotFound, "no such version in snapshot (as of %s)", tstamp.String(at))
		}
		if version == 0 && (asOf == 0 || asOf > at) {
			asOf = at
		}
	}
	asOf, err := st.clampAsOf(ctx, asOf)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		rec, err := st.cfg.Ranges.Read(ctx, s.Table(), obj, version, asOf)
		var le *rangeclient.LockedError
		if !errors.As(err, &le) {
			return rec, FromRange(err)
		}
		rec, wait, err := st.cfg.Txns.ReadPast(ctx, le, asOf)
		if err != nil {
			return nil, FromRange(err)
		}
		if !wait {
			if rec == nil {
				return nil, Errorf(NotFound, "no such object or version")
			}
			if rec.DeleteMarker {
				return nil, Errorf(NotFound, "the object is deleted")
			}
			return rec, nil
		}
		if err := clock.Sleep(ctx, txn.Backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// settle resolves the locks that stopped a write or a listing (err, if it
// is a *rangeclient.LockedError) and reports whether to try again.
func (st *Store) settle(ctx context.Context, err error, attempt int) (bool, error) {
	if err == nil {
		return false, nil
	}
	var le *rangeclient.LockedError
	if !errors.As(err, &le) {
		return false, nil
	}
	if err := st.cfg.Txns.Settle(ctx, le.Locks, attempt); err != nil {
		return false, FromRange(err)
	}
	return true, nil
}

// versions lists obj's versions on the leaseholder of its range in s,
// newest first (a branch's own, then its base's at or before the branch
// point).
func (st *Store) versions(ctx context.Context, s OpenSpace, obj []byte, before uint64, limit int) ([]*mvcc.Record, bool, error) {
	recs, more, err := st.versionsOwn(ctx, s, obj, before, limit)
	b, at := s.Base()
	if b == nil || err != nil || more {
		return recs, more, err
	}
	bb := at + 1
	if before != 0 && before < bb {
		bb = before
	}
	if limit > 0 && len(recs) >= limit {
		// A full page of the branch's own: more if the base has any.
		brecs, _, err := st.versionsOwn(ctx, b, rebase(obj, b.ID()), bb, 1)
		return recs, len(brecs) > 0, err
	}
	if limit > 0 {
		limit -= len(recs)
	}
	brecs, more, err := st.versionsOwn(ctx, b, rebase(obj, b.ID()), bb, limit)
	return append(recs, brecs...), more, err
}

// versionsOwn is versions of s's own versions (a branch's, without its
// base).
func (st *Store) versionsOwn(ctx context.Context, s OpenSpace, obj []byte, before uint64, limit int) ([]*mvcc.Record, bool, error) {
	if at := s.ReadAt(); at != 0 && (before == 0 || before > at+1) {
		before = at + 1 // a snapshot lists the versions at or before it
	}
	for attempt := 0; ; attempt++ {
		recs, more, err := st.cfg.Ranges.Versions(ctx, s.Table(), obj, before, limit)
		// A transaction's lock on the key: resolve it (waiting if it is
		// still pending) and list again, so a committed version shows.
		if again, serr := st.settle(ctx, err, attempt); serr != nil || !again {
			if serr != nil {
				return nil, false, serr
			}
			return recs, more, FromRange(err)
		}
	}
}

// futureSlack is how far past this node's clock a timestamp may lie and
// still be taken as one the oracle handed out.
const futureSlack = time.Second

// clampAsOf makes a read "as of" a time still to come a read as of now (a
// fresh timestamp): what it means at this moment. A read at a timestamp
// holds back writes at or below it in its range (the leaseholder's
// guard), so a timestamp far ahead must not reach the range.
func (st *Store) clampAsOf(ctx context.Context, asOf uint64) (uint64, error) {
	if asOf == 0 || tstamp.Physical(asOf) <= st.cfg.Clock().Add(futureSlack).UnixMilli() {
		return asOf, nil
	}
	ts, err := st.cfg.Timestamps.Next(ctx)
	if err != nil {
		return 0, Unreachable("timestamp oracle", err)
	}
	return min(asOf, ts), nil
}
