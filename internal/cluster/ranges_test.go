package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/wire"
)

// rangesOf returns the range table entries of space name.
func rangesOf(t testing.TB, n *Node, name string) []rangedesc.Range {
	t.Helper()
	ctx := context.Background()
	sp, err := n.catalog.GetSpace(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := n.catalog.SpaceRanges(ctx, sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// waitRanges waits until every range of space name has exactly want voters
// and no learners, in raft (on its leader) and in the range table, all of
// them among nodes.
func waitRanges(t *testing.T, nodes []*Node, name string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok := true
		var last string
		for _, d := range rangesOf(t, nodes[0], name) {
			settled := len(d.Replicas) == want && len(d.Learners) == 0
			for _, v := range d.Replicas {
				if !slices.ContainsFunc(nodes, func(n *Node) bool { return n.NodeID() == v }) {
					settled = false
				}
			}
			leader := false
			for _, n := range nodes {
				if rep := n.ranges.Replica(d.ID); rep != nil && rep.Status().IsLeader {
					st := rep.Status()
					leader = placement.SameMembers(st.Voters, d.Replicas) && len(st.Learners) == 0 && !st.Joint
				}
			}
			if !settled || !leader {
				ok = false
				last = fmt.Sprintf("range %d: table voters %v learners %v (epoch %d), leader agrees %v", d.ID, d.Replicas, d.Learners, d.Epoch, leader)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not settled after 90s: %s", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describeRanges says, for a failure message, what each node holds of
// the ranges ids: the raft state of its replica, and whether it leads
// (rng.leads) and is frozen for a merge.
func describeRanges(nodes []*Node, ids []uint64) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "\nrange %d:", id)
		for _, n := range nodes {
			rep := n.ranges.Replica(id)
			if rep == nil {
				fmt.Fprintf(&b, "\n  node %d: no replica", n.NodeID())
				continue
			}
			st := rep.Status()
			fmt.Fprintf(&b, "\n  node %d: leader %d term %d commit %d applied %d lease %v voters %v learners %v joint %v quiesced %v match %v leads %v merge %+v",
				n.NodeID(), st.Leader, st.Term, st.Commit, st.Applied, st.LeaseExpiration.Format("15:04:05.000"),
				st.Voters, st.Learners, st.Joint, st.Quiesced, st.Match, rep.Leads(), rep.MergeState())
		}
	}
	return b.String()
}

// TestRangeRepair stops a node holding range replicas in a four-node
// cluster: once it is down, each range gets a replica on the fourth node
// (learner, snapshot, joint promotion), the table follows, and every
// object reads back and takes writes. When the stopped node returns, it
// drops the replicas it no longer holds.
func TestRangeRepair(t *testing.T) {
	ctx := context.Background()
	nodes := clusterOf(t, 4, func(c *Config) {
		c.HeartbeatTTL, c.DownAfter, c.RepairCheck = time.Second, time.Second, 200*time.Millisecond
	})
	if _, err := nodes[0].CreateSpace(ctx, "moved", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	const objects = 40
	for i := range objects {
		writeAny(t, nodes, "moved", fmt.Sprintf("k%02d-%d", i, i*7919%256), fmt.Sprintf("body %d", i))
	}
	// Stop the node that holds the most replicas.
	held := map[uint64]int{}
	for _, d := range rangesOf(t, nodes[0], "moved") {
		for _, v := range d.Replicas {
			held[v]++
		}
	}
	gone := slices.MaxFunc(nodes, func(a, b *Node) int { return held[a.NodeID()] - held[b.NodeID()] })
	if held[gone.NodeID()] == 0 {
		t.Fatal("no node holds a replica")
	}
	var rest []*Node
	for _, n := range nodes {
		if n != gone {
			rest = append(rest, n)
		}
	}
	goneID, cfg := gone.NodeID(), restartConfig(gone)
	gone.Close()
	stopped := time.Now()
	waitRanges(t, rest, "moved", 3, "replicas moved off the stopped node")
	t.Logf("node %d held %d replicas; 3 replicas each on the other nodes %v after it stopped (down after 1s)",
		goneID, held[goneID], time.Since(stopped).Round(time.Millisecond))
	for i := range objects {
		key := fmt.Sprintf("k%02d-%d", i, i*7919%256)
		if got := readAny(t, rest, "moved", key); got != fmt.Sprintf("body %d", i) {
			t.Fatalf("%s reads %q after the move", key, got)
		}
	}
	writeAny(t, rest, "moved", "after", "written after the move")

	// Every replica holds the same objects: read each range's state on
	// every voter by making it the leader in turn is heavy; instead check
	// that the new replicas applied as far as their leaders.
	for _, d := range rangesOf(t, rest[0], "moved") {
		var commit uint64
		for deadline := time.Now().Add(10 * time.Second); commit == 0; {
			for _, n := range rest {
				if rep := n.ranges.Replica(d.ID); rep != nil && rep.Status().IsLeader {
					commit = rep.Status().Commit
				}
			}
			if commit == 0 {
				// No leader right now (an election): without its commit
				// index the check below would hold vacuously.
				if time.Now().After(deadline) {
					t.Fatalf("range %d has no leader among the nodes left", d.ID)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, n := range rest {
			if !slices.Contains(d.Replicas, n.NodeID()) {
				continue
			}
			deadline := time.Now().Add(30 * time.Second)
			for n.ranges.Replica(d.ID) == nil || n.ranges.Replica(d.ID).Status().Applied < commit {
				if time.Now().After(deadline) {
					t.Fatalf("range %d on node %d did not apply up to %d", d.ID, n.NodeID(), commit)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	back := openNode(t, cfg)
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := 0
		for _, d := range rangesOf(t, back, "moved") {
			if back.ranges.Replica(d.ID) != nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d still holds %d replicas it was replaced on", back.NodeID(), left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := readAny(t, []*Node{back}, "moved", "after"); got != "written after the move" {
		t.Fatalf("the returned node reads %q", got)
	}
}

// TestDrainAndRemove drains a node of a four-node cluster and removes it:
// its range replicas move, its chunks get their copies elsewhere, its meta
// member goes, the map says removed, everything reads back, and the node
// cannot start again under its id. Removal refuses until the node is
// empty, and refuses the answering node itself and unknown nodes.
func TestDrainAndRemove(t *testing.T) {
	ctx := context.Background()
	nodes := clusterOf(t, 4, func(c *Config) {
		c.HeartbeatTTL, c.RepairCheck = time.Second, 200*time.Millisecond
	})
	admin := nodes[0]
	if _, err := admin.CreateSpace(ctx, "drained", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	bodies := map[string]string{}
	var hashes []chunk.Hash
	for i := range 6 {
		key := fmt.Sprintf("obj-%d", i)
		bodies[key] = string(randBytes(rnd, 600<<10+i*1000))
		info := writeAny(t, nodes, "drained", key, bodies[key])
		for _, ref := range manifest(t, admin, "drained", key, info.Version).Chunks {
			hashes = append(hashes, ref.Hash)
		}
	}
	// The node to remove holds range replicas and is not the admin node.
	held := map[uint64]int{}
	for _, d := range rangesOf(t, admin, "drained") {
		for _, v := range d.Replicas {
			held[v]++
		}
	}
	victim := slices.MaxFunc(nodes[1:], func(a, b *Node) int { return held[a.NodeID()] - held[b.NodeID()] })
	id := victim.NodeID()
	var rest []*Node
	for _, n := range nodes {
		if n != victim {
			rest = append(rest, n)
		}
	}
	for _, c := range []struct {
		id   uint64
		code wire.Code
	}{{id, wire.CodeNotDrained}, {admin.NodeID(), wire.CodeInvalidArgument}, {999, wire.CodeNotFound}} {
		if err := admin.NodeAdmin(ctx, wire.NodeRemove, c.id); wire.CodeOf(err) != c.code {
			t.Fatalf("remove node %d before draining: %v, want code %v", c.id, err, c.code)
		}
	}
	if err := admin.NodeAdmin(ctx, wire.NodeDrain, id); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		err := admin.NodeAdmin(ctx, wire.NodeRemove, id)
		if err == nil {
			break
		}
		if wire.CodeOf(err) != wire.CodeNotDrained || time.Now().After(deadline) {
			var held []uint64
			if ranges, lerr := admin.catalog.ListRanges(ctx); lerr == nil {
				held = heldRanges(ranges, id)
			}
			t.Fatalf("remove node %d after %v: %v%s", id, time.Since(start).Round(time.Millisecond), err, describeRanges(nodes, held))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("node %d held %d replicas; drained and removed %v after the drain began", id, held[id], time.Since(start).Round(time.Millisecond))

	for _, d := range rangesOf(t, admin, "drained") {
		if d.Holds(id) {
			t.Fatalf("range %d still lists node %d: %+v", d.ID, id, d)
		}
	}
	for _, h := range hashes {
		if c := copies(rest, h); c < 3 {
			t.Fatalf("chunk %s has %d copies on the remaining nodes", h, c)
		}
	}
	all, err := admin.catalog.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range all {
		if nd.ID == id && nd.State != meta.NodeRemoved {
			t.Fatalf("node %d is %s after removal", id, nd.State)
		}
	}
	members, err := admin.meta.(membership).Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Name == memberName(id) {
			t.Fatalf("meta member of the removed node is still there: %+v", members)
		}
	}
	cfg := restartConfig(victim)
	victim.Close()
	for key, body := range bodies {
		if got := readAny(t, rest, "drained", key); got != body {
			t.Fatalf("%s reads back differently after the removal", key)
		}
	}
	writeAny(t, rest, "drained", "after", "x")
	if n, err := openStarted(ctx, cfg); err == nil {
		n.Close()
		t.Fatal("a removed node started again")
	} else if !strings.Contains(err.Error(), "removed") {
		t.Fatalf("restart of a removed node: %v", err)
	}
}

// TestRebalanceToNewNode adds a fourth node to a three-node cluster whose
// ranges are on all three: once every node has been up a while, each range
// whose best placement includes the new node moves a replica to it (and
// the lease goes to each range's first-placed node), with every object
// still readable.
func TestRebalanceToNewNode(t *testing.T) {
	ctx := context.Background()
	tune := func(c *Config) { c.HeartbeatTTL, c.RebalanceAfter = time.Second, 2*time.Second }
	nodes := clusterOf(t, 3, tune)
	if _, err := nodes[0].CreateSpace(ctx, "spread", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		writeAny(t, nodes, "spread", fmt.Sprintf("%c-%d", 'a'+i*6, i), fmt.Sprintf("body %d", i))
	}
	c := clusterConfig(t, nodes[0].PeerAddr())
	tune(&c)
	added := openNode(t, c)
	nodes = append(nodes, added)
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		up, err := nodes[0].catalog.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		settled, holds := true, 0
		for _, d := range rangesOf(t, nodes[0], "spread") {
			ideal := placement.Rank(d.ID, placementNodes(up), 3)
			if !placement.SameMembers(d.Replicas, ideal) || len(d.Learners) > 0 {
				settled = false
			}
			if d.Holds(added.NodeID()) {
				holds++
			}
		}
		if settled && holds > 0 {
			t.Logf("node %d joined and holds replicas of %d of 4 ranges; placement settled %v after it joined", added.NodeID(), holds, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("placement not settled 90s after node %d joined (it holds %d ranges)", added.NodeID(), holds)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := range 40 {
		if got := readAny(t, nodes, "spread", fmt.Sprintf("%c-%d", 'a'+i*6, i)); got != fmt.Sprintf("body %d", i) {
			t.Fatalf("object %d reads %q after the rebalance", i, got)
		}
	}
}
