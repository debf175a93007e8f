package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// TestMergeSmallRanges: a space made with four ranges that holds a few
// small objects merges down to one range while clients write and read
// through every node; no request fails, every object reads back, lists
// once and takes writes through every node afterwards, and no merged-away
// range is left anywhere.
func TestMergeSmallRanges(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.MergeSize, c.MergeAfter, c.SplitSize = 1<<20, time.Second, -1 })
	if _, err := nodes[0].CreateSpace(ctx, "small", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	before := rangesOf(t, nodes[0], "small")
	if len(before) != 4 {
		t.Fatalf("%d ranges at the start, want 4", len(before))
	}
	want := map[string]string{}
	for i := range 40 {
		key := fmt.Sprintf("%c-%03d", "!5Lz"[i%4], i)
		want[key] = strings.Repeat(key, 10)
		writeAny(t, nodes, "small", key, want[key])
	}

	// Clients keep reading and writing their own keys through every node
	// while the ranges merge (at well under a quarter of the split load).
	var stop atomic.Bool
	var wg sync.WaitGroup
	var ops atomic.Int64
	errs := make(chan error, 16)
	for c, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("%c-client%d", "!5Lz"[i%4], c)
				body := fmt.Sprint(i)
				if _, err := n.Put(ctx, &object.PutRequest{Space: "small", Key: key, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
					errs <- fmt.Errorf("node %d: put %s: %w", n.NodeID(), key, err)
					return
				}
				b, _, err := getCtx(ctx, n, object.GetRequest{Space: "small", Key: key})
				if err != nil || string(b) != body {
					errs <- fmt.Errorf("node %d: get %s = %q, %v; want %q", n.NodeID(), key, b, err, body)
					return
				}
				ops.Add(2)
				time.Sleep(20 * time.Millisecond) // quiet enough to merge
			}
		}()
	}
	start := time.Now()
	ds := waitMerged(t, nodes, "small", 1)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("merged to %d range in %v, %d client requests meanwhile", len(ds), time.Since(start).Round(time.Millisecond), ops.Load())
	for _, n := range nodes {
		for _, d := range before {
			if d.ID != ds[0].ID && n.ranges.Replica(d.ID) != nil {
				t.Fatalf("node %d still has merged-away range %d", n.NodeID(), d.ID)
			}
		}
		rep := n.ranges.Replica(ds[0].ID)
		if rep == nil || rep.MergeState().Phase != replica.MergeDone {
			t.Fatalf("node %d: the merged range's replica %v", n.NodeID(), rep)
		}
	}
	checkServed(t, nodes, "small", want, len(want)+4*len(nodes), 7)
}

// TestMergeNeighboursOnOtherNodes: in a five-node cluster with three
// replicas per range, neighbouring ranges are placed on different nodes;
// small quiet neighbours are colocated (the right-hand range's replicas
// move to the left-hand one's nodes) and merged, down to one range, and
// every object reads back and takes writes through every node.
func TestMergeNeighboursOnOtherNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("five nodes")
	}
	ctx := context.Background()
	nodes := clusterOf(t, 5, func(c *Config) {
		c.MergeSize, c.MergeAfter, c.SplitSize = 1<<20, time.Second, -1
		c.HeartbeatTTL, c.RepairCheck, c.RebalanceAfter = time.Second, 200*time.Millisecond, 2*time.Second
	})
	if _, err := nodes[0].CreateSpace(ctx, "apart", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	before := rangesOf(t, nodes[0], "apart")
	apart := 0
	for i := 1; i < len(before); i++ {
		if !placement.SameMembers(before[i-1].Replicas, before[i].Replicas) {
			apart++
		}
	}
	if apart == 0 {
		t.Fatalf("every neighbour starts on the same nodes (%+v): the test proves nothing", before)
	}
	want := map[string]string{}
	for i := range 20 {
		key := fmt.Sprintf("%c-%03d", "!5Lz"[i%4], i)
		want[key] = strings.Repeat(key, 10)
		writeAny(t, nodes, "apart", key, want[key])
	}
	start := time.Now()
	ds := waitMerged(t, nodes, "apart", 1)
	t.Logf("%d of 3 neighbour pairs on different nodes; merged to one range on %v in %v", apart, ds[0].Replicas, time.Since(start).Round(time.Millisecond))
	checkServed(t, nodes, "apart", want, len(want), 7)
}

