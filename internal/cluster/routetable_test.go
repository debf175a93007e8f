package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/object"
)

// forwards is how many range operations the nodes passed on to another
// node's leaseholder so far.
func forwards(nodes []*Node) int {
	k := 0
	for _, n := range nodes {
		var m dto.Metric
		if err := n.metrics.forwards.Write(&m); err != nil {
			panic(err)
		}
		k += int(m.GetCounter().GetValue())
	}
	return k
}

// TestClientRoutes checks that the Go client, given one live seed and a
// dead one, learns the route table and sends keyed requests straight to
// each range's leaseholder (no node forwards them), and that after a lease
// moves it finds the new leaseholder again.
func TestClientRoutes(t *testing.T) {
	ctx := context.Background()
	// No rebalancing: it would move the lease below back on its own.
	nodes := threeNodes(t, func(c *Config) { c.RebalanceAfter = time.Hour })
	if _, err := nodes[0].CreateSpace(ctx, "routes", object.SpaceSettings{Ranges: 8}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	root := nodes[0].RootKey()
	for _, n := range nodes {
		serveNative(t, n)
	}
	cl, err := client.DialOptions(ctx, client.Options{Addrs: []string{dead, nodes[1].cfg.NativeAddr}, DialTimeout: time.Second,
		AccessKey: root.Access, SecretKey: root.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// First bytes in most ranges (UTF-8 keys never start with 0x80-0xc1).
	var keys []string
	for i, first := range []string{"\x10", "!", "5", "L", "z", "é", "ж", "中", "😀"} {
		for j := range 6 {
			keys = append(keys, fmt.Sprintf("%s%d-%d", first, i, j))
		}
	}
	round := func() int {
		t.Helper()
		before := forwards(nodes)
		for _, k := range keys {
			if _, err := cl.Put(ctx, "routes", k, []byte("v"+k)); err != nil {
				t.Fatalf("put %q: %v", k, err)
			}
			if b, _, err := cl.Get(ctx, "routes", k); err != nil || string(b) != "v"+k {
				t.Fatalf("get %q: %q %v", k, b, err)
			}
		}
		return forwards(nodes) - before
	}
	settled := func(what string) {
		t.Helper()
		for i := 0; ; i++ {
			f := round()
			if f == 0 {
				t.Logf("%s: no request forwarded after %d rounds", what, i+1)
				return
			}
			if i == 20 {
				t.Fatalf("%s: a round of %d requests still had %d forwarded", what, 2*len(keys), f)
			}
			time.Sleep(300 * time.Millisecond) // a table fetch in flight
		}
	}
	if f := round(); f == 0 {
		t.Fatal("the first round, before the client had routes, was not forwarded at all: the nodes' leases are all on one node?")
	}
	settled("first routes")

	// Move one range's lease: the client must follow it.
	s, release, err := nodes[0].acquire(ctx, "routes")
	if err != nil {
		t.Fatal(err)
	}
	r := s.tab.Ranges()[2]
	release()
	var from, to *Node
	for _, n := range nodes {
		if rep := n.ranges.Replica(r.Desc().ID); rep != nil && rep.Status().Leader == n.NodeID() {
			from = n
		}
	}
	if from == nil {
		t.Fatal("no leader for range 2")
	}
	for _, n := range nodes {
		if n != from {
			to = n
			break
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		// A transfer starts only toward a node heard from just now
		// (replica.TransferLeadership): ask until it has.
		from.ranges.Replica(r.Desc().ID).TransferLeadership(to.NodeID())
		if rep := to.ranges.Replica(r.Desc().ID); rep != nil && rep.Leads() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease of range %d did not move to node %d", r.Desc().ID, to.NodeID())
		}
		time.Sleep(20 * time.Millisecond)
	}
	settled(fmt.Sprintf("lease of range %d moved from node %d to %d", r.Desc().ID, from.NodeID(), to.NodeID()))
	if rep := to.ranges.Replica(r.Desc().ID); rep == nil || !rep.Leads() {
		t.Fatalf("the lease of range %d left node %d while the client settled: the check above proved nothing", r.Desc().ID, to.NodeID())
	}
}
