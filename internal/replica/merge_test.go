package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// splitForMerge starts three Stores with range 1 over [a, z), writes b, m
// and x, and splits it at m into range 2. It returns the nodes and both
// leaders.
func splitForMerge(t *testing.T, net *memNet, adjust func(*Options)) ([]*testNode, *Replica, *Replica) {
	t.Helper()
	nodes := startSplitCluster(t, net, adjust, 1, 2, 3)
	left := leaderOfRange(t, nodes, 1)
	for _, k := range []string{"b", "m", "x"} {
		propose(t, left, k)
	}
	if _, err := left.Split(context.Background(), []byte("m"), 2); err != nil {
		t.Fatal(err)
	}
	right := leaderOfRange(t, nodes, 2)
	propose(t, right, "m")
	return nodes, left, right
}

// freezeEverywhere begins a merge of range 2 into range 1 under token and
// freezes range 2, waiting until every replica of it reports the freeze.
func freezeEverywhere(t *testing.T, nodes []*testNode, left, right *Replica, token uint64) {
	t.Helper()
	ctx := context.Background()
	if err := left.BeginMerge(ctx, 2, token); err != nil {
		t.Fatal(err)
	}
	if err := right.Freeze(ctx, 1, token); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, "the freeze everywhere", func() bool {
			r := n.store.Replica(2)
			return r != nil && r.MergeState().FrozenToken == token
		})
	}
}

// TestMerge merges range 2 back into range 1 on three Stores: the frozen
// range refuses writes, the merged range serves all keys with every write
// made to either side, the merged-away range cannot come back, and the
// merge survives a restart.
func TestMerge(t *testing.T) {
	net := &memNet{}
	nodes, left, right := splitForMerge(t, net, nil)
	ctx := context.Background()
	const token = 0x5eed

	// Steps out of order are refused, and change nothing.
	if _, err := left.CommitMerge(ctx, token, right.Descriptor()); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("commit before begin: %v, want ErrMergeRefused", err)
	}
	if err := left.AbortMerge(ctx, token); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("abort before begin: %v, want ErrMergeRefused", err)
	}
	if err := left.BeginMerge(ctx, 1, token); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("begin a merge with itself: %v", err)
	}
	if err := left.BeginMerge(ctx, 2, 0); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("begin with token 0: %v", err)
	}

	freezeEverywhere(t, nodes, left, right, token)
	if err := left.BeginMerge(ctx, 2, token); err != nil {
		t.Fatalf("begin again (idempotent): %v", err)
	}
	if err := left.BeginMerge(ctx, 2, token+1); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("a second merge while one is pending: %v", err)
	}
	if err := right.Freeze(ctx, 1, token+1); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("a freeze under another token: %v", err)
	}
	if _, err := right.Propose(ctx, []byte("m")); !errors.Is(err, ErrRangeFrozen) {
		t.Fatalf("write to the frozen range: %v, want ErrRangeFrozen", err)
	}
	if _, err := right.Split(ctx, []byte("q"), 3); !errors.Is(err, ErrRangeFrozen) {
		t.Fatalf("split of the frozen range: %v, want ErrRangeFrozen", err)
	}
	if right.Contains([]byte("m")) || right.ContainsSpan([]byte("m"), []byte("n")) {
		t.Fatal("a frozen range claims to serve its keys")
	}
	if _, err := left.Split(ctx, []byte("f"), 3); !errors.Is(err, ErrSplitRefused) {
		t.Fatalf("split of a range whose merge is pending: %v, want ErrSplitRefused", err)
	}
	wrong := right.Descriptor()
	wrong.Start = []byte("n")
	if _, err := left.CommitMerge(ctx, token, wrong); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("commit with bounds that do not adjoin: %v, want ErrMergeRefused", err)
	}

	merged, err := left.CommitMerge(ctx, token, right.Descriptor())
	if err != nil {
		t.Fatal(err)
	}
	if string(merged.Start) != "a" || string(merged.End) != "z" {
		t.Fatalf("merged bounds [%s, %s)", merged.Start, merged.End)
	}
	for _, n := range nodes {
		waitFor(t, "the merge everywhere", func() bool {
			r := n.store.Replica(1)
			return n.store.Replica(2) == nil && r != nil && bytes.Equal(r.Descriptor().End, []byte("z"))
		})
		if ms := n.store.Replica(1).MergeState(); ms.Phase != MergeDone || ms.Right != 2 {
			t.Fatalf("node %d: merge state %+v", n.id, ms)
		}
		if _, err := n.store.AddReplica(rangedesc.Range{ID: 2, Start: []byte("m"), End: []byte("z"), Replicas: []uint64{1, 2, 3}}, &keySM{}); !errors.Is(err, ErrRangeMerged) {
			t.Fatalf("node %d: add the merged-away range again: %v, want ErrRangeMerged", n.id, err)
		}
	}
	if v := propose(t, left, "m"); v != uint64(3) {
		t.Fatalf("merged range: counter of m is %v, want 3 (two writes before the merge)", v)
	}
	propose(t, left, "x")
	for _, n := range nodes {
		waitFor(t, "writes on every node", func() bool {
			db := n.engine.DB()
			return counter(db, "b") == 1 && counter(db, "m") == 3 && counter(db, "x") == 2
		})
	}

	// A restarted node has the merged bounds and no range 2.
	n := nodes[2]
	net.set(n.id, nil)
	if err := n.store.Close(); err != nil {
		t.Fatal(err)
	}
	n.store = openSplitStore(t, net, n, nil)
	if _, err := n.store.AddReplica(rangedesc.Range{ID: 2, Start: []byte("m"), End: []byte("z")}, &keySM{}); !errors.Is(err, ErrRangeMerged) {
		t.Fatalf("range 2 after a restart: %v, want ErrRangeMerged", err)
	}
	r, err := n.store.AddReplica(rangedesc.Range{ID: 1, Start: []byte("a"), End: []byte("m")}, &keySM{})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Descriptor(); string(d.End) != "z" {
		t.Fatalf("range 1 after a restart ends at %q", d.End)
	}
	left = leaderOfRange(t, nodes, 1)
	propose(t, left, "y")
	waitFor(t, "a write after the restart", func() bool { return counter(n.engine.DB(), "y") == 1 })
	for _, n := range nodes {
		if err := n.store.loopErr(); err != nil {
			t.Fatalf("node %d: %v", n.id, err)
		}
	}
}

