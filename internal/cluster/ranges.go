package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// Range membership.
//
// The raft configuration of a range is the truth about who holds it; the
// range table in the meta service follows it, one compare-and-set on the
// descriptor's epoch per change, written by the leaseholder:
//
//   - A replica is added as a learner: the meta service lists it first, so
//     that its node opens an empty replica (syncRanges), then the leader adds
//     it to the raft group, sends it a snapshot and then the log. Once it has
//     caught up, one joint change promotes it and removes the replica it
//     replaces.
//   - A replica is removed from the raft group first, then from the meta
//     service; a node that finds itself no longer listed drops its replica
//     and the range's data (syncRanges).
//
// A leaseholder that stops half-way leaves the two disagreeing; the next
// leaseholder's first repair step writes the raft configuration back to
// the meta service, which undoes a learner that was listed but never added.

// caughtUpLag is how far (in log entries) a learner may trail the commit
// index and still be promoted.
const caughtUpLag = 64

// syncRanges brings the node's ranges in line with the range table: it
// opens the replicas newly placed here (opening their spaces if needed),
// drops those no longer listed, and refreshes the cached descriptors.
// Every node runs it every 500ms.
func (n *Node) syncRanges(ctx context.Context) {
	descs, err := n.catalog.ListRanges(ctx)
	if err != nil {
		return
	}
	n.dropStaleFrozen(ctx, descs)
	unopened := n.syncOpenRanges(ctx, descs)
	if len(unopened) == 0 {
		return
	}
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return
	}
	for _, sp := range spaces {
		if unopened[sp.ID] && sp.State == meta.SpaceActive {
			if _, err := n.openSpace(ctx, sp); err != nil {
				n.log.Warn("open a space placed on this node", "space", sp.Name, "err", err)
			}
		}
	}
}

// dropStaleFrozen drops the replicas here frozen for a merge whose range
// the table (descs) no longer lists: the merge was committed and recorded,
// and this node will not apply it through its left-hand replica (see
// replica.Store.DropFrozen). Such a replica would otherwise decline every
// snapshot that overlaps it.
func (n *Node) dropStaleFrozen(ctx context.Context, descs []rangedesc.Range) {
	for _, id := range n.ranges.FrozenRanges() {
		if slices.ContainsFunc(descs, func(d rangedesc.Range) bool { return d.ID == id }) {
			continue
		}
		n.merged.Store(id, true)
		if err := n.ranges.DropFrozen(ctx, id); err != nil {
			n.log.Info("drop a frozen replica", "range", id, "err", err)
		}
	}
}

// syncOpenRanges applies descs to the ranges of the open spaces and returns
// the spaces not open here that have a range placed on this node.
func (n *Node) syncOpenRanges(ctx context.Context, descs []rangedesc.Range) map[uint32]bool {
	n.openMu.Lock() // serialized with openSpace
	defer n.openMu.Unlock()
	open := map[uint32]*space{}
	n.mu.RLock()
	for _, s := range n.mu.spaces {
		open[s.meta.ID] = s
	}
	n.mu.RUnlock()
	bySpace := map[uint32][]rangedesc.Range{}
	for _, d := range descs {
		bySpace[d.SpaceID] = append(bySpace[d.SpaceID], d)
	}
	unopened := map[uint32]bool{}
	for id, ds := range bySpace {
		if s := open[id]; s != nil {
			n.syncTable(ctx, s, ds)
			continue
		}
		for _, d := range ds {
			if d.Holds(n.id.NodeID) && n.ranges.Replica(d.ID) == nil {
				unopened[id] = true
			}
		}
	}
	return unopened
}

// syncTable brings open space s's table in line with ds, its ranges in
// the range table: ranges new there (split elsewhere) are added, ranges
// gone from it dropped, except one a split here made, which the range
// table has not listed yet (its leaseholder records it, see repairRange).
func (n *Node) syncTable(ctx context.Context, s *space, ds []rangedesc.Range) {
	cur := s.tab.Ranges()
	byID := make(map[uint64]*rng, len(cur))
	for _, r := range cur {
		byID[r.Desc().ID] = r
	}
	changed := false
	next := make([]*rng, 0, len(ds))
	listed := make(map[uint64]bool, len(ds))
	for _, d := range ds {
		listed[d.ID] = true
		if _, ok := n.merged.Load(d.ID); ok {
			// Merged away here; the table follows soon.
			if r := byID[d.ID]; r != nil {
				r.MarkGone()
				changed = true
			}
			continue
		}
		r := byID[d.ID]
		if r == nil {
			var rep *replica.Replica
			if d.Holds(n.id.NodeID) {
				var err error
				if rep, err = n.openReplica(d); err != nil {
					n.log.Warn("open a replica placed on this node", "range", d.ID, "err", err)
					rep = nil
				}
			}
			r, changed = newRng(d, rep), true
		} else {
			start := r.Desc().Start
			n.syncRange(ctx, r, d)
			ext(r).unlisted = false
			changed = changed || !bytes.Equal(start, r.Desc().Start)
		}
		next = append(next, r)
	}
	for _, r := range cur {
		if listed[r.Desc().ID] {
			continue
		}
		if ext(r).unlisted {
			next = append(next, r)
			continue
		}
		r.MarkGone()
		changed = true
	}
	if changed {
		s.tab.Set(next)
	}
}

