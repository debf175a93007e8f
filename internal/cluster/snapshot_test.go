package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

// TestSnapshot: a snapshot reads its space as of its making, refuses
// writes, holds the versions it shows (no pruning, no version delete),
// has a name no space may take, and goes with rm.
func TestSnapshot(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "base", object.SpaceSettings{Retention: "last", KeepLast: 1, Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	a1 := put(t, n, "base", "a", []byte("a1"))
	put(t, n, "base", "b", []byte("b1"))
	big := bytes.Repeat([]byte("big"), 200000)
	put(t, n, "base", "m", big)
	before := n.chunks.Stats().Bytes
	snap, err := n.CreateSnapshot(ctx, "base", "base-monday")
	if err != nil {
		t.Fatal(err)
	}
	if n.chunks.Stats().Bytes != before || snap.At <= a1.Version || snap.Space != "base" {
		t.Fatalf("snapshot %+v (segment bytes %d -> %d)", snap, before, n.chunks.Stats().Bytes)
	}
	a2 := put(t, n, "base", "a", []byte("a2")) // keep-last 1 would prune a1
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "base", Key: "b"}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "base", "c", []byte("c1"))
	put(t, n, "base", "m", []byte("small now"))

	read := func(space, key string) string {
		t.Helper()
		got, _, err := get(t, n, object.GetRequest{Space: space, Key: key})
		if err != nil {
			return "error: " + object.KindOf(err).String()
		}
		return string(got)
	}
	for key, want := range map[string]string{"a": "a1", "b": "b1", "c": "error: not found"} {
		if got := read("base-monday", key); got != want {
			t.Fatalf("snapshot reads %s = %q, want %q", key, got, want)
		}
	}
	if got := read("base-monday", "m"); got != string(big) {
		t.Fatal("snapshot reads the big object wrong")
	}
	if got := read("base", "a"); got != "a2" {
		t.Fatalf("the space reads a = %q", got)
	}
	l, err := n.List(ctx, &object.ListRequest{Space: "base-monday"})
	if err != nil || len(l.Objects) != 3 || l.Objects[0].Key != "a" || l.Objects[1].Key != "b" || l.Objects[2].Key != "m" {
		t.Fatalf("snapshot lists %+v %v", l.Objects, err)
	}
	vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "base-monday", Key: "a"})
	if err != nil || len(vs.Versions) != 1 || vs.Versions[0].Version != a1.Version {
		t.Fatalf("snapshot's versions of a: %+v %v", vs.Versions, err)
	}
	if _, _, err := get(t, n, object.GetRequest{Space: "base-monday", Key: "a", Version: a2.Version}); object.KindOf(err) != object.NotFound {
		t.Fatalf("a version after the snapshot read through it: %v", err)
	}
	// The space still has a1 (retention waits while a snapshot holds it).
	if got, _, err := get(t, n, object.GetRequest{Space: "base", Key: "a", Version: a1.Version}); err != nil || string(got) != "a1" {
		t.Fatalf("a1 was pruned under the snapshot: %q %v", got, err)
	}

	// Writes to the snapshot, and removals of what it holds, are refused.
	if _, err := n.Put(ctx, &object.PutRequest{Space: "base-monday", Key: "x", Size: 1}, strings.NewReader("x")); object.KindOf(err) != object.AccessDenied {
		t.Fatalf("put to a snapshot: %v", err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "base-monday", Key: "a"}); object.KindOf(err) != object.AccessDenied {
		t.Fatalf("delete in a snapshot: %v", err)
	}
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "base", Key: "a", DstSpace: "base-monday", DstKey: "x"}); object.KindOf(err) != object.AccessDenied {
		t.Fatalf("clone into a snapshot: %v", err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "base", Key: "a", Version: a1.Version}); object.KindOf(err) != object.PreconditionFailed {
		t.Fatalf("removing a held version: %v", err)
	}
	// A clone out of a snapshot is a writable copy of the past.
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "base-monday", Key: "b", DstSpace: "base", DstKey: "b-restored"}); err != nil {
		t.Fatal(err)
	}
	if got := read("base", "b-restored"); got != "b1" {
		t.Fatalf("restored b reads %q", got)
	}

	// Names: no space may take a snapshot's, nor a snapshot a space's.
	if _, err := n.CreateSpace(ctx, "base-monday", object.SpaceSettings{}); object.KindOf(err) != object.SpaceExists {
		t.Fatalf("a space named as a snapshot: %v", err)
	}
	if _, err := n.CreateSnapshot(ctx, "base", "base"); object.KindOf(err) != object.SpaceExists {
		t.Fatalf("a snapshot named as a space: %v", err)
	}
	if _, err := n.CreateSnapshot(ctx, "base-monday", "again"); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a snapshot of a snapshot: %v", err)
	}
	if _, err := n.CreateSnapshot(ctx, "nospace", "snapx"); object.KindOf(err) != object.SpaceNotFound {
		t.Fatalf("a snapshot of no space: %v", err)
	}
	if err := n.DeleteSpace(ctx, "base"); object.KindOf(err) != object.SpaceNotEmpty || !strings.Contains(err.Error(), "base-monday") {
		t.Fatalf("deleting a space with a snapshot: %v", err)
	}

	ls, err := n.Snapshots(ctx, "base")
	if err != nil || len(ls) != 1 || ls[0].Name != "base-monday" || ls[0].At != snap.At {
		t.Fatalf("snapshots of base: %+v %v", ls, err)
	}
	if err := n.DeleteSnapshot(ctx, "base-monday"); err != nil {
		t.Fatal(err)
	}
	if got := read("base-monday", "a"); got != "error: space not found" {
		t.Fatalf("a removed snapshot reads %q", got)
	}
	if err := n.DeleteSnapshot(ctx, "base-monday"); object.KindOf(err) != object.SpaceNotFound {
		t.Fatalf("removing it twice: %v", err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "base", Key: "a", Version: a1.Version}); err != nil {
		t.Fatalf("removing a version no snapshot holds: %v", err)
	}
}

