package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/object"
)

// TestChunkRepair writes chunked objects on four nodes (three copies of
// each chunk), stops one node, and checks that once it is down the
// repairer restores three copies of every chunk on the three left, and
// that the objects read back whole.
func TestChunkRepair(t *testing.T) {
	ctx := context.Background()
	nodes := clusterOf(t, 4, func(c *Config) {
		c.HeartbeatTTL, c.DownAfter, c.RepairCheck = time.Second, time.Second, 200*time.Millisecond
	})
	if _, err := nodes[0].CreateSpace(ctx, "repaired", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(11, 12))
	bodies := map[string]string{}
	var hashes []chunk.Hash
	for i := range 4 {
		key := fmt.Sprintf("obj-%d", i)
		bodies[key] = string(randBytes(rnd, 1<<20+i*4096))
		info := writeAny(t, nodes, "repaired", key, bodies[key])
		for _, ref := range manifest(t, nodes[0], "repaired", key, info.Version).Chunks {
			hashes = append(hashes, ref.Hash)
		}
	}
	// Stop a node that holds copies (every node does, with 4 objects of
	// several chunks at 3 copies on 4 nodes; pick the last).
	gone, rest := nodes[3], nodes[:3]
	lost := 0
	for _, h := range hashes {
		if ok, _ := gone.chunks.Has(h); ok {
			lost++
		}
	}
	if lost == 0 {
		t.Fatalf("node %d holds none of the %d chunks", gone.NodeID(), len(hashes))
	}
	gone.Close()
	stopped := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		short := 0
		for _, h := range hashes {
			if copies(rest, h) < 3 {
				short++
			}
		}
		if short == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d chunks still have fewer than 3 copies a minute after node %d stopped", short, len(hashes), gone.NodeID())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d chunks of %d had a copy on node %d; 3 copies again %v after it stopped (down after 1s)",
		lost, len(hashes), gone.NodeID(), time.Since(stopped).Round(time.Millisecond))
	for key, body := range bodies {
		if got := readAny(t, rest, "repaired", key); got != body {
			t.Fatalf("%s read back differently after repair", key)
		}
	}
}

// TestPacer checks that the repairer's pacer holds a byte rate and lets
// everything through when unlimited.
func TestPacer(t *testing.T) {
	p := pacer{rate: 10 << 20} // 10 MiB/s
	now := time.Unix(1000, 0)  // the time is an input: all five at once
	var d time.Duration
	for range 5 {
		d = p.reserve(1<<20, now)
	}
	// 5 MiB at 10 MiB/s: the last MiB fits 0.5 s from now (the first MiB
	// is paid for too).
	if d != 500*time.Millisecond {
		t.Fatalf("5 MiB at 10 MiB/s: the last waits %v, want 0.5s", d)
	}
	free := pacer{}
	for range 1000 {
		if d := free.reserve(1<<30, now); d != 0 {
			t.Fatalf("an unlimited pacer asked for a wait of %v", d)
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := pacer{rate: 1}
	if err := clock.Sleep(cctx, slow.reserve(1<<20, now)); err == nil {
		t.Fatal("a canceled wait returned nil")
	}
}

// copies counts the nodes of among that hold chunk h.
func copies(among []*Node, h chunk.Hash) int {
	c := 0
	for _, n := range among {
		if ok, _ := n.chunks.Has(h); ok {
			c++
		}
	}
	return c
}

// TestRepairKeepsSpaceCopies: the repairer keeps each chunk at the copies
// of the space that wrote it, not at the largest replication factor of any
// space: a space of one replica stays at one copy per chunk beside a space
// of three.
func TestRepairKeepsSpaceCopies(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "three", object.SpaceSettings{Ranges: 1, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].CreateSpace(ctx, "one", object.SpaceSettings{Ranges: 1, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(21, 22))
	one := writeAny(t, nodes, "one", "single", string(randBytes(rnd, 1<<20)))
	three := writeAny(t, nodes, "three", "triple", string(randBytes(rnd, 1<<20)))
	// A full repair pass on every node (as after any change of the
	// cluster map).
	for _, n := range nodes {
		if st, err := n.repairChunks(ctx, n.peers.view()); err != nil || st.Failed > 0 {
			t.Fatalf("repair pass on node %d: %+v, %v", n.NodeID(), st, err)
		}
	}
	for _, ref := range manifest(t, nodes[0], "one", "single", one.Version).Chunks {
		if c := copies(nodes, ref.Hash); c != 1 {
			t.Fatalf("a chunk of the space of one replica has %d copies", c)
		}
	}
	for _, ref := range manifest(t, nodes[0], "three", "triple", three.Version).Chunks {
		if c := copies(nodes, ref.Hash); c != 3 {
			t.Fatalf("a chunk of the space of three replicas has %d copies", c)
		}
	}
}