// syncRange applies descriptor d of an open range r.
func (n *Node) syncRange(ctx context.Context, r *rng, d rangedesc.Range) {
	curDesc, curRep := r.State()
	if d.Epoch < curDesc.Epoch {
		return // an older read than what the repairer stored
	}
	rep := curRep
	switch {
	case d.Holds(n.id.NodeID) && rep == nil:
		var err error
		if rep, err = n.openReplica(d); err != nil {
			n.log.Warn("open a replica placed on this node", "range", d.ID, "err", err)
			return
		}
		n.log.Info("opened a replica added to this node", "range", d.ID, "epoch", d.Epoch)
	case !d.Holds(n.id.NodeID) && rep != nil:
		// The group removed this node before the table did (or never
		// added it): the replica and its data go.
		if err := n.ranges.RemoveReplica(ctx, d.ID); err != nil {
			n.log.Warn("drop a replica removed from this node", "range", d.ID, "err", err)
			return
		}
		rep = nil
	}
	if d.Epoch != curDesc.Epoch || rep != curRep {
		r.SetState(d, rep)
	}
}

// repairRanges takes one membership step for each range this node holds
// the lease of, towards R replicas on nodes that are neither down nor
// draining. Every node runs it every second.
func (n *Node) repairRanges(ctx context.Context) {
	nodes := n.peers.view()
	if len(nodes) == 0 {
		return
	}
	type leased struct {
		s *space
		r *rng
	}
	var work []leased
	n.mu.RLock()
	for _, s := range n.mu.spaces {
		for _, r := range s.tab.Ranges() {
			if r.Leads() {
				work = append(work, leased{s, r})
			}
		}
	}
	n.mu.RUnlock()
	moving := int64(0)
	for _, w := range work {
		if rep := w.r.Replica(); rep != nil && len(rep.Status().Learners) > 0 {
			moving++
		}
	}
	n.moving.Store(moving)
	failed := make(map[uint64]string, len(n.repairLog))
	for _, w := range work {
		id := w.r.Desc().ID
		if err := n.repairRange(ctx, w.s, w.r, nodes); err != nil && ctx.Err() == nil {
			// A step that cannot succeed until the cluster changes (the
			// only node drains, say) fails every second: it is logged
			// when its reason changes, not each time.
			msg := err.Error()
			failed[id] = msg
			if n.repairLog[id] != msg {
				n.log.Info("range membership step failed; it is tried again every second (logged again when the reason changes)", "range", id, "err", err)
			}
		}
	}
	n.repairLog = failed
}

