package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangeclient"
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

	list := func(req object.ListRequest) []string { t.Helper(); return listKeys(t, n, req) }
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
	for _, bad := range []string{"tag:", "random", "tag:" + strings.Repeat("x", 129)} {
		if _, err := n.CreateSpace(ctx, "spread3", object.SpaceSettings{Placement: bad}); object.KindOf(err) != object.InvalidArgument {
			t.Fatalf("placement %q: %v", bad, err)
		}
	}
}

// TestTagPlacement: in a "tag:user" space the objects of one user live
// together, so a query naming the user asks one range (of 8) while one
// that does not asks them all; keys are found, listed (in key order, at a
// time, with versions), queried in key order and deleted wherever they
// live; a key's user tag cannot change; snapshots read the same way.
func TestTagPlacement(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	if _, err := n.CreateSpace(ctx, "tweets", object.SpaceSettings{Ranges: 8, Placement: "tag:user"}); err != nil {
		t.Fatal(err)
	}
	var all []string
	byUser := map[string][]string{}
	for i := range 240 {
		key := fmt.Sprintf("tweet-%04d", i)
		user := fmt.Sprintf("u%02d", i%12)
		all = append(all, key)
		byUser[user] = append(byUser[user], key)
		putTagged(t, n, "tweets", key, 10+i, map[string]string{"user": user, "even": fmt.Sprint(i%2 == 0)})
	}
	// Each user's objects are in one range; the users spread over several.
	s, release, err := n.acquire(ctx, "tweets")
	if err != nil {
		t.Fatal(err)
	}
	rs := s.Table().Ranges()
	usersIn := map[int]int{}
	for i, r := range rs {
		ents, _, err := n.rc.List(ctx, r, mvcc.ListOptions{Lower: r.Desc().Start, Upper: r.Desc().End})
		if err != nil {
			t.Fatal(err)
		}
		users := map[string]bool{}
		for _, e := range ents {
			if e.Rec.Tags["user"] != "" {
				users[e.Rec.Tags["user"]] = true
			}
		}
		for u := range users {
			usersIn[i]++
			for j, r2 := range rs {
				if j == i {
					continue
				}
				ents2, _, _ := n.rc.List(ctx, r2, mvcc.ListOptions{Lower: r2.Desc().Start, Upper: r2.Desc().End})
				for _, e := range ents2 {
					if e.Rec.Tags["user"] == u {
						t.Fatalf("user %s is in ranges %d and %d", u, i, j)
					}
				}
			}
		}
	}
	release()
	if len(usersIn) < 3 {
		t.Fatalf("12 users in %d of %d ranges", len(usersIn), len(rs))
	}
	list := func(req object.ListRequest) []string { t.Helper(); return listKeys(t, n, req) }
	if got := list(object.ListRequest{Space: "tweets", Limit: 7}); !slices.Equal(got, all) {
		t.Fatalf("listing in pages of 7: %d keys, in order %v", len(got), slices.IsSorted(got))
	}
	if got := list(object.ListRequest{Space: "tweets", Prefix: "tweet-01", Limit: 9}); !slices.Equal(got, all[100:200]) {
		t.Fatalf("prefix listing: %v", got)
	}
	// A query naming a user asks one range and returns its keys in order.
	for _, u := range []string{"u00", "u07"} {
		q, res := queryKeys(t, n, object.QueryRequest{Space: "tweets", Filter: fmt.Sprintf(`tags.user == %q`, u), Limit: 6})
		if !slices.Equal(q, byUser[u]) || res.Ranges != 1 {
			t.Fatalf("user %s: %v over %d ranges", u, q, res.Ranges)
		}
	}
	q, res := queryKeys(t, n, object.QueryRequest{Space: "tweets", Filter: `tags.even == "true" && key.startsWith("tweet-01")`, Limit: 6})
	var want []string
	for i := 100; i < 200; i += 2 {
		want = append(want, fmt.Sprintf("tweet-%04d", i))
	}
	if !slices.Equal(q, want) || res.Ranges != len(rs) {
		t.Fatalf("query of every user: %v over %d ranges", q, res.Ranges)
	}
	if q, res := queryKeys(t, n, object.QueryRequest{Space: "tweets", Filter: `key == "tweet-0042"`}); !slices.Equal(q, []string{"tweet-0042"}) || res.Ranges != 1 {
		t.Fatalf("query of one key: %v over %d ranges", q, res.Ranges)
	}
	// Overwrites keep the user; a changed user is refused and changes
	// nothing; deletes find their key; a key never written deletes as
	// nothing.
	putTagged(t, n, "tweets", "tweet-0005", 1, map[string]string{"user": "u05"})
	if _, err := n.Put(ctx, &object.PutRequest{Space: "tweets", Key: "tweet-0005", Tags: map[string]string{"user": "u99"}}, strings.NewReader("")); object.KindOf(err) != object.InvalidArgument || !strings.Contains(err.Error(), `user="u05"`) {
		t.Fatalf("moving a key to another user: %v", err)
	}
	if _, err := n.SetTags(ctx, &object.TagRequest{Space: "tweets", Key: "tweet-0005"}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("retagging without the user: %v", err)
	}
	if _, err := n.SetTags(ctx, &object.TagRequest{Space: "tweets", Key: "tweet-0005", Tags: map[string]string{"user": "u05", "pinned": "yes"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "tweets", Key: "tweet-0006"}); err != nil {
		t.Fatal(err)
	}
	if info, err := n.Delete(ctx, &object.DeleteRequest{Space: "tweets", Key: "never"}); err != nil || info.Version != 0 {
		t.Fatalf("delete of a key never written: %+v, %v", info, err)
	}
	_, got, err := get(t, n, object.GetRequest{Space: "tweets", Key: "tweet-0005", Length: -1})
	if err != nil || got.Size != 1 || got.Tags["pinned"] != "yes" {
		t.Fatalf("tweet-0005: %+v, %v", got, err)
	}
	if _, _, err := get(t, n, object.GetRequest{Space: "tweets", Key: "tweet-0006", Length: -1}); object.KindOf(err) != object.NotFound {
		t.Fatalf("deleted tweet-0006: %v", err)
	}
	if got := list(object.ListRequest{Space: "tweets", Prefix: "tweet-000"}); strings.Join(got, " ") != "tweet-0000 tweet-0001 tweet-0002 tweet-0003 tweet-0004 tweet-0005 tweet-0007 tweet-0008 tweet-0009" {
		t.Fatalf("after the writes: %v", got)
	}
	versions := 0
	req := object.ListRequest{Space: "tweets", Prefix: "tweet-000", AllVersions: true, Limit: 2}
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
		t.Fatalf("%d versions under tweet-000", versions)
	}
	if q, _ := queryKeys(t, n, object.QueryRequest{Space: "tweets", Filter: `tags.user == "u05" && key < "tweet-0100"`}); strings.Join(q, " ") != "tweet-0005 tweet-0017 tweet-0029 tweet-0041 tweet-0053 tweet-0065 tweet-0077 tweet-0089" {
		t.Fatalf("u05 after the writes: %v", q)
	}
	// A snapshot reads the same way; a transaction places its new keys.
	if _, err := n.CreateSnapshot(ctx, "tweets", "tweets-then"); err != nil {
		t.Fatal(err)
	}
	putTagged(t, n, "tweets", "tweet-0001x", 1, map[string]string{"user": "u01"})
	if got := list(object.ListRequest{Space: "tweets-then", Prefix: "tweet-000", Limit: 4}); len(got) != 9 || slices.Contains(got, "tweet-0001x") {
		t.Fatalf("snapshot: %v", got)
	}
	if q, _ := queryKeys(t, n, object.QueryRequest{Space: "tweets-then", Filter: `tags.user == "u01" && key < "tweet-0002"`}); strings.Join(q, " ") != "tweet-0001" {
		t.Fatalf("snapshot query: %v", q)
	}
	tx := begin(t, n, false)
	if _, err := tx.Put(ctx, &object.PutRequest{Space: "tweets", Key: "tweet-0003a", Tags: map[string]string{"user": "u03"}}, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete(ctx, &object.DeleteRequest{Space: "tweets", Key: "tweet-0004"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if q, _ := queryKeys(t, n, object.QueryRequest{Space: "tweets", Filter: `tags.user == "u03" && key < "tweet-0016"`}); strings.Join(q, " ") != "tweet-0003 tweet-0003a tweet-0015" {
		t.Fatalf("after the transaction: %v", q)
	}
	// Serializable transactions that each read a key the other creates
	// (write skew over keys never written) do not both commit.
	t1, t2 := begin(t, n, true), begin(t, n, true)
	for _, c := range []struct {
		tx        *object.Txn
		read, put string
	}{{t1, "skew-k", "skew-j"}, {t2, "skew-j", "skew-k"}} {
		if _, _, err := c.tx.Get(ctx, &object.GetRequest{Space: "tweets", Key: c.read, Length: -1}); object.KindOf(err) != object.NotFound {
			t.Fatalf("read of %s: %v", c.read, err)
		}
	}
	for _, c := range []struct {
		tx   *object.Txn
		key  string
		user string
	}{{t1, "skew-j", "u01"}, {t2, "skew-k", "u02"}} {
		if _, err := c.tx.Put(ctx, &object.PutRequest{Space: "tweets", Key: c.key, Tags: map[string]string{"user": c.user}}, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	_, err1 := t1.Commit(ctx)
	_, err2 := t2.Commit(ctx)
	if err1 == nil && err2 == nil {
		t.Fatal("both transactions of a write skew over unplaced keys committed")
	}
	if _, err := n.CreateBranch(ctx, "tweets", "tweets-dev", ""); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a branch of a tag space: %v", err)
	}
	if err := n.DeleteSnapshot(ctx, "tweets-then"); err != nil {
		t.Fatal(err)
	}
	// (The transaction's locks are resolved after its commit returned.)
	deadline := time.Now().Add(10 * time.Second)
	err = n.DeleteSpace(ctx, "tweets")
	for errors.Is(err, rangeclient.ErrLocked) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		err = n.DeleteSpace(ctx, "tweets")
	}
	if object.KindOf(err) != object.SpaceNotEmpty {
		t.Fatalf("delete of a tag space that holds objects: %v", err)
	}
}

// listKeys lists req's keys page by page to the end.
func listKeys(t *testing.T, n *Node, req object.ListRequest) []string {
	t.Helper()
	var got []string
	for {
		res, err := n.List(context.Background(), &req)
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
