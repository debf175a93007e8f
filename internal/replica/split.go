package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// Splits.
//
// A range's key bounds are replicated state: bootstrapped with the group,
// persisted under the range's 'b' key, shipped with every snapshot, and
// changed only by a split entry in the range's own log. Every replica
// applies the split at the same log position, in the same batch as
//
//   - the left-hand side's new bounds [Start, key), and
//   - the raft state of the right-hand range [key, End): the same voters,
//     a log truncated at (bootstrapIndex, bootstrapTerm), as a new group.
//
// The data does not move: every range of a node shares its keyspace, and
// the right-hand side's keys are already where they were. Commands of the
// left-hand side applied after the split that touch the right-hand side's
// keys are refused by the StateMachine (it learns its bounds through
// Bounder), so no write lands in a range that does not own its key.
//
// The right-hand group campaigns at once from the node whose left-hand
// replica led when it applied the split; elsewhere it waits an election
// timeout. So its first leader has applied the split (and refuses reads
// and writes of the moved keys in the left-hand side) before another node
// could win an election, and the left-hand side's lease (which expires
// ElectionTicks minus the clock offset after its last quorum contact)
// cannot serve the moved keys after the right-hand side took writes.
//
// A node that is behind may learn of the new range (from the range table)
// before it applies the split. Its replica of the new range stays
// uninitialized: a snapshot of a range whose bounds overlap an initialized
// replica on the node is declined (it would be overwritten by the older
// replica's log replay), and the leader retries it later. When the split
// applies there, it initializes that replica in place, keeping any newer
// term and vote it has.

// ErrSplitRefused is returned by Split when the range cannot split at the
// key: the key is not strictly inside the range, the range has no bounds,
// or its membership is changing. Nothing changed.
var ErrSplitRefused = errors.New("replica: split refused")

// ErrBadSplit is the result of a split entry that does not decode.
var ErrBadSplit = errors.New("replica: malformed split command")

// Rekeyer is implemented by a StateMachine that keeps part of a range's
// state under the range's id (kv's index entries): a split or a merge,
// which moves no data otherwise, must move that part. Both run in the
// apply batch b of the split or merge, on every replica alike, and read
// the node's committed state through b.
type Rekeyer interface {
	// RekeySplit moves left's id-keyed state of the keys that right now
	// holds under right's id; with moveRight false (right already has
	// state here, from a snapshot) it only deletes it from left's.
	RekeySplit(b *pebble.Batch, left, right rangedesc.Range, moveRight bool) error
	// RekeyMerge moves right's id-keyed state under left's id.
	RekeyMerge(b *pebble.Batch, left, right rangedesc.Range) error
}

// Bounder is implemented by a StateMachine that checks its commands'
// keys against the range's bounds: SetBounds is called, on the loop, when
// the replica starts and whenever its bounds change (split, snapshot).
type Bounder interface {
	SetBounds(d rangedesc.Range)
}

// Contains reports whether the range serves key: it is inside the
// replica's current bounds (rangedesc.Range.ContainsKey) and the range is not
// frozen for a merge (whose keys are about to move).
func (r *Replica) Contains(key []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.mu.merge.Frozen() && r.mu.desc.ContainsKey(key)
}

// LastSplit returns the new range of the latest split this replica
// applied (it persists with the range; a snapshot does not carry it), so
// that a split whose record in the range table was lost can be recorded
// again.
func (r *Replica) LastSplit() (rangedesc.Range, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.lastSplit.Clone(), r.mu.lastSplit.ID != 0
}

// encodeSplit frames a split-off range's descriptor: id, bounds, voters.
func encodeSplit(d rangedesc.Range) []byte {
	b := binary.BigEndian.AppendUint64(nil, d.ID)
	b = binary.AppendUvarint(b, uint64(len(d.Replicas)))
	for _, p := range d.Replicas {
		b = binary.BigEndian.AppendUint64(b, p)
	}
	return encodeValue(appendBounds(b, d.Start, d.End))
}

func decodeSplit(v []byte) (rangedesc.Range, error) {
	p, err := decodeValue(v)
	bad := fmt.Errorf("%w: malformed last split", ErrCorrupt)
	if err != nil {
		return rangedesc.Range{}, err
	}
	if len(p) < 9 {
		return rangedesc.Range{}, bad
	}
	d := rangedesc.Range{ID: binary.BigEndian.Uint64(p)}
	n, k := binary.Uvarint(p[8:])
	if k <= 0 || n > uint64(len(p)-8-k)/8 {
		return rangedesc.Range{}, bad
	}
	p = p[8+k:]
	for range n {
		d.Replicas = append(d.Replicas, binary.BigEndian.Uint64(p))
		p = p[8:]
	}
	if d.Start, d.End, err = parseBounds(p); err != nil {
		return rangedesc.Range{}, err
	}
	return d, nil
}

