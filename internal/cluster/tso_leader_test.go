package cluster

import (
	"context"
	"testing"
	"time"
)

// TestOracleOffMetaLeader: the node serving the timestamp oracle does not
// stay the meta service's raft leader: it hands that leadership to another
// node, also when it is moved onto it.
func TestOracleOffMetaLeader(t *testing.T) {
	nodes := threeNodes(t)
	apart := func() (oracle, leader *Node) {
		for _, n := range nodes {
			if n.servesOracle() {
				oracle = n
			}
			if m := n.localMember(); m != nil && m.LeadsRaft() {
				leader = n
			}
		}
		return oracle, leader
	}
	wait := func(what string) (oracle, leader *Node) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			o, l := apart()
			if o != nil && l != nil && o != l {
				return o, l
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: oracle on %v, meta leader on %v", what, o, l)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	oracle, leader := wait("after the start")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leader.localMember().MoveLeader(ctx, memberName(oracle.NodeID())); err != nil {
		t.Fatal(err)
	}
	// (MoveLeader returned: it was there; the node moves it away again.)
	oracle2, leader2 := wait("after the meta leadership moved onto the oracle's node")
	t.Logf("oracle on node %d, meta leader moved back from it to node %d", oracle2.NodeID(), leader2.NodeID())
}
