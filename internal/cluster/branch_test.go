package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
)

// TestBranch: a branch reads its base as of the branch point, takes
// writes and deletes of its own without touching the base, lists and
// lists versions as the merge of the two, checks conditional writes
// against what it shows, holds the base's history, and goes with rm.
func TestBranch(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "main", object.SpaceSettings{Retention: "last", KeepLast: 1, Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	a1 := put(t, n, "main", "a", []byte("a1"))
	put(t, n, "main", "b", []byte("b1"))
	big := bytes.Repeat([]byte("big"), 200000)
	put(t, n, "main", "m", big)
	put(t, n, "main", "z", []byte("z1"))
	put(t, n, "main", "t", []byte("t1"))
	before := n.chunks.Stats().Bytes
	br, err := n.CreateBranch(ctx, "main", "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	if n.chunks.Stats().Bytes != before || br.At <= a1.Version || br.Space != "main" || br.Name != "dev" {
		t.Fatalf("branch %+v (segment bytes %d -> %d)", br, before, n.chunks.Stats().Bytes)
	}
	read := func(space, key string) string {
		t.Helper()
		got, _, err := get(t, n, object.GetRequest{Space: space, Key: key})
		if err != nil {
			return "error: " + object.KindOf(err).String()
		}
		return string(got)
	}
	keysOf := func(space string) string {
		t.Helper()
		return strings.Join(listAll(t, n, space, 2), ",")
	}
	// The base moves on after the branch point: the branch does not see it.
	a2 := put(t, n, "main", "a", []byte("a2")) // keep-last 1 would prune a1
	put(t, n, "main", "c", []byte("c1"))
	if got := read("dev", "a"); got != "a1" {
		t.Fatalf("branch reads a = %q, want the base's a1", got)
	}
	if got := read("dev", "m"); got != string(big) {
		t.Fatal("branch reads the big object wrong")
	}
	// Writes and deletes land in the branch only.
	put(t, n, "dev", "b", []byte("b-dev"))
	put(t, n, "dev", "d", []byte("d-dev"))
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "dev", Key: "z"}); err != nil {
		t.Fatal(err)
	}
	for space, want := range map[string]map[string]string{
		"dev":  {"a": "a1", "b": "b-dev", "c": "error: not found", "d": "d-dev", "z": "error: not found"},
		"main": {"a": "a2", "b": "b1", "c": "c1", "d": "error: not found", "z": "z1"},
	} {
		for key, w := range want {
			if got := read(space, key); got != w {
				t.Fatalf("%s/%s = %q, want %q", space, key, got, w)
			}
		}
	}
	if got := keysOf("dev"); got != "a,b,d,m,t" {
		t.Fatalf("branch lists %s", got)
	}
	if got := keysOf("main"); got != "a,b,c,m,t,z" {
		t.Fatalf("base lists %s", got)
	}
	// The key's history in the branch: its own versions, then the base's
	// up to the point; a base version reads by number.
	vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "dev", Key: "b"})
	if err != nil || len(vs.Versions) != 2 || vs.Versions[0].Version <= br.At || vs.Versions[1].Version >= br.At {
		t.Fatalf("versions of b in the branch: %+v %v", vs.Versions, err)
	}
	if one, err := n.Versions(ctx, &object.VersionsRequest{Space: "dev", Key: "b", Limit: 1}); err != nil || len(one.Versions) != 1 || !one.Truncated {
		t.Fatalf("a page of the branch's own versions hides the base's: %+v %v", one, err)
	}
	// A serializable transaction that lists the branch (base keys
	// showing through) commits.
	tx, err := n.Begin(ctx, object.TxnOptions{Serializable: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.List(ctx, &object.ListRequest{Space: "dev"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.Get(ctx, &object.GetRequest{Space: "dev", Key: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, &object.PutRequest{Space: "dev", Key: "from-txn", Size: 1}, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatalf("a serializable transaction over the branch: %v", err)
	}
	if got, _, err := get(t, n, object.GetRequest{Space: "dev", Key: "b", Version: vs.Versions[1].Version}); err != nil || string(got) != "b1" {
		t.Fatalf("the base's version of b read through the branch: %q %v", got, err)
	}
	if _, _, err := get(t, n, object.GetRequest{Space: "dev", Key: "a", Version: a2.Version}); object.KindOf(err) != object.NotFound {
		t.Fatalf("a base version after the point read through the branch: %v", err)
	}
	if got, _, err := get(t, n, object.GetRequest{Space: "dev", Key: "b", AsOf: br.At}); err != nil || string(got) != "b1" {
		t.Fatalf("the branch as of its point: %q %v", got, err)
	}
	all, err := n.List(ctx, &object.ListRequest{Space: "dev", AllVersions: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	for _, o := range all.Objects {
		hist = append(hist, fmt.Sprintf("%s:%v", o.Key, o.DeleteMarker))
	}
	if got := strings.Join(hist, ","); got != "a:false,b:false,b:false,d:false,from-txn:false,m:false,t:false,z:true,z:false" {
		t.Fatalf("the branch's version listing: %s", got)
	}
	// Conditional writes see what the branch shows.
	if _, err := n.Put(ctx, &object.PutRequest{Space: "dev", Key: "a", Size: 1, IfNoneMatch: true}, strings.NewReader("x")); object.KindOf(err) != object.PreconditionFailed {
		t.Fatalf("if-none-match over a base key: %v", err)
	}
	if _, err := n.Put(ctx, &object.PutRequest{Space: "dev", Key: "a", Size: 1, IfMatch: a2.Version}, strings.NewReader("x")); object.KindOf(err) != object.PreconditionFailed {
		t.Fatalf("if-match of a version after the point: %v", err)
	}
	if _, err := n.Put(ctx, &object.PutRequest{Space: "dev", Key: "a", Size: 3, IfMatch: a1.Version}, strings.NewReader("a-d")); err != nil {
		t.Fatalf("if-match of the base's version: %v", err)
	}
	if _, err := n.Put(ctx, &object.PutRequest{Space: "dev", Key: "z", Size: 3, IfNoneMatch: true}, strings.NewReader("z-d")); err != nil {
		t.Fatalf("if-none-match of a key the branch deleted: %v", err)
	}
	// A byte-range write builds on the base's version.
	if _, err := n.Put(ctx, &object.PutRequest{Space: "dev", Key: "m", Mode: object.PutWriteAt, Offset: 3, Size: 3}, strings.NewReader("BIG")); err != nil {
		t.Fatal(err)
	}
	if got := read("dev", "m"); got != "bigBIG"+string(big[6:]) {
		t.Fatal("a byte-range write over the base's version reads wrong")
	}
	if got := read("main", "m"); got != string(big) {
		t.Fatal("a byte-range write in the branch changed the base")
	}
	// Tagging the base's version gives the branch its own.
	if info, err := n.SetTags(ctx, &object.TagRequest{Space: "dev", Key: "t", Tags: map[string]string{"k": "v"}}); err != nil || info.Version <= br.At {
		t.Fatalf("tagging the base's version in the branch: %+v %v", info, err)
	}
	if got, info, err := get(t, n, object.GetRequest{Space: "dev", Key: "t"}); err != nil || string(got) != "t1" || info.Tags["k"] != "v" {
		t.Fatalf("the branch's tagged t: %q %+v %v", got, info, err)
	}
	if _, info, err := get(t, n, object.GetRequest{Space: "main", Key: "t"}); err != nil || len(info.Tags) != 0 {
		t.Fatalf("tagging in the branch tagged the base: %+v %v", info, err)
	}
	// The base's history is held; the branch changes only its own.
	if got, _, err := get(t, n, object.GetRequest{Space: "main", Key: "a", Version: a1.Version}); err != nil || string(got) != "a1" {
		t.Fatalf("a1 was pruned under the branch: %q %v", got, err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "dev", Key: "b", Version: vs.Versions[1].Version}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("removing the base's version through the branch: %v", err)
	}
	// Names, kinds and removal.
	if _, err := n.CreateBranch(ctx, "main", "main", ""); object.KindOf(err) != object.SpaceExists {
		t.Fatalf("a branch named as a space: %v", err)
	}
	if _, err := n.CreateBranch(ctx, "dev", "dev2", ""); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a branch of a branch: %v", err)
	}
	if _, err := n.CreateSnapshot(ctx, "dev", "devsnap"); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a snapshot of a branch: %v", err)
	}
	if err := n.DeleteSpace(ctx, "main"); object.KindOf(err) != object.SpaceNotEmpty || !strings.Contains(err.Error(), "dev") {
		t.Fatalf("deleting a space with a branch: %v", err)
	}
	if err := n.DeleteSpace(ctx, "dev"); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("space rm of a branch: %v", err)
	}
	ls, err := n.Branches(ctx, "main")
	if err != nil || len(ls) != 1 || ls[0].Name != "dev" || ls[0].At != br.At {
		t.Fatalf("branches of main: %+v %v", ls, err)
	}
	spaces, err := n.ListSpaces(ctx)
	if err != nil || !slices.ContainsFunc(spaces, func(s object.SpaceInfo) bool { return s.Name == "dev" }) {
		t.Fatalf("a branch is a space: %+v %v", spaces, err)
	}
	if err := n.DeleteBranch(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if got := read("dev", "a"); got != "error: space not found" {
		t.Fatalf("a removed branch reads %q", got)
	}
	if err := n.DeleteBranch(ctx, "main"); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("branch rm of a space: %v", err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "main", Key: "a", Version: a1.Version}); err != nil {
		t.Fatalf("removing a version no branch holds: %v", err)
	}
}

// TestBranchFromSnapshot: a branch made from a snapshot shows the space
// as the snapshot does, and outlives it.
func TestBranchFromSnapshot(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "main", object.SpaceSettings{Retention: "last", KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "main", "a", []byte("a1"))
	snap, err := n.CreateSnapshot(ctx, "main", "monday")
	if err != nil {
		t.Fatal(err)
	}
	put(t, n, "main", "a", []byte("a2"))
	br, err := n.CreateBranch(ctx, "main", "fix", "monday")
	if err != nil || br.At != snap.At {
		t.Fatalf("branch %+v from snapshot %+v: %v", br, snap, err)
	}
	if err := n.DeleteSnapshot(ctx, "monday"); err != nil {
		t.Fatal(err)
	}
	put(t, n, "main", "a", []byte("a3")) // would prune a1 without the branch
	if got, _, err := get(t, n, object.GetRequest{Space: "fix", Key: "a"}); err != nil || string(got) != "a1" {
		t.Fatalf("the branch reads %q %v", got, err)
	}
	if _, err := n.CreateBranch(ctx, "main", "fix2", "nosnap"); object.KindOf(err) != object.SpaceNotFound {
		t.Fatalf("a branch from no snapshot: %v", err)
	}
}

// TestBranchMerge: a merge takes what changed only in the branch,
// reports keys changed on both sides, and settles them by strategy, all
// in one transaction; merging again changes nothing.
func TestBranchMerge(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "main", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"same", "both", "gone-here", "gone-there", "edit-there"} {
		put(t, n, "main", k, []byte(k+"0"))
	}
	if _, err := n.CreateBranch(ctx, "main", "work", ""); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("chunky"), 100000)
	put(t, n, "work", "new", big)
	put(t, n, "work", "both", []byte("both-branch"))
	put(t, n, "work", "gone-here", []byte("edited"))
	put(t, n, "work", "edit-there", []byte("edit-there1"))
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "work", Key: "gone-there"}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "main", "both", []byte("both-main"))
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "main", Key: "gone-here"}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "work", "twice", []byte("same change"))
	put(t, n, "main", "twice", []byte("same change"))

	res, err := n.MergeBranch(ctx, &object.MergeRequest{Branch: "work", Into: "main"})
	if err != nil {
		t.Fatal(err)
	}
	var conflicts []string
	for _, c := range res.Conflicts {
		conflicts = append(conflicts, c.Key)
	}
	if res.Version != 0 || res.Applied != 0 || strings.Join(conflicts, ",") != "both,gone-here" {
		t.Fatalf("merge with conflicts (fail): %+v", res)
	}
	if got, _, _ := get(t, n, object.GetRequest{Space: "main", Key: "edit-there"}); string(got) != "edit-there0" {
		t.Fatal("a failed merge wrote")
	}
	if _, err := n.MergeBranch(ctx, &object.MergeRequest{Branch: "work", Into: "work2"}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("merge into another space: %v", err)
	}
	if _, err := n.MergeBranch(ctx, &object.MergeRequest{Branch: "main"}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("merge of a space: %v", err)
	}
	before := n.chunks.Stats().Bytes
	res, err = n.MergeBranch(ctx, &object.MergeRequest{Branch: "work", Strategy: object.MergeDestWins})
	if err != nil || res.Version == 0 || res.Applied != 3 || len(res.Conflicts) != 2 {
		t.Fatalf("merge, dest wins: %+v %v", res, err)
	}
	if n.chunks.Stats().Bytes != before {
		t.Fatal("a merge copied data")
	}
	want := map[string]string{"same": "same0", "both": "both-main", "gone-here": "error", "gone-there": "error",
		"edit-there": "edit-there1", "new": string(big), "twice": "same change"}
	for k, w := range want {
		got, info, err := get(t, n, object.GetRequest{Space: "main", Key: k})
		if err != nil {
			got = []byte("error")
		}
		if string(got) != w {
			t.Fatalf("after the merge main/%s = %.20q, want %.20q", k, got, w)
		}
		if k == "new" && (info.Version != res.Version || info.Origin == nil || info.Origin.Key != "new") {
			t.Fatalf("a merged key's version %+v (merge at %d)", info, res.Version)
		}
	}
	// Lineage crosses the merge both ways: the merged version's origin
	// is the branch's, whose children name it.
	l, err := n.Lineage(ctx, &object.LineageRequest{Space: "main", Key: "new"})
	if err != nil || len(l.Ancestors) == 0 || !l.Ancestors[0].Clone || l.Ancestors[0].Space != "work" {
		t.Fatalf("lineage of a merged key: %+v %v", l, err)
	}
	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "work", Key: "new"})
	if err != nil || !slices.ContainsFunc(l.Children, func(c object.LineageEntry) bool { return c.Space == "main" && c.Version == res.Version }) {
		t.Fatalf("lineage of the branch's version: %+v %v", l, err)
	}
	// Settled: the conflicts dest-wins kept the space's for are no
	// conflicts again until a side changes them.
	res, err = n.MergeBranch(ctx, &object.MergeRequest{Branch: "work"})
	if err != nil || res.Applied != 0 || len(res.Conflicts) != 0 {
		t.Fatalf("merging again after dest-wins: %+v %v", res, err)
	}
	put(t, n, "work", "both", []byte("both-branch2"))
	put(t, n, "main", "both", []byte("both-main2"))
	res, err = n.MergeBranch(ctx, &object.MergeRequest{Branch: "work", Strategy: object.MergeSourceWins})
	if err != nil || res.Applied != 1 || len(res.Conflicts) != 1 {
		t.Fatalf("merge, source wins: %+v %v", res, err)
	}
	if got, _, _ := get(t, n, object.GetRequest{Space: "main", Key: "both"}); string(got) != "both-branch2" {
		t.Fatalf("source wins: both = %q", got)
	}
	res, err = n.MergeBranch(ctx, &object.MergeRequest{Branch: "work", Strategy: object.MergeFail})
	if err != nil || res.Applied != 0 || len(res.Conflicts) != 0 || res.Version != 0 {
		t.Fatalf("merging again: %+v %v", res, err)
	}
	// And the branch point: a key's history in the branch goes on into
	// its base's.
	put(t, n, "work", "same", []byte("same-branch"))
	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "work", Key: "same"})
	if err != nil || len(l.Ancestors) != 1 || l.Ancestors[0].Clone {
		t.Fatalf("lineage across the branch point: %+v %v", l, err)
	}
	// and the base's version names the branch's first as a child (not
	// a later one, and not in a branch made after another version).
	firstInWork := l.Version.Version
	put(t, n, "work", "same", []byte("same-branch2"))
	base := l.Ancestors[0]
	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "main", Key: "same", Version: base.Version})
	if err != nil || !slices.ContainsFunc(l.Children, func(c object.LineageEntry) bool { return c.Space == "work" && c.Version == firstInWork && !c.Clone }) ||
		slices.ContainsFunc(l.Children, func(c object.LineageEntry) bool { return c.Space == "work" && c.Version != firstInWork }) {
		t.Fatalf("children of the base's version %d: %+v %v (want work@%d)", base.Version, l.Children, err, firstInWork)
	}
	put(t, n, "main", "same", []byte("same-main2"))
	if _, err := n.CreateBranch(ctx, "main", "later", ""); err != nil {
		t.Fatal(err)
	}
	put(t, n, "later", "same", []byte("same-later"))
	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "main", Key: "same", Version: base.Version})
	if err != nil || slices.ContainsFunc(l.Children, func(c object.LineageEntry) bool { return c.Space == "later" }) {
		t.Fatalf("a branch made after the version was replaced is no child of it: %+v %v", l.Children, err)
	}
	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "main", Key: "same"})
	if err != nil || !slices.ContainsFunc(l.Children, func(c object.LineageEntry) bool { return c.Space == "later" }) {
		t.Fatalf("the latest version's children lack the branch made from it: %+v %v", l.Children, err)
	}
}