// waitMerged waits until space name has at most want ranges in the
// range table, tiling the space, and every node's table agrees with it.
func waitMerged(t *testing.T, nodes []*Node, name string, want int) []rangedesc.Range {
	t.Helper()
	return waitTable(t, nodes, name, fmt.Sprintf("at most %d", want), func(n int) bool { return n <= want }, nil)
}

// TestMergeDoesNotHoldRepair: a merge that cannot finish (its right-hand
// range answers nowhere) waits up to mergeWait for it in the background;
// the range's repair step, and so the repair loop over every other range
// this node leads, goes on at once. The merge then aborts and the range
// takes merges again.
func TestMergeDoesNotHoldRepair(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, clusterConfig(t, ""))
	if _, err := n.CreateSpace(ctx, "held", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	n.mu.RLock()
	s := n.mu.spaces["held"]
	n.mu.RUnlock()
	r := s.tab.Ranges()[0]
	deadline := time.Now().Add(10 * time.Second)
	for !r.Leads() {
		if time.Now().After(deadline) {
			t.Fatal("the range has no leader here")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep := r.Replica()
	const noSuchRange, token = 1 << 40, 0xfeed
	if err := rep.BeginMerge(ctx, noSuchRange, token); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := n.repairRange(ctx, s, r, n.peers.view()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > mergeWait/5 {
		t.Fatalf("the repair step took %v with a merge that cannot finish (mergeWait %v)", took, mergeWait)
	}
	if !ext(r).merging.Load() {
		t.Fatal("no merge runs in the background")
	}
	for deadline := time.Now().Add(3 * mergeWait); ext(r).merging.Load() || rep.MergeState().Phase == replica.MergePending; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the merge never ended: %+v", rep.MergeState())
		}
	}
	t.Logf("the merge ended after %v in phase %v", time.Since(began).Round(time.Millisecond), rep.MergeState().Phase)
}

// TestMergeUnrecordedAtRestart: a node that stopped after a merge applied
// (its right-hand range gone, a tombstone here) and before the merge was
// recorded in the table opens the space again when it restarts (the
// merged-away range is left out of its table), records the merge, and
// serves every object.
func TestMergeUnrecordedAtRestart(t *testing.T) {
	ctx := context.Background()
	fs, store := vfs.NewMem(), meta.NewMemStore(time.Now)
	cfg := testConfig(fs, store)
	cfg.MergeSize, cfg.MergeAfter, cfg.SplitSize = 1<<20, time.Second, -1
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateSpace(ctx, "small", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 20 {
		key := fmt.Sprintf("%c-%03d", "!z"[i%2], i)
		want[key] = strings.Repeat(key, 3)
		put(t, n, "small", key, []byte(want[key]))
	}
	before := rangesOf(t, n, "small")
	unrecorded := &atomic.Bool{}
	unrecorded.Store(true)
	testMergeUnrecorded = unrecorded
	defer func() { testMergeUnrecorded = nil }()
	// The merge applies; the table still lists both ranges.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rep := n.ranges.Replica(before[0].ID); rep != nil && rep.MergeState().Phase == replica.MergeDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ranges did not merge")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ds := rangesOf(t, n, "small"); len(ds) != 2 {
		t.Fatalf("the merge was recorded: %d ranges", len(ds))
	}
	cfg = restartConfig(n)
	n.Close()
	unrecorded.Store(false)
	if n, err = openStarted(ctx, cfg); err != nil {
		t.Fatalf("restart after an unrecorded merge: %v", err)
	}
	defer n.Close()
	waitMerged(t, []*Node{n}, "small", 1)
	for key, body := range want {
		b, _, err := get(t, n, object.GetRequest{Space: "small", Key: key})
		if err != nil || string(b) != body {
			t.Fatalf("%s: %q, %v", key, b, err)
		}
	}
	res, err := n.List(ctx, &object.ListRequest{Space: "small"})
	if err != nil || len(res.Objects) != len(want) {
		t.Fatalf("listing after the restart: %d objects, %v", len(res.Objects), err)
	}
}
