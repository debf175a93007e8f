package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// Merges.
//
// A range L absorbs its right-hand neighbour R when both live on the same
// voters. As with a split no data moves (every range of a node shares its
// keyspace): L's bounds grow over R's keys and R's raft group goes. What
// must not happen is a write to R that some replica of L does not see,
// or two ranges serving one key. The merge is four entries, driven by a
// coordinator (L's leaseholder), each idempotent:
//
//  1. begin (L's log): L records the merge as pending, under a random
//     token. From here only a commit or an abort of that token ends it, and
//     both are entries in L's log, so their order decides, the same on
//     every replica.
//  2. freeze (R's log): R refuses every later command, split and
//     membership change, and serves nothing (Contains is false), so its
//     state is final. The coordinator waits until every voter of R reports
//     the freeze applied (MergeState); the freeze is applied in a synced
//     batch, so it survives any crash after that.
//  3. commit (L's log, with R's descriptor as the frozen replicas report
//     it): where L is still pending with that token, ends where R starts
//     and has exactly R's voters (checked at apply, from replicated state
//     only, so every replica decides the same), L takes R's bounds and the
//     same batch deletes R's raft state and leaves a tombstone (R is never
//     bootstrapped again here). Every replica of L has a replica of R
//     (same voters) that applied the freeze before the commit was even
//     proposed, so the keys L takes over are R's final state everywhere.
//  4. abort (L's log) instead of a commit, when R cannot be frozen or a
//     voter of R does not answer: only once the abort applied may R be
//     thawed (a thaw entry in R's log names the token), and the record in
//     L is cleared after the thaw.
//
// A replica of L that is too far behind gets a snapshot of the merged
// range; a frozen replica of R on that node, whose keys the snapshot
// covers, is subsumed by it (its raft state goes with the install).
//
// The leaseholder of a frozen range cannot serve reads from a lease that
// outlives the freeze: its lease is bounded by raft's election timeout and
// every later leader has applied the freeze before it serves.

var (
	// ErrRangeFrozen is the result of a command proposed to a range that
	// is frozen for a merge: nothing was done; the range's keys are about
	// to move to its left-hand neighbour (or to be served again).
	ErrRangeFrozen = errors.New("replica: range frozen for a merge")
	// ErrMergeRefused is the result of a merge step that does not fit the
	// ranges' replicated state: nothing changed.
	ErrMergeRefused = errors.New("replica: merge refused")
	// ErrRangeMerged is returned by AddReplica for a range that was merged
	// into another on this node.
	ErrRangeMerged = errors.New("replica: range merged away")
)

// MergePhase is where a left-hand range's latest merge stands.
type MergePhase uint8

const (
	MergeNone    MergePhase = iota
	MergePending            // begun: a commit or an abort ends it
	MergeAborted            // aborted: the right-hand range may be thawed
	MergeDone               // committed (kept so that the range table can follow)
)

// MergeState is a range's part in merges, replicated with the range.
type MergeState struct {
	// FrozenFor is, on a right-hand range, the range it is frozen for
	// (0: not frozen), and FrozenToken the merge's token.
	FrozenFor, FrozenToken uint64
	// Right, Token and Phase are, on a left-hand range, its latest merge.
	Right, Token uint64
	Phase        MergePhase
	// Thawed is, on a right-hand range, the token of the last thaw: a
	// freeze under it that arrives late (its proposal was still on its way
	// when the merge was aborted) is refused.
	Thawed uint64
}

// Frozen reports whether the range is frozen for a merge.
func (m MergeState) Frozen() bool { return m.FrozenFor != 0 }

func (m MergeState) isZero() bool { return m == MergeState{} }

// mergeStateSize is the unframed size of a MergeState: six BE64s.
const mergeStateSize = 6 * 8

func encodeMerge(m MergeState) []byte { return encodeValue(appendMerge(nil, m)) }

func appendMerge(b []byte, m MergeState) []byte {
	for _, x := range []uint64{m.FrozenFor, m.FrozenToken, m.Right, m.Token, uint64(m.Phase), m.Thawed} {
		b = binary.BigEndian.AppendUint64(b, x)
	}
	return b
}

func decodeMerge(v []byte) (MergeState, error) {
	p, err := decodeValue(v)
	if err != nil {
		return MergeState{}, err
	}
	return parseMerge(p)
}

