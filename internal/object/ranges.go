package object

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangeclient"
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
}

// FromRange maps a range client failure to the kind it stands for.
func FromRange(err error) error {
	var e *rangeclient.Error
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
func (st *Store) readRecord(ctx context.Context, s OpenSpace, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	rec, err := st.cfg.Ranges.Read(ctx, s.Table(), obj, version, asOf)
	return rec, FromRange(err)
}

// versions lists obj's versions on the leaseholder of its range in s.
func (st *Store) versions(ctx context.Context, s OpenSpace, obj []byte, before uint64, limit int) ([]*mvcc.Record, bool, error) {
	recs, more, err := st.cfg.Ranges.Versions(ctx, s.Table(), obj, before, limit)
	return recs, more, FromRange(err)
}