// ContainsSpan reports whether the range serves all of [start, end) (nil
// end: unbounded): it lies inside the replica's current bounds, and the
// range is not frozen for a merge.
func (r *Replica) ContainsSpan(start, end []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &r.mu.desc
	if r.mu.merge.Frozen() || bytes.Compare(start, d.Start) < 0 {
		return false
	}
	return d.End == nil || (end != nil && bytes.Compare(end, d.End) <= 0)
}

// bounded reports whether d has key bounds.
func bounded(d *rangedesc.Range) bool { return d.Start != nil || d.End != nil }

// overlaps reports whether [s1, e1) and [s2, e2) share a key (nil ends are
// unbounded).
func overlaps(s1, e1, s2, e2 []byte) bool {
	return (e1 == nil || bytes.Compare(s2, e1) < 0) && (e2 == nil || bytes.Compare(s1, e2) < 0)
}

// Split splits the range at key into [Start, key), which keeps this
// range's id, and [key, End), a new range with id rightID on the same
// voters. It proposes the split on this replica, which must lead, and
// returns the new range's descriptor once the split applied here (the new
// range's replica on this node then exists). It returns ErrSplitRefused if
// the split is not possible, and the errors of Propose.
func (r *Replica) Split(ctx context.Context, key []byte, rightID uint64) (rangedesc.Range, error) {
	if r.s.opts.NewStateMachine == nil {
		return rangedesc.Range{}, fmt.Errorf("%w: the store has no NewStateMachine", ErrSplitRefused)
	}
	cmd := binary.BigEndian.AppendUint64(nil, rightID)
	return r.proposeDescriptor(ctx, cmdSplit, append(cmd, key...))
}

// proposeDescriptor proposes an entry that applies as a rangedesc.Range (a
// split or a merge) or an error value, and returns that.
func (r *Replica) proposeDescriptor(ctx context.Context, kind byte, cmd []byte) (rangedesc.Range, error) {
	v, err := r.proposeKind(ctx, kind, cmd, nil)
	if err != nil {
		return rangedesc.Range{}, err
	}
	switch v := v.(type) {
	case rangedesc.Range:
		return v, nil
	case error:
		return rangedesc.Range{}, v
	}
	return rangedesc.Range{}, fmt.Errorf("replica: range %d: entry of kind %d applied as %T", r.rangeID, kind, v)
}

// pendingSplit is a split applied in an apply batch, finished once the
// batch has committed (finishSplit).
type pendingSplit struct {
	left, right rangedesc.Range
	skip        bool // an initialized replica of the new range is here already
	campaign    bool
}

// hasState reports whether the replica has raft state (is a member of a
// configuration), as opposed to an uninitialized one waiting for its
// first snapshot. Loop-owned.
func (r *Replica) hasState() bool {
	cs := r.st.cs
	return len(cs.GetVoters()) > 0 || len(cs.GetLearners()) > 0 || len(cs.GetLearnersNext()) > 0
}

// applySplit applies a split entry into b and returns the new range's
// rangedesc.Range, or an error value if the split is refused (then b is
// untouched). The checks read only replicated state, so every replica
// decides the same. A returned error is fatal: b must not commit.
// Loop-owned.
func (r *Replica) applySplit(b *pebble.Batch, cmd []byte, out *[]*pendingSplit) (any, error) {
	if len(cmd) < 9 {
		return fmt.Errorf("%w: split command of %d bytes", ErrBadSplit, len(cmd)), nil
	}
	rightID, key := binary.BigEndian.Uint64(cmd), slices.Clone(cmd[8:])
	d := r.Descriptor()
	cs := r.st.cs
	switch {
	case !bounded(&d):
		return fmt.Errorf("%w: range %d has no key bounds", ErrSplitRefused, r.rangeID), nil
	case bytes.Compare(key, d.Start) <= 0 || (d.End != nil && bytes.Compare(key, d.End) >= 0):
		return fmt.Errorf("%w: range %d: key %x is not strictly inside [%x, %x)", ErrSplitRefused, r.rangeID, key, d.Start, d.End), nil
	case rightID == 0 || rightID == r.rangeID:
		return fmt.Errorf("%w: range %d: bad new range id %d", ErrSplitRefused, r.rangeID, rightID), nil
	case r.membershipChanging():
		return fmt.Errorf("%w: range %d: its membership is changing", ErrSplitRefused, r.rangeID), nil
	case r.st.merge.Phase == MergePending:
		return fmt.Errorf("%w: range %d: its merge of range %d is pending", ErrSplitRefused, r.rangeID, r.st.merge.Right), nil
	}
	left := d.Clone()
	left.End = key
	right := rangedesc.Range{ID: rightID, Start: slices.Clone(key), End: slices.Clone(d.End), Replicas: slices.Clone(cs.GetVoters())}
	sp := &pendingSplit{left: left, right: right, campaign: r.isLeader}
	r.s.mu.Lock()
	ex := r.s.mu.replicas[rightID]
	r.s.mu.Unlock()
	if ex != nil {
		// Its hard state (a vote) may still be on its way to the disk:
		// write it before the split's state goes over it.
		if err := r.s.flush(); err != nil {
			return nil, err
		}
	}
	err := b.Set(stateKey(r.st.prefix, suffixBounds), encodeBounds(left.Start, left.End), nil)
	if err == nil {
		err = b.Set(stateKey(r.st.prefix, suffixSplit), encodeSplit(right), nil)
	}
	switch {
	case ex != nil && ex.hasState():
		// It has state from a snapshot of the new range: newer than what
		// the split would write.
		sp.skip = true
	case err == nil:
		prefix := rangePrefix(rightID)
		err = b.DeleteRange(prefix, keys.PrefixEnd(prefix), nil)
		if err == nil {
			// The log's entries under the id too (there are none unless
			// an earlier replica of it left them): the new group starts
			// with an empty log.
			err = r.s.dropLog(rightID)
		}
		var hs *raftpb.HardState
		if ex != nil {
			hs = ex.st.hs
		}
		if err == nil {
			tmp := &raftStorage{prefix: prefix}
			err = tmp.bootstrap(b, right.Replicas, right.Start, right.End, hs)
		}
	}
	if rk, ok := r.sm.(Rekeyer); ok && err == nil {
		err = rk.RekeySplit(b, left, right, !sp.skip)
	}
	if err != nil {
		return nil, fmt.Errorf("write the split into the apply batch: %w", err)
	}
	r.mu.Lock()
	r.mu.desc.Start, r.mu.desc.End = left.Start, left.End
	r.mu.lastSplit = right.Clone()
	r.mu.Unlock()
	if bd, ok := r.sm.(Bounder); ok {
		bd.SetBounds(left)
	}
	*out = append(*out, sp)
	return right, nil
}

