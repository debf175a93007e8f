package placement

import (
	"slices"
	"testing"
	"time"
)

// TestLeaseTargetDeals: the ranges of a three-node cluster (every range on
// the same three nodes) deal their leases evenly round the nodes, and a
// range's target is always one of its best-placed nodes.
func TestLeaseTargetDeals(t *testing.T) {
	up := []Node{{ID: 1}, {ID: 2}, {ID: 3}}
	count := map[uint64]int{}
	for id := uint64(1); id <= 30; id++ {
		ideal := Rank(id, up, 3)
		lt := LeaseTarget(id, ideal)
		if !slices.Contains(ideal, lt) {
			t.Fatalf("range %d: lease target %d is not among %v", id, lt, ideal)
		}
		count[lt]++
	}
	for _, n := range up {
		if count[n.ID] != 10 {
			t.Fatalf("leases of 30 ranges per node: %v, want 10 each", count)
		}
	}
	if LeaseTarget(7, nil) != 0 {
		t.Fatal("a range placed nowhere has a lease target")
	}
}

// TestRangePlanColocate: a range asked to colocate with its neighbour
// takes the neighbour's nodes as its placement (new replicas go there
// first, voters elsewhere are removed first, the lease goes to one of
// them), but only while every node is calm and every node named is up and
// they are as many as the range wants.
func TestRangePlanColocate(t *testing.T) {
	now := time.Now()
	var nodes []Node
	for id := uint64(1); id <= 5; id++ {
		nodes = append(nodes, Node{ID: id, State: Up, Since: now.Add(-time.Hour)})
	}
	voters, prefer := []uint64{1, 2, 3}, []uint64{3, 4, 5}
	for id := uint64(1); id <= 20; id++ {
		p := NewRangePlan(1, 3, nodes, voters, nil, now, time.Minute)
		p.Colocate(prefer)
		if !slices.Equal(p.Ideal(id), prefer) {
			t.Fatalf("range %d: ideal %v, want %v", id, p.Ideal(id), prefer)
		}
		if tg := p.Target(id); tg != 4 && tg != 5 {
			t.Fatalf("range %d: new replica goes to %d, want 4 or 5", id, tg)
		}
		if v := p.Victim(id); v != 1 && v != 2 {
			t.Fatalf("range %d: removes voter %d, want 1 or 2", id, v)
		}
	}

	// Ignored when not calm, when a node named is not up, when the count
	// is not the range's.
	p := NewRangePlan(1, 3, nodes, voters, nil, now, 2*time.Hour)
	p.Colocate(prefer)
	if p.prefer != nil {
		t.Fatal("colocating while nodes are not calm")
	}
	p = NewRangePlan(1, 3, nodes, voters, nil, now, time.Minute)
	p.Colocate([]uint64{3, 4, 9}) // node 9 is not in the map
	if p.prefer != nil {
		t.Fatal("colocating onto a node that is not up")
	}
	p = NewRangePlan(1, 3, nodes, voters, nil, now, time.Minute)
	p.Colocate([]uint64{4, 5})
	if p.prefer != nil {
		t.Fatal("colocating onto two nodes for three replicas")
	}
}