// repairRange takes at most one step for range r, whose lease is here.
func (n *Node) repairRange(ctx context.Context, s *space, r *rng, nodes []meta.NodeInfo) error {
	rep := r.Replica()
	if rep == nil {
		return nil
	}
	st := rep.Status()
	d := *r.Desc()
	if st.Joint || len(st.Voters) == 0 {
		return nil // raft leaves a joint configuration by itself
	}
	// The table follows raft: a split that applied here but is not in the
	// table (its leaseholder stopped before recording it, or the record
	// failed) is recorded from the replica's own record of it.
	if rb := rep.Descriptor(); rb.End != nil && (d.End == nil || bytes.Compare(rb.End, d.End) < 0) {
		ls, ok := rep.LastSplit()
		if !ok || !bytes.Equal(ls.Start, rb.End) {
			return fmt.Errorf("range %d ends at %x here but at %x in the table, and its last split is not known here", d.ID, rb.End, d.End)
		}
		return n.recordSplit(ctx, s, r, ls)
	}
	// Likewise a merge: the replica's bounds reach past the table's.
	if rb := rep.Descriptor(); d.End != nil && (rb.End == nil || bytes.Compare(rb.End, d.End) > 0) {
		ms := rep.MergeState()
		if ms.Phase != replica.MergeDone {
			return fmt.Errorf("range %d ends at %x here but at %x in the table, and no merge is known here", d.ID, rb.End, d.End)
		}
		return n.recordMerge(ctx, s, r, rangedesc.Range{ID: ms.Right, Start: d.End, End: rb.End})
	}
	// A merge in progress goes on before any membership step (its
	// right-hand range serves nothing meanwhile).
	if did, err := n.resumeMerge(ctx, s, r, rep); did || err != nil {
		return err
	}
	if !placement.SameMembers(d.Replicas, st.Voters) || !placement.SameMembers(d.Learners, st.Learners) {
		nd, err := n.catalog.SetRangeMembers(ctx, d, st.Voters, st.Learners)
		if err != nil {
			return err
		}
		r.SetState(nd, rep)
		n.log.Info("range table updated", "range", d.ID, "voters", st.Voters, "learners", st.Learners, "epoch", nd.Epoch)
		return nil
	}
	// A replica on a node this node's copy of the cluster map does not
	// list is on a node that joined since the copy was read: nothing is
	// decided about the range until the map shows it (the node would
	// count as gone, and its replica be removed).
	for _, id := range append(slices.Clone(st.Voters), st.Learners...) {
		if _, ok := nodeByID(nodes, id); !ok {
			n.peers.refresh(id)
			return nil
		}
	}
	p := placement.NewRangePlan(n.id.NodeID, s.Replicas(), placementNodes(nodes), st.Voters, st.Learners, n.cfg.Clock(), n.cfg.RebalanceAfter)
	p.Colocate(ext(r).colocation(n.cfg.Clock()))
	me := n.id.NodeID

	// A leaving node hands its leases away first.
	if !p.Usable(me) {
		return n.handOff(rep, p)
	}

	if p.Colocating() && len(st.Learners) > 0 {
		n.passColocation(ctx, r, st.Learners)
	}

	// A learner is promoted once it has caught up, replacing a voter that
	// is leaving or down (or one too many); a learner on a node that can
	// no longer hold it is dropped.
	for _, l := range st.Learners {
		if !p.Usable(l) {
			return rep.ChangeReplicas(ctx, change(raftpb.ConfChangeRemoveNode, l))
		}
		if m := st.Match[l]; m == 0 || st.Commit > m+caughtUpLag {
			return nil // still catching up
		}
		cc := change(raftpb.ConfChangeAddNode, l)
		if v := p.Victim(d.ID); v != me && (!p.Usable(v) || len(st.Voters)+1 > p.Want()) {
			cc.Changes = append(cc.Changes, change(raftpb.ConfChangeRemoveNode, v).Changes...)
		}
		n.log.Info("promoting a caught-up replica", "range", d.ID, "node", l, "changes", len(cc.Changes))
		return rep.ChangeReplicas(ctx, cc)
	}

	// Replace voters that are down or leaving, or add missing ones.
	replace := slices.ContainsFunc(st.Voters, func(v uint64) bool { return !p.Usable(v) })
	if replace || len(st.Voters) < p.Want() {
		if t := p.Target(d.ID); t != 0 {
			return n.addLearner(ctx, r, rep, d, st.Voters, t, "replacing or adding a replica")
		}
	}

	// Remove one too many, or a leaving one nobody can replace.
	leaving := slices.ContainsFunc(st.Voters, p.Leaving)
	if len(st.Voters) > p.Want() || (leaving && len(st.Voters) > 1) {
		v := p.Victim(d.ID)
		if v == me {
			return n.handOff(rep, p)
		}
		n.log.Info("removing a replica", "range", d.ID, "node", v, "voters", st.Voters, "want", p.Want())
		return rep.ChangeReplicas(ctx, change(raftpb.ConfChangeRemoveNode, v))
	}

	// Split when too big or too busy; merge with the right-hand
	// neighbour when both are small and quiet.
	if len(st.Learners) == 0 {
		if err := n.maybeSplit(ctx, s, r, rep); err != nil {
			return err
		}
		if err := n.maybeMerge(ctx, s, r, rep); err != nil {
			return err
		}
	}

	// Rebalance, only while every node has been up a while (so a restart
	// or a fault does not move replicas back and forth): replicas go to
	// the range's best-placed nodes, one at a time (a node added to the
	// cluster takes its share this way), and the lease to one of them
	// (leaseTarget).
	if !p.Calm() {
		return nil
	}
	ideal := p.Ideal(d.ID)
	if t := placement.FirstMissing(ideal, st.Voters); t != 0 && n.moving.Load() < maxMoves {
		n.moving.Add(1)
		return n.addLearner(ctx, r, rep, d, st.Voters, t, "rebalancing a replica")
	}
	if t := placement.LeaseTarget(d.ID, ideal); t != 0 && t != me && slices.Contains(st.Voters, t) {
		rep.TransferLeadership(t)
	}
	return nil
}

// maxMoves bounds the rebalancing moves (ranges with a learner) a node
// leads at once.
const maxMoves = 2

// addLearner adds node t to range r (local replica rep, descriptor d,
// which has no learners) as a learner: in the range table first, so that t opens an
// empty replica, then in raft.
func (n *Node) addLearner(ctx context.Context, r *rng, rep *replica.Replica, d rangedesc.Range, voters []uint64, t uint64, why string) error {
	nd, err := n.catalog.SetRangeMembers(ctx, d, voters, []uint64{t})
	if err != nil {
		return err
	}
	r.SetState(nd, rep)
	n.log.Info(why, "range", d.ID, "node", t, "voters", voters)
	return rep.ChangeReplicas(ctx, change(raftpb.ConfChangeAddLearnerNode, t))
}

// handOff moves the range's leadership to a usable voter, a preferred
// one (rangePlan.prefer) if there is one.
func (n *Node) handOff(rep *replica.Replica, p *placement.RangePlan) error {
	if v := p.HandOffTo(); v != 0 {
		rep.TransferLeadership(v)
		return nil
	}
	return errors.New("no other voter can take the lease")
}

func change(t raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}}}
}
