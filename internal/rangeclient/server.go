package rangeclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// Handler serves one cairn.Range method on r, a range with a local
// replica, with the request after its range id.
type Handler func(ctx context.Context, r *Range, req []byte) ([]byte, error)

// MethodNames are the cairn.Range methods Methods serves.
var MethodNames = []string{"Propose", "Read", "List", "Versions", "TxnStatus", "Children", "Refs", "Query", "Changes"}

// Methods returns the cairn.Range methods this package serves, for the
// peer server: those of MethodNames.
func (c *Client) Methods() map[string]transport.Unary {
	return map[string]transport.Unary{
		"Propose":  c.Method(false, c.handlePropose),
		"Read":     c.Method(true, c.handleRead),
		"List":     c.Method(true, c.handleList),
		"Versions": c.Method(true, c.handleVersions),
		// TxnStatus reads what a transaction's primary says of it.
		"TxnStatus": c.Method(true, c.handleTxnStatus),
		// Children reads the children index of a version (clones of it).
		"Children": c.Method(true, c.handleChildren),
		// Refs reads which of a batch of chunks the range's versions
		// and locks reference (the chunk collector's mark).
		"Refs": c.Method(true, c.handleRefs),
		// Query runs a range's part of a query next to its data.
		"Query": c.Method(true, c.handleQuery),
		// Changes reads a range's change feed (a watch's part).
		"Changes": c.Method(true, c.handleChanges),
	}
}

// Method adapts a cairn.Range handler: its error becomes the reply
// envelope. With lease, the handler runs only while the local replica
// holds the range's lease (reads); without, raft decides (proposals).
func (c *Client) Method(lease bool, h Handler) transport.Unary {
	return func(ctx context.Context, req []byte) ([]byte, error) {
		r, rest, err := c.entry(req)
		if err != nil {
			return c.errReply(err, 0, nil), nil
		}
		if lease {
			if err := r.Replica().AwaitRead(ctx); err != nil {
				return c.errReply(errorf(CodeNotLeader, "range %d: %v", r.Desc().ID, err), r.Replica().Status().Leader, nil), nil
			}
		}
		out, err := h(ctx, r, rest)
		if err != nil {
			return c.errReply(err, r.Replica().Status().Leader, out), nil
		}
		return okReply(out), nil
	}
}

// entry finds the local range a cairn.Range request names.
func (c *Client) entry(req []byte) (*Range, []byte, error) {
	if len(req) < 8 {
		return nil, nil, errorf(CodeMalformed, "range request of %d bytes", len(req))
	}
	id := binary.BigEndian.Uint64(req)
	rep := c.cfg.Replicas.Replica(id)
	if rep == nil {
		return nil, nil, errorf(CodeNotLeader, "node %d holds no replica of range %d", c.cfg.Self, id)
	}
	return c.cfg.Entry(id, rep), req[8:], nil
}

func (c *Client) handlePropose(ctx context.Context, r *Range, cmd []byte) ([]byte, error) {
	res, err := c.proposeLocal(ctx, r, r.Replica(), nil, cmd)
	if err != nil {
		return nil, err
	}
	return encodeResult(res), nil
}

func (c *Client) handleRead(ctx context.Context, r *Range, req []byte) ([]byte, error) {
	if len(req) < 16 {
		return nil, errorf(CodeMalformed, "read request of %d bytes", len(req))
	}
	rec, err := c.readOwned(ctx, r, req[16:], binary.BigEndian.Uint64(req), binary.BigEndian.Uint64(req[8:]))
	var out []byte
	if rec != nil {
		out = AppendRecord(nil, rec)
	}
	return out, err
}

