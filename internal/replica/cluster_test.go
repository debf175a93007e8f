package replica

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/storage"
)

type testNode struct {
	id     uint64
	engine *storage.Engine
	store  *Store
	rep    *Replica
}

// startCluster starts one Store per node id, each on its own in-memory
// pebble, connected by net, with one range replicated on all of them.
func startCluster(t *testing.T, net *memNet, ids ...uint64) []*testNode {
	return startClusterWith(t, net, func(*Options) {}, ids...)
}

func startClusterWith(t *testing.T, net *memNet, adjust func(*Options), ids ...uint64) []*testNode {
	t.Helper()
	var nodes []*testNode
	for _, id := range ids {
		e := openEngine(t, vfs.NewMem())
		o := testOptions(id, e)
		o.Transport = net
		adjust(&o)
		s := newStore(t, o)
		net.set(id, s)
		nodes = append(nodes, &testNode{id: id, engine: e, store: s})
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.store.Close()
			_ = n.engine.Close()
		}
	})
	for _, n := range nodes {
		r, err := n.store.AddReplica(rangedesc.Range{ID: 1, Replicas: ids}, &counterSM{rangeID: 1})
		if err != nil {
			t.Fatal(err)
		}
		n.rep = r
	}
	return nodes
}

// reopen starts a new Store on n's engine (its old one closed) and range
// 1's replica on it, from the state on disk.
func reopen(t *testing.T, net *memNet, n *testNode) *Replica {
	t.Helper()
	o := testOptions(n.id, n.engine)
	o.Transport = net
	n.store = newStore(t, o)
	net.set(n.id, n.store)
	r, err := n.store.AddReplica(rangedesc.Range{ID: 1}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	n.rep = r
	return r
}

// leaderOf waits until exactly one of nodes leads and all of them agree.
func leaderOf(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	waitFor(t, "an agreed leader", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.rep.Status().IsLeader {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if n.rep.Status().Leader != leader.id {
				return false
			}
		}
		return true
	})
	return leader
}

// TestThreeReplicas replicates a range on three Stores: a proposal applies
// on all three, followers refuse proposals and reads, and when the leader's
// Store closes another replica takes over and commits.
func TestThreeReplicas(t *testing.T) {
	net := &memNet{}
	nodes := startCluster(t, net, 1, 2, 3)
	leader := leaderOf(t, nodes)
	t.Logf("leader is node %d", leader.id)
	proposeSeq(t, leader.rep, 1, 5)
	for _, n := range nodes {
		waitCount(t, "apply on every replica", n, 5)
	}
	waitFor(t, "leader lease", func() bool { return leader.rep.ReadReady() == nil })
	for _, n := range nodes {
		if n == leader {
			continue
		}
		if err := n.rep.ReadReady(); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower %d ReadReady: %v", n.id, err)
		}
		if _, err := n.rep.Propose(context.Background(), seqCmd(6)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower %d Propose: %v", n.id, err)
		}
	}

	oldTerm := leader.rep.Status().Term
	net.set(leader.id, nil)
	if err := leader.store.Close(); err != nil {
		t.Fatal(err)
	}
	rest := without(nodes, leader)
	next := leaderOf(t, rest)
	if next.rep.Status().Term <= oldTerm {
		t.Fatalf("new leader %d in term %d, old term %d", next.id, next.rep.Status().Term, oldTerm)
	}
	t.Logf("new leader is node %d", next.id)
	proposeSeq(t, next.rep, 6, 8)
	for _, n := range rest {
		waitCount(t, "apply on the remaining replicas", n, 8)
	}
	waitFor(t, "new leader lease", func() bool { return next.rep.ReadReady() == nil })
}

