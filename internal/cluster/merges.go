package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// Range merges.
//
// The leaseholder of a range L checks it every second, after splits
// (repairRange): L absorbs its right-hand neighbour R in the space's table
// when both live on the same voters, their versions together take fewer
// than Config.MergeSize bytes, and both have served under a quarter of
// Config.SplitLoad for Config.MergeAfter (R's leaseholder reports its own
// figures). The merge itself is replica.BeginMerge on L, replica.Freeze on
// R's leader, a wait until every replica of R reports the freeze, then
// replica.CommitMerge on L (see internal/replica/merge.go for why that is
// safe); a step that fails is retried by the next check from L's merge
// state, and one that cannot finish within mergeWait is aborted (and R
// thawed).
//
// The rebalancer places each range by its own id, so in a cluster larger
// than the replication factor neighbours are often on different voters.
// Then L's leaseholder, finding both small and quiet, asks R's replicas
// to colocate R with L (mergeOpColocate, naming L's voters): for
// colocateFor from the last ask, R's rebalancer takes L's voters as R's
// placement instead of R's own (repairRange: learner, promotion with the
// voter not wanted removed), one step at a time like any rebalancing, and
// only while every node is calm; R's leaseholder passes the ask on to
// R's learners, so whichever replica leads R next has it. L asks again at
// every check while the merge is wanted; once R's voters are L's, the
// merge goes as above. If L stops asking (it grew, got busy, or its lease
// moved) the ask lapses and R goes back to its own placement.
//
// While R is frozen its requests wait (CodeRangeMoved inside the node:
// retryMoved); once the merge applied on a node, R's entry leaves that
// node's table (onMerge), so they route to L. The leaseholder then records
// the merge in the range table (Catalog.MergeRange), and a leaseholder of
// L that finds its replica's bounds wider than the table records it later.

// mergeWait bounds how long a merge waits for every replica of the
// right-hand range to report its freeze before it is aborted.
const mergeWait = 5 * time.Second

// Merge steps of the cairn.Range "Merge" method (after the range id).
const (
	mergeOpStatus = 's' // -> mergeStatus, without its size (0)
	mergeOpSized  = 'S' // -> mergeStatus with the range's size
	mergeOpFreeze = 'f' // left BE64, token BE64
	mergeOpThaw   = 't' // token BE64
	// mergeOpColocate asks to move the range's replicas to the nodes
	// listed: how long the ask holds (ns BE64, at most colocateFor), then
	// the nodes (BE64 each).
	mergeOpColocate = 'c'
)

// colocateFor is how long an ask to colocate a range holds after it came:
// past the left-hand range's next ask even when the right-hand range's
// lease moved meanwhile (its new holder reports it quiet only after
// MergeAfter, and the left-hand range asks only a quiet range).
func (n *Node) colocateFor() time.Duration { return 2*n.cfg.MergeAfter + 10*time.Second }

// colocation is an ask to place a range's voters on the nodes of its
// left-hand neighbour, until the given time.
type colocation struct {
	voters []uint64
	until  time.Time
}

// colocation returns the voters the range was asked to colocate on, if
// the ask still holds at now.
func (e *rangeExt) colocation(now time.Time) []uint64 {
	if c := e.colocate.Load(); c != nil && now.Before(c.until) {
		return c.voters
	}
	return nil
}

// mergeStatus is what a replica of a merge's right-hand range reports.
type mergeStatus struct {
	node     uint64
	merge    replica.MergeState
	leader   bool
	bytes    uint64        // its versions' size (up to MergeSize)
	quiet    time.Duration // how long it has been quiet, as leaseholder (0 elsewhere)
	desc     rangedesc.Range
	hasState bool
}

