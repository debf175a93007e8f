package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/codec"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// Any node serves any request. The body of a write goes to the chunk
// nodes from whichever node took the request; only the range's part of an
// operation (proposing a command, reading version records, listing) must
// run on the range's leaseholder. A node that does not hold the lease
// sends that part to the leaseholder over the peer service cairn.Range,
// trying the node it last found holding it, then the range's other
// replicas; a replica that is not the leaseholder answers with the leader
// it knows of, which is tried next.

const rangeService = "cairn.Range"

// Reply envelope of the cairn.Range methods: a status byte, then for
// replyErr a wire code (u16), the leader the replica knows of (u64, 0 if
// none) and a length-prefixed message; the payload follows in every case.
const (
	replyOK    = 0
	replyErr   = 1
	replyStale = 2 // mvcc.ErrStaleVersion: commit retries with a new timestamp
)

// forwardTimeout bounds one forwarded call; forwardPatience bounds the
// search for a leaseholder while leadership moves.
const (
	forwardTimeout  = 10 * time.Second
	forwardPatience = 10 * time.Second
)

// errLeaseHere is returned by forward when, while it looked for the
// leaseholder elsewhere, the local replica took the lease: the caller
// serves the request here.
var errLeaseHere = errors.New("the lease moved to this node")

// forward runs method for range r on its leaseholder elsewhere and returns
// the reply payload; a wire error from the leaseholder comes back as one,
// along with any payload it carried. It returns errLeaseHere if the local
// replica takes the lease meanwhile.
func (n *Node) forward(ctx context.Context, r *rng, method string, req []byte) ([]byte, error) {
	wire.MarkForwarded(ctx) // the client's route for this key is stale
	n.metrics.forwards.Inc()
	msg := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(req)), r.desc().ID)
	msg = append(msg, req...)
	deadline := n.cfg.Clock().Add(forwardPatience)
	var last error
	for round := 0; ; round++ {
		if r.gone.Load() {
			return nil, errMoved(r.desc().ID) // merged away: route again
		}
		if rep := r.replica(); round > 0 && rep != nil && rep.Status().IsLeader {
			// The others name this node: a new leader whose lease is
			// not valid yet (or a split's new range). Wait for it here.
			if rep.AwaitRead(ctx) == nil {
				return nil, errLeaseHere
			}
			if n.cfg.Clock().After(deadline) {
				return nil, object.Errorf(object.Unavailable, "range %d: this node leads it but has no lease yet", r.desc().ID)
			}
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		tried := map[uint64]bool{n.id.NodeID: true}
		queue := []uint64{}
		// The local replica's raft knows the current leader best (a
		// frozen old leader stays the hint until a call to it fails).
		if rep := r.replica(); rep != nil {
			if lead := rep.Status().Leader; lead != 0 {
				queue = append(queue, lead)
			}
		}
		if h := r.hint.Load(); h != 0 {
			queue = append(queue, h)
		}
		queue = append(queue, r.desc().Replicas...)
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			if tried[id] {
				continue
			}
			tried[id] = true
			b, err := n.callNode(ctx, id, rangeService, method, msg, forwardTimeout)
			if err != nil {
				// Even when our caller gave up first: a frozen node would
				// otherwise stay the first one tried by every request.
				r.hint.CompareAndSwap(id, 0)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if method == "Propose" && !errors.Is(err, transport.ErrNotSent) {
					// The command may have reached the leaseholder and
					// applied: do not send it again, and do not claim it
					// had no effect.
					return nil, object.Errorf(object.OutcomeUnknown, "range %d: node %d: %v", r.desc().ID, id, err)
				}
				last = fmt.Errorf("node %d: %w", id, err)
				continue
			}
			payload, lead, err := decodeReply(b)
			if object.KindOf(err) == object.NotLeader {
				last = err
				if lead != 0 && !tried[lead] {
					queue = append([]uint64{lead}, queue...)
				}
				continue
			}
			r.hint.Store(id)
			return payload, err
		}
		if n.cfg.Clock().After(deadline) {
			return nil, object.Errorf(object.Unavailable, "range %d: no replica of %v holds its lease: %v", r.desc().ID, r.desc().Replicas, last)
		}
		// Leadership is moving: wait a little and ask again.
		if err := sleep(ctx, time.Duration(min(round+1, 10))*50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func okReply(payload []byte) []byte { return append([]byte{replyOK}, payload...) }

// errReply encodes err (with any payload that goes with it) for the caller.
func errReply(err error, lead uint64, payload []byte) []byte {
	if errors.Is(err, mvcc.ErrStaleVersion) {
		return append([]byte{replyStale}, payload...)
	}
	// The envelope carries the native protocol's code (a peer of another
	// version reads the same numbers) and the message without its prefix.
	code, msg := wire.CodeOf(err), err.Error()
	var we *wire.Error
	var oe *object.Error
	if errors.As(err, &we) {
		msg = we.Message
	} else if errors.As(err, &oe) {
		msg = oe.Message
	}
	b := []byte{replyErr}
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	b = binary.BigEndian.AppendUint64(b, lead)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	b = append(b, msg...)
	return append(b, payload...)
}

func decodeReply(b []byte) (payload []byte, lead uint64, err error) {
	if len(b) == 0 {
		return nil, 0, object.Errorf(object.Internal, "empty reply from a peer")
	}
	switch b[0] {
	case replyOK:
		return b[1:], 0, nil
	case replyStale:
		return b[1:], 0, mvcc.ErrStaleVersion
	case replyErr:
		if len(b) >= 15 {
			code := wire.Code(binary.BigEndian.Uint16(b[1:]))
			lead = binary.BigEndian.Uint64(b[3:])
			ml := binary.BigEndian.Uint32(b[11:])
			if uint64(len(b)-15) >= uint64(ml) {
				return b[15+ml:], lead, &wire.Error{Code: code, Message: string(b[15 : 15+ml])}
			}
		}
	}
	return nil, 0, object.Errorf(object.Internal, "malformed reply from a peer")
}

// replicaFor finds the local replica a cairn.Range request names.
func (n *Node) replicaFor(req []byte) (*rng, []byte, error) {
	if len(req) < 8 {
		return nil, nil, object.Errorf(object.Malformed, "range request of %d bytes", len(req))
	}
	id := binary.BigEndian.Uint64(req)
	rep := n.ranges.Replica(id)
	if rep == nil {
		return nil, nil, object.Errorf(object.NotLeader, "node %d holds no replica of range %d", n.id.NodeID, id)
	}
	// The table's entry, so that the request counts towards the range's
	// load (splits.go); a replica the table does not show yet gets one.
	if _, r := n.tableEntry(id); r != nil && r.replica() == rep {
		return r, req[8:], nil
	}
	return newRng(meta.RangeDesc{ID: id}, rep), req[8:], nil
}

// rangeMethod adapts a cairn.Range handler: its error becomes the reply
// envelope. With lease, the handler runs only while the local replica holds
// the range's lease (reads); without, raft decides (proposals).
func (n *Node) rangeMethod(lease bool, h func(ctx context.Context, r *rng, req []byte) ([]byte, error)) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, req []byte) ([]byte, error) {
		r, rest, err := n.replicaFor(req)
		if err != nil {
			return errReply(err, 0, nil), nil
		}
		if lease {
			if err := r.replica().AwaitRead(ctx); err != nil {
				return errReply(object.Errorf(object.NotLeader, "range %d: %v", r.desc().ID, err), r.replica().Status().Leader, nil), nil
			}
		}
		out, err := h(ctx, r, rest)
		if err != nil {
			return errReply(err, r.replica().Status().Leader, out), nil
		}
		return okReply(out), nil
	}
}

