package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
)

// putDoc writes a JSON document.
func putDoc(t *testing.T, n *Node, space, key, doc string) object.Info {
	t.Helper()
	if !json.Valid([]byte(doc)) {
		t.Fatalf("bad JSON in the test: %s", doc)
	}
	info, err := n.Put(context.Background(), &object.PutRequest{Space: space, Key: key, Size: int64(len(doc)), ContentType: "application/json"},
		bytes.NewReader([]byte(doc)))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestFollow: a document's references are read with it, breadth first,
// each once (a cycle ends), to the depth asked, all as of one snapshot; a
// missing target, a space the caller may not read and a body over the
// budget are reported in place; a reference in an object that is not a
// document is not followed.
func TestFollow(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	for _, s := range []string{"people", "orgs", "secret"} {
		if _, err := n.CreateSpace(ctx, s, object.SpaceSettings{Ranges: 2}); err != nil {
			t.Fatal(err)
		}
	}
	putDoc(t, n, "people", "alice", `{"name": "Alice", "org": {"$ref": "orgs/acme"}, "friends": [{"$ref": "people/bob"}, {"$ref": "people/nobody"}]}`)
	bob1 := putDoc(t, n, "people", "bob", `{"name": "Bob", "friend": {"$ref": "people/alice"}, "org": {"$ref": "orgs/acme"}}`)
	putDoc(t, n, "orgs", "acme", `{"name": "Acme", "ceo": {"$ref": "secret/x"}, "note": {"$ref": "people/bob", "why": "not a reference: two members"}}`)
	putDoc(t, n, "secret", "x", `{}`)
	put(t, n, "people", "plain", []byte(`{"$ref": "people/alice"}`)) // no content type: not a document

	deny := func(space string) error {
		if space == "secret" {
			return &object.Error{Kind: object.AccessDenied, Message: "no read on secret"}
		}
		return nil
	}
	type seen struct {
		ref   string
		depth int
		kind  object.Kind
	}
	follow := func(req object.FollowRequest) ([]seen, object.FollowResult) {
		t.Helper()
		res, err := n.Follow(ctx, &req, deny)
		if err != nil {
			t.Fatal(err)
		}
		var out []seen
		for _, o := range res.Objects {
			s := seen{ref: o.Space + "/" + o.Key, depth: o.Depth}
			if o.Err != nil {
				s.kind = object.KindOf(o.Err)
			} else if o.Data == nil {
				t.Fatalf("%s came without data or error", s.ref)
			}
			out = append(out, s)
		}
		return out, res
	}
	equal := func(got, want []seen) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}

	if got, _ := follow(object.FollowRequest{Space: "people", Key: "alice"}); !equal(got, []seen{{"people/alice", 0, 0}}) {
		t.Fatalf("depth 0: %+v", got)
	}
	want1 := []seen{{"people/alice", 0, 0}, {"orgs/acme", 1, 0}, {"people/bob", 1, 0}, {"people/nobody", 1, object.NotFound}}
	if got, _ := follow(object.FollowRequest{Space: "people", Key: "alice", Depth: 1}); !equal(got, want1) {
		t.Fatalf("depth 1: %+v", got)
	}
	want2 := append(want1, seen{"secret/x", 2, object.AccessDenied})
	got, res := follow(object.FollowRequest{Space: "people", Key: "alice", Depth: 5})
	if !equal(got, want2) || res.Truncated || res.At == 0 {
		t.Fatalf("depth 5: %+v (truncated %v, at %d)", got, res.Truncated, res.At)
	}
	if got, _ := follow(object.FollowRequest{Space: "people", Key: "plain", Depth: 3}); !equal(got, []seen{{"people/plain", 0, 0}}) {
		t.Fatalf("an object that is no document: %+v", got)
	}

	// One snapshot: bob's newer version is not seen as of the older time,
	// whether asked by time or by the first object's version.
	alice := putDoc(t, n, "people", "alice", `{"name": "Alice", "friends": [{"$ref": "people/bob"}]}`)
	putDoc(t, n, "people", "bob", `{"name": "Robert"}`)
	name := func(res object.FollowResult, ref string) string {
		for _, o := range res.Objects {
			if o.Space+"/"+o.Key == ref {
				var d struct{ Name string }
				_ = json.Unmarshal(o.Data, &d)
				return d.Name
			}
		}
		return ""
	}
	_, res = follow(object.FollowRequest{Space: "people", Key: "alice", Depth: 1, AsOf: alice.Version})
	if name(res, "people/bob") != "Bob" || res.At != alice.Version {
		t.Fatalf("as of alice's version, bob is %q (at %d)", name(res, "people/bob"), res.At)
	}
	_, res = follow(object.FollowRequest{Space: "people", Key: "alice", Depth: 1, Version: alice.Version})
	if name(res, "people/bob") != "Bob" {
		t.Fatalf("from alice's version, bob is %q", name(res, "people/bob"))
	}
	_, res = follow(object.FollowRequest{Space: "people", Key: "alice", Depth: 1})
	if name(res, "people/bob") != "Robert" || res.At <= bob1.Version {
		t.Fatalf("now, bob is %q", name(res, "people/bob"))
	}

	// A budget that holds alice but not bob's body.
	_, res = follow(object.FollowRequest{Space: "people", Key: "alice", Depth: 1, Budget: 60})
	if len(res.Objects) != 2 || res.Objects[1].Data != nil || object.KindOf(res.Objects[1].Err) != object.TooLarge || !res.Truncated {
		t.Fatalf("over the budget: %+v", res)
	}
	// More references than one answer holds: the first ones, in order.
	var many strings.Builder
	many.WriteString(`[`)
	for i := range object.MaxFollowObjects + 5 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"$ref": "people/p%04d"}`, i)
	}
	many.WriteString(`]`)
	putDoc(t, n, "people", "crowd", many.String())
	_, res = follow(object.FollowRequest{Space: "people", Key: "crowd", Depth: 1})
	if len(res.Objects) != object.MaxFollowObjects || !res.Truncated || res.Objects[1].Key != "p0000" ||
		res.Objects[object.MaxFollowObjects-1].Key != fmt.Sprintf("p%04d", object.MaxFollowObjects-2) {
		t.Fatalf("a crowd: %d objects, truncated %v", len(res.Objects), res.Truncated)
	}
	if _, err := n.Follow(ctx, &object.FollowRequest{Space: "people", Key: "alice", Depth: object.MaxFollowDepth + 1}, nil); object.KindOf(err) != object.InvalidArgument {
		t.Fatalf("too deep: %v", err)
	}
	if _, err := n.Follow(ctx, &object.FollowRequest{Space: "secret", Key: "x"}, deny); object.KindOf(err) != object.AccessDenied {
		t.Fatalf("a first object the caller may not read: %v", err)
	}
}
