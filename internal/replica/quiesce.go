package replica

import (
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Quiescence: a group with nothing to do is not ticked.
//
// An idle raft group still costs a heartbeat round per tick (and here a
// lease renewal per tick), on every node of the group; with thousands of
// ranges that is most of a cluster's traffic. So a leader whose group has
// been idle for QuiesceTicks ticks (no proposal, no read, nothing
// unapplied, every member's log matching its own, no membership or
// leadership change under way) sends each member a quiesce heartbeat, an
// ordinary MsgHeartbeat whose context marks it, and stops ticking. A
// follower steps it like any heartbeat and then stops ticking too, if its
// log and commit index are the leader's and it knows the sender as leader
// in the same term; otherwise it keeps ticking and, if the leader stays
// quiet, campaigns, which wakes everyone.
//
// Any other raft message to a quiesced replica wakes it, as do a proposal, a
// leadership transfer and a read that finds the lease lapsed (AwaitRead): a
// quiesced leader renews no lease, so its lease runs out an election
// timeout after quiescing and the first read afterwards costs a heartbeat
// round. The lease stays sound: it only ever claims what the last renewal
// proved, and a follower that is not ticked refuses votes for longer, not
// shorter.
//
// A quiesced follower must still notice its leader's death, and a quiesced
// leader its own isolation (it runs no CheckQuorum while not ticked).
// Stores that share quiesced groups send each other one store heartbeat
// per tick (a message for range 0), and any message from a node counts as
// hearing from it. When a quiesced follower's leader's node has been
// silent for an election timeout, the follower wakes; a quiesced leader
// wakes when it has not heard from a quorum of its voters' nodes for that
// long (awake, raft's CheckQuorum makes it step down). A follower, however
// woken, is first ticked for the ticks it missed since it last heard from
// its leader's node (at most an election timeout's worth): real time
// passed in which it heard nothing from the leader, so raft's election
// timer is where it would be had the replica never stopped, and it grants
// votes and campaigns as soon as an awake follower would have.

// quiesceCtx marks a quiesce heartbeat. raft echoes a heartbeat's context
// in the response, and reads the context of a response it steps as an
// 8-byte read-index position: Replica.step drops the responses to quiesce
// heartbeats instead of stepping them.
var quiesceCtx = []byte("quiesce")

func isQuiesceMsg(m *raftpb.Message) bool {
	t := m.GetType()
	return (t == raftpb.MsgHeartbeat || t == raftpb.MsgHeartbeatResp) && string(m.GetContext()) == string(quiesceCtx)
}

// storeHeartbeat is the message a Store sends each tick to every node that
// holds a member of a quiesced group it holds a member of.
func storeHeartbeat(from, to uint64) Message {
	return Message{Msg: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(from), To: new(to)}}
}

// maybeQuiesce quiesces an idle leader's group: it returns the quiesce
// heartbeats to send, or nil. Called on every tick before ticking.
func (r *Replica) maybeQuiesce() []Message {
	if r.s.opts.QuiesceTicks < 0 || !r.isLeader || r.quiesced {
		return nil
	}
	busy := r.active.Swap(false) || r.removed || r.freezing || r.st.merge.Frozen() ||
		len(r.waiters) > 0 || !r.renewSent.IsZero() || !r.appliedInTerm || r.unstable > 0 || r.rn.HasReady()
	if busy {
		r.idle = 0
		return nil
	}
	if r.idle++; r.idle < r.s.opts.QuiesceTicks {
		return nil
	}
	last := r.st.lastIndex
	if r.st.applied != last || len(r.st.cs.GetVotersOutgoing()) > 0 {
		return nil
	}
	st := r.rn.Status()
	if st.GetCommit() != last || st.LeadTransferee != 0 {
		return nil
	}
	self := r.s.opts.NodeID
	for id, pr := range st.Progress {
		if id != self && (pr.Match != last || pr.State != tracker.StateReplicate) {
			return nil
		}
	}
	var out []Message
	for id := range st.Progress {
		if id == self {
			continue
		}
		out = append(out, Message{RangeID: r.rangeID, Msg: &raftpb.Message{
			Type:    raftpb.MsgHeartbeat.Enum(),
			To:      new(id),
			From:    new(self),
			Term:    new(st.GetTerm()),
			Commit:  new(last),
			Context: quiesceCtx,
		}})
	}
	r.quiesce()
	return out
}

