package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// waitSplit waits until space name has at least want ranges in the range
// table, tiling the space, and every node's table agrees with it.
func waitSplit(t *testing.T, nodes []*Node, name string, want int, busy func()) []rangedesc.Range {
	t.Helper()
	return waitTable(t, nodes, name, fmt.Sprintf("at least %d", want), func(n int) bool { return n >= want }, busy)
}

// waitTable waits until the number of space name's ranges in the range
// table is as ok wants (what says how), the table tiles the space, and
// every node's table agrees with it; busy, if not nil, runs every round.
func waitTable(t *testing.T, nodes []*Node, name, what string, ok func(int) bool, busy func()) []rangedesc.Range {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if busy != nil {
			busy()
		}
		ds := rangesOf(t, nodes[0], name)
		if ok(len(ds)) && tiles(ds) && tablesAgree(nodes, name, ds) {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("space %s: %d ranges in the table (want %s), tiling %v", name, len(ds), what, tiles(ds))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tiles reports whether ds (sorted by start) cover their space end to end.
func tiles(ds []rangedesc.Range) bool {
	if len(ds) == 0 || !bytes.Equal(ds[0].Start, keys.SpaceStart(ds[0].SpaceID)) {
		return false
	}
	for i := 1; i < len(ds); i++ {
		if !bytes.Equal(ds[i-1].End, ds[i].Start) {
			return false
		}
	}
	return bytes.Equal(ds[len(ds)-1].End, keys.SpaceEnd(ds[0].SpaceID))
}

func tablesAgree(nodes []*Node, name string, ds []rangedesc.Range) bool {
	for _, n := range nodes {
		n.mu.RLock()
		s := n.mu.spaces[name]
		n.mu.RUnlock()
		if s == nil {
			continue
		}
		tab := s.tab.Ranges()
		if len(tab) != len(ds) {
			return false
		}
		for i, r := range tab {
			d := r.Desc()
			if d.ID != ds[i].ID || !bytes.Equal(d.Start, ds[i].Start) || !bytes.Equal(d.End, ds[i].End) {
				return false
			}
		}
	}
	return true
}

// TestSplitBySize fills a one-range space past a small split size: the
// range splits repeatedly, the range table tiles the space, every node
// routes by the new ranges, and every object reads back, lists once, and
// takes writes, through every node.
func TestSplitBySize(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.SplitSize, c.SplitLoad = 24<<10, -1 })
	if _, err := nodes[0].CreateSpace(ctx, "big", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	body := func() string {
		b := make([]byte, 1024)
		for i := range b {
			b[i] = 'a' + byte(rnd.IntN(26))
		}
		return string(b)
	}
	want := map[string]string{}
	for i := range 240 {
		key := fmt.Sprintf("%c-%03d", "!5Lz"[i%4], i)
		want[key] = body()
		writeAny(t, nodes, "big", key, want[key])
	}
	flush := func() {
		for _, n := range nodes {
			_ = n.eng.DB().Flush()
		}
	}
	ds := waitSplit(t, nodes, "big", 4, flush)
	t.Logf("%d ranges after the splits", len(ds))
	for _, d := range ds[1:] {
		if d.Parent == 0 {
			t.Fatalf("range %d has no parent recorded", d.ID)
		}
	}
	checkServed(t, nodes, "big", want, len(want), 50)
}

// checkServed checks that every node serves space as want says: each key
// reads back its value, a listing (page keys a page) has total keys in
// order, and each key takes a write that then reads back everywhere.
func checkServed(t *testing.T, nodes []*Node, space string, want map[string]string, total int, page uint32) {
	t.Helper()
	for _, n := range nodes {
		for key, v := range want {
			if got := string(mustGet(t, n, space, key)); got != v {
				t.Fatalf("node %d: %s reads %d bytes, want its value (%d)", n.NodeID(), key, len(got), len(v))
			}
		}
		listed := listAll(t, n, space, page)
		if len(listed) != total || !slices.IsSorted(listed) {
			t.Fatalf("node %d lists %d keys (sorted %v), want %d", n.NodeID(), len(listed), slices.IsSorted(listed), total)
		}
	}
	for key := range want {
		writeAny(t, nodes, space, key, "after")
	}
	for _, n := range nodes {
		for key := range want {
			if got := string(mustGet(t, n, space, key)); got != "after" {
				t.Fatalf("node %d: %s = %q after a write", n.NodeID(), key, got)
			}
		}
	}
}

// listAll lists every key of space through n, limit keys a page.
func listAll(t *testing.T, n *Node, space string, limit uint32) []string {
	t.Helper()
	var listed []string
	after := ""
	for {
		res, err := n.List(context.Background(), &object.ListRequest{Space: space, StartAfter: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			listed = append(listed, o.Key)
		}
		if !res.Truncated {
			return listed
		}
		after = res.Next
	}
}

func mustGet(t *testing.T, n *Node, space, key string) []byte {
	t.Helper()
	b, _, err := getCtx(context.Background(), n, object.GetRequest{Space: space, Key: key})
	if err != nil {
		for _, x := range []*Node{n} {
			x.mu.RLock()
			sp := x.mu.spaces[space]
			x.mu.RUnlock()
			for _, r := range sp.tab.Ranges() {
				rep := r.Replica()
				st := ""
				if rep != nil {
					st = fmt.Sprintf("%+v ready=%v store=%p rep=%p", rep.Status(), rep.ReadReady(), x.ranges.Replica(r.Desc().ID), rep)
				}
				t.Logf("node %d range %d [%x,%x) epoch %d: %s", x.NodeID(), r.Desc().ID, r.Desc().Start, r.Desc().End, r.Desc().Epoch, st)
			}
		}
		t.Fatalf("get %s/%s from node %d: %v", space, key, n.NodeID(), err)
	}
	return b
}

// TestSplitByLoad: a one-range space read hard enough splits by load, at
// a key it served, while the reads go on without errors.
func TestSplitByLoad(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.SplitSize, c.SplitLoad = -1, 30 })
	if _, err := nodes[0].CreateSpace(ctx, "hot", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for i := range 40 {
		k := fmt.Sprintf("%c-%02d", "!5Lz"[i%4], i)
		ks = append(ks, k)
		writeAny(t, nodes, "hot", k, k)
	}
	var stop atomic.Bool
	var errs atomic.Int64
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; !stop.Load(); i++ {
				k := ks[i%len(ks)]
				b, _, err := getCtx(ctx, nodes[i%3], object.GetRequest{Space: "hot", Key: k})
				if err != nil || string(b) != k {
					errs.Add(1)
					t.Errorf("get %s: %q, %v", k, b, err)
					return
				}
			}
		}()
	}
	ds := waitSplit(t, nodes, "hot", 2, nil)
	stop.Store(true)
	wg.Wait()
	if errs.Load() > 0 {
		t.Fatal("reads failed while the range split")
	}
	t.Logf("%d ranges after the load split", len(ds))
}