// TestBranchListingModel lists a branch with random writes and deletes
// on both sides, page by page at random sizes, and compares it with a
// model: the base as of the point overlaid with the branch's own.
func TestBranchListingModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "main", object.SpaceSettings{Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	model := map[string]string{}
	key := func() string { return fmt.Sprintf("k%03d", rng.IntN(120)) }
	step := func(space string, m map[string]string) {
		k := key()
		if rng.IntN(3) == 0 {
			if _, err := n.Delete(ctx, &object.DeleteRequest{Space: space, Key: k}); err != nil {
				t.Fatal(err)
			}
			delete(m, k)
			return
		}
		v := fmt.Sprintf("%s-%d", space, rng.IntN(1000))
		put(t, n, space, k, []byte(v))
		m[k] = v
	}
	for range 150 {
		step("main", model)
	}
	if _, err := n.CreateBranch(ctx, "main", "side", ""); err != nil {
		t.Fatal(err)
	}
	branch := map[string]string{}
	for k, v := range model {
		branch[k] = v
	}
	after := map[string]string{}
	for range 150 {
		step("side", branch)
		step("main", after) // the base moves on; the branch must not see it
	}
	var want []string
	for k := range branch {
		want = append(want, k)
	}
	slices.Sort(want)
	got := listAll(t, n, "side", uint32(1+rng.IntN(7)))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("branch lists\n%v\nwant\n%v", got, want)
	}
	for _, k := range want[:min(len(want), 20)] {
		if b, _, err := get(t, n, object.GetRequest{Space: "side", Key: k}); err != nil || string(b) != branch[k] {
			t.Fatalf("side/%s = %q %v, want %q", k, b, err, branch[k])
		}
	}
}

