package cluster

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// TestNodeFailureStates stops one node of three: the others see it suspect
// once its heartbeat lease ends and down after DownAfter, and chunked
// writes go on with two copies, on the nodes that are up.
func TestNodeFailureStates(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.HeartbeatTTL, c.DownAfter = time.Second, 2*time.Second })
	if _, err := nodes[0].CreateSpace(ctx, "health", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	writeAny(t, nodes, "health", "before", "x")
	gone, rest := nodes[2], nodes[:2]
	gone.Close()
	stopped := time.Now()
	stateOf := func() string {
		ns, err := rest[0].catalog.Nodes(ctx)
		if err != nil {
			return ""
		}
		for _, nd := range ns {
			if nd.ID == gone.NodeID() {
				return nd.State
			}
		}
		return ""
	}
	var suspectAfter time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for st := stateOf(); st != meta.NodeDown; st = stateOf() {
		if st == meta.NodeSuspect && suspectAfter == 0 {
			suspectAfter = time.Since(stopped)
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped node %d is %q after 30s, not down", gone.NodeID(), st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if suspectAfter == 0 {
		t.Fatal("the node went down without being suspect first")
	}
	t.Logf("node %d suspect %v and down %v after it stopped", gone.NodeID(), suspectAfter.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))

	body := randBytes(rand.New(rand.NewPCG(7, 8)), 2<<20)
	info := writeAny(t, rest, "health", "after", string(body))
	if got := readAny(t, rest, "health", "after"); got != string(body) {
		t.Fatal("read back a different body")
	}
	for _, ref := range manifest(t, rest[0], "health", "after", info.Version).Chunks {
		for _, holder := range rest {
			if ok, _ := holder.chunks.Has(ref.Hash); !ok {
				t.Fatalf("node %d lacks chunk %s written while node %d was down", holder.NodeID(), ref.Hash, gone.NodeID())
			}
		}
	}
}