// maybeQuiesceFollower quiesces a follower after it stepped the quiesce
// heartbeat m, if its raft state agrees with the leader's.
func (r *Replica) maybeQuiesceFollower(m *raftpb.Message) {
	if r.quiesced || r.removed || r.s.opts.QuiesceTicks < 0 {
		return // (entries still being written fail the lastIndex check below)
	}
	st := r.rn.BasicStatus()
	if st.Lead != m.GetFrom() || st.GetTerm() != m.GetTerm() || st.ID == st.Lead ||
		st.GetCommit() != m.GetCommit() || r.st.lastIndex != m.GetCommit() {
		return
	}
	r.quiesce()
}

// quiesce stops ticking r. The Status published after the last Ready may
// be older than raft's state: the step that made the group idle (a
// learner's last append response, say) changes the leader's progress
// without a Ready, and a quiesced group has no more Readies to publish
// it. So the state is published here, as it stands.
func (r *Replica) quiesce() {
	r.quiesced, r.idle, r.quietSince = true, 0, r.s.ticks
	r.publish()
}

// wake makes a quiesced replica tick again; a follower is first ticked
// for the ticks it missed in silence (see the comment at the top of this
// file), a leader renews its lease.
func (r *Replica) wake() {
	if !r.quiesced {
		return
	}
	r.quiesced, r.idle = false, 0
	s := r.s
	if r.isLeader {
		r.wokeAt.Store(s.opts.Clock().UnixNano())
		r.maybeRenewLease(s.opts.Clock, true)
	} else {
		for range min(r.silentTicks(r.leader), uint64(s.opts.ElectionTicks)) {
			r.tick()
		}
	}
	r.publish()
	s.signal() // the wake may have left raft work (a renewal, a campaign)
}

// checkQuiesced runs on every tick for a quiesced replica: a follower
// whose leader's node has been silent for an election timeout wakes, and
// so does a leader that has not heard from a quorum of its voters' nodes
// for that long.
func (r *Replica) checkQuiesced() {
	s := r.s
	et := uint64(s.opts.ElectionTicks)
	recent := func(id uint64) bool { return r.silentTicks(id) < et }
	if !r.isLeader {
		if !recent(r.leader) {
			s.log.Debug("waking a quiesced replica: its leader is silent", "range", r.rangeID, "leader", r.leader)
			r.wake()
		}
		return
	}
	voters := r.st.cs.GetVoters()
	heard := 0
	for _, id := range voters {
		if id == s.opts.NodeID || recent(id) {
			heard++
		}
	}
	if heard <= len(voters)/2 {
		s.log.Debug("waking a quiesced leader: a quorum is silent", "range", r.rangeID, "heard", heard, "voters", len(voters))
		r.wake()
	}
}

// silentTicks is how many ticks have passed since this quiesced replica
// last heard from node id: since the last message from it, or since it
// quiesced if that came later.
func (r *Replica) silentTicks(id uint64) uint64 {
	return r.s.ticks - max(r.s.heard[id], r.quietSince)
}

// storeHeartbeats returns one store heartbeat for each node that holds a
// member of a quiesced group this Store holds a member of.
func (s *Store) storeHeartbeats(order []*Replica) []Message {
	to := map[uint64]bool{}
	for _, r := range order {
		if !r.quiesced {
			continue
		}
		for _, ids := range [][]uint64{r.st.cs.GetVoters(), r.st.cs.GetLearners()} {
			for _, id := range ids {
				to[id] = id != s.opts.NodeID
			}
		}
	}
	var out []Message
	for id, send := range to {
		if send {
			out = append(out, storeHeartbeat(s.opts.NodeID, id))
		}
	}
	return out
}