// propose runs cmd, a command on object key obj of space s, on the
// leaseholder of the range holding obj: here if this node leads it, else
// on the node that does.
func (n *Node) propose(ctx context.Context, s *space, obj, cmd []byte) (res *kv.Result, err error) {
	err = n.onRange(ctx, s, obj, func(r *rng) error {
		for {
			if rep := r.replica(); rep != nil {
				res, err = n.proposeLocal(ctx, r, rep, obj, cmd)
				if object.KindOf(err) != object.NotLeader {
					return err
				}
			}
			b, err := n.forward(ctx, r, "Propose", cmd)
			if errors.Is(err, errLeaseHere) {
				continue
			}
			if err != nil {
				return err
			}
			res, err = decodeResult(b)
			return err
		}
	})
	return res, err
}

func (n *Node) handlePropose(ctx context.Context, r *rng, cmd []byte) ([]byte, error) {
	res, err := n.proposeLocal(ctx, r, r.replica(), nil, cmd)
	if err != nil {
		return nil, err
	}
	return encodeResult(res), nil
}

// proposeLocal proposes cmd, on object key obj if known, to rep, the
// local replica of r.
func (n *Node) proposeLocal(ctx context.Context, r *rng, rep *replica.Replica, obj, cmd []byte) (*kv.Result, error) {
	id := r.desc().ID
	if obj != nil && !rep.Contains(obj) {
		return nil, errMoved(id)
	}
	v, err := rep.Propose(ctx, cmd)
	if err == nil && obj != nil {
		r.load.note(obj)
	}
	if err != nil {
		if errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrRangeNotFound) {
			// Not applied: raft never took it (or the replica is gone).
			return nil, object.Errorf(object.NotLeader, "range %d: %v", id, err)
		}
		if errors.Is(err, replica.ErrRangeFrozen) {
			return nil, errMoved(id) // not applied: the range is merging
		}
		return nil, err
	}
	switch v := v.(type) {
	case *kv.Result:
		return v, nil
	case error:
		if errors.Is(v, kv.ErrPreconditionFailed) {
			return nil, object.Errorf(object.PreconditionFailed, "the object's current version does not match the request's condition")
		}
		if errors.Is(v, mvcc.ErrNotFound) {
			return nil, object.Errorf(object.NotFound, "no such version")
		}
		if errors.Is(v, mvcc.ErrDeleteMarker) {
			return nil, object.Errorf(object.Deleted, "the version is a delete marker")
		}
		if errors.Is(v, kv.ErrWrongRange) || errors.Is(v, replica.ErrRangeFrozen) {
			return nil, errMoved(id)
		}
		return nil, v // mvcc.ErrStaleVersion: commit retries with a new timestamp
	}
	return nil, fmt.Errorf("range %d: unexpected apply result %T", id, v)
}

