package meta

import (
	"context"
	"testing"
	"time"
)

func TestClusterMap(t *testing.T) {
	ctx := context.Background()
	c := NewCatalog(NewMemStore(time.Now))
	if err := c.ReserveNodeID(ctx, 1); err != nil {
		t.Fatal(err)
	}
	id, err := c.AllocNodeID(ctx)
	if err != nil || id != 2 {
		t.Fatalf("first allocated id after reserving 1: %d, %v", id, err)
	}
	if err := c.ReserveNodeID(ctx, 1); err != nil { // never lowers the counter
		t.Fatal(err)
	}
	if id, _ := c.AllocNodeID(ctx); id != 3 {
		t.Fatalf("next id %d, want 3", id)
	}
	started := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	for _, n := range []NodeInfo{
		{ID: 2, Native: "10.0.0.2:7070", Peer: "10.0.0.2:7071", Zone: "b", Started: started},
		{ID: 1, Native: "10.0.0.1:7070", Peer: "10.0.0.1:7071", Zone: "a", Capacity: 1 << 40, Started: started},
	} {
		if err := c.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].ID != 1 || nodes[1].ID != 2 || nodes[0].Capacity != 1<<40 ||
		nodes[0].State != NodeUp || nodes[1].Peer != "10.0.0.2:7071" || !nodes[1].Started.Equal(started) {
		t.Fatalf("cluster map: %+v", nodes)
	}
	if err := c.RegisterNode(ctx, NodeInfo{}); err == nil {
		t.Fatal("node id 0 was accepted")
	}
}

// TestNextState walks a node through every heartbeat-driven transition.
func TestNextState(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	const grace, down = 3 * time.Second, time.Minute
	for _, tc := range []struct {
		cur   string
		alive bool
		age   time.Duration // now - since
		want  string
	}{
		{NodeUp, true, time.Hour, NodeUp},
		{NodeUp, false, time.Second, NodeUp}, // just registered: its first heartbeat may not have landed
		{NodeUp, false, grace, NodeSuspect},
		{NodeSuspect, false, down - time.Second, NodeSuspect},
		{NodeSuspect, false, down, NodeDown},
		{NodeSuspect, true, time.Second, NodeUp},
		{NodeDown, false, time.Hour, NodeDown},
		{NodeDown, true, time.Hour, NodeUp},
		{NodeDraining, false, time.Hour, NodeDraining},
		{NodeDraining, true, 0, NodeDraining},
	} {
		if got := NextState(tc.cur, tc.alive, t0, t0.Add(tc.age), grace, down); got != tc.want {
			t.Errorf("%s, alive=%v, %v in state: %s, want %s", tc.cur, tc.alive, tc.age, got, tc.want)
		}
	}
}

// TestNodeStateAndHeartbeats checks that heartbeat leases name the live
// nodes and that a state change is a compare-and-swap that moves the map
// epoch.
func TestNodeStateAndHeartbeats(t *testing.T) {
	ctx := context.Background()
	s := NewMemStore(time.Now)
	c := NewCatalog(s)
	at := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	for _, id := range []uint64{1, 2} {
		if err := c.RegisterNode(ctx, NodeInfo{ID: id, Peer: "p", Started: at}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.Campaign(ctx, HeartbeatName(2), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if live, err := c.LiveNodes(ctx); err != nil || len(live) != 1 || !live[2] {
		t.Fatalf("live nodes with node 2 heartbeating: %v, %v", live, err)
	}
	epoch, _ := c.MapEpoch(ctx)
	later := at.Add(time.Minute)
	if ok, err := c.SetNodeState(ctx, 1, NodeUp, NodeSuspect, later); !ok || err != nil {
		t.Fatalf("up -> suspect: %v, %v", ok, err)
	}
	if ok, err := c.SetNodeState(ctx, 1, NodeUp, NodeSuspect, later); ok || err != nil {
		t.Fatalf("a second up -> suspect must not apply: %v, %v", ok, err)
	}
	if ok, err := c.SetNodeState(ctx, 9, NodeUp, NodeSuspect, later); ok || err != nil {
		t.Fatalf("state change of an unknown node: %v, %v", ok, err)
	}
	nodes, _ := c.Nodes(ctx)
	if nodes[0].State != NodeSuspect || !nodes[0].Since.Equal(later) || !nodes[0].Started.Equal(at) || nodes[1].State != NodeUp {
		t.Fatalf("after the change: %+v", nodes)
	}
	if e, _ := c.MapEpoch(ctx); e <= epoch {
		t.Fatalf("map epoch %d did not move past %d", e, epoch)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if live, err := c.LiveNodes(ctx); err != nil || len(live) != 0 {
		t.Fatalf("live nodes after node 2 resigned: %v, %v", live, err)
	}
}