func (c *Client) handleList(ctx context.Context, r *Range, req []byte) ([]byte, error) {
	d := NewDecoder(req)
	o := mvcc.ListOptions{AsOf: d.U64(), Limit: int(d.U32())}
	o.Lower, o.Upper, o.StartAfter = d.OptBytes(), d.OptBytes(), d.OptBytes()
	if d.Err() == nil && d.Len() > 0 {
		// Flags (listFlags) and the version an AllVersions listing
		// resumes after.
		f := d.U8()
		o.AllVersions, o.Markers, o.Snapshot, o.AfterVersion = f&1 != 0, f&2 != 0, f&8 != 0, d.U64()
		if f&4 != 0 {
			o.Since = d.U64()
		}
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	ents, more, err := c.listOwned(ctx, r, o)
	if err != nil {
		return nil, err
	}
	out := appendPage(nil, more, len(ents))
	for _, e := range ents {
		out = AppendBytes(out, e.Obj)
		out = AppendRecord(out, e.Rec)
	}
	return out, nil
}

func (c *Client) handleVersions(_ context.Context, r *Range, req []byte) ([]byte, error) {
	if len(req) < 12 {
		return nil, errorf(CodeMalformed, "versions request of %d bytes", len(req))
	}
	recs, more, err := c.versionsOwned(r, req[12:], binary.BigEndian.Uint64(req), int(binary.BigEndian.Uint32(req[8:])))
	if err != nil {
		return nil, err
	}
	out := appendPage(nil, more, len(recs))
	for _, rec := range recs {
		out = AppendRecord(out, rec)
	}
	return out, nil
}

// readOwned is readLocal for a key the local replica of r must still
// hold (after a split it may not). A read at a timestamp passes the
// range's timestamp guard first.
func (c *Client) readOwned(ctx context.Context, r *Range, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	rep := r.Replica()
	if !rep.Contains(obj) {
		return nil, errMoved(rep.Descriptor().ID)
	}
	if asOf != 0 && version == 0 {
		if err := c.guard(rep.Descriptor().ID).read(ctx, rep.Status().Term, asOf); err != nil {
			return nil, err
		}
	}
	r.Load.Note(obj)
	return c.readLocal(obj, version, asOf)
}

// listOwned lists a span the local replica of r must still hold. A
// listing at a timestamp passes the range's timestamp guard first; one
// whose page holds keys locked by transactions that may cover it fails
// with a *LockedError naming them (at most lockedMax).
func (c *Client) listOwned(ctx context.Context, r *Range, o mvcc.ListOptions) ([]mvcc.Entry, bool, error) {
	rep := r.Replica()
	if !rep.ContainsSpan(o.Lower, o.Upper) {
		return nil, false, errMoved(rep.Descriptor().ID)
	}
	if o.AsOf != 0 {
		if err := c.guard(rep.Descriptor().ID).read(ctx, rep.Status().Term, o.AsOf); err != nil {
			return nil, false, err
		}
	}
	r.Load.Add()
	rd := kv.Reader{R: c.cfg.DB}
	// The locks first, the versions after (as readLocal does): a lock
	// that arrives in between belongs to a transaction that commits after
	// this listing's timestamp; a commit in between leaves a lock seen
	// that is gone, which only costs a look at its primary.
	lower := o.Lower
	if o.StartAfter != nil && bytes.Compare(o.StartAfter, lower) > 0 {
		lower = o.StartAfter
	}
	locks, err := mvcc.Locks(rd, lower, o.Upper, o.AsOf, lockedMax)
	if err != nil {
		return nil, false, c.corrupt(err)
	}
	ents, more, err := mvcc.List(rd, o)
	if err != nil {
		return nil, false, c.corrupt(err)
	}
	// The locks that matter lie before where the page ends (its last key,
	// if more follow).
	if more && len(ents) > 0 {
		end := keys.PrefixEnd(ents[len(ents)-1].Obj)
		locks = slices.DeleteFunc(locks, func(l mvcc.LockEntry) bool { return bytes.Compare(l.Obj, end) >= 0 })
	}
	if len(locks) > 0 {
		return nil, false, &LockedError{Locks: locks}
	}
	return ents, more, nil
}

// lockedMax bounds the locks one reply names.
const lockedMax = 256

// versionsOwned is versionsLocal for a key the local replica of r must
// still hold.
func (c *Client) versionsOwned(r *Range, obj []byte, before uint64, limit int) ([]*mvcc.Record, bool, error) {
	rep := r.Replica()
	if !rep.Contains(obj) {
		return nil, false, errMoved(rep.Descriptor().ID)
	}
	r.Load.Note(obj)
	rd := kv.Reader{R: c.cfg.DB}
	// A lock on the key may stand for a version committed but not yet
	// resolved here (a transaction's secondary): the listing fails with
	// it, so the caller resolves it and lists again, as a listing of keys
	// does.
	locks, err := mvcc.Locks(rd, obj, keys.PrefixEnd(obj), ^uint64(0), lockedMax)
	if err != nil {
		return nil, false, c.corrupt(err)
	}
	if len(locks) > 0 {
		return nil, false, &LockedError{Locks: locks}
	}
	recs, more, err := mvcc.Versions(rd, obj, before, limit)
	return recs, more, c.corrupt(err)
}

// corrupt classes a record that failed its checksum, and counts it.
func (c *Client) corrupt(err error) error {
	if errors.Is(err, mvcc.ErrCorrupt) {
		c.cfg.Metrics.Corrupt.Inc()
		return errorf(CodeCorrupt, "%v", err)
	}
	if errors.Is(err, mvcc.ErrHistoryPruned) {
		return errorf(CodeHistoryPruned, "a version the listing's snapshot shows was pruned by the space's retention")
	}
	return err
}

// readLocal reads the selected version of obj from the local replica of
// its range, which must hold the lease. version != 0 selects an exact
// version; asOf != 0 the newest at or before it; otherwise the latest. A
// delete marker as the latest (or as-of) version reads as ErrNotFound; an
// exact delete marker as ErrDeleted (with the marker's record). A write
// lock that may cover the read fails it with a *LockedError carrying what
// was read beneath the lock.
func (c *Client) readLocal(obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	rd := kv.Reader{R: c.cfg.DB}
	var (
		rec *mvcc.Record
		err error
	)
	// The cache holds the latest committed version: it answers reads of the
	// latest, and of an exact version that is the latest.
	var (
		cached *mvcc.Record
		tok    kv.CacheToken
	)
	cached, tok = c.cfg.Cache.Get(obj)
	var lock *mvcc.Lock
	switch {
	case cached != nil && asOf != 0 && version == 0 && cached.Version <= asOf:
		// The latest version is the newest at or before asOf, and a cached
		// key holds no lock (the guard already waited out writes in flight
		// at or below asOf).
		rec = cached
		c.cfg.Metrics.CacheHits.Inc()
	case cached != nil && asOf == 0 && (version == 0 || version == cached.Version):
		rec = cached // a cached key holds no lock
		c.cfg.Metrics.CacheHits.Inc()
	case version != 0:
		rec, err = mvcc.Exact(rd, obj, version)
	default:
		// The lock first: a lock that arrives after this look belongs to
		// a transaction that commits after this read's timestamp (it takes
		// its commit timestamp once the lock is in place).
		if lock, err = mvcc.GetLock(rd, obj); err != nil {
			break
		}
		if asOf != 0 {
			rec, err = mvcc.AtSnapshot(rd, obj, asOf)
			break
		}
		rec, err = mvcc.Latest(rd, obj)
		c.cfg.Metrics.CacheMisses.Inc()
		if err == nil && lock == nil {
			c.cfg.Cache.Fill(obj, rec, tok)
		}
	}
	if errors.Is(err, mvcc.ErrCorrupt) {
		c.cfg.Metrics.Corrupt.Inc()
		return nil, errorf(CodeCorrupt, "version record: %v", err)
	}
	if errors.Is(err, mvcc.ErrHistoryPruned) {
		return nil, errorf(CodeHistoryPruned, "the version visible at %s was pruned by the space's retention", tstamp.String(asOf))
	}
	if lock != nil && lock.Blocks(asOf) {
		if errors.Is(err, mvcc.ErrNotFound) {
			rec, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		return nil, &LockedError{Locks: []mvcc.LockEntry{{Obj: obj, Lock: lock}}, Read: true, Under: rec}
	}
	if errors.Is(err, mvcc.ErrNotFound) {
		return nil, errorf(CodeNotFound, "no such object or version")
	}
	if err != nil {
		return nil, err
	}
	if rec.DeleteMarker {
		if version != 0 {
			return rec, errorf(CodeDeleted, "version %s is a delete marker", tstamp.String(rec.Version))
		}
		return nil, errorf(CodeNotFound, "the object is deleted")
	}
	return rec, nil
}