// TestSplitRecordedByRepair: a split that applied but was never written to
// the range table (its leaseholder stopped in between) is recorded by the
// repairer from the replica's own record of it, and the moved keys stay
// readable and writable through every node meanwhile and after.
func TestSplitRecordedByRepair(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.SplitSize, c.SplitLoad = -1, -1 })
	if _, err := nodes[0].CreateSpace(ctx, "rec", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	ks := []string{"!a", "5b", "Lc", "zd"}
	for _, k := range ks {
		writeAny(t, nodes, "rec", k, k)
	}
	d := rangesOf(t, nodes[0], "rec")[0]
	var lh *Node // the range's leaseholder
	deadline := time.Now().Add(30 * time.Second)
	for lh == nil {
		for _, n := range nodes {
			if r := n.ranges.Replica(d.ID); r != nil && r.Leads() {
				lh = n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leaseholder")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rid, err := lh.catalog.NewRangeID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := keys.Object(d.SpaceID, nil, []byte("L"))
	if _, err := lh.ranges.Replica(d.ID).Split(ctx, key, rid); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		for _, k := range ks {
			if got := string(mustGet(t, n, "rec", k)); got != k {
				t.Fatalf("node %d: %s = %q before the split is recorded", n.NodeID(), k, got)
			}
		}
	}
	ds := waitSplit(t, nodes, "rec", 2, nil)
	if ds[1].ID != rid || !bytes.Equal(ds[1].Start, key) {
		t.Fatalf("recorded %+v", ds)
	}
	for _, k := range ks {
		writeAny(t, nodes, "rec", k, "2"+k)
	}
	for _, n := range nodes {
		for _, k := range ks {
			if got := string(mustGet(t, n, "rec", k)); got != "2"+k {
				t.Fatalf("node %d: %s = %q after the split is recorded", n.NodeID(), k, got)
			}
		}
	}
}