// TestFollowerRestartCatchesUp restarts a follower's Store on its own pebble
// while the others commit, and checks it catches up from the leader's log.
func TestFollowerRestartCatchesUp(t *testing.T) {
	net := &memNet{}
	nodes := startCluster(t, net, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeSeq(t, leader.rep, 1, 3)
	f := without(nodes, leader)[0]
	waitCount(t, "follower apply", f, 3)
	net.set(f.id, nil)
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	proposeSeq(t, leader.rep, 4, 10)

	reopen(t, net, f)
	waitCount(t, "restarted follower to catch up", f, 10)
}

// TestChangeReplicas removes a follower through a conf change: every
// remaining replica applies it (through RawNode.ApplyConfChange), the pair
// keeps committing without the removed node, the ConfState is persisted,
// and invalid changes are refused before raft sees them.
func TestChangeReplicas(t *testing.T) {
	net := &memNet{}
	nodes := startCluster(t, net, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeSeq(t, leader.rep, 1, 2)
	var removed, kept *testNode
	for _, n := range nodes {
		if n == leader {
			continue
		}
		if removed == nil {
			removed = n
		} else {
			kept = n
		}
	}
	ctx := context.Background()
	if err := kept.rep.ChangeReplicas(ctx, removeNode(removed.id)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ChangeReplicas on a follower: %v", err)
	}
	if err := leader.rep.ChangeReplicas(ctx, removeNode(removed.id)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*testNode{leader, kept} {
		waitFor(t, "conf change applied", func() bool { return len(n.rep.Descriptor().Replicas) == 2 })
		if slices.Contains(n.rep.Descriptor().Replicas, removed.id) {
			t.Fatalf("node %d still lists %d: %v", n.id, removed.id, n.rep.Descriptor().Replicas)
		}
	}
	net.set(removed.id, nil)
	_ = removed.store.Close()
	proposeSeq(t, leader.rep, 3, 5)

	// Two voters changed at once need a joint configuration.
	two := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(leader.id)},
		{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(kept.id)},
	}}
	if err := leader.rep.ChangeReplicas(ctx, two); !errors.Is(err, ErrConfChangeRefused) {
		t.Fatalf("removing both voters: %v", err)
	}
	waitCount(t, "apply on the kept follower", kept, 5)

	for _, n := range []*testNode{leader, kept} {
		if err := n.store.Close(); err != nil {
			t.Fatal(err)
		}
		st, _, err := loadRaftStorage(n.engine.DB(), n.engine.LogDB(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if v := st.cs.GetVoters(); len(v) != 2 || slices.Contains(v, removed.id) {
			t.Fatalf("node %d persisted voters %v", n.id, v)
		}
		if c := checkSM(t, n.engine.DB(), 1); c != 5 {
			t.Fatalf("node %d count %d", n.id, c)
		}
	}
}

func removeNode(id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(id)}}}
}

// TestPartitionedLeaderProposal proposes on a leader cut off from its
// followers: the others elect a new leader and commit other entries at the
// same indexes, and when the partition heals the stranded proposal fails
// with ErrNotLeader instead of hanging, and never applies anywhere.
func TestPartitionedLeaderProposal(t *testing.T) {
	net := &memNet{}
	nodes := startCluster(t, net, 1, 2, 3)
	old := leaderOf(t, nodes)
	proposeSeq(t, old.rep, 1, 2)
	for _, n := range nodes {
		waitCount(t, "apply everywhere", n, 2)
	}
	net.partition(old.id, true)
	res := make(chan error, 1)
	go func() {
		// 1000 is out of sequence: if it ever applied, checkSM would fail.
		_, err := old.rep.Propose(context.Background(), seqCmd(1000))
		res <- err
	}()
	var rest []*testNode
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	next := leaderOf(t, rest)
	proposeSeq(t, next.rep, 3, 6)
	net.partition(old.id, false)
	select {
	case err := <-res:
		t.Logf("stranded proposal: %v", err)
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("stranded proposal: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stranded proposal still waiting after the partition healed")
	}
	for _, n := range nodes {
		waitCount(t, "catch up", n, 6)
	}
}

