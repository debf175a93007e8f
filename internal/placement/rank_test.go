package placement

import (
	"fmt"
	"slices"
	"testing"
)

func TestRank(t *testing.T) {
	var nodes []Node
	for i := range 6 {
		nodes = append(nodes, Node{ID: uint64(i + 1), Zone: fmt.Sprintf("z%d", i%3)})
	}
	counts := map[uint64]int{}
	for rangeID := uint64(1); rangeID <= 300; rangeID++ {
		got := Rank(rangeID, nodes, 3)
		if len(got) != 3 {
			t.Fatalf("range %d: %d replicas", rangeID, len(got))
		}
		zones := map[string]bool{}
		for _, id := range got {
			zones[nodes[id-1].Zone] = true
			counts[id]++
		}
		if len(zones) != 3 {
			t.Fatalf("range %d on %v shares a zone", rangeID, got)
		}
		if again := Rank(rangeID, nodes, 3); !slices.Equal(got, again) {
			t.Fatalf("range %d: %v then %v", rangeID, got, again)
		}
	}
	for id, c := range counts { // 900 replicas over 6 nodes: about 150 each
		if c < 100 || c > 200 {
			t.Fatalf("node %d holds %d of 900 replicas: %v", id, c, counts)
		}
	}
	// Fewer nodes than replicas: every node, once.
	if got := Rank(7, nodes[:2], 3); len(got) != 2 || got[0] == got[1] {
		t.Fatalf("two nodes: %v", got)
	}
	// Adding a node moves only ranges that now prefer it.
	more := append(slices.Clone(nodes), Node{ID: 7, Zone: "z0"})
	moved := 0
	for rangeID := uint64(1); rangeID <= 300; rangeID++ {
		before, after := Rank(rangeID, nodes, 1), Rank(rangeID, more, 1)
		if before[0] != after[0] {
			moved++
			if after[0] != 7 {
				t.Fatalf("range %d moved from %d to %d, not to the new node", rangeID, before[0], after[0])
			}
		}
	}
	if moved == 0 || moved > 80 { // about 300/7
		t.Fatalf("%d of 300 ranges moved to the new node", moved)
	}
}

// TestRankSmallIDs checks the spread where node ids differ only
// in their low bits and keys are arbitrary 64-bit numbers (chunk hashes):
// every node must be first choice for about its share of keys, for every
// pair of nodes.
func TestRankSmallIDs(t *testing.T) {
	var nodes []Node
	for i := range 4 {
		nodes = append(nodes, Node{ID: uint64(i + 1), Zone: "default"})
	}
	first := map[uint64]int{}
	held := map[uint64]int{}
	key := uint64(0x243f6a8885a308d3)
	for range 4000 {
		key = key*6364136223846793005 + 1442695040888963407
		got := Rank(key, nodes, 3)
		first[got[0]]++
		for _, id := range got {
			held[id]++
		}
	}
	for _, nd := range nodes {
		if f := first[nd.ID]; f < 800 || f > 1200 { // about 1000
			t.Errorf("node %d is first choice for %d of 4000 keys: %v", nd.ID, f, first)
		}
		if h := held[nd.ID]; h < 2700 || h > 3300 { // about 3000
			t.Errorf("node %d holds %d of 12000 copies: %v", nd.ID, h, held)
		}
	}
}
