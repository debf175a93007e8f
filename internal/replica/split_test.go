package replica

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// keySM keeps one counter per key under "k" + key: a command is a key, and
// applying it increments the key's counter. Commands for keys outside the
// range's bounds are refused (errOutOfRange), as the kv state machine does.
type keySM struct {
	start, end []byte
}

var errOutOfRange = errors.New("key outside the range")

func (m *keySM) SetBounds(d rangedesc.Range) { m.start, m.end = d.Start, d.End }

func (m *keySM) Spans(d rangedesc.Range) []Span {
	end := []byte("l")
	if d.End != nil {
		end = append([]byte("k"), d.End...)
	}
	return []Span{{Start: append([]byte("k"), d.Start...), End: end}}
}

func (m *keySM) Apply(b *pebble.Batch, cmd []byte) any {
	if !(&rangedesc.Range{Start: m.start, End: m.end}).ContainsKey(cmd) {
		return errOutOfRange
	}
	k := append([]byte("k"), cmd...)
	n := readUint(b, k) + 1
	_ = b.Set(k, appendUint(nil, n), nil)
	return n
}

func appendUint(b []byte, n uint64) []byte {
	return append(b, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// startSplitCluster starts one Store per id with range 1 over [a, z) on
// all of them; Stores create keySMs for split-off ranges.
func startSplitCluster(t *testing.T, net *memNet, adjust func(*Options), ids ...uint64) []*testNode {
	t.Helper()
	var nodes []*testNode
	for _, id := range ids {
		e := openEngine(t, vfs.NewMem())
		n := &testNode{id: id, engine: e}
		n.store = openSplitStore(t, net, n, adjust)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.store.Close()
			_ = n.engine.Close()
		}
	})
	for _, n := range nodes {
		r, err := n.store.AddReplica(rangedesc.Range{ID: 1, Start: []byte("a"), End: []byte("z"), Replicas: ids}, &keySM{})
		if err != nil {
			t.Fatal(err)
		}
		n.rep = r
	}
	return nodes
}

func openSplitStore(t *testing.T, net *memNet, n *testNode, adjust func(*Options)) *Store {
	o := testOptions(n.id, n.engine)
	o.Transport = net
	o.NewStateMachine = func(rangedesc.Range) StateMachine { return &keySM{} }
	if adjust != nil {
		adjust(&o)
	}
	s := newStore(t, o)
	net.set(n.id, s)
	return s
}

// leaderOfRange waits for a leader of rangeID among nodes.
func leaderOfRange(t *testing.T, nodes []*testNode, rangeID uint64) *Replica {
	t.Helper()
	var lead *Replica
	waitFor(t, "a leader with a lease", func() bool {
		for _, n := range nodes {
			if r := n.store.Replica(rangeID); r != nil && r.ReadReady() == nil {
				lead = r
				return true
			}
		}
		return false
	})
	return lead
}

func counter(db *pebble.DB, key string) uint64 { return readUint(db, []byte("k"+key)) }

func propose(t *testing.T, r *Replica, key string) any {
	t.Helper()
	v, err := r.Propose(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("propose %q to range %d: %v", key, r.rangeID, err)
	}
	return v
}

