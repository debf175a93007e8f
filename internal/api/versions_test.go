package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/api"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// TestVersionsOverJSON: clone, lineage and diff through the JSON
// endpoints, and the errors they answer.
func TestVersionsOverJSON(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t)
	for _, sp := range []string{"vjone", "vjtwo"} {
		if _, err := n.CreateSpace(ctx, sp, object.SpaceSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	v1, err := n.Put(ctx, &object.PutRequest{Space: "vjone", Key: "a", Size: 5, Meta: map[string]string{"m": "1"}}, bytes.NewReader([]byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := n.Put(ctx, &object.PutRequest{Space: "vjone", Key: "a", Size: 5}, bytes.NewReader([]byte("jello")))
	if err != nil {
		t.Fatal(err)
	}

	st, b := post(t, ep, "/_cairn/v1/clone", api.CloneRequest{Ref: api.Ref{Space: "vjone", Key: "a"}, Version: tstamp.String(v1.Version), To: api.Ref{Space: "vjtwo", Key: "c"}}, nil)
	c := must[api.Version](t, st, b)
	if c.Space != "vjtwo" || c.Key != "c" || c.Size != 5 || c.Meta["m"] != "1" || c.Origin == nil ||
		c.Origin.Space != "vjone" || c.Origin.Key != "a" || c.Origin.Version != tstamp.String(v1.Version) {
		t.Fatalf("clone: %s", b)
	}

	st, b = post(t, ep, "/_cairn/v1/lineage", api.LineageRequest{Ref: api.Ref{Space: "vjone", Key: "a"}, Version: tstamp.String(v1.Version)}, nil)
	l := must[api.LineageResponse](t, st, b)
	if len(l.Ancestors) != 0 || len(l.Children) != 2 {
		t.Fatalf("lineage of a@1: %s", b)
	}
	for _, ch := range l.Children {
		switch {
		case ch.Space == "vjone" && ch.Version.Version == tstamp.String(v2.Version) && !ch.Clone:
		case ch.Space == "vjtwo" && ch.Key == "c" && ch.Version.Version == c.Version && ch.Clone:
		default:
			t.Fatalf("child %+v", ch)
		}
	}
	st, b = post(t, ep, "/_cairn/v1/lineage", api.LineageRequest{Ref: api.Ref{Space: "vjtwo", Key: "c"}}, nil)
	if l := must[api.LineageResponse](t, st, b); len(l.Ancestors) != 1 || !l.Ancestors[0].Clone || l.Ancestors[0].Version.Version != tstamp.String(v1.Version) {
		t.Fatalf("lineage of the clone: %s", b)
	}

	st, b = post(t, ep, "/_cairn/v1/diff", api.DiffRequest{Ref: api.Ref{Space: "vjone", Key: "a"}, From: tstamp.String(v1.Version)}, nil)
	d := must[api.DiffResponse](t, st, b)
	if !d.Exact || len(d.Ranges) != 1 || d.Ranges[0] != (api.ChangedRange{Offset: 0, Length: 1}) || d.To.Version != tstamp.String(v2.Version) {
		t.Fatalf("diff: %s", b)
	}
	var removed bool
	for _, ch := range d.Changes {
		removed = removed || ch.Field == "meta.m" && ch.Removed
	}
	if !removed {
		t.Fatalf("diff changes: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/diff", api.DiffRequest{Ref: api.Ref{Space: "vjone", Key: "a"}, ToRef: &api.Ref{Space: "vjtwo", Key: "c"}}, nil)
	if d := must[api.DiffResponse](t, st, b); len(d.Ranges) != 1 || d.From.Version != tstamp.String(v2.Version) {
		t.Fatalf("diff across objects: %s", b)
	}

	// Snapshots: made, listed, read through the transaction endpoints,
	// removed.
	st, b = post(t, ep, "/_cairn/v1/snapshot/create", api.SnapshotRequest{Space: "vjone", Name: "vjone-snap"}, nil)
	snap := must[api.Snapshot](t, st, b)
	if snap.Name != "vjone-snap" || snap.Space != "vjone" || snap.At == "" {
		t.Fatalf("snapshot create: %s", b)
	}
	if _, err := n.Put(ctx, &object.PutRequest{Space: "vjone", Key: "a", Size: 3}, bytes.NewReader([]byte("new"))); err != nil {
		t.Fatal(err)
	}
	st, b = post(t, ep, "/_cairn/v1/txn/read", api.ReadRequest{At: begin(t, ep), Objects: []api.Ref{{Space: "vjone-snap", Key: "a"}}}, nil)
	if rd := must[api.ReadResponse](t, st, b); string(rd.Objects[0].Data) != "jello" {
		t.Fatalf("reading the snapshot: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/snapshot/list", api.SnapshotRequest{Space: "vjone"}, nil)
	if l := must[api.SnapshotList](t, st, b); len(l.Snapshots) != 1 || l.Snapshots[0] != snap {
		t.Fatalf("snapshot list: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: begin(t, ep), Writes: []api.Write{{Ref: api.Ref{Space: "vjone-snap", Key: "x"}, Data: []byte("x")}}}, nil)
	if st != 403 {
		t.Fatalf("a commit into a snapshot: %d %s", st, b)
	}
	st, b = post(t, ep, "/_cairn/v1/snapshot/delete", api.SnapshotRequest{Name: "vjone-snap"}, nil)
	must[struct{}](t, st, b)
	st, b = post(t, ep, "/_cairn/v1/snapshot/list", api.SnapshotRequest{}, nil)
	if l := must[api.SnapshotList](t, st, b); len(l.Snapshots) != 0 {
		t.Fatalf("snapshot list after delete: %s", b)
	}

	// Branches: made, written through a transaction, merged, removed.
	st, b = post(t, ep, "/_cairn/v1/branch/create", api.BranchRequest{Space: "vjone", Name: "vjone-dev"}, nil)
	if br := must[api.Branch](t, st, b); br.Name != "vjone-dev" || br.Space != "vjone" || br.At == "" {
		t.Fatalf("branch create: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/txn/commit", api.CommitRequest{Start: begin(t, ep), Writes: []api.Write{{Ref: api.Ref{Space: "vjone-dev", Key: "dev"}, Data: []byte("dev")}}}, nil)
	if st != 200 {
		t.Fatalf("a commit into a branch: %d %s", st, b)
	}
	st, b = post(t, ep, "/_cairn/v1/txn/read", api.ReadRequest{At: begin(t, ep), Objects: []api.Ref{{Space: "vjone-dev", Key: "a"}, {Space: "vjone-dev", Key: "dev"}}}, nil)
	if rd := must[api.ReadResponse](t, st, b); string(rd.Objects[0].Data) != "new" || string(rd.Objects[1].Data) != "dev" {
		t.Fatalf("reading the branch: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/branch/list", api.BranchRequest{Space: "vjone"}, nil)
	if l := must[api.BranchList](t, st, b); len(l.Branches) != 1 || l.Branches[0].Name != "vjone-dev" {
		t.Fatalf("branch list: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/diff/spaces", api.SpaceDiffRequest{From: "vjone", To: "vjone-dev"}, nil)
	if d := must[api.SpaceDiffResponse](t, st, b); len(d.Changes) != 1 || d.Changes[0].Key != "dev" || d.Changes[0].Change != "added" || d.Changes[0].ToSize == nil || *d.Changes[0].ToSize != 3 {
		t.Fatalf("diff/spaces: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/branch/merge", api.BranchRequest{Name: "vjone-dev"}, nil)
	if m := must[api.MergeResponse](t, st, b); m.Applied != 1 || m.Version == "" || len(m.Conflicts) != 0 {
		t.Fatalf("branch merge: %s", b)
	}
	st, b = post(t, ep, "/_cairn/v1/branch/merge", api.BranchRequest{Name: "vjone-dev", Strategy: "nope"}, nil)
	if st != 400 {
		t.Fatalf("a merge with no such strategy: %d %s", st, b)
	}
	st, b = post(t, ep, "/_cairn/v1/branch/delete", api.BranchRequest{Name: "vjone-dev"}, nil)
	must[struct{}](t, st, b)

	for name, tc := range map[string]struct {
		path   string
		body   any
		status int
		code   string
	}{
		"bad version":    {"/_cairn/v1/clone", api.CloneRequest{Ref: api.Ref{Space: "vjone", Key: "a"}, Version: "zz", To: api.Ref{Key: "x"}}, 400, "InvalidArgument"},
		"missing source": {"/_cairn/v1/clone", api.CloneRequest{Ref: api.Ref{Space: "vjone", Key: "nope"}, To: api.Ref{Key: "x"}}, 404, "NotFound"},
		"missing space":  {"/_cairn/v1/lineage", api.LineageRequest{Ref: api.Ref{Space: "nospace", Key: "a"}}, 404, "SpaceNotFound"},
		"unknown field":  {"/_cairn/v1/diff", map[string]any{"space": "vjone", "key": "a", "bogus": 1}, 400, "MalformedJSON"},
	} {
		st, b := post(t, ep, tc.path, tc.body, nil)
		var e struct{ Error api.ErrorBody }
		if err := json.Unmarshal(b, &e); err != nil || st != tc.status || e.Error.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, st, b, tc.status, tc.code)
		}
	}
	if _, _, err := n.Get(ctx, &object.GetRequest{Space: "vjone", Key: "x", Length: -1}); object.KindOf(err) != object.NotFound {
		t.Fatalf("a refused clone wrote: %v", err)
	}
}

// TestFollowOverJSON: /_cairn/v1/follow reads a document and what its
// references reach, each object as txn/read answers it, with its depth;
// a missing target is found false.
func TestFollowOverJSON(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t)
	if _, err := n.CreateSpace(ctx, "fjs", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	for k, doc := range map[string]string{
		"a": `{"next": {"$ref": "fjs/b"}, "gone": {"$ref": "fjs/none"}}`,
		"b": `{"next": {"$ref": "fjs/a"}, "v": 2}`,
	} {
		if _, err := n.Put(ctx, &object.PutRequest{Space: "fjs", Key: k, Size: int64(len(doc)), ContentType: "application/json"}, bytes.NewReader([]byte(doc))); err != nil {
			t.Fatal(err)
		}
	}
	st, b := post(t, ep, "/_cairn/v1/follow", api.FollowRequest{Ref: api.Ref{Space: "fjs", Key: "a"}, Depth: 3}, nil)
	res := must[api.FollowResponse](t, st, b)
	if len(res.Objects) != 3 || res.At == "" || res.Truncated {
		t.Fatalf("follow: %s", b)
	}
	a, bb, none := res.Objects[0], res.Objects[1], res.Objects[2]
	if a.Key != "a" || !a.Found || a.Depth != 0 || bb.Key != "b" || bb.Depth != 1 || !json.Valid(bb.Data) || none.Key != "none" || none.Found || none.Error != nil {
		t.Fatalf("follow: %s", b)
	}
	if st, b := post(t, ep, "/_cairn/v1/follow", api.FollowRequest{Ref: api.Ref{Space: "fjs", Key: "a"}, Depth: 99}, nil); st != 400 {
		t.Fatalf("follow too deep: %d %s", st, b)
	}
	if st, b := post(t, ep, "/_cairn/v1/follow", api.FollowRequest{Ref: api.Ref{Space: "fjs", Key: "none"}}, nil); st != 404 {
		t.Fatalf("follow of a missing document: %d %s", st, b)
	}
}

// TestQueryOverJSON: /_cairn/v1/query answers a tag filter in pages of
// one snapshot, with documents on request, and refuses a bad filter with
// 400.
func TestQueryOverJSON(t *testing.T) {
	ctx := context.Background()
	n, ep := openNode(t)
	if _, err := n.CreateSpace(ctx, "qjs", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		doc := fmt.Sprintf(`{"n": %d}`, i)
		tags := map[string]string{"even": fmt.Sprint(i%2 == 0)}
		if _, err := n.Put(ctx, &object.PutRequest{Space: "qjs", Key: k, Size: int64(len(doc)), ContentType: "application/json", Tags: tags}, bytes.NewReader([]byte(doc))); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	req := api.QueryRequest{Space: "qjs", Filter: `tags.even == "true" && doc.n >= 0`, Limit: 2, Docs: true}
	for {
		st, b := post(t, ep, "/_cairn/v1/query", req, nil)
		res := must[api.QueryResponse](t, st, b)
		for _, o := range res.Objects {
			got = append(got, o.Key+string(o.Doc))
		}
		if res.Plan != "tag equal \"even\"" || res.AsOf == "" {
			t.Fatalf("query: %s", b)
		}
		if !res.Truncated {
			break
		}
		req.After, req.AsOf = res.Next, res.AsOf
	}
	if strings.Join(got, " ") != `a{"n":0} c{"n":2} e{"n":4}` {
		t.Fatalf("query: %v", got)
	}
	if st, b := post(t, ep, "/_cairn/v1/query", api.QueryRequest{Space: "qjs", Filter: "size >"}, nil); st != 400 {
		t.Fatalf("bad filter: %d %s", st, b)
	}
	// A field index, through index/add and index/list, serves the query.
	st, b := post(t, ep, "/_cairn/v1/index/add", api.IndexRequest{Space: "qjs", Field: "doc.n", Type: "number"}, nil)
	if l := must[api.IndexList](t, st, b); len(l.Indexes) != 1 || l.Indexes[0].Field != "doc.n" {
		t.Fatalf("index/add: %s", b)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, b := post(t, ep, "/_cairn/v1/index/list", api.IndexRequest{Space: "qjs"}, nil)
		if l := must[api.IndexList](t, st, b); len(l.Indexes) == 1 && l.Indexes[0].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index/list: %s", b)
		}
	}
	st, b = post(t, ep, "/_cairn/v1/query", api.QueryRequest{Space: "qjs", Filter: "doc.n >= 3"}, nil)
	if res := must[api.QueryResponse](t, st, b); len(res.Objects) != 2 || res.Plan != `field range "doc.n"` {
		t.Fatalf("query with the field index: %s", b)
	}
	if st, b := post(t, ep, "/_cairn/v1/index/add", api.IndexRequest{Space: "qjs", Field: "doc.n", Type: "time"}, nil); st != 400 {
		t.Fatalf("index/add of another type: %d %s", st, b)
	}
	st, b = post(t, ep, "/_cairn/v1/sql", api.SQLRequest{Statement: "SELECT COUNT(*), MAX(doc_n) FROM qjs WHERE doc_n >= 1"}, nil)
	if res := must[api.SQLResponse](t, st, b); len(res.Rows) != 1 || *res.Rows[0][0] != "4" || *res.Rows[0][1] != "4" {
		t.Fatalf("sql: %s", b)
	}
	if st, b := post(t, ep, "/_cairn/v1/sql", api.SQLRequest{Statement: "DELETE FROM qjs"}, nil); st != 400 {
		t.Fatalf("sql delete: %d %s", st, b)
	}
	st, b = post(t, ep, "/_cairn/v1/index/drop", api.IndexRequest{Space: "qjs", Field: "doc.n"}, nil)
	if l := must[api.IndexList](t, st, b); len(l.Indexes) != 0 {
		t.Fatalf("index/drop: %s", b)
	}
}
