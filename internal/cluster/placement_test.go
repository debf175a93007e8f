package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
)

// TestHashPlacement: a hash space spreads sequential keys over its
// ranges (every range gets a share), and still reads, lists (pages,
// prefixes, versions, snapshots, transactions) and queries in key order.
func TestHashPlacement(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	info, err := n.CreateSpace(ctx, "spread", object.SpaceSettings{Ranges: 4, Placement: "hash"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Settings.Placement != "hash" {
		t.Fatalf("placement %q", info.Settings.Placement)
	}
	var all []string
	for i := range 200 {
		key := fmt.Sprintf("seq-%04d", i)
		all = append(all, key)
		putTagged(t, n, "spread", key, 10+i, map[string]string{"even": fmt.Sprint(i%2 == 0)})
	}
	// Every range holds a share of the sequential keys.
	s, release, err := n.acquire(ctx, "spread")
	if err != nil {
		t.Fatal(err)
	}
	rs := s.Table().Ranges()
	if len(rs) != 4 {
		t.Fatalf("%d ranges", len(rs))
	}
	for i, r := range rs {
		ents, _, err := n.rc.List(ctx, r, mvcc.ListOptions{Lower: r.Desc().Start, Upper: r.Desc().End})
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) < 20 {
			t.Errorf("range %d holds %d of 200 sequential keys", i, len(ents))
		}
	}
	release()

	list := func(req object.ListRequest) []string {
		t.Helper()
		var got []string
		for {
			res, err := n.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range res.Objects {
				got = append(got, o.Key)
			}
			if !res.Truncated {
				return got
			}
			req.StartAfter = res.Next
		}
	}
	if got := list(object.ListRequest{Space: "spread", Limit: 7}); !slices.Equal(got, all) {
		t.Fatalf("listing in pages of 7: %d keys, in order %v", len(got), slices.IsSorted(got))
	}
	if got := list(object.ListRequest{Space: "spread", Prefix: "seq-01", Limit: 9}); !slices.Equal(got, all[100:200]) {
		t.Fatalf("prefix listing: %v", got)
	}
	// Reads, overwrites and deletes find their key.
	putTagged(t, n, "spread", "seq-0005", 1, nil)
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "spread", Key: "seq-0006"}); err != nil {
		t.Fatal(err)
	}
	_, got, err := get(t, n, object.GetRequest{Space: "spread", Key: "seq-0005", Length: -1})
	if err != nil || got.Size != 1 {
		t.Fatalf("seq-0005: %+v, %v", got, err)
	}
	if got := list(object.ListRequest{Space: "spread", Prefix: "seq-000"}); strings.Join(got, " ") != "seq-0000 seq-0001 seq-0002 seq-0003 seq-0004 seq-0005 seq-0007 seq-0008 seq-0009" {
		t.Fatalf("after the writes: %v", got)
	}
	versions := 0
	req := object.ListRequest{Space: "spread", Prefix: "seq-000", AllVersions: true, Limit: 2}
	for {
		res, err := n.List(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		versions += len(res.Objects)
		if !res.Truncated {
			break
		}
		req.StartAfter, req.AfterVersion = res.Next, res.NextVersion
	}
	if versions != 12 { // 10 keys, one overwritten, one deleted (its marker)
		t.Fatalf("%d versions under seq-000", versions)
	}
	// Queries come in key order too.
	q, _ := queryKeys(t, n, object.QueryRequest{Space: "spread", Filter: `tags.even == "true" && key.startsWith("seq-01")`, Limit: 6})
	var want []string
	for i := 100; i < 200; i += 2 {
		want = append(want, fmt.Sprintf("seq-%04d", i))
	}
	if !slices.Equal(q, want) {
		t.Fatalf("query: %v", q)
	}
	if q, res := queryKeys(t, n, object.QueryRequest{Space: "spread", Filter: `key == "seq-0042"`}); !slices.Equal(q, []string{"seq-0042"}) || res.Ranges != 1 {
		t.Fatalf("query of one key: %v over %d ranges", q, res.Ranges)
	}
	// A snapshot of it lists the same way; a transaction sees its writes
	// in order.
	if _, err := n.CreateSnapshot(ctx, "spread", "spread-then"); err != nil {
		t.Fatal(err)
	}
	putTagged(t, n, "spread", "seq-0001x", 1, nil)
	if got := list(object.ListRequest{Space: "spread-then", Prefix: "seq-000", Limit: 4}); len(got) != 9 || slices.Contains(got, "seq-0001x") {
		t.Fatalf("snapshot: %v", got)
	}
	tx := begin(t, n, false)
	txnPut(t, tx, "spread", "seq-0003a", "x")
	res, err := tx.List(ctx, &object.ListRequest{Space: "spread", Prefix: "seq-000"})
	if err != nil {
		t.Fatal(err)
	}
	var keysSeen []string
	for _, o := range res.Objects {
		keysSeen = append(keysSeen, o.Key)
	}
	if strings.Join(keysSeen, " ") != "seq-0000 seq-0001 seq-0001x seq-0002 seq-0003 seq-0003a seq-0004 seq-0005 seq-0007 seq-0008 seq-0009" {
		t.Fatalf("transaction listing: %v", keysSeen)
	}
	tx.Rollback()
	if _, err := n.CreateBranch(ctx, "spread", "spread-dev", ""); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a branch of a hash space: %v", err)
	}
	if err := n.DeleteSnapshot(ctx, "spread-then"); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteSpace(ctx, "spread"); object.KindOf(err) != object.SpaceNotEmpty {
		t.Fatalf("delete of a hash space that holds objects: %v", err)
	}
	if _, err := n.CreateSpace(ctx, "spread2", object.SpaceSettings{Ranges: 17, Placement: "hash"}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("17 hash ranges: %v", err)
	}
	if _, err := n.CreateSpace(ctx, "spread3", object.SpaceSettings{Placement: "tag:user"}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("tag placement: %v", err)
	}
}
