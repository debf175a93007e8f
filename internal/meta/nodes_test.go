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
