package replica

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// tapNet shows every message to see before memNet delivers it; see
// returns false to drop it.
type tapNet struct {
	*memNet
	see func(m Message) bool
}

func (n *tapNet) Send(msgs []Message) {
	var keep []Message
	for _, m := range msgs {
		if n.see(m) {
			keep = append(keep, m)
		}
	}
	n.memNet.Send(keep)
}

// recordNet keeps what is sent.
type recordNet struct {
	mu   sync.Mutex
	msgs []Message
}

func (n *recordNet) Send(msgs []Message) {
	n.mu.Lock()
	n.msgs = append(n.msgs, msgs...)
	n.mu.Unlock()
}

func (n *recordNet) take() []Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.msgs
	n.msgs = nil
	return m
}

// recordOptions are node 1's options on an in-memory engine (closed with
// the test) with a transport that records what is sent.
func recordOptions(t *testing.T) (Options, *recordNet) {
	e := openEngine(t, vfs.NewMem())
	t.Cleanup(func() { _ = e.Close() })
	net := &recordNet{}
	o := testOptions(1, e)
	o.Transport = net
	return o, net
}

func raftMsg(typ raftpb.MessageType, to, term, index, commit uint64, ents int) *raftpb.Message {
	m := &raftpb.Message{Type: typ.Enum(), To: &to, Term: &term, Index: &index, Commit: &commit}
	for range ents {
		m.Entries = append(m.Entries, &raftpb.Entry{})
	}
	return m
}

