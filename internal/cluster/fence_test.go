package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// TestDeleteSpaceFencesWrites: a space deleted while another node writes
// to it is either deleted with no write acknowledged, or not deleted
// (not empty) with every acknowledged write there; never deleted under an
// acknowledged write. A space whose delete failed takes writes again.
func TestDeleteSpaceFencesWrites(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	deleted, refused := 0, 0
	for i := range 10 {
		name := fmt.Sprintf("fenced-%d", i)
		if _, err := nodes[0].CreateSpace(ctx, name, object.SpaceSettings{Ranges: 2}); err != nil {
			t.Fatal(err)
		}
		// Every node has the space open (as a busy cluster would).
		for _, n := range nodes {
			if _, err := n.Stat(ctx, &object.GetRequest{Space: name, Key: "none", Length: -1}); !errors.Is(err, object.ErrNotFound) {
				t.Fatalf("stat on node %d: %v", n.NodeID(), err)
			}
		}
		var acked atomic.Int64
		var keys sync.Map
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 1 {
				time.Sleep(time.Duration(i) * time.Millisecond) // let the delete go first
			}
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%d", k)
				_, err := nodes[1+k%2].Put(ctx, &object.PutRequest{Space: name, Key: key, Size: 1}, strings.NewReader("x"))
				switch {
				case err == nil:
					acked.Add(1)
					keys.Store(key, true)
				case errors.Is(err, object.ErrSpaceNotFound):
					return
				}
			}
		}()
		if i%2 == 0 {
			time.Sleep(time.Duration(i) * time.Millisecond) // let the writes go first
		}
		err := nodes[0].DeleteSpace(ctx, name)
		close(stop)
		wg.Wait()
		switch {
		case err == nil:
			deleted++
			if n := acked.Load(); n > 0 {
				t.Fatalf("space %s deleted although %d writes to it were acknowledged", name, n)
			}
			// Made again under the same name, it takes writes through
			// every node (which drop the deleted one).
			if _, err := nodes[0].CreateSpace(ctx, name, object.SpaceSettings{Ranges: 1}); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				writeAny(t, []*Node{n}, name, fmt.Sprintf("again-%d", n.NodeID()), "new")
			}
			res, err := nodes[0].List(ctx, &object.ListRequest{Space: name})
			if err != nil || len(res.Objects) != len(nodes) {
				t.Fatalf("the space made again lists %+v, %v; want the %d objects written through every node", res.Objects, err, len(nodes))
			}
		case errors.Is(err, object.ErrSpaceNotEmpty):
			refused++
			res, lerr := nodes[2].List(ctx, &object.ListRequest{Space: name, Limit: 1000})
			if lerr != nil {
				t.Fatal(lerr)
			}
			found := map[string]bool{}
			for _, o := range res.Objects {
				found[o.Key] = true
			}
			keys.Range(func(k, _ any) bool {
				if !found[k.(string)] {
					t.Fatalf("acknowledged write %s is missing after a refused delete", k)
				}
				return true
			})
			// The space takes writes again, on every node.
			for _, n := range nodes {
				writeAny(t, []*Node{n}, name, "after", "again")
			}
		default:
			t.Fatalf("delete of %s: %v", name, err)
		}
	}
	t.Logf("%d deleted with no write acknowledged, %d refused as not empty", deleted, refused)
}

// TestDeleteSpaceNeedsEveryNode: a delete while a node cannot be reached
// fails with an error that names it and what to do, and changes nothing:
// the space stays, active, and takes writes on every node.
func TestDeleteSpaceNeedsEveryNode(t *testing.T) {
	ctx := context.Background()
	var cut atomic.Uint64 // a node no other can reach; 0: none
	nodes := threeNodes(t, func(c *Config) {
		c.Link = func(from, to uint64) bool { return to != cut.Load() && from != cut.Load() }
	})
	if _, err := nodes[0].CreateSpace(ctx, "kept", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	cut.Store(nodes[2].NodeID())
	err := nodes[0].DeleteSpace(ctx, "kept")
	want := fmt.Sprintf("node %d", nodes[2].NodeID())
	if !errors.Is(err, object.ErrUnavailable) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cairn node remove") {
		t.Fatalf("delete with node %d cut off: %v", nodes[2].NodeID(), err)
	}
	cut.Store(0)
	for _, n := range nodes {
		writeAny(t, []*Node{n}, "kept", fmt.Sprintf("after-%d", n.NodeID()), "still here")
	}
}

// TestStaleReadKeepsFence: a settings refresh that read the catalog before
// a delete began (the space still active) does not lift the fence the
// delete set since; once the catalog says active again, it does.
func TestStaleReadKeepsFence(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, clusterConfig(t, ""))
	if _, err := n.CreateSpace(ctx, "kept", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	stale, err := n.catalog.GetSpace(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	n.mu.RLock()
	s := n.mu.spaces["kept"]
	n.mu.RUnlock()
	if err := n.catalog.MoveSpaceState(ctx, "kept", meta.SpaceActive, meta.SpaceFencing); err != nil {
		t.Fatal(err)
	}
	if err := n.fenceOn(ctx, n.NodeID(), "kept", true); err != nil {
		t.Fatal(err)
	}
	n.liftStaleFence(ctx, stale, s) // read before the delete began
	if _, err := n.Put(ctx, &object.PutRequest{Space: "kept", Key: "k", Size: 1}, strings.NewReader("x")); !errors.Is(err, object.ErrUnavailable) {
		t.Fatalf("a write after a stale refresh during a delete: %v, want unavailable", err)
	}
	if err := n.catalog.MoveSpaceState(ctx, "kept", meta.SpaceFencing, meta.SpaceActive); err != nil {
		t.Fatal(err)
	}
	n.liftStaleFence(ctx, stale, s)
	if _, err := n.Put(ctx, &object.PutRequest{Space: "kept", Key: "k", Size: 1}, strings.NewReader("x")); err != nil {
		t.Fatalf("a write once the space is active again: %v", err)
	}
}

// TestStaleListKeepsNewSpace: a settings refresh whose catalog list was
// read before a space was made here does not drop that space.
func TestStaleListKeepsNewSpace(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, clusterConfig(t, ""))
	before, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateSpace(ctx, "fresh", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	n.mu.RLock()
	s := n.mu.spaces["fresh"]
	n.mu.RUnlock()
	if s == nil {
		t.Fatal("the new space is not open here")
	}
	n.applySettings(ctx, before)
	n.mu.RLock()
	kept := n.mu.spaces["fresh"] == s
	n.mu.RUnlock()
	if !kept {
		t.Fatal("a refresh on a list read before the space was made dropped it")
	}
}