// TestFollowerBehindTruncatedLog cuts a follower off until the leader has
// truncated entries it lacks. When it is back, the leader sends it the
// range's state as a snapshot (SSTs), and it catches up: same state, every
// command applied once, and later commands apply on top.
func TestFollowerBehindTruncatedLog(t *testing.T) {
	net := &memNet{}
	nodes := startClusterWith(t, net, func(o *Options) { o.LogKeep, o.TruncateEvery = 2, 8 }, 1, 2, 3)
	leader := leaderOf(t, nodes)
	lag := without(nodes, leader)[0]
	proposeSeq(t, leader.rep, 1, 2)
	waitCount(t, "follower apply", lag, 2)
	net.partition(lag.id, true)
	seq := uint64(2)
	waitFor(t, "leader truncation past the follower's log", func() bool {
		seq++
		proposeSeq(t, leader.rep, seq, seq)
		// The follower's log, not its applied index: it may hold entries
		// it has not learned are committed (hold.go).
		lst, _, err := loadRaftStorage(lag.engine.DB(), lag.engine.LogDB(), 1)
		if err != nil {
			return false
		}
		st, _, err := loadRaftStorage(leader.engine.DB(), leader.engine.LogDB(), 1)
		return err == nil && st.truncIndex > lst.lastIndex
	})
	net.partition(lag.id, false)
	waitFor(t, "the follower to catch up", func() bool { return checkSM(t, lag.engine.DB(), 1) == seq })
	if net.snaps.Load() == 0 {
		t.Fatal("the follower caught up without a snapshot")
	}
	proposeSeq(t, leader.rep, seq+1, seq+5)
	for _, n := range nodes {
		waitFor(t, "apply everywhere", func() bool { return checkSM(t, n.engine.DB(), 1) == seq+5 })
		if err := n.store.loopErr(); err != nil {
			t.Fatalf("node %d loop failed: %v", n.id, err)
		}
	}
	// The installed state survives a restart of the follower.
	net.set(lag.id, nil)
	if err := lag.store.Close(); err != nil {
		t.Fatal(err)
	}
	reopen(t, net, lag)
	proposeSeq(t, leader.rep, seq+6, seq+6)
	waitFor(t, "apply after restart", func() bool { return checkSM(t, lag.engine.DB(), 1) == seq+6 })
}

// TestAddReplicaBySnapshot grows a range onto a new, empty node: it starts
// uninitialized, is added as a learner, gets the state by snapshot, is
// promoted while an old voter is removed in one joint change, and the
// group goes on without the removed node.
func TestAddReplicaBySnapshot(t *testing.T) {
	net := &memNet{}
	adjust := func(o *Options) { o.LogKeep, o.TruncateEvery = 2, 8 }
	nodes := startClusterWith(t, net, adjust, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeSeq(t, leader.rep, 1, 40)

	e, r4 := addEmptyNode(t, net, 4, adjust)
	if st := r4.Status(); st.Applied != 0 || st.Leader != 0 {
		t.Fatalf("uninitialized replica status %+v", st)
	}
	ctx := context.Background()
	if err := leader.rep.ChangeReplicas(ctx, learnerChange(4)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the learner to catch up", func() bool { return checkSM(t, e.DB(), 1) == 40 })
	// The snapshot's SSTs were built in files on the leader's disk, not in
	// memory, and the files went once it was sent.
	if net.snaps.Load() == 0 {
		t.Fatal("the learner caught up without a snapshot")
	}
	waitFor(t, "the outgoing snapshot's files to go", func() bool {
		fs := leader.engine.FS()
		names, err := fs.List(fs.PathJoin(leader.engine.Dir(), snapshotDir))
		return err == nil && !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "out-") })
	})
	waitFor(t, "the leader to see the learner's progress", func() bool {
		st := leader.rep.Status()
		return slices.Contains(st.Learners, 4) && st.Match[4] >= 40
	})

	out := without(nodes, leader)[0]
	swap := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(4))},
		{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(out.id)},
	}}
	if err := leader.rep.ChangeReplicas(ctx, swap); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leaving the joint configuration", func() bool {
		st := leader.rep.Status()
		return !st.Joint && slices.Contains(st.Voters, 4) && !slices.Contains(st.Voters, out.id)
	})
	net.set(out.id, nil)
	if err := out.store.RemoveReplica(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, found, err := loadRaftStorage(out.engine.DB(), out.engine.LogDB(), 1); found || err != nil {
		t.Fatalf("removed replica: raft state found %v, err %v", found, err)
	}
	if c := checkSM(t, out.engine.DB(), 1); c != 0 {
		t.Fatalf("removed replica: count %d left", c)
	}
	if out.store.Replica(1) != nil {
		t.Fatal("removed replica still listed")
	}
	_ = out.store.Close()
	proposeSeq(t, leader.rep, 41, 45)
	waitFor(t, "apply on the new voter", func() bool { return checkSM(t, e.DB(), 1) == 45 })
	if v := r4.Descriptor().Replicas; !slices.Contains(v, 4) || slices.Contains(v, out.id) {
		t.Fatalf("new voter's peers %v", v)
	}
	leader.rep.TransferLeadership(4)
	waitFor(t, "leadership on the new voter", func() bool { return r4.Status().IsLeader })
	proposeSeq(t, r4, 46, 46)
}