// TestOutboundHoldsCommitOnlyAppends: a commit-only MsgApp waits up to
// CommitDelay; a later MsgApp of the same range to the same node replaces
// it; other ranges, other nodes and other message types are not held; what
// is still held goes out when the delay is up.
func TestOutboundHoldsCommitOnlyAppends(t *testing.T) {
	o, net := recordOptions(t)
	o.CommitDelay = 50 * time.Millisecond
	s := newStore(t, o)
	defer s.Close()

	var out []Message
	err := s.onLoop(context.Background(), func() error {
		out = s.outbound(out, 1, raftMsg(raftpb.MsgApp, 2, 5, 10, 10, 0)) // held
		out = s.outbound(out, 1, raftMsg(raftpb.MsgApp, 3, 5, 10, 10, 0)) // held
		out = s.outbound(out, 2, raftMsg(raftpb.MsgApp, 2, 5, 7, 7, 0))   // held
		out = s.outbound(out, 1, raftMsg(raftpb.MsgApp, 2, 5, 10, 11, 1)) // goes, replaces range 1's to 2
		out = s.outbound(out, 1, raftMsg(raftpb.MsgApp, 3, 5, 10, 11, 0)) // replaces range 1's to 3, held
		out = s.outbound(out, 1, raftMsg(raftpb.MsgHeartbeat, 2, 5, 0, 10, 0))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Msg.GetType() != raftpb.MsgApp || len(out[0].Msg.GetEntries()) != 1 ||
		out[1].Msg.GetType() != raftpb.MsgHeartbeat {
		t.Fatalf("sent at once: %v", out)
	}
	if got := s.Stats().CommitsSkipped; got != 2 {
		t.Fatalf("CommitsSkipped = %d, want 2", got)
	}
	var late []Message
	waitFor(t, "the held messages", func() bool {
		late = append(late, net.take()...)
		return len(late) >= 2
	})
	time.Sleep(2 * o.CommitDelay)
	late = append(late, net.take()...)
	got := map[peerKey]uint64{}
	for _, m := range late {
		if m.Msg.GetType() != raftpb.MsgApp || len(m.Msg.GetEntries()) != 0 {
			t.Fatalf("released %v", m.Msg)
		}
		got[peerKey{m.RangeID, m.Msg.GetTo()}] = m.Msg.GetCommit()
	}
	want := map[peerKey]uint64{{1, 3}: 11, {2, 2}: 7}
	if len(got) != len(want) || len(late) != len(want) || got[peerKey{1, 3}] != 11 || got[peerKey{2, 2}] != 7 {
		t.Fatalf("released %v, want one each of %v", got, want)
	}
}

// TestAcksCoalesced: of the append acknowledgements a written batch
// releases, one per range and leader goes: the highest of each term.
// Rejections and acks to other nodes or of other ranges are kept, in order.
func TestAcksCoalesced(t *testing.T) {
	o, net := recordOptions(t)
	s := newStore(t, o)
	defer s.Close()
	r1, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.AddReplica(rangedesc.Range{ID: 2, Replicas: []uint64{1}}, &counterSM{rangeID: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r1)
	waitLeader(t, r2)
	net.take()

	ack := func(to, term, index uint64) *raftpb.Message {
		return raftMsg(raftpb.MsgAppResp, to, term, index, 0, 0)
	}
	reject := ack(2, 5, 4)
	reject.Reject = new(true)
	err = s.onLoop(context.Background(), func() error {
		req := func(r *Replica, resps ...*raftpb.Message) appendReq {
			r.unstable++ // as queueAppend does
			return appendReq{r: r, rn: r.rn, resps: resps}
		}
		j := &persistJob{b: s.logDB.NewBatch(), hb: s.db.NewBatch(), reqs: []appendReq{
			req(r1, ack(2, 5, 10), ack(3, 5, 10)),
			req(r2, ack(2, 5, 3)),
			req(r1, ack(2, 5, 12), reject),
			req(r1, ack(2, 5, 11)), // older than 12: dropped
			req(r1, ack(2, 6, 9)),  // a new term: kept
			req(r2, ack(2, 5, 4)),
		}}
		return s.finishPersist(j)
	})
	if err != nil {
		t.Fatal(err)
	}
	type sent struct {
		rangeID, to, term, index uint64
		reject                   bool
	}
	var got []sent
	for _, m := range net.take() {
		got = append(got, sent{m.RangeID, m.Msg.GetTo(), m.Msg.GetTerm(), m.Msg.GetIndex(), m.Msg.GetReject()})
	}
	want := []sent{
		{1, 3, 5, 10, false},
		{1, 2, 5, 12, false},
		{1, 2, 5, 4, true},
		{1, 2, 6, 9, false},
		{2, 2, 5, 4, false},
	}
	if len(got) != len(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sent %v, want %v", got, want)
		}
	}
}

// TestFollowersLearnHeldCommit: under concurrent proposals the leader
// skips commit-only appends, and with heartbeats cut off (they carry the
// commit index too) an idle follower still learns that the last entry
// committed, from the held append sent when the delay is up, and applies
// it.
func TestFollowersLearnHeldCommit(t *testing.T) {
	var noBeats atomic.Bool
	net := &tapNet{memNet: &memNet{}, see: func(m Message) bool {
		return !noBeats.Load() || m.Msg.GetType() != raftpb.MsgHeartbeat
	}}
	nodes := startClusterWith(t, net.memNet, func(o *Options) {
		o.Transport = net
		o.CommitDelay = 20 * time.Millisecond
		o.ElectionTicks = 1000 // no election while heartbeats are cut off
	}, 1, 2, 3)
	leader := leaderOf(t, nodes)
	proposeConcurrently(t, leader.rep, 4, 25)
	if st := leader.store.Stats(); st.CommitsSkipped == 0 {
		t.Fatalf("no commit-only append skipped under 4 concurrent proposers: %+v", st)
	}

	term := leader.rep.Status().Term
	noBeats.Store(true)
	defer noBeats.Store(false)
	if _, err := leader.rep.Propose(context.Background(), seqCmd(5000)); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, "every replica to apply the last entry", func() bool { return readUint(n.engine.DB(), smKey(1, "count")) == 101 })
	}
	if st := leader.rep.Status(); !st.IsLeader || st.Term != term {
		t.Fatalf("leadership changed (term %d, now %+v): the followers learned the commit from an election", term, st)
	}
}