// TestMergeAbort: an aborted merge cannot commit, the right-hand range
// is thawed and takes writes again, and the left-hand range can merge
// again once the abort is cleared.
func TestMergeAbort(t *testing.T) {
	net := &memNet{}
	nodes, left, right := splitForMerge(t, net, nil)
	ctx := context.Background()
	const token = 0xab
	freezeEverywhere(t, nodes, left, right, token)
	if err := left.AbortMerge(ctx, token); err != nil {
		t.Fatal(err)
	}
	if err := left.AbortMerge(ctx, token); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("abort twice: %v, want ErrMergeRefused", err)
	}
	if _, err := left.CommitMerge(ctx, token, right.Descriptor()); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("commit after abort: %v, want ErrMergeRefused", err)
	}
	if err := left.BeginMerge(ctx, 2, token+1); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("begin before the abort is cleared: %v, want ErrMergeRefused", err)
	}
	if err := right.Thaw(ctx, token+1); err != nil {
		t.Fatal(err)
	}
	if !right.MergeState().Frozen() {
		t.Fatal("a thaw under another token thawed the range")
	}
	if err := right.Thaw(ctx, token); err != nil {
		t.Fatal(err)
	}
	if v := propose(t, right, "m"); v != uint64(3) {
		t.Fatalf("thawed range: counter of m is %v, want 3", v)
	}
	// A freeze under the aborted token that arrives late is refused.
	if err := right.Freeze(ctx, 1, token); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("a late freeze under a thawed token: %v, want ErrMergeRefused", err)
	}
	if err := left.ClearMerge(ctx, token); err != nil {
		t.Fatal(err)
	}
	if ms := left.MergeState(); ms.Phase != MergeNone {
		t.Fatalf("merge state after clear: %+v", ms)
	}
	freezeEverywhere(t, nodes, left, right, token+2)
	if _, err := left.CommitMerge(ctx, token+2, right.Descriptor()); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, "the merge everywhere", func() bool {
			return n.store.Replica(2) == nil && counter(n.engine.DB(), "m") == 3
		})
	}
}

// commitWithoutFollower freezes range 2 everywhere for a merge into range
// 1 under token, cuts off a follower of range 1 (after calling before
// with it, if not nil) and commits the merge without it. It returns the
// follower and the index its replica of range 1 had applied.
func commitWithoutFollower(t *testing.T, net *memNet, nodes []*testNode, left, right *Replica, token uint64, before func(*testNode)) (*testNode, uint64) {
	t.Helper()
	freezeEverywhere(t, nodes, left, right, token)
	var lag *testNode
	for _, n := range nodes {
		if n.store.Replica(1) != left {
			lag = n
			break
		}
	}
	if before != nil {
		before(lag)
	}
	lagApplied := lag.store.Replica(1).Status().Applied
	net.partition(lag.id, true)
	if _, err := left.CommitMerge(context.Background(), token, right.Descriptor()); err != nil {
		t.Fatal(err)
	}
	return lag, lagApplied
}