// readRecord reads the selected version of obj (see readLocal) in space s
// from the leaseholder of its range: here if this node holds the lease,
// else where it is.
func (n *Node) readRecord(ctx context.Context, s *space, obj []byte, version, asOf uint64) (rec *mvcc.Record, err error) {
	err = n.onRange(ctx, s, obj, func(r *rng) error {
		rec, err = n.readRange(ctx, r, obj, version, asOf)
		return err
	})
	return rec, err
}

func (n *Node) readRange(ctx context.Context, r *rng, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	if r.leaseHere(ctx) {
		return n.readOwned(r, obj, version, asOf)
	}
	req := binary.BigEndian.AppendUint64(nil, version)
	req = binary.BigEndian.AppendUint64(req, asOf)
	req = append(req, obj...)
	b, err := n.forward(ctx, r, "Read", req)
	if errors.Is(err, errLeaseHere) {
		return n.readOwned(r, obj, version, asOf)
	}
	var rec *mvcc.Record
	if len(b) > 0 {
		d := newDecoder(b)
		rec = d.record()
		if d.Err() != nil {
			return nil, d.Err()
		}
	}
	return rec, err
}

// readOwned is readLocal for a key the local replica of r must still
// hold (after a split it may not).
func (n *Node) readOwned(r *rng, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	rep := r.replica()
	if !rep.Contains(obj) {
		return nil, errMoved(rep.Descriptor().RangeID)
	}
	r.load.note(obj)
	return n.readLocal(obj, version, asOf)
}