// handleMerge serves the "Merge" method: a merge coordinator's status
// query, freeze or thaw of the local replica of r.
func (n *Node) handleMerge(ctx context.Context, r *rng, req []byte) ([]byte, error) {
	rep := r.Replica()
	if len(req) < 1 {
		return nil, object.Errorf(object.Malformed, "empty merge request")
	}
	op, args := req[0], req[1:]
	switch {
	case (op == mergeOpStatus || op == mergeOpSized) && len(args) == 0:
		d := rep.Descriptor()
		st := rep.Status()
		var size uint64
		if op == mergeOpSized {
			// (Only when a merge is being considered: the coordinator
			// polls the plain status while it waits for a freeze.)
			var err error
			if size, err = n.rangeSize(r, st.Applied, d, max(n.cfg.MergeSize, 1)); err != nil {
				return nil, err
			}
		}
		var quiet time.Duration
		if rep.Leads() {
			quiet = ext(r).load.quietFor(n.cfg.Clock())
		}
		ms := rep.MergeState()
		b := binary.BigEndian.AppendUint64(nil, ms.FrozenFor)
		b = binary.BigEndian.AppendUint64(b, ms.FrozenToken)
		b = append(b, boolByte(st.IsLeader), boolByte(len(st.Voters) > 0), byte(ms.Phase))
		b = binary.BigEndian.AppendUint64(b, size)
		b = binary.BigEndian.AppendUint64(b, uint64(quiet))
		b = rangeclient.AppendBytes(b, d.Start)
		b = rangeclient.AppendOptBytes(b, d.End)
		b = binary.BigEndian.AppendUint32(b, uint32(len(st.Voters)))
		for _, v := range st.Voters {
			b = binary.BigEndian.AppendUint64(b, v)
		}
		return b, nil
	case op == mergeOpFreeze && len(args) == 16:
		return nil, mergeErr(rep.Freeze(ctx, binary.BigEndian.Uint64(args), binary.BigEndian.Uint64(args[8:])))
	case op == mergeOpThaw && len(args) == 8:
		return nil, mergeErr(rep.Thaw(ctx, binary.BigEndian.Uint64(args)))
	case op == mergeOpColocate && len(args) > 8 && len(args)%8 == 0 && len(args) <= 8*(1+maxSpaceReplicas):
		hold := min(time.Duration(binary.BigEndian.Uint64(args)), n.colocateFor())
		var voters []uint64
		for b := args[8:]; len(b) > 0; b = b[8:] {
			voters = append(voters, binary.BigEndian.Uint64(b))
		}
		ext(r).colocate.Store(&colocation{voters: voters, until: n.cfg.Clock().Add(hold)})
		return nil, nil
	}
	return nil, object.Errorf(object.Malformed, "merge request %q of %d bytes", op, len(req))
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// mergeErr maps a merge step's error for the coordinator: a refusal is
// CodePreconditionFailed (the range's state does not allow it), not
// leading is CodeNotLeader.
func mergeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replica.ErrMergeRefused):
		return object.Errorf(object.PreconditionFailed, "%v", err)
	case errors.Is(err, replica.ErrNotLeader):
		return object.Errorf(object.NotLeader, "%v", err)
	}
	return err
}

// mergeCall runs a Merge request on node id's replica of range rangeID
// (here directly when id is this node).
func (n *Node) mergeCall(ctx context.Context, id, rangeID uint64, req []byte) ([]byte, error) {
	msg := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(req)), rangeID)
	msg = append(msg, req...)
	var b []byte
	var err error
	if id == n.id.NodeID {
		b, err = n.rangeMethods["Merge"](ctx, msg)
	} else {
		b, err = n.callNode(ctx, id, rangeclient.Service, "Merge", msg, rangeclient.CallTimeout)
	}
	if err != nil {
		return nil, err
	}
	payload, _, err := n.rc.DecodeReply(b)
	return payload, object.FromRange(err)
}

// mergeStatuses asks every node of voters for its replica of range
// rangeID (op: mergeOpStatus or mergeOpSized), and any voter those
// replicas name that was not asked; it returns the answers, and the nodes
// that did not answer.
func (n *Node) mergeStatuses(ctx context.Context, rangeID uint64, voters []uint64, op byte) (map[uint64]mergeStatus, []uint64) {
	out := map[uint64]mergeStatus{}
	var missing []uint64
	queue := slices.Clone(voters)
	asked := map[uint64]bool{}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if asked[id] {
			continue
		}
		asked[id] = true
		b, err := n.mergeCall(ctx, id, rangeID, []byte{op})
		if err != nil {
			missing = append(missing, id)
			continue
		}
		st, err := decodeMergeStatus(id, b)
		if err != nil {
			missing = append(missing, id)
			continue
		}
		out[id] = st
		queue = append(queue, st.desc.Replicas...)
	}
	return out, missing
}