// TestMergeFollowerBehindTruncation: a follower that applied the freeze
// but missed the commit and the log behind it gets the merged range as a
// snapshot; its frozen replica of the right-hand range is subsumed by it.
func TestMergeFollowerBehindTruncation(t *testing.T) {
	net := &memNet{}
	nodes, left, right := splitForMerge(t, net, func(o *Options) { o.LogKeep, o.TruncateEvery = 2, 8 })
	const token = 0xcd
	lag, lagApplied := commitWithoutFollower(t, net, nodes, left, right, token, nil)
	writes := uint64(1)
	waitFor(t, "the leader to truncate past the follower", func() bool {
		writes++
		propose(t, left, "x")
		st, _, err := loadRaftStorage(left.s.db, left.s.logDB, 1)
		return err == nil && st.truncIndex > lagApplied
	})
	if lag.store.Replica(2) == nil {
		t.Fatal("the cut-off follower lost its frozen range")
	}
	// The frozen range goes in the snapshot's own ingestion: at the
	// moment that ends (a crash could come next), its raft state is gone
	// from the disk and its tombstone is there.
	var atIngest atomic.Value
	lag.store.afterIngest = func() {
		_, found, err := loadRaftStorage(lag.engine.DB(), lag.engine.LogDB(), 2)
		v, closer, terr := lag.engine.DB().Get(stateKey(rangePrefix(2), suffixTombstone))
		if terr == nil {
			defer closer.Close()
		}
		if found || err != nil || terr != nil || len(v) == 0 {
			atIngest.Store(fmt.Sprintf("raft state found %v (%v), tombstone %v", found, err, terr))
		} else {
			atIngest.Store("")
		}
	}
	net.partition(lag.id, false)
	waitFor(t, "the follower to take the merged range's snapshot", func() bool {
		r := lag.store.Replica(1)
		return lag.store.Replica(2) == nil && r != nil && bytes.Equal(r.Descriptor().End, []byte("z")) &&
			counter(lag.engine.DB(), "x") == writes && counter(lag.engine.DB(), "m") == 2
	})
	if got, ok := atIngest.Load().(string); !ok || got != "" {
		t.Fatalf("right after the snapshot's ingestion (ingested: %v), the subsumed range: %s", ok, got)
	}
	if _, err := lag.store.AddReplica(rangedesc.Range{ID: 2, Start: []byte("m"), End: []byte("z"), Replicas: []uint64{1, 2, 3}}, &keySM{}); !errors.Is(err, ErrRangeMerged) {
		t.Fatalf("the subsumed range again: %v, want ErrRangeMerged", err)
	}
	if err := lag.store.loopErr(); err != nil {
		t.Fatal(err)
	}
}

// TestMergeStateCodec: the merge state and the snapshot data round-trip,
// and damaged encodings are refused.
func TestMergeStateCodec(t *testing.T) {
	ms := MergeState{FrozenFor: 1, FrozenToken: 2, Right: 3, Token: 4, Phase: MergeAborted}
	got, err := decodeMerge(encodeMerge(ms))
	if err != nil || got != ms {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, d := range []rangedesc.Range{{Start: []byte("a"), End: []byte("m")}, {Start: []byte("m")}, {}} {
		s, e, hb, gm, err := decodeSnapData(encodeSnapData(d, ms))
		if err != nil || gm != ms || hb != bounded(&d) || !bytes.Equal(s, d.Start) || !bytes.Equal(e, d.End) {
			t.Fatalf("snapshot data of %+v: [%q, %q) %v %+v %v", d, s, e, hb, gm, err)
		}
	}
	v := encodeMerge(MergeState{Phase: 9})
	if _, err := decodeMerge(v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("phase 9: %v", err)
	}
	data := encodeSnapData(rangedesc.Range{Start: []byte("a")}, ms)
	data[len(data)-5] ^= 1
	if _, _, _, _, err := decodeSnapData(data); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged snapshot data: %v", err)
	}
}