// TestSnapshotCheckpoints is VOSD's read-atomic checkpoint: writers
// publish checkpoints whose parts (on several ranges) are written in one
// transaction each, while snapshots are taken; every snapshot holds each
// checkpoint whole or not at all, and a later snapshot never holds fewer.
func TestSnapshotCheckpoints(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "ckpt", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	const writers, parts = 4, 4
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gen := 0; !stop.Load(); gen++ {
				tx, err := n.Begin(ctx, object.TxnOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				for p := range parts {
					// One part in each of the four ranges (cut at 9, i and r).
					key := fmt.Sprintf("%c/w%d/g%05d", "0akz"[p], w, gen)
					body := fmt.Sprintf("w%d g%d p%d", w, gen, p)
					if _, err := tx.Put(ctx, &object.PutRequest{Space: "ckpt", Key: key, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
						t.Error(err)
						tx.Rollback()
						return
					}
				}
				if _, err := tx.Commit(ctx); err != nil && object.KindOf(err) != object.TxnConflict {
					t.Error(err)
					return
				}
			}
		}()
	}
	prev := 0
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 8 || prev < 2*writers && time.Now().Before(deadline); i++ {
		time.Sleep(20 * time.Millisecond)
		name := fmt.Sprintf("ckpt-snap-%d", i)
		if _, err := n.CreateSnapshot(ctx, "ckpt", name); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{} // per checkpoint (writer and generation)
		var after string
		for {
			res, err := n.List(ctx, &object.ListRequest{Space: name, StartAfter: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range res.Objects {
				counts[o.Key[2:]]++
			}
			if !res.Truncated {
				break
			}
			after = res.Next
		}
		for ck, c := range counts {
			if c != parts {
				t.Fatalf("snapshot %s holds %d of %d parts of checkpoint %s", name, c, parts, ck)
			}
		}
		if len(counts) < prev {
			t.Fatalf("snapshot %s holds %d checkpoints, an earlier one %d", name, len(counts), prev)
		}
		prev = len(counts)
		// A part read through the snapshot has its checkpoint's content.
		for ck := range counts {
			_, rc, err := n.Get(ctx, &object.GetRequest{Space: name, Key: "0/" + ck, Length: -1})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if !strings.HasSuffix(string(b), " p0") {
				t.Fatalf("part 0 of %s reads %q", ck, b)
			}
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if prev == 0 {
		t.Fatal("no checkpoint was published during the test")
	}
}

// TestSnapshotThreeNodes: a snapshot made through one node holds the
// space on every node at once: a write through another node right after
// prunes nothing the snapshot shows, every node reads the snapshot, and
// after rm every node may prune again.
func TestSnapshotThreeNodes(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "held", object.SpaceSettings{Retention: "last", KeepLast: 1, Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	old := writeAny(t, nodes, "held", "k", "old")
	// Every node opens the space before the snapshot (the case a missed
	// broadcast would break).
	for _, n := range nodes {
		if _, err := n.List(ctx, &object.ListRequest{Space: "held"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nodes[0].CreateSnapshot(ctx, "held", "held-snap"); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if h := heldMark(n, "held"); h == 0 || h == object.HeldPending {
			t.Fatalf("node %d's mark is %d after the snapshot", n.NodeID(), h)
		}
	}
	for i, n := range nodes[1:] {
		if _, err := n.Put(ctx, &object.PutRequest{Space: "held", Key: "k", Size: 3}, strings.NewReader(fmt.Sprint("n", i, "x")[:3])); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		got, _, err := get(t, n, object.GetRequest{Space: "held-snap", Key: "k"})
		if err != nil || string(got) != "old" {
			t.Fatalf("node %d reads the snapshot's k as %q (%v)", n.NodeID(), got, err)
		}
		if _, _, err := get(t, n, object.GetRequest{Space: "held", Key: "k", Version: old.Version}); err != nil {
			t.Fatalf("node %d: the held version was pruned: %v", n.NodeID(), err)
		}
	}
	if err := nodes[2].DeleteSnapshot(ctx, "held-snap"); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if h := heldMark(n, "held"); h != 0 {
			t.Fatalf("node %d's mark is %d after rm", n.NodeID(), h)
		}
	}
}

// heldMark is node n's snapshot mark of space name.
func heldMark(n *Node, name string) uint64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.spaces[name].held.Load()
}

// TestSnapshotHoldsAgainstTransactions: a transaction that buffered a
// write before a snapshot was made and commits after it prunes nothing
// the snapshot shows (its space's policy is taken at the commit), and a
// version the snapshot shows keeps its tags.
func TestSnapshotHoldsAgainstTransactions(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "txheld", object.SpaceSettings{Retention: "last", KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "txheld", "k", []byte("old"))
	tx, err := n.Begin(ctx, object.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, &object.PutRequest{Space: "txheld", Key: "k", Size: 3}, strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateSnapshot(ctx, "txheld", "txheld-snap"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, err := get(t, n, object.GetRequest{Space: "txheld-snap", Key: "k"}); err != nil || string(got) != "old" {
		t.Fatalf("the snapshot reads k as %q (%v): the commit pruned it", got, err)
	}
	if _, err := n.SetTags(ctx, &object.TagRequest{Space: "txheld", Key: "k", Version: 0, Tags: map[string]string{"a": "b"}}); err != nil {
		t.Fatalf("tagging the version after the snapshot: %v", err)
	}
	vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "txheld-snap", Key: "k"})
	if err != nil || len(vs.Versions) != 1 {
		t.Fatalf("the snapshot's versions: %+v %v", vs, err)
	}
	if _, err := n.SetTags(ctx, &object.TagRequest{Space: "txheld", Key: "k", Version: vs.Versions[0].Version, Tags: map[string]string{"a": "b"}}); object.KindOf(err) != object.PreconditionFailed {
		t.Fatalf("retagging a version the snapshot shows: %v", err)
	}
}
