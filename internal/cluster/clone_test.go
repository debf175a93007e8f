package cluster

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/object"
)

// TestClone: a clone has its source's content and metadata, shares every
// chunk (the segments do not grow), names its origin, and is independent
// of the source afterwards; clones of inline bodies, across spaces, of an
// old version, and onto an existing key all work; bad sources fail and
// write nothing.
func TestClone(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	for _, sp := range []string{"src", "dst"} {
		if _, err := n.CreateSpace(ctx, sp, object.SpaceSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	big := randBytes(r, 2<<20)
	v1, err := n.Put(ctx, &object.PutRequest{Space: "src", Key: "a", Size: int64(len(big)), ContentType: "application/x-test",
		Meta: map[string]string{"m": "1"}, Tags: map[string]string{"t": "x"}}, bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	v2 := put(t, n, "src", "a", []byte("now small")) // the latest; v1 is older

	before := n.chunks.Stats().Bytes
	c, err := n.Clone(ctx, &object.CloneRequest{Space: "src", Key: "a", Version: v1.Version, DstSpace: "dst", DstKey: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if after := n.chunks.Stats().Bytes; after != before {
		t.Fatalf("clone wrote %d segment bytes, want none", after-before)
	}
	if o := c.Origin; o == nil || o.Space != "src" || o.Key != "a" || o.Version != v1.Version {
		t.Fatalf("clone's origin %+v", c.Origin)
	}
	if c.Size != v1.Size || c.Hash != v1.Hash || c.ETag != v1.ETag || c.ContentType != "application/x-test" ||
		c.Meta["m"] != "1" || c.Tags["t"] != "x" || c.Parent != 0 {
		t.Fatalf("clone's info %+v does not describe the source %+v", c, v1)
	}
	if !slices.Equal(manifestOfKey(t, n, "dst", "copy", c.Version).Chunks, manifestOfKey(t, n, "src", "a", v1.Version).Chunks) {
		t.Fatal("the clone's manifest is not the source's")
	}
	got, info, err := get(t, n, object.GetRequest{Space: "dst", Key: "copy"})
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("clone reads back wrong (%v)", err)
	}
	if info.Origin == nil || info.Origin.Space != "src" || info.Origin.Version != v1.Version {
		t.Fatalf("a read of the clone names origin %+v", info.Origin)
	}

	// The latest (inline) version, in the same space; then a clone onto
	// an existing key becomes its next version.
	c2, err := n.Clone(ctx, &object.CloneRequest{Space: "src", Key: "a", DstKey: "b"})
	if err != nil || c2.Origin.Version != v2.Version {
		t.Fatalf("clone of the latest: %+v %v", c2, err)
	}
	if got, _, _ := get(t, n, object.GetRequest{Space: "src", Key: "b"}); string(got) != "now small" {
		t.Fatalf("inline clone reads %q", got)
	}
	c3, err := n.Clone(ctx, &object.CloneRequest{Space: "src", Key: "a", Version: v1.Version, DstKey: "b"})
	if err != nil || c3.Parent != c2.Version {
		t.Fatalf("clone onto an existing key: %+v %v", c3, err)
	}
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "src", Key: "a", DstKey: "b", IfNoneMatch: true}); object.KindOf(err) != object.PreconditionFailed {
		t.Fatalf("clone onto an existing key with IfNoneMatch: %v", err)
	}

	// Writing the source afterwards leaves the clone alone.
	put(t, n, "src", "a", []byte("changed"))
	if got, _, _ := get(t, n, object.GetRequest{Space: "dst", Key: "copy"}); !bytes.Equal(got, big) {
		t.Fatal("the clone changed with its source")
	}

	// Bad sources and targets.
	for name, req := range map[string]object.CloneRequest{
		"missing key":     {Space: "src", Key: "nope", DstKey: "x"},
		"missing version": {Space: "src", Key: "a", Version: 12345, DstKey: "x"},
		"missing space":   {Space: "nospace", Key: "a", DstKey: "x"},
		"missing target":  {Space: "src", Key: "a", DstSpace: "nospace", DstKey: "x"},
		"empty target":    {Space: "src", Key: "a", DstKey: ""},
	} {
		if _, err := n.Clone(ctx, &req); err == nil {
			t.Fatalf("%s: clone succeeded", name)
		}
		if _, _, err := get(t, n, object.GetRequest{Space: "src", Key: "x"}); object.KindOf(err) != object.NotFound {
			t.Fatalf("%s: a failed clone wrote (%v)", name, err)
		}
	}
	n.Delete(ctx, &object.DeleteRequest{Space: "src", Key: "gone"})
	put(t, n, "src", "gone", []byte("x"))
	n.Delete(ctx, &object.DeleteRequest{Space: "src", Key: "gone"})
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "src", Key: "gone", DstKey: "x"}); object.KindOf(err) != object.NotFound {
		t.Fatalf("clone of a deleted object: %v", err)
	}
}