// TestFrozenRangeMembership: a frozen range refuses membership changes,
// and a refused freeze does not leave its leader refusing them.
func TestFrozenRangeMembership(t *testing.T) {
	net := &memNet{}
	_, left, right := splitForMerge(t, net, nil)
	ctx := context.Background()
	// Range 2 merging a neighbour of its own cannot be frozen.
	if err := right.BeginMerge(ctx, 3, 0x77); err != nil {
		t.Fatal(err)
	}
	if err := right.Freeze(ctx, 1, 0x78); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("freeze of a range with a merge pending: %v, want ErrMergeRefused", err)
	}
	if err := right.ChangeReplicas(ctx, removeNode(3)); errors.Is(err, ErrRangeFrozen) {
		t.Fatalf("membership change after a refused freeze: %v", err)
	}
	waitFor(t, "node 3 out of range 2", func() bool { return len(right.Status().Voters) == 2 })
	// Frozen for range 1's merge, range 2's membership is final, and
	// range 1 cannot take it over on other voters.
	if err := left.BeginMerge(ctx, 2, 0x79); err != nil {
		t.Fatal(err)
	}
	if err := right.AbortMerge(ctx, 0x77); err != nil {
		t.Fatal(err)
	}
	if err := right.ClearMerge(ctx, 0x77); err != nil {
		t.Fatal(err)
	}
	if err := right.Freeze(ctx, 1, 0x79); err != nil {
		t.Fatal(err)
	}
	if err := right.ChangeReplicas(ctx, removeNode(2)); !errors.Is(err, ErrRangeFrozen) {
		t.Fatalf("membership change of a frozen range: %v, want ErrRangeFrozen", err)
	}
	if _, err := left.CommitMerge(ctx, 0x79, right.Descriptor()); !errors.Is(err, ErrMergeRefused) {
		t.Fatalf("commit with voters that differ: %v, want ErrMergeRefused", err)
	}
}

// TestDropFrozen: a follower that missed a merge keeps its frozen replica
// of the merged-away range; when the merged range splits again at the
// same key, the new range's snapshot overlaps that replica and is
// declined, until the replica is dropped (as a node does once the range
// table no longer lists the range). Its keys stay until the snapshot.
func TestDropFrozen(t *testing.T) {
	net := &memNet{}
	nodes, left, right := splitForMerge(t, net, func(o *Options) { o.LogKeep, o.TruncateEvery = 2, 8 })
	ctx := context.Background()
	const token = 0xef
	lag, lagApplied := commitWithoutFollower(t, net, nodes, left, right, token, func(lag *testNode) {
		if err := lag.store.DropFrozen(ctx, 1); !errors.Is(err, ErrMergeRefused) {
			t.Fatalf("drop a range that is not frozen: %v, want ErrMergeRefused", err)
		}
	})
	if _, err := left.Split(ctx, []byte("m"), 3); err != nil {
		t.Fatal(err)
	}
	up := without(nodes, lag)
	r3 := leaderOfRange(t, up, 3)
	waitFor(t, "the leaders to truncate past the follower", func() bool {
		propose(t, left, "b")
		propose(t, r3, "x")
		st1, _, err1 := loadRaftStorage(left.s.db, left.s.logDB, 1)
		st3, _, err3 := loadRaftStorage(r3.s.db, r3.s.logDB, 3)
		return err1 == nil && err3 == nil && st1.truncIndex > lagApplied && st3.truncIndex > 10
	})
	if _, err := lag.store.AddReplica(rangedesc.Range{ID: 3, Start: []byte("m"), End: []byte("z")}, &keySM{}); err != nil {
		t.Fatal(err)
	}
	before := net.declined.Load()
	net.partition(lag.id, false)
	waitFor(t, "range 3's snapshot declined on the follower", func() bool { return net.declined.Load() > before })
	if lag.store.Replica(2) == nil {
		t.Fatal("the frozen replica went away by itself")
	}
	if err := lag.store.DropFrozen(ctx, 2); err != nil {
		t.Fatal(err)
	}
	want := counter(r3.s.db, "x")
	waitFor(t, "range 3 on the follower", func() bool {
		r := lag.store.Replica(3)
		return lag.store.Replica(2) == nil && r != nil && r.Status().Applied > 5 && counter(lag.engine.DB(), "x") >= want
	})
	if _, err := lag.store.AddReplica(rangedesc.Range{ID: 2, Start: []byte("m"), End: []byte("z"), Replicas: []uint64{1, 2, 3}}, &keySM{}); !errors.Is(err, ErrRangeMerged) {
		t.Fatalf("the dropped range again: %v, want ErrRangeMerged", err)
	}
	if err := lag.store.loopErr(); err != nil {
		t.Fatal(err)
	}
}
