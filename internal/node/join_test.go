package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
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
	thirdCfg := clusterConfig(t, second.PeerAddr())
	third := openNode(t, thirdCfg) // any node admits

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

	// A joined node writes objects: its timestamps come from the oracle's
	// leader (the first node) over the peer service.
	if _, err := third.CreateSpace(ctx, "objects", wire.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	v1 := put(t, third, "objects", "k", []byte("one"))
	if b, _, err := get(t, third, wire.GetRequest{Space: "objects", Key: "k"}); err != nil || string(b) != "one" {
		t.Fatalf("read back on the joined node: %q, %v", b, err)
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

	// The oracle's leader stops (and resigns): another node takes the oracle
	// over and writes go on, above every earlier
	// timestamp. The writer is the third node (it holds the range), so the
	// leader must be another one.
	leader := func() *Node {
		deadline := time.Now().Add(30 * time.Second)
		for {
			name, err := meta.Leader(ctx, third.meta, "tso")
			for _, nd := range []*Node{first, again, third} {
				if err == nil && name == memberName(nd.NodeID()) {
					return nd
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no oracle leader: %q, %v", name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if leader() == third { // restart it: another node takes the oracle
		third.Close()
		third = openNode(t, thirdCfg)
	}
	gone := leader()
	gone.Close()
	stopped := time.Now()
	deadline = time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := third.Put(pctx, &wire.PutRequest{Space: "objects", Key: "k", Size: 3}, strings.NewReader("two"))
		cancel()
		if err == nil {
			if info.Version <= v1.Version {
				t.Fatalf("version %x after the oracle moved is not above %x", info.Version, v1.Version)
			}
			t.Logf("writes resumed %v after the oracle's leader (node %d) stopped", time.Since(stopped).Round(time.Millisecond), gone.NodeID())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write after the oracle's leader stopped: %v", err)
		}
		t.Logf("write after the oracle's leader stopped: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
}
