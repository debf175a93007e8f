package cluster

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// TestCompose makes versions out of other versions' bodies: the content is
// the concatenation, the hash and ETag describe it, and the manifest
// reuses the sources' chunks (only a range's cut edges and inline bodies
// become new chunks).
func TestCompose(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	r := rand.New(rand.NewPCG(3, 4))
	a, b, tiny := randBytes(r, 1<<20), randBytes(r, 300<<10), randBytes(r, 100)
	ai, bi := put(t, n, "sp1", "a", a), put(t, n, "sp1", "b", b)
	put(t, n, "sp1", "tiny", tiny)
	src := func(key string, v uint64, off, length int64) object.ComposeSource {
		return object.ComposeSource{Space: "sp1", Key: key, Version: v, Offset: off, Length: length}
	}
	check := func(key string, info object.Info, want []byte) {
		t.Helper()
		got, _, err := get(t, n, object.GetRequest{Space: "sp1", Key: key})
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: content differs (%v)", key, err)
		}
		if info.Size != int64(len(want)) || info.Hash != chunk.Sum(want) {
			t.Fatalf("%s: info %+v does not describe the content", key, info)
		}
	}
	chunksOf := func(key string, v uint64) []chunk.Ref { return manifestOfKey(t, n, "sp1", key, v).Chunks }

	// Whole sources, one of them inline.
	ci, err := n.Compose(ctx, &object.PutRequest{Space: "sp1", Key: "c", ContentType: "text/x"}, "", []object.ComposeSource{src("a", 0, 0, -1), src("b", bi.Version, 0, -1), src("tiny", 0, 0, -1)})
	if err != nil {
		t.Fatal(err)
	}
	whole := slices.Concat(a, b, tiny)
	check("c", ci, whole)
	sum := md5.Sum(whole)
	if ci.ETag != hex.EncodeToString(sum[:]) || ci.ContentType != "text/x" {
		t.Fatalf("c: ETag %s, content type %q", ci.ETag, ci.ContentType)
	}
	cc, ac, bc := chunksOf("c", ci.Version), chunksOf("a", ai.Version), chunksOf("b", bi.Version)
	if !slices.Equal(cc[:len(ac)], ac) || !slices.Equal(cc[len(ac):len(ac)+len(bc)], bc) || len(cc) != len(ac)+len(bc)+1 {
		t.Fatalf("c's manifest (%d chunks) is not a's (%d), b's (%d) and one for the inline body", len(cc), len(ac), len(bc))
	}

	// A range: only the chunks it cuts are new.
	ri, err := n.Compose(ctx, &object.PutRequest{Space: "sp1", Key: "r"}, "given-etag", []object.ComposeSource{src("a", 0, 1000, 500000)})
	if err != nil {
		t.Fatal(err)
	}
	check("r", ri, a[1000:501000])
	if ri.ETag != "given-etag" {
		t.Fatalf("r: ETag %q", ri.ETag)
	}
	fresh := 0
	for _, c := range chunksOf("r", ri.Version) {
		if !slices.Contains(ac, c) {
			fresh++
		}
	}
	if fresh > 2 {
		t.Fatalf("r: %d new chunks, want at most the two cut edges", fresh)
	}

	// A whole copy of one source keeps its hash, ETag and manifest.
	di, err := n.Compose(ctx, &object.PutRequest{Space: "sp1", Key: "d"}, "", []object.ComposeSource{src("a", 0, 0, -1)})
	if err != nil {
		t.Fatal(err)
	}
	check("d", di, a)
	if di.ETag != ai.ETag || !slices.Equal(chunksOf("d", di.Version), ac) {
		t.Fatalf("d: ETag %s (a's %s), or its manifest differs", di.ETag, ai.ETag)
	}

	// Bad sources write nothing.
	_, err = n.Compose(ctx, &object.PutRequest{Space: "sp1", Key: "e"}, "", []object.ComposeSource{src("nosuch", 0, 0, -1)})
	mustCode(t, err, wire.CodeNotFound)
	_, err = n.Compose(ctx, &object.PutRequest{Space: "sp1", Key: "e"}, "", []object.ComposeSource{src("b", 0, 1, int64(len(b)))})
	mustCode(t, err, wire.CodeInvalidRange)
	_, _, err = get(t, n, object.GetRequest{Space: "sp1", Key: "e"})
	mustCode(t, err, wire.CodeNotFound)
}

// TestSystemKeys: keys under wire.SystemKeyPrefix are refused without
// WithSystemKeys, and listed only when asked for by prefix.
func TestSystemKeys(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	key := object.SystemKeyPrefix + "state"
	_, err := n.Put(ctx, &object.PutRequest{Space: "sp1", Key: key, Size: 1}, bytes.NewReader([]byte("x")))
	mustCode(t, err, wire.CodeInvalidArgument)
	sys := object.WithSystemKeys(ctx)
	if _, err := n.Put(sys, &object.PutRequest{Space: "sp1", Key: key, Size: 1}, bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	put(t, n, "sp1", "user", []byte("y"))
	for _, c := range []struct {
		ctx    context.Context
		prefix string
		want   []string
	}{{ctx, "", []string{"user"}}, {sys, "", []string{"user"}}, {ctx, object.SystemKeyPrefix, nil}, {sys, object.SystemKeyPrefix, []string{key}}} {
		l, err := n.List(c.ctx, &object.ListRequest{Space: "sp1", Prefix: c.prefix})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range l.Objects {
			got = append(got, o.Key)
		}
		if !slices.Equal(got, c.want) || l.Truncated {
			t.Fatalf("list %q: %q (truncated %v), want %q", c.prefix, got, l.Truncated, c.want)
		}
	}
	// Only client keys keep a space from being deleted; its system keys
	// go with it.
	mustCode(t, n.DeleteSpace(ctx, "sp1"), wire.CodeSpaceNotEmpty)
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "sp1", Key: "user"}); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteSpace(ctx, "sp1"); err != nil {
		t.Fatalf("deleting a space that holds only system keys: %v", err)
	}
	n.CreateSpace(ctx, "sp1", object.SpaceSettings{})
	if _, err := n.Stat(sys, &object.GetRequest{Space: "sp1", Key: key, Length: -1}); wire.CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("a system key outlived its space: %v", err)
	}
}