func decodeMergeStatus(id uint64, b []byte) (mergeStatus, error) {
	d := rangeclient.NewDecoder(b)
	st := mergeStatus{node: id}
	st.merge.FrozenFor, st.merge.FrozenToken = d.U64(), d.U64()
	st.leader, st.hasState, st.merge.Phase = d.U8() == 1, d.U8() == 1, replica.MergePhase(d.U8())
	st.bytes, st.quiet = d.U64(), time.Duration(d.U64())
	st.desc.Start, st.desc.End = d.Bytes(), d.OptBytes()
	for range d.U32() {
		if d.Err() != nil {
			break
		}
		st.desc.Replicas = append(st.desc.Replicas, d.U64())
	}
	return st, d.Done()
}

// resumeMerge, for range r whose lease is here, goes on with its merge in
// progress (pending: to a commit or an abort; aborted: to the thaw), and
// thaws its right-hand neighbour if it finds the replica here frozen for
// r under a token r is not merging under (a freeze that arrived after
// its merge was aborted and thawed: no commit can ever match it). It
// reports whether it did anything.
func (n *Node) resumeMerge(ctx context.Context, s *space, r *rng, rep *replica.Replica) (bool, error) {
	ms := rep.MergeState()
	switch ms.Phase {
	case replica.MergePending:
		return true, n.startMerge(ctx, s, r, rep, ms.Right, ms.Token)
	case replica.MergeAborted:
		return true, n.thaw(ctx, s, rep, ms.Right, ms.Token)
	}
	d := rep.Descriptor()
	for _, x := range s.tab.Ranges() {
		if d.End == nil || !bytes.Equal(x.Desc().Start, d.End) {
			continue
		}
		if rr := x.Replica(); rr != nil {
			// (Not under r's own token: that one is pending or aborted,
			// handled above, or committed, and must never be thawed.)
			if fs := rr.MergeState(); fs.FrozenFor == d.ID && fs.FrozenToken != ms.Token {
				n.log.Info("thawing a neighbour frozen for a merge that is not pending", "range", d.ID, "right", x.Desc().ID, "token", fmt.Sprintf("%x", fs.FrozenToken))
				return true, n.sendThaw(ctx, s, rep, x.Desc().ID, fs.FrozenToken)
			}
		}
	}
	return false, nil
}

// maybeMerge, for range r whose lease is here (no membership change
// under way, no merge in progress), starts a merge with its right-hand
// neighbour if both are small and quiet.
func (n *Node) maybeMerge(ctx context.Context, s *space, r *rng, rep *replica.Replica) error {
	ms := rep.MergeState()
	if n.cfg.MergeSize <= 0 || ms.Frozen() || ms.Phase == replica.MergePending || ms.Phase == replica.MergeAborted ||
		ext(r).load.quietFor(n.cfg.Clock()) < n.cfg.MergeAfter {
		return nil
	}
	d := rep.Descriptor()
	if d.End == nil || !bytes.Equal(d.End, r.Desc().End) {
		return nil // the last range, or the table has not caught up
	}
	var right *rng
	for _, x := range s.tab.Ranges() {
		if bytes.Equal(x.Desc().Start, d.End) {
			right = x
		}
	}
	st := rep.Status()
	if right == nil || len(right.Desc().Learners) > 0 {
		return nil
	}
	size, err := n.rangeSize(r, st.Applied, d, n.cfg.MergeSize)
	if err != nil || size >= uint64(n.cfg.MergeSize) {
		return err
	}
	rd := *right.Desc()
	sts, missing := n.mergeStatuses(ctx, rd.ID, rd.Replicas, mergeOpSized)
	if len(missing) > 0 {
		return nil
	}
	for _, x := range sts {
		if x.leader {
			busy := x.merge.Frozen() || x.merge.Phase == replica.MergePending || x.merge.Phase == replica.MergeAborted
			if x.quiet < n.cfg.MergeAfter || size+x.bytes >= uint64(n.cfg.MergeSize) || busy ||
				!bytes.Equal(x.desc.Start, rd.Start) || !bytes.Equal(x.desc.End, rd.End) {
				return nil
			}
			if !placement.SameMembers(rd.Replicas, st.Voters) || !placement.SameMembers(x.desc.Replicas, st.Voters) {
				return n.askColocate(ctx, d.ID, rd.ID, slices.Collect(maps.Keys(sts)), st.Voters)
			}
			token := n.random() | 1
			if err := rep.BeginMerge(ctx, rd.ID, token); err != nil {
				return err
			}
			n.log.Info("merging a range", "range", d.ID, "right", rd.ID, "bytes", size+x.bytes, "token", fmt.Sprintf("%x", token))
			return n.startMerge(ctx, s, r, rep, rd.ID, token)
		}
	}
	return nil
}