// TestLineage: the parent chain runs through versions of a key and
// across clones; children are the next version and the clones, in any
// space; a clone whose commit never happened is not listed.
func TestLineage(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	for _, sp := range []string{"lin", "other"} {
		if _, err := n.CreateSpace(ctx, sp, object.SpaceSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	a1 := put(t, n, "lin", "a", []byte("one"))
	a2 := put(t, n, "lin", "a", []byte("two"))
	c1, err := n.Clone(ctx, &object.CloneRequest{Space: "lin", Key: "a", Version: a1.Version, DstSpace: "other", DstKey: "c"})
	if err != nil {
		t.Fatal(err)
	}
	c2 := put(t, n, "other", "c", []byte("c two"))
	d1, err := n.Clone(ctx, &object.CloneRequest{Space: "other", Key: "c", DstSpace: "lin", DstKey: "d"})
	if err != nil {
		t.Fatal(err)
	}
	// e's first version is a clone of a1; a later clone of a1 onto e is
	// refused after its index entry was written, and is no child.
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "lin", Key: "a", Version: a1.Version, DstSpace: "lin", DstKey: "e", IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	put(t, n, "lin", "e", []byte("overwritten"))
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "lin", Key: "a", Version: a1.Version, DstKey: "e", IfNoneMatch: true}); object.KindOf(err) != object.PreconditionFailed {
		t.Fatalf("refused clone: %v", err)
	}

	l, err := n.Lineage(ctx, &object.LineageRequest{Space: "lin", Key: "d"})
	if err != nil {
		t.Fatal(err)
	}
	ref := func(e object.LineageEntry) object.VersionRef {
		return object.VersionRef{Space: e.Space, Key: e.Key, Version: e.Version}
	}
	var anc []object.VersionRef
	for _, e := range l.Ancestors {
		anc = append(anc, ref(e))
	}
	want := []object.VersionRef{{Space: "other", Key: "c", Version: c2.Version}, {Space: "other", Key: "c", Version: c1.Version}, {Space: "lin", Key: "a", Version: a1.Version}}
	if l.Version.Version != d1.Version || !slices.Equal(anc, want) {
		t.Fatalf("ancestors of d: %+v, want %+v", anc, want)
	}
	if !l.Ancestors[0].Clone || l.Ancestors[1].Clone || !l.Ancestors[2].Clone {
		t.Fatalf("ancestor relations: %+v", l.Ancestors)
	}

	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "lin", Key: "a", Version: a1.Version})
	if err != nil {
		t.Fatal(err)
	}
	wantKids := map[object.VersionRef]bool{{Space: "lin", Key: "a", Version: a2.Version}: false, {Space: "other", Key: "c", Version: c1.Version}: true}
	for _, e := range l.Children {
		if e.Space == "lin" && e.Key == "e" {
			wantKids[ref(e)] = true
		}
	}
	if len(l.Children) != len(wantKids) || len(wantKids) != 3 {
		t.Fatalf("children of a@1: %+v", l.Children)
	}
	for _, e := range l.Children {
		clone, ok := wantKids[ref(e)]
		if !ok || clone != e.Clone {
			t.Fatalf("child %+v unexpected (children %+v)", e, l.Children)
		}
	}

	// A pruned ancestor ends the chain as gone.
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "lin", Key: "a", Version: a1.Version}); err != nil {
		t.Fatal(err)
	}
	l, err = n.Lineage(ctx, &object.LineageRequest{Space: "other", Key: "c", Version: c1.Version})
	if err != nil || len(l.Ancestors) != 1 || !l.Ancestors[0].Gone || l.Ancestors[0].Version != a1.Version {
		t.Fatalf("lineage past a deleted origin: %+v %v", l, err)
	}
	if l, err = n.Lineage(ctx, &object.LineageRequest{Space: "lin", Key: "a"}); err != nil || len(l.Ancestors) != 1 || !l.Ancestors[0].Gone {
		t.Fatalf("a@2's parent was deleted: %+v %v", l, err)
	}
	// Limit bounds the chain.
	if l, err = n.Lineage(ctx, &object.LineageRequest{Space: "lin", Key: "d", Limit: 1}); err != nil || len(l.Ancestors) != 1 || !l.Truncated {
		t.Fatalf("lineage with limit 1: %+v %v", l, err)
	}
}