// TestSplit splits a range on three Stores: both halves elect leaders and
// take writes, the left refuses the right's keys, bad split keys are
// refused, and the bounds survive a restart.
func TestSplit(t *testing.T) {
	net := &memNet{}
	nodes := startSplitCluster(t, net, nil, 1, 2, 3)
	left := leaderOfRange(t, nodes, 1)
	for _, k := range []string{"b", "m", "x"} {
		propose(t, left, k)
	}
	ctx := context.Background()
	for _, bad := range []string{"a", "0", "z", "zz"} {
		if _, err := left.Split(ctx, []byte(bad), 2); !errors.Is(err, ErrSplitRefused) {
			t.Fatalf("split at %q: %v, want ErrSplitRefused", bad, err)
		}
	}
	if _, err := left.Split(ctx, []byte("m"), 1); !errors.Is(err, ErrSplitRefused) {
		t.Fatalf("split into its own id: %v, want ErrSplitRefused", err)
	}
	rd, err := left.Split(ctx, []byte("m"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if rd.ID != 2 || string(rd.Start) != "m" || string(rd.End) != "z" || len(rd.Replicas) != 3 {
		t.Fatalf("right-hand descriptor %+v", rd)
	}
	for _, n := range nodes {
		waitFor(t, "the new range everywhere", func() bool { return n.store.Replica(2) != nil })
		if d := n.store.Replica(1).Descriptor(); string(d.Start) != "a" || string(d.End) != "m" {
			t.Fatalf("node %d: left bounds [%s, %s)", n.id, d.Start, d.End)
		}
		if d := n.store.Replica(2).Descriptor(); string(d.Start) != "m" || string(d.End) != "z" {
			t.Fatalf("node %d: right bounds [%s, %s)", n.id, d.Start, d.End)
		}
	}
	// The old leader campaigned for the new range at once.
	right := leaderOfRange(t, nodes, 2)
	for _, n := range nodes {
		ls, ok := n.store.Replica(1).LastSplit()
		if !ok || ls.ID != 2 || string(ls.Start) != "m" || string(ls.End) != "z" || len(ls.Replicas) != 3 {
			t.Fatalf("node %d: last split %+v, %v", n.id, ls, ok)
		}
	}
	if v := propose(t, left, "m"); !errors.Is(asErr(v), errOutOfRange) {
		t.Fatalf("left took a key of the right: %v", v)
	}
	if v := propose(t, right, "m"); v != uint64(2) {
		t.Fatalf("right: counter of m is %v, want 2 (the write before the split is its)", v)
	}
	if v := propose(t, right, "b"); !errors.Is(asErr(v), errOutOfRange) {
		t.Fatalf("right took a key of the left: %v", v)
	}
	propose(t, left, "b")
	for _, n := range nodes {
		waitFor(t, "writes on every node", func() bool {
			db := n.engine.DB()
			return counter(db, "b") == 2 && counter(db, "m") == 2 && counter(db, "x") == 1
		})
	}
	// Restart one node: its replicas come back with their own bounds, not
	// the caller's.
	n := nodes[2]
	net.set(n.id, nil)
	if err := n.store.Close(); err != nil {
		t.Fatal(err)
	}
	n.store = openSplitStore(t, net, n, nil)
	for _, id := range []uint64{1, 2} {
		r, err := n.store.AddReplica(rangedesc.Range{ID: id, Start: []byte("a"), End: []byte("z")}, &keySM{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64]string{1: "a-m", 2: "m-z"}[id]
		if d := r.Descriptor(); string(d.Start)+"-"+string(d.End) != want {
			t.Fatalf("range %d after restart: [%s, %s), want %s", id, d.Start, d.End, want)
		}
		if ls, ok := r.LastSplit(); id == 1 && (!ok || ls.ID != 2 || string(ls.End) != "z") {
			t.Fatalf("last split after restart: %+v, %v", ls, ok)
		}
	}
	right = leaderOfRange(t, nodes, 2)
	propose(t, right, "x")
	waitFor(t, "a write after the restart", func() bool { return counter(n.engine.DB(), "x") == 2 })
}

// cutFollower writes "b" through range 1's leader, waits until a follower
// applied it, and cuts that follower off. It returns the leader's replica
// and the follower.
func cutFollower(t *testing.T, net *memNet, nodes []*testNode) (*Replica, *testNode) {
	t.Helper()
	left := leaderOfRange(t, nodes, 1)
	var lag *testNode
	for _, n := range nodes {
		if n.store.Replica(1) != left {
			lag = n
			break
		}
	}
	propose(t, left, "b")
	waitFor(t, "the follower applies", func() bool { return counter(lag.engine.DB(), "b") == 1 })
	net.partition(lag.id, true)
	return left, lag
}

func asErr(v any) error {
	err, _ := v.(error)
	return err
}

// TestSplitBehindFollower: a follower cut off during the split learns of
// the new range first (an uninitialized replica, as a node does from the
// range table). The new range's snapshot overlaps its unsplit replica of
// the old range and is declined; once the old range's log reaches it, the
// split initializes the waiting replica, which then catches up.
func TestSplitBehindFollower(t *testing.T) {
	net := &memNet{}
	nodes := startSplitCluster(t, net, nil, 1, 2, 3)
	left, lag := cutFollower(t, net, nodes)
	if _, err := left.Split(context.Background(), []byte("m"), 2); err != nil {
		t.Fatal(err)
	}
	up := without(nodes, lag)
	right := leaderOfRange(t, up, 2)
	for range 5 {
		propose(t, right, "q")
	}
	if _, err := lag.store.AddReplica(rangedesc.Range{ID: 2, Start: []byte("m"), End: []byte("z")}, &keySM{}); err != nil {
		t.Fatal(err)
	}
	// The node is back, but the old range's log does not reach it yet:
	// the new range's leader sends it a snapshot, which is declined.
	net.block(1, lag.id, true)
	net.partition(lag.id, false)
	waitFor(t, "a declined snapshot", func() bool { return net.declined.Load() > 0 })
	if counter(lag.engine.DB(), "q") != 0 {
		t.Fatal("a declined snapshot changed the node's data")
	}
	net.block(1, lag.id, false)
	waitFor(t, "the lagging node to catch up on both ranges", func() bool {
		db := lag.engine.DB()
		r := lag.store.Replica(2)
		return r != nil && counter(db, "q") == 5 && counter(db, "b") == 1 && r.Status().Applied >= right.Status().Applied
	})
	if d := lag.store.Replica(1).Descriptor(); !bytes.Equal(d.End, []byte("m")) {
		t.Fatalf("lagging node's left ends at %q", d.End)
	}
	propose(t, right, "q")
	waitFor(t, "a later write", func() bool { return counter(lag.engine.DB(), "q") == 6 })
	for _, n := range nodes {
		if err := n.store.loopErr(); err != nil {
			t.Fatalf("node %d: %v", n.id, err)
		}
	}
}

// TestSnapshotOverlapDeclined: a snapshot of a range whose bounds overlap
// another replica here that has state is declined, and nothing changes.
func TestSnapshotOverlapDeclined(t *testing.T) {
	net := &memNet{}
	nodes := startSplitCluster(t, net, nil, 1, 2)
	b := nodes[1]
	// Range 1 over [a, z) has state on node 2.
	s := b.store
	p := &pendingSnap{rangeID: 9, start: []byte("b"), end: []byte("e")}
	s.mu.Lock()
	reps := s.mu.replicas
	s.mu.Unlock()
	if err := s.snapshotFits(reps, p, nil); !errors.Is(err, ErrSnapshotDeclined) {
		t.Fatalf("overlapping snapshot: %v, want declined", err)
	}
	p.start, p.end = []byte("z"), nil
	if err := s.snapshotFits(reps, p, nil); err != nil {
		t.Fatalf("disjoint snapshot: %v", err)
	}
	// Two snapshots of different ranges taken in one cycle must not
	// overlap each other either.
	q := &pendingSnap{rangeID: 10, start: []byte("zz"), end: nil}
	if err := s.snapshotFits(reps, q, []*pendingSnap{p}); !errors.Is(err, ErrSnapshotDeclined) {
		t.Fatalf("snapshot overlapping one taken in the same cycle: %v", err)
	}
}

// TestSplitFollowerBehindTruncation: a follower that missed a split and
// the log behind it gets the old range as a snapshot with the new, smaller
// bounds (it never applies the split), after which the new range's
// snapshot fits and is taken.
func TestSplitFollowerBehindTruncation(t *testing.T) {
	net := &memNet{}
	nodes := startSplitCluster(t, net, func(o *Options) { o.LogKeep, o.TruncateEvery = 2, 8 }, 1, 2, 3)
	left, lag := cutFollower(t, net, nodes)
	lagApplied := lag.store.Replica(1).Status().Applied
	if _, err := left.Split(context.Background(), []byte("m"), 2); err != nil {
		t.Fatal(err)
	}
	writes := uint64(1)
	waitFor(t, "the leader to truncate past the follower", func() bool {
		writes++
		propose(t, left, "b")
		st, _, err := loadRaftStorage(left.s.db, left.s.logDB, 1)
		return err == nil && st.truncIndex > lagApplied
	})
	up := without(nodes, lag)
	right := leaderOfRange(t, up, 2)
	propose(t, right, "q")
	if _, err := lag.store.AddReplica(rangedesc.Range{ID: 2, Start: []byte("m"), End: []byte("z")}, &keySM{}); err != nil {
		t.Fatal(err)
	}
	net.partition(lag.id, false)
	waitFor(t, "the lagging node to catch up on both ranges", func() bool {
		db := lag.engine.DB()
		return counter(db, "q") == 1 && counter(db, "b") == writes
	})
	if d := lag.store.Replica(1).Descriptor(); !bytes.Equal(d.End, []byte("m")) {
		t.Fatalf("lagging node's left ends at %q after its snapshot", d.End)
	}
	propose(t, right, "q")
	waitFor(t, "a later write", func() bool { return counter(lag.engine.DB(), "q") == 2 })
}