// parseMerge decodes what appendMerge wrote, all of p.
func parseMerge(p []byte) (MergeState, error) {
	if len(p) != mergeStateSize {
		return MergeState{}, fmt.Errorf("%w: merge state of %d bytes", ErrCorrupt, len(p))
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(p[8*i:]) }
	if u(4) > uint64(MergeDone) {
		return MergeState{}, fmt.Errorf("%w: merge phase %d", ErrCorrupt, u(4))
	}
	return MergeState{FrozenFor: u(0), FrozenToken: u(1), Right: u(2), Token: u(3), Phase: MergePhase(u(4)), Thawed: u(5)}, nil
}

// Merge steps inside a cmdMerge entry: op byte, then BE64 arguments.
const (
	mergeBegin  = 'b' // right, token
	mergeFreeze = 'f' // left, token
	mergeThaw   = 't' // token
	mergeAbort  = 'a' // token
	mergeClear  = 'c' // token
	mergeCommit = 'm' // token, then the right-hand range (encodeSplit)
)

// MergeState returns the range's merge state as of its applied index.
func (r *Replica) MergeState() MergeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.merge
}

// BeginMerge records, in this range (the left-hand side, whose replica
// here must lead), a pending merge of range right under token. It is a
// no-op if that merge is pending already; ErrMergeRefused if another is
// pending or aborted and not cleared, or the range is frozen, unbounded
// above, or changing membership.
func (r *Replica) BeginMerge(ctx context.Context, right, token uint64) error {
	_, err := r.mergeStep(ctx, mergeBegin, right, token)
	return err
}

// Freeze freezes this range (the right-hand side) for a merge into left
// under token: it is a no-op if it is frozen so already, ErrMergeRefused
// if it is frozen for another merge, pending a merge of its own, or
// changing membership.
func (r *Replica) Freeze(ctx context.Context, left, token uint64) error {
	_, err := r.mergeStep(ctx, mergeFreeze, left, token)
	return err
}

// Thaw lifts a freeze under token; a no-op if the range is not frozen
// under it. Call it only after AbortMerge of token succeeded on the
// left-hand range.
func (r *Replica) Thaw(ctx context.Context, token uint64) error {
	_, err := r.mergeStep(ctx, mergeThaw, token)
	return err
}

// AbortMerge aborts this range's pending merge under token. It returns
// ErrMergeRefused if that merge is not pending (committed, or aborted
// already): then the right-hand range must not be thawed by this caller.
func (r *Replica) AbortMerge(ctx context.Context, token uint64) error {
	_, err := r.mergeStep(ctx, mergeAbort, token)
	return err
}

// ClearMerge forgets an aborted merge under token once its right-hand
// range is thawed; a no-op otherwise.
func (r *Replica) ClearMerge(ctx context.Context, token uint64) error {
	_, err := r.mergeStep(ctx, mergeClear, token)
	return err
}

// CommitMerge merges right, frozen under token on all of its voters, into
// this range, whose merge under token is pending, and returns this
// range's new descriptor. right must be the right-hand range's descriptor
// as its frozen replicas have it (bounds and voters).
func (r *Replica) CommitMerge(ctx context.Context, token uint64, right rangedesc.Range) (rangedesc.Range, error) {
	return r.proposeDescriptor(ctx, cmdMerge, append(binary.BigEndian.AppendUint64([]byte{mergeCommit}, token), encodeSplit(right)...))
}

func (r *Replica) mergeStep(ctx context.Context, op byte, args ...uint64) (any, error) {
	cmd := []byte{op}
	for _, a := range args {
		cmd = binary.BigEndian.AppendUint64(cmd, a)
	}
	v, err := r.proposeKind(ctx, cmdMerge, cmd, nil)
	if err != nil {
		return nil, err
	}
	if e, ok := v.(error); ok {
		return nil, e
	}
	return v, nil
}

// pendingMerge is a merge committed in an apply batch, finished once the
// batch has committed (finishMerge).
type pendingMerge struct {
	left, right rangedesc.Range
}

// membershipChanging reports whether the group is joint or has learners.
// Loop-owned.
func (r *Replica) membershipChanging() bool {
	cs := r.st.cs
	return len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearners()) > 0 || len(cs.GetLearnersNext()) > 0
}

