package replica

import (
	"context"
	"testing"
	"time"
)

// allQuiesced reports whether every replica of nodes is quiesced.
func allQuiesced(nodes []*testNode) bool {
	for _, n := range nodes {
		if !n.rep.Status().Quiesced {
			return false
		}
	}
	return true
}

// quiescedCluster starts a three-replica group, commits n entries and
// waits until every replica quiesced.
func quiescedCluster(t *testing.T, net *memNet, n uint64) ([]*testNode, *testNode) {
	t.Helper()
	nodes := startCluster(t, net, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeSeq(t, leader.rep, 1, n)
	waitFor(t, "every replica quiesced", func() bool { return allQuiesced(nodes) })
	return nodes, leader
}

// TestQuiesce: an idle group stops ticking on every replica and sends no
// raft message at all, only store heartbeats; a read wakes the leader and
// renews its lease; a proposal wakes the group; idle again, it quiesces
// again.
func TestQuiesce(t *testing.T) {
	net := &memNet{}
	nodes, leader := quiescedCluster(t, net, 5)

	raft0, beats0 := net.raftMsgs.Load(), net.storeBeats.Load()
	time.Sleep(30 * 10 * time.Millisecond) // 30 ticks
	if d := net.raftMsgs.Load() - raft0; d != 0 {
		t.Fatalf("a quiesced group sent %d raft messages in 30 ticks", d)
	}
	if d := net.storeBeats.Load() - beats0; d < 10 {
		t.Fatalf("%d store heartbeats in 30 ticks, want one per tick to each follower's node", d)
	}
	if !allQuiesced(nodes) {
		t.Fatal("a replica woke up with nothing to do")
	}

	// The lease lapsed an election timeout after quiescing.
	if err := leader.rep.ReadReady(); err == nil {
		t.Fatal("a quiesced leader still claims a lease 30 ticks later")
	}
	ctx := context.Background()
	start := time.Now()
	if err := leader.rep.AwaitRead(ctx); err != nil {
		t.Fatalf("AwaitRead on the quiesced leader: %v", err)
	}
	t.Logf("lease renewed %v after the read asked", time.Since(start).Round(time.Microsecond))
	if leader.rep.Status().Quiesced {
		t.Fatal("the leader serves a read but stays quiesced")
	}
	for _, n := range nodes {
		if n != leader && n.rep.AwaitRead(ctx) == nil {
			t.Fatalf("follower %d: AwaitRead succeeded", n.id)
		}
	}

	waitFor(t, "quiesced again after the read", func() bool { return allQuiesced(nodes) })
	proposeSeq(t, leader.rep, 6, 6)
	for _, n := range nodes {
		waitCount(t, "apply everywhere", n, 6)
	}
	waitFor(t, "quiesced again after the proposal", func() bool { return allQuiesced(nodes) })
}

// TestQuiesceWaitsForLaggingFollower: a leader does not quiesce while a
// follower's log is behind its own, and does once the follower caught up.
func TestQuiesceWaitsForLaggingFollower(t *testing.T) {
	net := &memNet{}
	nodes := startCluster(t, net, 1, 2, 3)
	leader := leaderOf(t, nodes)
	lagging := without(nodes, leader)[0]
	net.block(1, lagging.id, true)
	proposeSeq(t, leader.rep, 1, 5)
	time.Sleep(40 * 10 * time.Millisecond) // four quiesce periods
	if leader.rep.Status().Quiesced || lagging.rep.Status().Quiesced {
		t.Fatal("quiesced with a follower behind")
	}
	net.block(1, lagging.id, false)
	waitFor(t, "every replica quiesced once caught up", func() bool { return allQuiesced(nodes) })
	if c := checkSM(t, lagging.engine.DB(), 1); c != 5 {
		t.Fatalf("caught-up follower: count %d, want 5", c)
	}
}

// TestQuiescedLeaderDies: when the node leading a quiesced group goes
// silent, the followers wake within about an election timeout (no
// message from the leader's node, no store heartbeat) and elect a leader
// that commits.
func TestQuiescedLeaderDies(t *testing.T) {
	net := &memNet{}
	nodes, leader := quiescedCluster(t, net, 3)
	net.partition(leader.id, true)
	killed := time.Now()
	rest := without(nodes, leader)
	next := leaderOf(t, rest)
	t.Logf("node %d leads %v after the quiesced leader's node went silent (election timeout %v)",
		next.id, time.Since(killed).Round(time.Millisecond), next.store.opts.electionTimeout())
	proposeSeq(t, next.rep, 4, 6)
	waitFor(t, "lease on the new leader", func() bool { return next.rep.AwaitRead(context.Background()) == nil })
}

// TestTransferNeedsLiveTarget: a leadership transfer to a node not heard
// from in the last ticks does not start (raft would refuse proposals while
// it waits for the target); to a live, caught-up one it does.
func TestTransferNeedsLiveTarget(t *testing.T) {
	net := &memNet{}
	nodes := startClusterWith(t, net, func(o *Options) { o.QuiesceTicks = -1 }, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeSeq(t, leader.rep, 1, 2)
	fs := without(nodes, leader)
	dead, live := fs[0], fs[1]
	net.partition(dead.id, true)
	time.Sleep(5 * 10 * time.Millisecond)
	leader.rep.TransferLeadership(dead.id)
	proposeSeq(t, leader.rep, 3, 3) // refused during a transfer
	if st := leader.rep.Status(); !st.IsLeader {
		t.Fatalf("leader %d gave up leadership toward a silent node: %+v", leader.id, st)
	}
	waitFor(t, "a lease before the transfer", func() bool { return leader.rep.ReadReady() == nil })
	leader.rep.TransferLeadership(live.id)
	waitFor(t, "leadership on the live node", func() bool {
		// The target's forced campaign ignores the old leader's lease,
		// so that lease must be gone before the target can win.
		if live.rep.Status().IsLeader && leader.rep.ReadReady() == nil {
			t.Fatal("the old leader still holds a lease while the transfer's target leads")
		}
		return live.rep.Status().IsLeader
	})
}

// TestQuiescedLeaderIsolated: a quiesced leader cut off from the rest of
// its group runs no CheckQuorum while it is not ticked; it wakes once a
// quorum of its voters' nodes has been silent for an election timeout,
// and then steps down, so it stops counting as the range's coordinator.
func TestQuiescedLeaderIsolated(t *testing.T) {
	net := &memNet{}
	_, leader := quiescedCluster(t, net, 3)
	if !leader.rep.Leads() {
		t.Fatal("a quiesced leader does not count as leading")
	}
	net.partition(leader.id, true)
	waitFor(t, "the isolated leader steps down", func() bool {
		st := leader.rep.Status()
		return !st.IsLeader && !leader.rep.Leads()
	})
}

// TestQuiescedStatusCurrent: a group that quiesces publishes its final
// raft state. A learner's last append response changes the leader's
// progress without producing a Ready (and a quiesced group produces no
// more), so a Status published only after Readies kept the learner's
// match from before it caught up, and the repairer waited forever to
// promote it.
func TestQuiescedStatusCurrent(t *testing.T) {
	net := &memNet{}
	nodes := startCluster(t, net, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeSeq(t, leader.rep, 1, 20)

	_, r4 := addEmptyNode(t, net, 4, func(*Options) {})
	if err := leader.rep.ChangeReplicas(context.Background(), learnerChange(4)); err != nil {
		t.Fatal(err)
	}
	// The learner lags behind for longer than the group takes to go
	// idle, so that its catching up is the last thing before quiescence.
	for i := range uint64(10) {
		waitFor(t, "the group quiesced with its learner", func() bool {
			return allQuiesced(nodes) && r4.Status().Quiesced
		})
		st := leader.rep.Status()
		for _, id := range []uint64{1, 2, 3, 4} {
			if st.Match[id] != st.Commit {
				t.Fatalf("round %d: quiesced leader's status: member %d matches %d, commit %d (%+v)", i, id, st.Match[id], st.Commit, st)
			}
		}
		net.block(1, 4, true)
		proposeSeq(t, leader.rep, 21+i, 21+i)
		time.Sleep(time.Duration(15+i) * 10 * time.Millisecond) // past QuiesceTicks
		net.block(1, 4, false)
	}
}
