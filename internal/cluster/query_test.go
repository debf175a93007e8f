package cluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

// putTagged writes a body of size bytes with tags.
func putTagged(t *testing.T, n *Node, space, key string, size int, tags map[string]string) object.Info {
	t.Helper()
	info, err := n.Put(context.Background(), &object.PutRequest{Space: space, Key: key, Size: int64(size), Tags: tags},
		bytes.NewReader(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// queryKeys runs a query to its end, page by page at the first page's
// timestamp, and returns the keys it matched.
func queryKeys(t *testing.T, n *Node, req object.QueryRequest) ([]string, object.QueryResult) {
	t.Helper()
	var keys []string
	var first object.QueryResult
	for page := 0; ; page++ {
		res, err := n.Query(context.Background(), &req)
		if err != nil {
			t.Fatalf("query %q: %v", req.Filter, err)
		}
		if page == 0 {
			first = res
		}
		for _, o := range res.Objects {
			keys = append(keys, o.Key)
		}
		if !res.Truncated {
			return keys, first
		}
		req.After, req.AsOf = res.Next, res.AsOf
	}
}

// TestQuery: a tag query over a space of four ranges answers exactly the
// live objects whose visible version matches, in key order, served by
// the tag index; pages of one timestamp join up; a query as of a past
// time sees that time's tags; a transaction's writes appear once it
// committed; ordering, documents and bad filters.
func TestQuery(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	if _, err := n.CreateSpace(ctx, "pics", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	var red []string
	for i := range 120 {
		key := fmt.Sprintf("k%03d", i)
		color := "green"
		if i%10 == 0 {
			color = "red"
			red = append(red, key)
		}
		putTagged(t, n, "pics", key, i*10, map[string]string{"color": color, "shape": []string{"round", "square"}[i%2]})
	}
	got, res := queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `tags.color == "red"`})
	if !slices.Equal(got, red) {
		t.Fatalf("red: %v, want %v", got, red)
	}
	if !strings.HasPrefix(res.Plan, "tag equal") || res.Ranges != 4 || res.Examined != len(red) {
		t.Fatalf("plan %q, %d ranges, %d examined: want the tag index over 4 ranges, %d examined", res.Plan, res.Ranges, res.Examined, len(red))
	}
	// Pages of 3 join up to the same answer.
	if paged, _ := queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `tags.color == "red"`, Limit: 3}); !slices.Equal(paged, red) {
		t.Fatalf("paged: %v", paged)
	}
	// A residual filter next to the data, and a scan.
	got, _ = queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `tags.color == "red" && size > 500 && tags.shape == "round"`})
	if want := []string{"k060", "k070", "k080", "k090", "k100", "k110"}; !slices.Equal(got, want) {
		t.Fatalf("red, large, round: %v, want %v", got, want)
	}
	got, res = queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `size >= 1150`})
	if want := []string{"k115", "k116", "k117", "k118", "k119"}; !slices.Equal(got, want) || res.Plan != "scan" {
		t.Fatalf("size >= 1150: %v (%s)", got, res.Plan)
	}
	got, _ = queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `key.startsWith("k11") && tags.color.startsWith("r")`})
	if want := []string{"k110"}; !slices.Equal(got, want) {
		t.Fatalf("prefix: %v", got)
	}

	// Change the past: retag, overwrite, delete. The query as of before
	// the changes answers as it did.
	before := res.AsOf
	if _, err := n.SetTags(ctx, &object.TagRequest{Space: "pics", Key: "k010", Tags: map[string]string{"color": "blue"}}); err != nil {
		t.Fatal(err)
	}
	putTagged(t, n, "pics", "k020", 5, map[string]string{"color": "blue"})
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "pics", Key: "k030"}); err != nil {
		t.Fatal(err)
	}
	putTagged(t, n, "pics", "k001", 5, map[string]string{"color": "red"})
	got, _ = queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `tags.color == "red"`})
	want := slices.DeleteFunc(append([]string{"k001"}, red...), func(k string) bool { return k == "k010" || k == "k020" || k == "k030" })
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("red now: %v, want %v", got, want)
	}
	// k010's tags changed in place (tags are the one mutable part of a
	// version): its past shows its present tags. k020 and k030 are as
	// they were.
	got, _ = queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `tags.color == "red"`, AsOf: before})
	if want := slices.DeleteFunc(slices.Clone(red), func(k string) bool { return k == "k010" }); !slices.Equal(got, want) {
		t.Fatalf("red as of before: %v, want %v", got, want)
	}

	// A transaction's writes, across ranges, show once it committed
	// (its locks on the other ranges are settled by the query).
	tx := begin(t, n, false)
	for _, k := range []string{"k005", "k045", "k085", "k115"} {
		if _, err := tx.Put(ctx, &object.PutRequest{Space: "pics", Key: k, Size: 1, Tags: map[string]string{"color": "violet"}}, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ = queryKeys(t, n, object.QueryRequest{Space: "pics", Filter: `tags.color == "violet"`}); !slices.Equal(got, []string{"k005", "k045", "k085", "k115"}) {
		t.Fatalf("violet: %v", got)
	}
	// A page that holds exactly every match is not truncated.
	if res, err := n.Query(ctx, &object.QueryRequest{Space: "pics", Filter: `tags.color == "violet"`, Limit: 4}); err != nil || len(res.Objects) != 4 || res.Truncated {
		t.Fatalf("violet, limit 4: %d objects, truncated %v, %v", len(res.Objects), res.Truncated, err)
	}
	if res, err := n.Query(ctx, &object.QueryRequest{Space: "pics", Filter: `tags.color == "violet"`, Limit: 3}); err != nil || len(res.Objects) != 3 || !res.Truncated || res.Next != "k085" {
		t.Fatalf("violet, limit 3: %+v, %v", res, err)
	}

	// Ordered: the largest three red ones.
	res, err := n.Query(ctx, &object.QueryRequest{Space: "pics", Filter: `tags.color == "red"`, OrderBy: "size", Desc: true, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, o := range res.Objects {
		sizes = append(sizes, o.Size)
	}
	if !slices.Equal(sizes, []int64{1100, 1000, 900}) || !res.Truncated {
		t.Fatalf("ordered by size: %v, truncated %v", sizes, res.Truncated)
	}

	// Documents: class extents by doc.type, and their bodies on request.
	if _, err := n.CreateSpace(ctx, "staff", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	putDoc(t, n, "staff", "e1", `{"type": "Employee", "name": "Ada", "age": 36}`)
	putDoc(t, n, "staff", "e2", `{"type": "Employee", "name": "Grace", "age": 45}`)
	putDoc(t, n, "staff", "d1", `{"type": "Department", "name": "R&D"}`)
	put(t, n, "staff", "note", []byte(`{"type": "Employee"}`)) // not a document: no content type
	res, err = n.Query(ctx, &object.QueryRequest{Space: "staff", Filter: `doc.type == "Employee" && doc.age > 40`, Docs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || res.Objects[0].Key != "e2" || !strings.Contains(string(res.Docs["e2"]), "Grace") {
		t.Fatalf("employees over 40: %+v", res)
	}
	got, _ = queryKeys(t, n, object.QueryRequest{Space: "staff", Filter: `doc.type == "Employee"`})
	if !slices.Equal(got, []string{"e1", "e2"}) {
		t.Fatalf("employees: %v", got)
	}

	for _, bad := range []string{`size >`, `nosuch == 1`, `size`} {
		if _, err := n.Query(ctx, &object.QueryRequest{Space: "pics", Filter: bad}); object.KindOf(err) != object.InvalidArgument {
			t.Errorf("filter %q: %v, want InvalidArgument", bad, err)
		}
	}
	if _, err := n.Query(ctx, &object.QueryRequest{Space: "pics", OrderBy: "colour"}); object.KindOf(err) != object.InvalidArgument {
		t.Errorf("order by colour: %v", err)
	}
	if _, err := n.Query(ctx, &object.QueryRequest{Space: "nosuch"}); object.KindOf(err) != object.NotFound && object.KindOf(err) != object.SpaceNotFound {
		t.Errorf("no such space: %v", err)
	}
}

// TestQueryThreeNodes: every node answers a query the same, whichever
// nodes lead the space's ranges (the ranges not led by the asking node
// run their part on their leaseholder, over the peer protocol).
func TestQueryThreeNodes(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "tweets", object.SpaceSettings{Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 60 {
		key := fmt.Sprintf("u%02d", i)
		user := fmt.Sprintf("user%d", i%4)
		if i%4 == 1 {
			want = append(want, key)
		}
		putTagged(t, nodes[i%3], "tweets", key, 1, map[string]string{"user": user})
	}
	for _, n := range nodes {
		got, res := queryKeys(t, n, object.QueryRequest{Space: "tweets", Filter: `tags.user == "user1"`, Limit: 4})
		if !slices.Equal(got, want) || res.Ranges == 0 {
			t.Fatalf("node %d: %v (%d ranges), want %v", n.NodeID(), got, res.Ranges, want)
		}
	}
}

// waitIndex waits until space's index on field is ready.
func waitIndex(t *testing.T, n *Node, space, field string) object.IndexInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ixs, err := n.Indexes(context.Background(), space)
		if err != nil {
			t.Fatal(err)
		}
		for _, ix := range ixs {
			if ix.Path == field && ix.State == "ready" {
				return ix
			}
			if ix.Path == field && ix.Error != "" {
				t.Fatalf("index %s: %s", field, ix.Error)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("index %s of %s not ready: %+v", field, space, ixs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFieldIndex: a field index declared over existing documents is
// filled, then serves queries (numbers, strings, times, array elements)
// with the same answers a scan gives; documents written, changed and
// deleted afterwards are indexed with them; a second type is refused;
// dropping it goes back to scanning.
func TestFieldIndex(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	if _, err := n.CreateSpace(ctx, "people", object.SpaceSettings{Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 90 {
		putDoc(t, n, "people", fmt.Sprintf("p%02d", i), fmt.Sprintf(`{"type": %q, "age": %d, "joined": "2026-%02d-01T00:00:00Z", "skills": ["go", "s%d"]}`,
			[]string{"Employee", "Contractor", "Intern"}[i%3], 20+i%40, 1+i%12, i%5))
	}
	check := func(filter, plan string) []string {
		t.Helper()
		got, res := queryKeys(t, n, object.QueryRequest{Space: "people", Filter: filter, Limit: 7})
		if res.Plan != plan {
			t.Errorf("%s: plan %q, want %q", filter, res.Plan, plan)
		}
		return got
	}
	filters := map[string]string{
		`doc.age >= 30 && doc.age < 33`:                                       `field range "doc.age"`,
		`doc.age == 41`:                                                       `field equal "doc.age"`,
		`doc.type == "Intern" && doc.age > 50`:                                `field equal "doc.type"`,
		`"s3" in doc.skills`:                                                  "scan", // in: an array's element, or a map's key: not planned
		`timestamp(doc.joined) >= timestamp("2026-11-01T00:00:00Z")`:          `field range "doc.joined"`,
		`doc.type.startsWith("Con") && timestamp(doc.joined).getMonth() == 1`: `field prefix "doc.type"`,
	}
	scanned := map[string][]string{}
	for f := range filters {
		scanned[f] = check(f, "scan")
		if len(scanned[f]) == 0 {
			t.Fatalf("%s matches nothing: a poor test", f)
		}
	}
	for field, typ := range map[string]string{"doc.age": "number", "doc.type": "string", "doc.skills": "string", "doc.joined": "time"} {
		if err := n.AddIndex(ctx, "people", field, typ); err != nil {
			t.Fatal(err)
		}
	}
	for _, field := range []string{"doc.age", "doc.type", "doc.skills", "doc.joined"} {
		if ix := waitIndex(t, n, "people", field); ix.Ranges != 3 || ix.RangesDone != 3 {
			t.Fatalf("%s built: %+v", field, ix)
		}
	}
	for f, plan := range filters {
		if got := check(f, plan); !slices.Equal(got, scanned[f]) {
			t.Errorf("%s with the index: %v, scanned %v", f, got, scanned[f])
		}
	}
	// Writes after the build are indexed; a changed age leaves its old
	// value; a deleted document leaves.
	putDoc(t, n, "people", "new", `{"type": "Intern", "age": 41}`)
	putDoc(t, n, "people", "p01", `{"type": "Contractor", "age": 99}`)                           // was 21
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "people", Key: "p21"}); err != nil { // age 41
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(scanned[`doc.age == 41`]), func(k string) bool { return k == "p21" })
	want = append(want, "new")
	slices.Sort(want)
	if got := check(`doc.age == 41`, `field equal "doc.age"`); !slices.Equal(got, want) {
		t.Fatalf("age 41 after the writes: %v, want %v", got, want)
	}
	if got := check(`doc.age > 90`, `field range "doc.age"`); !slices.Equal(got, []string{"p01"}) {
		t.Fatalf("age over 90: %v", got)
	}
	if err := n.AddIndex(ctx, "people", "doc.age", "string"); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a second type: %v", err)
	}
	if err := n.AddIndex(ctx, "people", "age", "number"); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a field without doc.: %v", err)
	}
	if err := n.DropIndex(ctx, "people", "doc.age"); err != nil {
		t.Fatal(err)
	}
	if got := check(`doc.age == 41`, "scan"); !slices.Equal(got, want) {
		t.Fatalf("age 41 after the drop: %v", got)
	}
	if err := n.DropIndex(ctx, "people", "doc.age"); object.KindOf(err) != object.NotFound {
		t.Fatalf("a second drop: %v", err)
	}
	ixs, _ := n.Indexes(ctx, "people")
	if len(ixs) != 3 {
		t.Fatalf("indexes after the drop: %+v", ixs)
	}
}

// TestQueryBranch: a query of a branch sees what the branch shows: its
// own matching versions, and its base's as of the branch point except
// for keys the branch overwrote or deleted; not the base's later writes.
// Pages of one and ordered queries see the same; so does a query as of
// the branch point.
func TestQueryBranch(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	if _, err := n.CreateSpace(ctx, "shop", object.SpaceSettings{Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"red", "blue", "red", "red", "blue", "red"} {
		putTagged(t, n, "shop", fmt.Sprintf("item-%d", i), 1+i, map[string]string{"color": c})
	}
	bi, err := n.CreateBranch(ctx, "shop", "shop-dev", "")
	if err != nil {
		t.Fatal(err)
	}
	putTagged(t, n, "shop-dev", "item-2", 1, map[string]string{"color": "blue"}) // red -> blue
	putTagged(t, n, "shop-dev", "item-4", 1, map[string]string{"color": "red"})  // blue -> red
	putTagged(t, n, "shop-dev", "item-9", 1, map[string]string{"color": "red"})  // new
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "shop-dev", Key: "item-5"}); err != nil {
		t.Fatal(err)
	}
	putTagged(t, n, "shop", "item-7", 1, map[string]string{"color": "red"}) // the base, after the point
	want := "item-0 item-3 item-4 item-9"
	for _, limit := range []uint32{0, 1, 2} {
		q, _ := queryKeys(t, n, object.QueryRequest{Space: "shop-dev", Filter: `tags.color == "red"`, Limit: limit})
		if got := strings.Join(q, " "); got != want {
			t.Fatalf("branch query in pages of %d: %s, want %s", limit, got, want)
		}
	}
	q, _ := queryKeys(t, n, object.QueryRequest{Space: "shop-dev", Filter: `tags.color == "red"`, OrderBy: "size", Desc: true})
	if got := strings.Join(q, " "); got != "item-3 item-0 item-4 item-9" && got != "item-3 item-0 item-9 item-4" {
		t.Fatalf("ordered branch query: %s", got)
	}
	if q, _ := queryKeys(t, n, object.QueryRequest{Space: "shop-dev", Filter: `tags.color == "red"`, AsOf: bi.At}); strings.Join(q, " ") != "item-0 item-2 item-3 item-5" {
		t.Fatalf("branch query as of its point: %v", q)
	}
	if q, _ := queryKeys(t, n, object.QueryRequest{Space: "shop", Filter: `tags.color == "red"`}); strings.Join(q, " ") != "item-0 item-2 item-3 item-5 item-7" {
		t.Fatalf("the base: %v", q)
	}
}