// askColocate asks every replica of range right (on nodes) to move
// right's replicas onto voters, the nodes of its left-hand neighbour
// left, so that the two can merge. Every replica is asked, not only the
// leaseholder's: the lease may move while the replicas do (a leaseholder
// that is not wanted hands it off), and its next holder goes on.
func (n *Node) askColocate(ctx context.Context, left, right uint64, nodes, voters []uint64) error {
	req := colocateRequest(n.colocateFor(), voters)
	var errs []error
	for _, id := range nodes {
		if _, err := n.mergeCall(ctx, id, right, req); err != nil {
			errs = append(errs, fmt.Errorf("ask node %d to colocate range %d with range %d: %w", id, right, left, err))
		}
	}
	n.log.Debug("asked to colocate a range for a merge", "range", left, "right", right, "voters", voters)
	return errors.Join(errs...)
}

func colocateRequest(hold time.Duration, voters []uint64) []byte {
	req := binary.BigEndian.AppendUint64([]byte{mergeOpColocate}, uint64(hold))
	for _, v := range voters {
		req = binary.BigEndian.AppendUint64(req, v)
	}
	return req
}

// passColocation hands range r's ask to colocate, if one holds here, on
// to its learners (nodes it is moving to, which L has not asked), for
// what is left of it: one of them may take the lease before L asks again.
func (n *Node) passColocation(ctx context.Context, r *rng, learners []uint64) {
	c := ext(r).colocate.Load()
	if c == nil {
		return
	}
	left := c.until.Sub(n.cfg.Clock())
	if left <= 0 {
		return
	}
	for _, l := range learners {
		if _, err := n.mergeCall(ctx, l, r.Desc().ID, colocateRequest(left, c.voters)); err != nil {
			n.log.Debug("could not pass on an ask to colocate", "range", r.Desc().ID, "node", l, "err", err)
		}
	}
}

// startMerge runs merge token of range right into r (runMerge) in the
// background, one merge per range at a time: a merge waits up to
// mergeWait for every replica of right to freeze, and the repair loop,
// which steps every range this node leads, must not wait with it. The
// merge stays pending in the replica, so the range's next repair pass
// starts it again if this run ends without an outcome.
func (n *Node) startMerge(ctx context.Context, s *space, r *rng, rep *replica.Replica, right, token uint64) error {
	if !ext(r).merging.CompareAndSwap(false, true) {
		return nil // the run under way goes on
	}
	n.bg.Add(1) // the repair loop is one of bg's: bg.Wait has not returned
	go func() {
		defer n.bg.Done()
		defer ext(r).merging.Store(false)
		if err := n.runMerge(ctx, s, r, rep, right, token); err != nil && ctx.Err() == nil {
			n.log.Info("merge step failed; the range's next repair pass goes on with it", "range", r.Desc().ID, "right", right, "err", err)
		}
	}()
	return nil
}

