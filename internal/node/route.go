package node

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/wire"
)

// Any node serves any request. The body of a write goes to the chunk
// nodes from whichever node took the request; only the range's part of an
// operation (proposing a command, reading version records, listing) must
// run on the range's leaseholder, and the range client
// (internal/rangeclient) takes it there. The wrappers below map its
// classed failures to the object service's kinds.

// newRangeClient builds the range client over the node's replicas, state
// and peers; the node's identity must be known.
func (n *Node) newRangeClient() *rangeclient.Client {
	return rangeclient.New(rangeclient.Config{
		Self:     n.id.NodeID,
		Replicas: n.ranges,
		DB:       n.eng.DB(),
		Cache:    n.cache,
		Call: func(ctx context.Context, id uint64, method string, req []byte, timeout time.Duration) ([]byte, error) {
			return n.callNode(ctx, id, rangeclient.Service, method, req, timeout)
		},
		Entry:     n.rangeEntry,
		Stale:     n.kickSync,
		Forwarded: wire.MarkForwarded, // the client's route for this key is stale
		Codes:     peerCodes{},
		Clock:     n.cfg.Clock,
		Metrics: rangeclient.Metrics{Forwards: n.metrics.forwards, CacheHits: n.metrics.cacheHits,
			CacheMisses: n.metrics.cacheMiss, Corrupt: n.metrics.corrupt},
	})
}

// rangeEntry is the table entry of range id, with local replica rep, that
// a request from a peer is served on (so that it counts towards the
// range's load); a replica the table does not show yet gets one.
func (n *Node) rangeEntry(id uint64, rep *replica.Replica) *rng {
	if _, r := n.tableEntry(id); r != nil && r.Replica() == rep {
		return r
	}
	return newRng(meta.RangeDesc{ID: id}, rep)
}

// peerCodes carries the object service's failures across the cairn.Range
// reply envelope as the native protocol's codes (a peer of another
// version reads the same numbers).
type peerCodes struct{}

func (peerCodes) Code(err error) (uint16, string) {
	code, msg := wire.CodeOf(err), err.Error()
	var we *wire.Error
	var oe *object.Error
	if errors.As(err, &we) {
		msg = we.Message
	} else if errors.As(err, &oe) {
		msg = oe.Message
	}
	return uint16(code), msg
}

func (peerCodes) Error(code uint16, msg string) error {
	return &wire.Error{Code: wire.Code(code), Message: msg}
}

// rangeKinds maps the range client's classes to the object service's
// kinds; rangeclient.ErrConflict stays itself (commit retries on it).
var rangeKinds = map[rangeclient.Code]object.Kind{
	rangeclient.CodeInternal:       object.Internal,
	rangeclient.CodeMalformed:      object.Malformed,
	rangeclient.CodeNotFound:       object.NotFound,
	rangeclient.CodePrecondition:   object.PreconditionFailed,
	rangeclient.CodeCorrupt:        object.Corrupt,
	rangeclient.CodeNotLeader:      object.NotLeader,
	rangeclient.CodeUnavailable:    object.Unavailable,
	rangeclient.CodeCanceled:       object.Canceled,
	rangeclient.CodeDeleted:        object.Deleted,
	rangeclient.CodeOutcomeUnknown: object.OutcomeUnknown,
	rangeclient.CodeRangeMoved:     object.RangeMoved,
}

// rangeErr maps a range client failure to the object service's kind.
func rangeErr(err error) error {
	var e *rangeclient.Error
	if errors.As(err, &e) {
		if k, ok := rangeKinds[e.Code]; ok {
			return &object.Error{Kind: k, Message: e.Msg}
		}
	}
	return err
}

// propose runs cmd, a command on object key obj of space s, on the
// leaseholder of the range holding obj.
func (n *Node) propose(ctx context.Context, s *space, obj, cmd []byte) (*kv.Result, error) {
	res, err := n.rc.Propose(ctx, &s.tab, obj, cmd)
	return res, rangeErr(err)
}

// readRecord reads the selected version of obj in space s from the
// leaseholder of its range (version != 0: that version; asOf != 0: the
// newest at or before it; else the latest). A delete marker as the
// latest version reads as not found; an exact one as Deleted, with its
// record.
func (n *Node) readRecord(ctx context.Context, s *space, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	rec, err := n.rc.Read(ctx, &s.tab, obj, version, asOf)
	return rec, rangeErr(err)
}

// listRange lists r's part of a listing on its leaseholder.
func (n *Node) listRange(ctx context.Context, r *rng, o mvcc.ListOptions) ([]mvcc.Entry, bool, error) {
	ents, more, err := n.rc.List(ctx, r, o)
	return ents, more, rangeErr(err)
}

// versions lists obj's versions on the leaseholder of its range in s.
func (n *Node) versions(ctx context.Context, s *space, obj []byte, before uint64, limit int) ([]*mvcc.Record, bool, error) {
	recs, more, err := n.rc.Versions(ctx, &s.tab, obj, before, limit)
	return recs, more, rangeErr(err)
}

// retryMoved runs op again while it fails with object.RangeMoved (see
// rangeclient.Client.RetryMoved).
func (n *Node) retryMoved(ctx context.Context, op func() error, stale func() bool) error {
	var last error
	err := n.rc.RetryMoved(ctx, func() error {
		if last = op(); object.KindOf(last) == object.RangeMoved {
			return rangeclient.ErrRangeMoved
		}
		return last
	}, stale)
	if errors.Is(err, rangeclient.ErrRangeMoved) {
		return last
	}
	return err
}

// errMoved is the answer for a key that left the range a request reached.
func errMoved(rangeID uint64) error {
	return object.Errorf(object.RangeMoved, "range %d does not serve the key now (it split, or is merging)", rangeID)
}