func (n *Node) handleRead(_ context.Context, r *rng, req []byte) ([]byte, error) {
	if len(req) < 16 {
		return nil, object.Errorf(object.Malformed, "read request of %d bytes", len(req))
	}
	rec, err := n.readOwned(r, req[16:], binary.BigEndian.Uint64(req), binary.BigEndian.Uint64(req[8:]))
	var out []byte
	if rec != nil {
		out = appendRecord(nil, rec)
	}
	return out, err
}

// listRange lists r's part of a listing on its leaseholder.
func (n *Node) listRange(ctx context.Context, r *rng, o mvcc.ListOptions) ([]mvcc.Entry, bool, error) {
	if r.leaseHere(ctx) {
		return n.listOwned(r, o)
	}
	req := binary.BigEndian.AppendUint64(nil, o.AsOf)
	req = binary.BigEndian.AppendUint32(req, uint32(max(o.Limit, 0)))
	req = appendOptBytes(req, o.Lower)
	req = appendOptBytes(req, o.Upper)
	req = appendOptBytes(req, o.StartAfter)
	if o.AllVersions {
		req = binary.BigEndian.AppendUint64(append(req, 1), o.AfterVersion)
	}
	b, err := n.forward(ctx, r, "List", req)
	if errors.Is(err, errLeaseHere) {
		return n.listOwned(r, o)
	}
	if err != nil {
		return nil, false, err
	}
	d := newDecoder(b)
	more := d.U8() == 1
	ents := make([]mvcc.Entry, d.Count32(12))
	for i := range ents {
		ents[i].Obj = d.bytes()
		ents[i].Rec = d.record()
	}
	return ents, more, d.Done()
}

// listOwned is listLocal for a span the local replica of r must still
// hold.
func (n *Node) listOwned(r *rng, o mvcc.ListOptions) ([]mvcc.Entry, bool, error) {
	rep := r.replica()
	if !rep.ContainsSpan(o.Lower, o.Upper) {
		return nil, false, errMoved(rep.Descriptor().RangeID)
	}
	r.load.ops.Add(1)
	return n.listLocal(o)
}