// persistCheckNet checks, as each message leaves its node, what that node
// has persisted: an append response must only vouch for entries in the
// sender's log on disk; a leader's append may go out before its entries
// are (counted in early).
type persistCheckNet struct {
	*memNet
	t       *testing.T
	engines map[uint64]*storage.Engine
	early   atomic.Int64 // appends sent before the leader had the entries
	acks    atomic.Int64 // append responses checked
}

func (n *persistCheckNet) Send(msgs []Message) {
	for _, m := range msgs {
		e := n.engines[m.Msg.GetFrom()]
		if e == nil || m.RangeID == 0 {
			continue
		}
		has := func(index uint64) bool {
			_, closer, err := e.LogDB().Get(logKey(rangePrefix(m.RangeID), index))
			if err != nil {
				return false
			}
			_ = closer.Close()
			return true
		}
		switch m.Msg.GetType() {
		case raftpb.MsgAppResp:
			if !m.Msg.GetReject() && m.Msg.GetIndex() > 0 {
				n.acks.Add(1)
				if !has(m.Msg.GetIndex()) {
					n.t.Errorf("node %d acknowledged entry %d before persisting it", m.Msg.GetFrom(), m.Msg.GetIndex())
				}
			}
		case raftpb.MsgApp:
			if ents := m.Msg.GetEntries(); len(ents) > 0 && !has(ents[len(ents)-1].GetIndex()) {
				n.early.Add(1)
			}
		}
	}
	n.memNet.Send(msgs)
}

// TestAppendSentBeforePersist: a leader's appends go out while it persists
// its own log (Raft thesis §10.2.1), and no follower acknowledges an entry
// it has not persisted.
func TestAppendSentBeforePersist(t *testing.T) {
	net := &persistCheckNet{memNet: &memNet{}, t: t, engines: map[uint64]*storage.Engine{}}
	nodes := startClusterWith(t, net.memNet, func(o *Options) {
		o.Transport = net
		net.engines[o.NodeID] = o.Engine
	}, 1, 2, 3)
	waitLeader(t, nodes[0].rep)
	proposeConcurrently(t, nodes[0].rep, 4, 50)
	if net.acks.Load() == 0 || net.early.Load() == 0 {
		t.Fatalf("checked %d append responses, %d appends sent before the leader's write: want both > 0", net.acks.Load(), net.early.Load())
	}
	// A proposer is answered inside the apply step, and the loop counts
	// the applied entries after it: wait for the count to catch up.
	st := nodes[0].store.Stats()
	for deadline := time.Now().Add(5 * time.Second); st.Applied < 200 && time.Now().Before(deadline); st = nodes[0].store.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st.Appended < 200 || st.Applied < 200 || st.Syncs == 0 || st.Syncs > st.Cycles || st.PersistTime <= 0 {
		t.Fatalf("loop stats after 200 proposals: %+v", st)
	}
	t.Logf("%d acks checked, %d early appends; leader: %+v", net.acks.Load(), net.early.Load(), st)
}
