package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/wire"
)

func clusterConfig(t *testing.T, join string) Config {
	return Config{
		DataDir: t.TempDir(), Listen: "127.0.0.1",
		NativePort: -1, HTTPPort: -1, MetaPort: -1, MetaClientPort: -1, PeerPort: -1,
		Join:   join,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func openNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Serve()
	t.Cleanup(func() { n.Close() })
	return n
}

// TestJoinGrowsMeta starts a node, joins two more through it, and checks
// that every node is in the cluster map under its own id, that the meta
// service grows to three voters, and that a node that joined writes to the
// meta service. A joined node restarts as the same node.
func TestJoinGrowsMeta(t *testing.T) {
	ctx := context.Background()
	first := openNode(t, clusterConfig(t, ""))
	secondCfg := clusterConfig(t, first.PeerAddr())
	second := openNode(t, secondCfg)
	third := openNode(t, clusterConfig(t, second.PeerAddr())) // any node admits

	if ids := []uint64{first.NodeID(), second.NodeID(), third.NodeID()}; ids[0] != 1 || ids[1] == ids[0] || ids[2] == ids[1] || ids[2] == ids[0] {
		t.Fatalf("node ids %v", ids)
	}
	nodes, err := third.catalog.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("cluster map seen from the third node: %+v, %v", nodes, err)
	}
	ms := first.meta.(membership)
	deadline := time.Now().Add(60 * time.Second)
	for {
		members, err := ms.Members(ctx)
		voters := 0
		for _, m := range members {
			if !m.Learner {
				voters++
			}
		}
		if err == nil && len(members) == 3 && voters == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("meta members never became three voters: %+v, %v", members, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	doc, err := third.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.ClusterReport
	if err := json.Unmarshal(doc, &rep); err != nil || len(rep.Nodes) != 3 || len(rep.Meta) != 3 || rep.Node != third.NodeID() || rep.Epoch == 0 {
		t.Fatalf("cluster report from the third node: %s (%v)", doc, err)
	}
	for _, m := range rep.Meta {
		if !m.Voter {
			t.Fatalf("cluster report shows a learner: %s", doc)
		}
	}
	if _, err := third.catalog.CreateSpace(ctx, "joined", meta.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatalf("create a space from a joined node: %v", err)
	}
	if _, err := first.catalog.GetSpace(ctx, "joined"); err != nil {
		t.Fatalf("the first node does not see it: %v", err)
	}

	// Restart the second node on its data directory: same id, no new join.
	id := second.NodeID()
	second.Close()
	again := openNode(t, secondCfg)
	if again.NodeID() != id {
		t.Fatalf("restarted as node %d, was %d", again.NodeID(), id)
	}
	if got, _ := first.catalog.Nodes(ctx); len(got) != 3 {
		t.Fatalf("cluster map after restart has %d nodes", len(got))
	}
}