// applyMerge applies a merge step into b and returns its result: nil, a
// rangedesc.Range (commit), or an error value (refused: b untouched). The
// checks read only replicated state, so every replica decides the same.
// A returned error is fatal: b must not commit. Loop-owned.
func (r *Replica) applyMerge(b *pebble.Batch, cmd []byte, out *[]*pendingMerge) (any, error) {
	bad := func() (any, error) {
		return fmt.Errorf("%w: malformed merge command of %d bytes", ErrCorrupt, len(cmd)), nil
	}
	if len(cmd) < 9 {
		return bad()
	}
	op, arg := cmd[0], binary.BigEndian.Uint64(cmd[1:])
	refuse := func(format string, a ...any) (any, error) {
		return fmt.Errorf("%w: range %d: %s", ErrMergeRefused, r.rangeID, fmt.Sprintf(format, a...)), nil
	}
	ms := r.st.merge
	d := r.Descriptor()
	var val any
	switch op {
	case mergeBegin, mergeFreeze:
		if len(cmd) != 17 {
			return bad()
		}
		token := binary.BigEndian.Uint64(cmd[9:])
		switch {
		case op == mergeBegin && ms.Phase == MergePending && ms.Right == arg && ms.Token == token,
			op == mergeFreeze && ms.FrozenFor == arg && ms.FrozenToken == token:
			return nil, nil // done already
		case token == 0 || arg == 0 || arg == r.rangeID:
			return refuse("bad merge (range %d, token %x)", arg, token)
		case op == mergeFreeze && token == ms.Thawed:
			return refuse("merge %x was aborted and the range thawed", token)
		case ms.Frozen():
			return refuse("it is frozen for a merge into range %d", ms.FrozenFor)
		case ms.Phase == MergePending || ms.Phase == MergeAborted:
			return refuse("its merge of range %d is %s", ms.Right, map[MergePhase]string{MergePending: "pending", MergeAborted: "aborted and not cleared"}[ms.Phase])
		case !bounded(&d) || (op == mergeBegin && d.End == nil):
			return refuse("it has no right-hand neighbour")
		case r.membershipChanging():
			return refuse("its membership is changing")
		}
		if op == mergeBegin {
			ms.Right, ms.Token, ms.Phase = arg, token, MergePending
		} else {
			ms.FrozenFor, ms.FrozenToken = arg, token
		}
	case mergeThaw:
		if ms.FrozenToken == arg {
			ms.FrozenFor, ms.FrozenToken = 0, 0
		}
		ms.Thawed = arg
	case mergeAbort:
		if ms.Phase != MergePending || ms.Token != arg {
			return refuse("merge %x is not pending", arg)
		}
		ms.Phase = MergeAborted
	case mergeClear:
		if ms.Phase == MergeAborted && ms.Token == arg {
			ms.Right, ms.Token, ms.Phase = 0, 0, MergeNone
		}
	case mergeCommit:
		right, err := decodeSplit(cmd[9:])
		if err != nil {
			return bad()
		}
		switch {
		case ms.Phase != MergePending || ms.Token != arg || ms.Right != right.ID:
			return refuse("merge %x of range %d is not pending", arg, right.ID)
		case d.End == nil || !bytes.Equal(d.End, right.Start):
			return refuse("it ends at %x, range %d starts at %x", d.End, right.ID, right.Start)
		case r.membershipChanging() || !placement.SameMembers(r.st.cs.GetVoters(), right.Replicas):
			return refuse("its voters %v are not range %d's %v", r.st.cs.GetVoters(), right.ID, right.Replicas)
		}
		if rr := r.s.replicaByID(right.ID); rr != nil && rr.st.merge.FrozenToken != arg {
			// Cannot happen while the protocol holds: every voter of the
			// right-hand range applied the freeze before the commit was
			// proposed (a node that replays the commit after a restart
			// has no replica of it open: the table no longer lists it).
			r.s.log.Error("merge applied while the right-hand range here is not frozen for it", "range", r.rangeID, "right", right.ID)
		}
		// The right-hand range's raft state goes: nothing of it may
		// still be on its way to the disk.
		if err := r.s.flush(); err != nil {
			return nil, err
		}
		merged := d.Clone()
		merged.End = slices.Clone(right.End)
		prefix := rangePrefix(right.ID)
		err = errors.Join(
			b.Set(stateKey(r.st.prefix, suffixBounds), encodeBounds(merged.Start, merged.End), nil),
			b.DeleteRange(prefix, keys.PrefixEnd(prefix), nil),
			b.Set(stateKey(prefix, suffixTombstone), encodeUint64s(r.rangeID), nil),
		)
		if rk, ok := r.sm.(Rekeyer); ok && err == nil {
			err = rk.RekeyMerge(b, merged, right)
		}
		if err != nil {
			return nil, fmt.Errorf("write the merge into the apply batch: %w", err)
		}
		ms.Phase = MergeDone
		r.mu.Lock()
		r.mu.desc.End = merged.End
		r.mu.Unlock()
		if bd, ok := r.sm.(Bounder); ok {
			bd.SetBounds(merged)
		}
		*out = append(*out, &pendingMerge{left: merged, right: right})
		val = merged
	default:
		return bad()
	}
	if err := b.Set(stateKey(r.st.prefix, suffixMerge), encodeMerge(ms), nil); err != nil {
		return nil, fmt.Errorf("write the merge state into the apply batch: %w", err)
	}
	r.st.merge = ms
	return val, nil
}