// TestBranchThreeNodes: a branch made through one node holds its base on
// every node, is read and written through the others, merges through
// any, and its removal lets every node prune again.
func TestBranchThreeNodes(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "trunk", object.SpaceSettings{Retention: "last", KeepLast: 1, Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	old := writeAny(t, nodes, "trunk", "k", "old")
	for _, n := range nodes {
		if _, err := n.List(ctx, &object.ListRequest{Space: "trunk"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nodes[1].CreateBranch(ctx, "trunk", "twig", ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if h := heldMark(n, "trunk"); h == 0 || h == object.HeldPending {
			t.Fatalf("node %d's mark is %d after the branch", n.NodeID(), h)
		}
	}
	if _, err := nodes[0].Put(ctx, &object.PutRequest{Space: "trunk", Key: "k", Size: 3}, strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[2].Put(ctx, &object.PutRequest{Space: "twig", Key: "t", Size: 4}, strings.NewReader("twig")); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if got, _, err := get(t, n, object.GetRequest{Space: "twig", Key: "k"}); err != nil || string(got) != "old" {
			t.Fatalf("node %d reads the branch's k as %q (%v)", n.NodeID(), got, err)
		}
		if got, _, err := get(t, n, object.GetRequest{Space: "twig", Key: "t"}); err != nil || string(got) != "twig" {
			t.Fatalf("node %d reads the branch's t as %q (%v)", n.NodeID(), got, err)
		}
		if _, _, err := get(t, n, object.GetRequest{Space: "trunk", Key: "k", Version: old.Version}); err != nil {
			t.Fatalf("node %d: the held version was pruned: %v", n.NodeID(), err)
		}
	}
	res, err := nodes[0].MergeBranch(ctx, &object.MergeRequest{Branch: "twig"})
	if err != nil || res.Applied != 1 {
		t.Fatalf("merge: %+v %v", res, err)
	}
	if got, _, err := get(t, nodes[1], object.GetRequest{Space: "trunk", Key: "t"}); err != nil || string(got) != "twig" {
		t.Fatalf("the merged key reads %q (%v)", got, err)
	}
	if err := nodes[2].DeleteBranch(ctx, "twig"); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if h := heldMark(n, "trunk"); h != 0 {
			t.Fatalf("node %d's mark is %d after rm", n.NodeID(), h)
		}
	}
}

// TestSpaceDiffModel diffs every pair of views of one space — the space,
// two snapshots, a branch made from the first and one made now — after
// random writes and deletes on each writable one, page by page at random
// sizes, against a model: both sides listed whole and compared key by
// key.
func TestSpaceDiffModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "base", object.SpaceSettings{Ranges: 3}); err != nil {
		t.Fatal(err)
	}
	churn := func(space string, ops int) {
		for range ops {
			k := fmt.Sprintf("k%03d", rng.IntN(150))
			if rng.IntN(4) == 0 {
				if _, err := n.Delete(ctx, &object.DeleteRequest{Space: space, Key: k}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			put(t, n, space, k, []byte(fmt.Sprint(space, rng.IntN(3)))) // often the same bytes again
		}
	}
	churn("base", 200)
	if _, err := n.CreateSnapshot(ctx, "base", "base-s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateBranch(ctx, "base", "base-b1", "base-s1"); err != nil {
		t.Fatal(err)
	}
	churn("base", 60)
	if _, err := n.CreateSnapshot(ctx, "base", "base-s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateBranch(ctx, "base", "base-b2", ""); err != nil {
		t.Fatal(err)
	}
	churn("base", 40)
	churn("base-b1", 50)
	churn("base-b2", 30)
	if _, err := n.CreateSpace(ctx, "other", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}

	// shows is what a view shows: key -> the object's content and metadata.
	shows := func(space string) map[string]string {
		m := map[string]string{}
		for _, k := range listAll(t, n, space, 1000) {
			b, info, err := get(t, n, object.GetRequest{Space: space, Key: k})
			if err != nil {
				t.Fatal(err)
			}
			m[k] = fmt.Sprint(string(b), info.ETag, info.Size)
		}
		return m
	}
	views := []string{"base", "base-s1", "base-s2", "base-b1", "base-b2"}
	for _, from := range views {
		for _, to := range views {
			fm, tm := shows(from), shows(to)
			var want []string
			for k := range fm {
				if _, ok := tm[k]; !ok {
					want = append(want, k+" removed")
				} else if fm[k] != tm[k] {
					want = append(want, k+" changed")
				}
			}
			for k := range tm {
				if _, ok := fm[k]; !ok {
					want = append(want, k+" added")
				}
			}
			slices.Sort(want)
			var got []string
			after, pages := "", 0
			for {
				d, err := n.DiffSpaces(ctx, &object.SpaceDiffRequest{From: from, To: to, StartAfter: after, Limit: uint32(1 + rng.IntN(20))})
				if err != nil {
					t.Fatalf("%s -> %s: %v", from, to, err)
				}
				pages++
				for _, c := range d.Changes {
					got = append(got, c.Key+" "+c.Change)
					if (c.From == nil) != (c.Change == object.KeyAdded) || (c.To == nil) != (c.Change == object.KeyRemoved) {
						t.Fatalf("%s -> %s: %+v", from, to, c)
					}
				}
				if !d.Truncated {
					break
				}
				after = d.Next
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s -> %s (%d pages):\n got %v\nwant %v", from, to, pages, got, want)
			}
		}
	}
	if _, err := n.DiffSpaces(ctx, &object.SpaceDiffRequest{From: "base", To: "other"}); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("a diff of two spaces: %v", err)
	}
	if _, err := n.DiffSpaces(ctx, &object.SpaceDiffRequest{From: "base", To: "nothing"}); object.KindOf(err) != object.SpaceNotFound {
		t.Fatalf("a diff with no space: %v", err)
	}
}

// TestBranchMergeAgain: a key is compared with where the two sides last
// agreed on it — its last merge from the branch, else the branch point —
// so merging again takes what the branch changed since, keeps what the
// space changed since, and a delete of a key that did not exist at the
// branch point is no conflict with the space making it later.
func TestBranchMergeAgain(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "main", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "main", "k", []byte("k0"))
	put(t, n, "main", "j", []byte("j0"))
	if _, err := n.CreateBranch(ctx, "main", "bee", ""); err != nil {
		t.Fatal(err)
	}
	put(t, n, "bee", "k", []byte("k-b1"))
	put(t, n, "bee", "j", []byte("j-b1"))
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "bee", Key: "late"}); err != nil { // no such key yet: a marker
		t.Fatal(err)
	}
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "bee", Key: "d"}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "main", "d", []byte("d0")) // made in the space after the branch deleted it (it did not exist then)
	merge := func(strategy string) object.MergeResult {
		t.Helper()
		res, err := n.MergeBranch(ctx, &object.MergeRequest{Branch: "bee", Strategy: strategy})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := merge(""); res.Applied != 2 || len(res.Conflicts) != 0 {
		t.Fatalf("first merge: %+v", res)
	}
	// After the merge: the space changes k, the branch changes j; late
	// is made in the space.
	put(t, n, "main", "k", []byte("k-main2"))
	put(t, n, "bee", "j", []byte("j-b2"))
	put(t, n, "main", "late", []byte("late0"))
	res := merge("")
	if res.Applied != 1 || len(res.Conflicts) != 0 {
		t.Fatalf("second merge: %+v", res)
	}
	for k, want := range map[string]string{"k": "k-main2", "j": "j-b2", "late": "late0", "d": "d0"} {
		if got, _, err := get(t, n, object.GetRequest{Space: "main", Key: k}); err != nil || string(got) != want {
			t.Fatalf("main/%s = %q %v, want %q", k, got, err, want)
		}
	}
	// Both change k now: a conflict again.
	put(t, n, "bee", "k", []byte("k-b3"))
	put(t, n, "main", "k", []byte("k-main3"))
	if res := merge(""); res.Version != 0 || len(res.Conflicts) != 1 || res.Conflicts[0].Key != "k" {
		t.Fatalf("third merge: %+v", res)
	}
	// A merged delete counts as a merge: the space re-making the key
	// afterwards is its own change.
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "bee", Key: "j"}); err != nil {
		t.Fatal(err)
	}
	if res := merge(object.MergeDestWins); res.Applied != 1 {
		t.Fatalf("merging a delete: %+v", res)
	}
	put(t, n, "main", "j", []byte("j-main"))
	if res := merge(""); len(res.Conflicts) != 0 || res.Applied != 0 {
		t.Fatalf("after a merged delete (and k settled by dest-wins): %+v", res)
	}
	if got, _, _ := get(t, n, object.GetRequest{Space: "main", Key: "j"}); string(got) != "j-main" {
		t.Fatalf("main/j = %q", got)
	}
	// The space makes g, a merge passes (the branch has no g), then the
	// branch makes g too: both changed it since they last agreed (on no
	// g), a conflict — not the branch's g over the space's.
	put(t, n, "main", "g", []byte("g-main"))
	merge("")
	put(t, n, "bee", "g", []byte("g-branch"))
	if res := merge(""); len(res.Conflicts) != 1 || res.Conflicts[0].Key != "g" {
		t.Fatalf("a key both made: %+v", res)
	}
}