// TestDiff: metadata changes by field; byte ranges from the manifests
// (chunk-granular), exact with Exact, and for inline versions.
func TestDiff(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "dif", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	base := randBytes(r, 1<<20)
	v1, err := n.Put(ctx, &object.PutRequest{Space: "dif", Key: "k", Size: int64(len(base)), Meta: map[string]string{"a": "1", "b": "2"}}, bytes.NewReader(base))
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte("0123456789")
	v2, err := n.Put(ctx, &object.PutRequest{Space: "dif", Key: "k", Mode: object.PutWriteAt, Offset: 500000, Size: int64(len(patch)),
		Meta: map[string]string{"a": "1", "c": "3"}}, bytes.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}
	d, err := n.Diff(ctx, &object.DiffRequest{Space: "dif", Key: "k", From: v1.Version, To: v2.Version})
	if err != nil {
		t.Fatal(err)
	}
	if d.Exact || len(d.Ranges) == 0 {
		t.Fatalf("chunk-granular diff: %+v", d.Ranges)
	}
	var covered int64
	for _, e := range d.Ranges {
		covered += e.Len
		if e.Off > 500000 || e.Off+e.Len < 500010 {
			if !(e.Off <= 500000 && e.Off+e.Len >= 500010) {
				t.Fatalf("range %+v does not hold the write", e)
			}
		}
	}
	if covered > 1<<19 {
		t.Fatalf("diff covers %d bytes for a 10-byte write", covered)
	}
	fields := map[string]object.FieldChange{}
	for _, c := range d.Changes {
		fields[c.Field] = c
	}
	if !fields["meta.b"].Removed || !fields["meta.c"].Added || fields["meta.c"].To != "3" || fields["hash"].From == "" {
		t.Fatalf("changes %+v", d.Changes)
	}
	if _, ok := fields["meta.a"]; ok || fields["size"].Field != "" {
		t.Fatalf("unchanged fields reported: %+v", d.Changes)
	}
	d, err = n.Diff(ctx, &object.DiffRequest{Space: "dif", Key: "k", From: v1.Version, To: v2.Version, Exact: true})
	want := chunk.DiffBytes(base[500000:500010], patch, 500000)
	if err != nil || !d.Exact || !slices.Equal(d.Ranges, want) {
		t.Fatalf("exact diff %+v, want %+v (%v)", d.Ranges, want, err)
	}
	// The same content: nothing changed.
	if d, err = n.Diff(ctx, &object.DiffRequest{Space: "dif", Key: "k", From: v2.Version, To: v2.Version}); err != nil || len(d.Ranges) != 0 || len(d.Changes) != 0 {
		t.Fatalf("a version against itself: %+v %v", d, err)
	}
	// Inline versions are compared byte by byte; across objects too.
	put(t, n, "dif", "s1", []byte("hello world"))
	put(t, n, "dif", "s2", []byte("hello there!"))
	d, err = n.Diff(ctx, &object.DiffRequest{Space: "dif", Key: "s1", ToKey: "s2"})
	if err != nil || !d.Exact || !slices.Equal(d.Ranges, chunk.DiffBytes([]byte("hello world"), []byte("hello there!"), 0)) {
		t.Fatalf("inline diff %+v %v", d, err)
	}
	if _, err := n.Diff(ctx, &object.DiffRequest{Space: "dif", Key: "k", From: 7}); object.KindOf(err) != object.NotFound {
		t.Fatalf("diff of a missing version: %v", err)
	}
}