// finishSplit starts the new range's replica once the batch holding the
// split has committed: a new one, or the uninitialized one already here,
// initialized in place. Loop-owned.
func (s *Store) finishSplit(left *Replica, sp *pendingSplit) error {
	defer func() {
		if s.opts.OnSplit != nil {
			s.opts.OnSplit(sp.left, sp.right)
		}
	}()
	if sp.skip {
		return nil
	}
	st, found, err := loadRaftStorage(s.db, s.logDB, sp.right.ID)
	if err != nil || !found {
		return fmt.Errorf("replica: range %d: load the state of its split-off range %d: found %v, %v", left.rangeID, sp.right.ID, found, err)
	}
	s.mu.Lock()
	ex := s.mu.replicas[sp.right.ID]
	s.mu.Unlock()
	if ex == nil {
		if s.opts.NewStateMachine == nil {
			return fmt.Errorf("replica: range %d split, but the store has no NewStateMachine for range %d", left.rangeID, sp.right.ID)
		}
		r, err := newReplicaWith(s, sp.right, s.opts.NewStateMachine(sp.right), st, sp.campaign, false)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if ex = s.mu.replicas[r.rangeID]; ex == nil {
			s.insertLocked(r)
		}
		s.mu.Unlock()
		if ex == nil {
			s.log.Info("split a range", "range", left.rangeID, "new", r.rangeID, "key", fmt.Sprintf("%x", sp.right.Start), "campaign", sp.campaign)
			s.signal()
			return nil
		}
	}
	// Already here (seen by applySplit, or added by AddReplica since): an
	// uninitialized one is initialized in place; one that loaded the state
	// this split just wrote is that state already.
	if ex.hasState() {
		return nil
	}
	if err := ex.initRaft(sp.right, st, sp.campaign, false); err != nil {
		return err
	}
	s.log.Info("split initialized a waiting replica", "range", left.rangeID, "new", sp.right.ID)
	s.signal()
	return nil
}

// snapshotFits checks, on the loop, that the received snapshot p does
// not overlap the bounds of another replica here that has state: that
// replica is behind a split, and its log replay would write over the
// snapshot's keys. The leader retries the snapshot later.
func (s *Store) snapshotFits(reps map[uint64]*Replica, p *pendingSnap, accepted []*pendingSnap) error {
	if !p.bounded() {
		return nil
	}
	for _, q := range accepted {
		if q.rangeID != p.rangeID && q.bounded() && overlaps(q.start, q.end, p.start, p.end) {
			return fmt.Errorf("%w: range %d: its bounds overlap a snapshot of range %d taken in the same cycle", ErrSnapshotDeclined, p.rangeID, q.rangeID)
		}
	}
	for _, r := range reps {
		if r.rangeID == p.rangeID || !r.hasState() || r.st.merge.FrozenFor == p.rangeID {
			// (One frozen for a merge into the snapshot's range is
			// subsumed by it: see subsume.)
			continue
		}
		d := r.Descriptor()
		if bounded(&d) && overlaps(d.Start, d.End, p.start, p.end) {
			return fmt.Errorf("%w: range %d: its bounds overlap range %d here, which has not applied a split yet", ErrSnapshotDeclined, p.rangeID, r.rangeID)
		}
	}
	return nil
}