func (n *Node) handleList(_ context.Context, r *rng, req []byte) ([]byte, error) {
	d := newDecoder(req)
	o := mvcc.ListOptions{AsOf: d.U64(), Limit: int(d.U32())}
	o.Lower, o.Upper, o.StartAfter = d.optBytes(), d.optBytes(), d.optBytes()
	if d.Err() == nil && d.Len() > 0 {
		// An AllVersions listing: a flag byte and the version to resume after.
		o.AllVersions, o.AfterVersion = d.U8() == 1, d.U64()
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	ents, more, err := n.listOwned(r, o)
	if err != nil {
		return nil, err
	}
	out := appendPage(nil, more, len(ents))
	for _, e := range ents {
		out = appendBytes(out, e.Obj)
		out = appendRecord(out, e.Rec)
	}
	return out, nil
}

// versions lists obj's versions on the leaseholder of its range in s.
func (n *Node) versions(ctx context.Context, s *space, obj []byte, before uint64, limit int) (recs []*mvcc.Record, more bool, err error) {
	err = n.onRange(ctx, s, obj, func(r *rng) error {
		if r.leaseHere(ctx) {
			recs, more, err = n.versionsOwned(r, obj, before, limit)
			return err
		}
		req := binary.BigEndian.AppendUint64(nil, before)
		req = binary.BigEndian.AppendUint32(req, uint32(limit))
		req = append(req, obj...)
		b, err := n.forward(ctx, r, "Versions", req)
		if errors.Is(err, errLeaseHere) {
			recs, more, err = n.versionsOwned(r, obj, before, limit)
			return err
		}
		if err != nil {
			return err
		}
		d := newDecoder(b)
		more = d.U8() == 1
		recs = make([]*mvcc.Record, d.Count32(12))
		for i := range recs {
			recs[i] = d.record()
		}
		return d.Done()
	})
	return recs, more, err
}

// versionsOwned is versionsLocal for a key the local replica of r must
// still hold.
func (n *Node) versionsOwned(r *rng, obj []byte, before uint64, limit int) ([]*mvcc.Record, bool, error) {
	rep := r.replica()
	if !rep.Contains(obj) {
		return nil, false, errMoved(rep.Descriptor().RangeID)
	}
	r.load.note(obj)
	return n.versionsLocal(obj, before, limit)
}

func (n *Node) handleVersions(_ context.Context, r *rng, req []byte) ([]byte, error) {
	if len(req) < 12 {
		return nil, object.Errorf(object.Malformed, "versions request of %d bytes", len(req))
	}
	recs, more, err := n.versionsOwned(r, req[12:], binary.BigEndian.Uint64(req), int(binary.BigEndian.Uint32(req[8:])))
	if err != nil {
		return nil, err
	}
	out := appendPage(nil, more, len(recs))
	for _, rec := range recs {
		out = appendRecord(out, rec)
	}
	return out, nil
}

// appendPage starts a listing reply: whether more follow, and the count.
func appendPage(b []byte, more bool, count int) []byte {
	flag := byte(0)
	if more {
		flag = 1
	}
	return binary.BigEndian.AppendUint32(append(b, flag), uint32(count))
}

func encodeResult(res *kv.Result) []byte {
	var out []byte
	if res.Rec != nil {
		out = appendRecord(append(out, 1), res.Rec)
	} else {
		out = append(out, 0)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(res.Pruned)))
	for _, p := range res.Pruned {
		out = appendRecord(out, p)
	}
	return out
}

func decodeResult(b []byte) (*kv.Result, error) {
	d := newDecoder(b)
	res := &kv.Result{}
	if d.U8() == 1 {
		res.Rec = d.record()
	}
	res.Pruned = make([]*mvcc.Record, d.Count32(12))
	for i := range res.Pruned {
		res.Pruned[i] = d.record()
	}
	return res, d.Done()
}

// appendRecord encodes a version record with its version (which its own
// encoding leaves to the key).
func appendRecord(b []byte, rec *mvcc.Record) []byte {
	b = binary.BigEndian.AppendUint64(b, rec.Version)
	return appendBytes(b, rec.Marshal())
}

func appendBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// appendOptBytes keeps nil apart from empty (nil bounds are unbounded).
func appendOptBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	return appendBytes(append(b, 1), v)
}

// decoder reads the encodings above (codec.Decoder): a read that fails is
// a malformed peer message; a version record that fails its own checks is
// corrupt.
type decoder struct{ codec.Decoder }

func newDecoder(b []byte) decoder {
	return decoder{codec.NewDecoder(b, func(msg string) error {
		return object.Errorf(object.Malformed, "peer message: %s", msg)
	})}
}

// bytes reads a u32-length-prefixed field into a copy (never nil).
func (d *decoder) bytes() []byte {
	v := d.Bytes32()
	if d.Err() != nil {
		return nil
	}
	return append([]byte{}, v...)
}

// optBytes reads what appendOptBytes wrote: nil stays apart from empty.
func (d *decoder) optBytes() []byte {
	if d.U8() == 0 {
		return nil
	}
	return d.bytes()
}

func (d *decoder) record() *mvcc.Record {
	v := d.U64()
	b := d.bytes()
	if d.Err() != nil {
		return nil
	}
	rec, err := mvcc.Unmarshal(b)
	if err != nil {
		d.FailWith(object.Errorf(object.Corrupt, "version record from a peer: %v", err))
		return nil
	}
	rec.Version = v
	return rec
}