// replicaByID returns the replica of range id here, or nil.
func (s *Store) replicaByID(id uint64) *Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.replicas[id]
}

// finishMerge stops the merged-away replica once the batch holding the
// merge has committed (its raft state is gone already). Loop-owned.
func (s *Store) finishMerge(m *pendingMerge) {
	s.dropMerged(m.right.ID)
	s.log.Info("merged a range", "range", m.left.ID, "merged", m.right.ID, "end", fmt.Sprintf("%x", m.left.End))
	if s.opts.OnMerge != nil {
		s.opts.OnMerge(m.left, m.right)
	}
}

// dropMerged removes the replica of range id, merged into another here,
// from the loop, without touching any data: the keys are the other
// range's now. Loop-owned.
func (s *Store) dropMerged(id uint64) {
	s.unlink(id, fmt.Errorf("%w: range %d was merged into its left-hand neighbour", ErrRangeFrozen, id))
	if err := s.dropLog(id); err != nil {
		// Swept at the next open (its state is a tombstone).
		s.log.Warn("could not drop a merged range's raft log", "range", id, "err", err)
	}
}

// subsumable returns the replicas here that are frozen for a merge into
// range left and that the bounds [start, end) of left's snapshot being
// installed cover: the snapshot holds their keys, so the merge they wait
// for is done. Loop-owned.
func (s *Store) subsumable(left uint64, start, end []byte) []uint64 {
	s.mu.Lock()
	reps := s.mu.replicas
	s.mu.Unlock()
	var gone []uint64
	for id, r := range reps {
		d := r.Descriptor()
		if id != left && r.st.merge.FrozenFor == left && overlaps(d.Start, d.End, start, end) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// subsumeSSTs are the SSTs that drop range id's raft state and leave its
// tombstone (merged into left), and drop its id-keyed state (one SST per
// span of Options.IDSpans: the snapshot's SSTs must not overlap); the
// snapshot of left that subsumes it ingests them with its own.
func (s *Store) subsumeSSTs(id, left uint64, wo sstable.WriterOptions) ([][]byte, error) {
	w := &memWritable{}
	sw := sstable.NewWriter(w, wo)
	prefix := rangePrefix(id)
	err := errors.Join(sw.DeleteRange(prefix, keys.PrefixEnd(prefix)),
		sw.Set(stateKey(prefix, suffixTombstone), encodeUint64s(left)), sw.Close())
	ssts := [][]byte{w.buf}
	for _, x := range s.idSpans(id) {
		if err != nil {
			break
		}
		w := &memWritable{}
		sw := sstable.NewWriter(w, wo)
		err = errors.Join(sw.DeleteRange(x.Start, x.End), sw.Close())
		ssts = append(ssts, w.buf)
	}
	if err != nil {
		return nil, fmt.Errorf("replica: SST dropping range %d: %w", id, err)
	}
	return ssts, nil
}

// idSpans returns Options.IDSpans(id), or none.
func (s *Store) idSpans(id uint64) []Span {
	if s.opts.IDSpans == nil {
		return nil
	}
	return s.opts.IDSpans(id)
}

// subsumed unlinks the replicas a snapshot of left subsumed (their state
// went in its ingestion). Loop-owned.
func (s *Store) subsumed(left uint64, start, end []byte, gone []uint64) {
	for _, id := range gone {
		s.dropMerged(id)
		s.log.Info("a snapshot subsumed a frozen range", "range", left, "subsumed", id)
		if s.opts.OnMerge != nil {
			s.opts.OnMerge(rangedesc.Range{ID: left, Start: start, End: end}, rangedesc.Range{ID: id})
		}
	}
}

// encodeSnapData frames what a snapshot carries besides the SSTs: the
// range's bounds (if it has any) and its merge state.
func encodeSnapData(d rangedesc.Range, ms MergeState) []byte {
	var bd []byte
	if bounded(&d) {
		bd = appendBounds(nil, d.Start, d.End)
	}
	p := binary.AppendUvarint(nil, uint64(len(bd)))
	p = append(p, bd...)
	return encodeValue(appendMerge(p, ms))
}

func decodeSnapData(v []byte) (start, end []byte, hasBounds bool, ms MergeState, err error) {
	p, err := decodeValue(v)
	if err != nil {
		return nil, nil, false, ms, err
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, false, ms, fmt.Errorf("%w: malformed snapshot data", ErrCorrupt)
	}
	bd, rest := p[k:k+int(n)], p[k+int(n):]
	if len(bd) > 0 {
		if start, end, err = parseBounds(bd); err != nil {
			return nil, nil, false, ms, err
		}
		hasBounds = true
	}
	ms, err = parseMerge(rest)
	return start, end, hasBounds, ms, err
}

// covers reports whether range a's bounds hold all of b's.
func covers(a, b rangedesc.Range) bool {
	return bytes.Compare(a.Start, b.Start) <= 0 && (a.End == nil || b.End != nil && bytes.Compare(b.End, a.End) <= 0)
}

// FrozenRanges returns the ids of the ranges whose replicas here are
// frozen for a merge.
func (s *Store) FrozenRanges() []uint64 {
	s.mu.Lock()
	reps := s.mu.replicas
	s.mu.Unlock()
	var ids []uint64
	for id, r := range reps {
		if r.MergeState().Frozen() {
			ids = append(ids, id)
		}
	}
	return ids
}

// DropFrozen drops the replica of range id, frozen for a merge that was
// committed and recorded (the caller knows: the range table no longer
// lists the range) but that this node will not apply through it: its
// left-hand replica here is gone, or was caught up by a snapshot that
// did not cover it. Its raft state goes, with a tombstone; its keys stay
// (they are final, and whichever range holds them now replaces them with
// its snapshot, or applies the merge over them), but its id-keyed state
// (Options.IDSpans) goes. ErrMergeRefused if the
// replica is not frozen.
func (s *Store) DropFrozen(ctx context.Context, id uint64) error {
	return s.onLoop(ctx, func() error {
		r := s.replicaByID(id)
		if r == nil || !r.st.merge.Frozen() {
			return fmt.Errorf("%w: range %d is not frozen here", ErrMergeRefused, id)
		}
		if err := s.flush(); err != nil {
			return err
		}
		b := s.db.NewBatch()
		defer b.Close()
		prefix := rangePrefix(id)
		err := errors.Join(b.DeleteRange(prefix, keys.PrefixEnd(prefix), nil),
			b.Set(stateKey(prefix, suffixTombstone), encodeUint64s(r.st.merge.FrozenFor), nil))
		// Its id-keyed state goes unless the range it merged into still
		// has a replica here that may apply the merge (and move that
		// state under its own id): left over, a dead id's span is
		// harmless; deleted too early, the merged range loses it.
		if lr := s.replicaByID(r.st.merge.FrozenFor); lr == nil || covers(lr.Descriptor(), r.Descriptor()) {
			for _, x := range s.idSpans(id) {
				err = errors.Join(err, b.DeleteRange(x.Start, x.End, nil))
			}
		}
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		if err == nil {
			s.dropMerged(id)
			s.log.Info("dropped a frozen replica whose merge is recorded", "range", id, "into", r.st.merge.FrozenFor)
		}
		return err
	})
}