// runMerge takes merge token of range right into r (local replica rep,
// which leads) from wherever it stands: freeze, wait for every replica of
// right, commit, record. It aborts the merge when right cannot be frozen
// everywhere within mergeWait.
func (n *Node) runMerge(ctx context.Context, s *space, r *rng, rep *replica.Replica, right, token uint64) error {
	voters := rightVoters(s, rep, right)
	freeze := binary.BigEndian.AppendUint64([]byte{mergeOpFreeze}, r.Desc().ID)
	freeze = binary.BigEndian.AppendUint64(freeze, token)
	deadline := n.cfg.Clock().Add(mergeWait)
	for {
		if err := rep.ReadReady(); err != nil && !rep.Leads() {
			// The lease moved: the merge stays pending for the next
			// leaseholder, who resumes it.
			return fmt.Errorf("merge %x of range %d: %w", token, right, err)
		}
		sts, missing := n.mergeStatuses(ctx, right, voters, mergeOpStatus)
		var frozen *mergeStatus
		all := len(missing) == 0 && len(sts) > 0
		for _, x := range sts {
			if x.merge.FrozenToken != token || !x.hasState {
				all = false
			} else if frozen == nil || x.leader {
				frozen = &x
			}
		}
		if all && frozen != nil && len(frozen.desc.Replicas) > 0 {
			if x := s.tab.ByID(right); x == nil || !bytes.Equal(x.Desc().End, frozen.desc.End) {
				// It split after the merge began, and the table does
				// not show that yet: merging it now would lose the
				// split's record.
				return n.abortMerge(ctx, s, rep, right, token, fmt.Sprintf("range %d ends at %x, not where the range table ends it", right, frozen.desc.End))
			}
			return n.commitMerge(ctx, s, r, rep, right, token, frozen.desc)
		}
		for _, x := range sts {
			if x.leader && x.merge.FrozenToken != token {
				_, err := n.mergeCall(ctx, x.node, right, freeze)
				if object.KindOf(err) == object.PreconditionFailed {
					return n.abortMerge(ctx, s, rep, right, token, err.Error())
				}
			}
		}
		if n.cfg.Clock().After(deadline) {
			return n.abortMerge(ctx, s, rep, right, token, fmt.Sprintf("range %d is not frozen on every replica after %v (no answer from %v)", right, mergeWait, missing))
		}
		if err := clock.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// commitMerge commits the merge of right (as its frozen replicas
// describe it) into r and records it.
func (n *Node) commitMerge(ctx context.Context, s *space, r *rng, rep *replica.Replica, right, token uint64, rd rangedesc.Range) error {
	rd.ID = right
	merged, err := rep.CommitMerge(ctx, token, rd)
	if errors.Is(err, replica.ErrMergeRefused) {
		return n.abortMerge(ctx, s, rep, right, token, err.Error())
	}
	if err != nil {
		return err
	}
	n.metrics.rangeOps.WithLabelValues("merge").Inc()
	n.log.Info("merged a range", "range", merged.ID, "merged", right, "start", fmt.Sprintf("%x", merged.Start), "end", fmt.Sprintf("%x", merged.End))
	return n.recordMerge(ctx, s, r, rd)
}

// abortMerge aborts merge token of range right in rep's range and, once
// that applied, thaws right.
func (n *Node) abortMerge(ctx context.Context, s *space, rep *replica.Replica, right, token uint64, why string) error {
	if err := rep.AbortMerge(ctx, token); err != nil {
		// Refused: the merge is not pending any more (it committed); the
		// next check records it.
		return err
	}
	n.metrics.rangeOps.WithLabelValues("merge_aborted").Inc()
	n.log.Info("aborted a merge", "range", rep.Descriptor().ID, "right", right, "why", why)
	return n.thaw(ctx, s, rep, right, token)
}

// thaw thaws range right for rep's aborted merge token, and then clears
// the aborted merge.
func (n *Node) thaw(ctx context.Context, s *space, rep *replica.Replica, right, token uint64) error {
	if err := n.sendThaw(ctx, s, rep, right, token); err != nil {
		return err
	}
	return rep.ClearMerge(ctx, token)
}

// sendThaw proposes a thaw under token on the leader of range right. The
// thaw is proposed even when no replica reports the freeze: it also
// makes the range refuse a freeze under that token that is still on its
// way. Call it only for a token whose merge cannot commit (aborted, or
// not the one the left-hand range has pending).
func (n *Node) sendThaw(ctx context.Context, s *space, rep *replica.Replica, right, token uint64) error {
	voters := rightVoters(s, rep, right)
	sts, missing := n.mergeStatuses(ctx, right, voters, mergeOpStatus)
	req := binary.BigEndian.AppendUint64([]byte{mergeOpThaw}, token)
	for _, x := range sts {
		if x.leader {
			if _, err := n.mergeCall(ctx, x.node, right, req); err == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("range %d: no leader took the thaw of merge %x (no answer from %v)", right, token, missing)
}

// rightVoters is whom to ask about range right, rep's right-hand
// neighbour: its voters in the table and rep's own (the same, for a
// merge; mergeStatuses asks each once).
func rightVoters(s *space, rep *replica.Replica, right uint64) []uint64 {
	voters := rep.Status().Voters
	if x := s.tab.ByID(right); x != nil {
		voters = append(slices.Clone(x.Desc().Replicas), voters...)
	}
	return voters
}

// recordMerge writes a merge that applied here into the range table.
func (n *Node) recordMerge(ctx context.Context, s *space, r *rng, right rangedesc.Range) error {
	if h := testMergeUnrecorded; h != nil && h.Load() {
		return errors.New("merge not recorded: a test stands for a node stopped first")
	}
	left, err := n.catalog.MergeRange(ctx, s.meta.ID, r.Desc().ID, right.ID, right.Start, right.End)
	if err != nil {
		return err
	}
	n.adoptMerge(s, &left, right.ID)
	return nil
}

// testMergeUnrecorded, set by a test, makes recordMerge fail: the node
// stands for one that stops after a merge applied and before its record.
var testMergeUnrecorded *atomic.Bool

// onMerge is called on the replica loop when a merge applied here: the
// node's routing follows at once (off the loop).
func (n *Node) onMerge(left, right rangedesc.Range) {
	select {
	case n.rangec <- rangeEvent{merge: true, left: left, right: right}:
	default: // the table sync catches up
	}
}

// adoptMerge drops range right from s's table (it is gone here, or merged
// into left) and, when the merge is recorded (left not nil), stores the
// left range's recorded descriptor.
func (n *Node) adoptMerge(s *space, left *rangedesc.Range, right uint64) {
	n.merged.Store(right, true)
	n.openMu.Lock()
	defer n.openMu.Unlock()
	if left != nil {
		if l := s.tab.ByID(left.ID); l != nil {
			l.AdoptDesc(*left)
		}
	}
	t := s.tab.Ranges()
	i := slices.IndexFunc(t, func(x *rng) bool { return x.Desc().ID == right })
	if i < 0 {
		return
	}
	t[i].MarkGone()
	s.tab.Set(slices.Delete(slices.Clone(t), i, i+1))
}

// rangeSize is the size of the range's versions and locks: pebble's
// estimate of their disk space, or, when that is under limit (data still
// in memtables counts for nothing in it), their exact size, counted up to
// limit. The count is kept on r with applied, the range's applied index
// read before the call (so never newer than what is counted), and a quiet
// range (nothing applied since) is not read again.
func (n *Node) rangeSize(r *rng, applied uint64, d rangedesc.Range, limit int64) (uint64, error) {
	est, err := n.rangeBytes(d)
	if err != nil || est >= uint64(limit) {
		return est, err
	}
	if m := ext(r).sized.Load(); m != nil && m.applied == applied && m.limit == limit &&
		bytes.Equal(m.start, d.Start) && bytes.Equal(m.end, d.End) {
		return max(m.sum, est), nil
	}
	snap := n.eng.DB().NewSnapshot()
	defer snap.Close()
	var sum uint64
	for _, sp := range kv.Spans(d) {
		if sum >= uint64(limit) {
			break
		}
		b, err := spanBytes(snap, sp.Start, sp.End, uint64(limit)-sum)
		if err != nil {
			return 0, err
		}
		sum += b
	}
	ext(r).sized.Store(&sizeMemo{start: slices.Clone(d.Start), end: slices.Clone(d.End), applied: applied, limit: limit, sum: sum})
	return max(sum, est), nil
}

// sizeMemo is a range's counted size (rangeSize) as of an applied index.
type sizeMemo struct {
	start, end []byte
	applied    uint64
	limit      int64
	sum        uint64
}
