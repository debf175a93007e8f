package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// TestAnyNodeServes puts a space's ranges on one node each (replicas 1)
// and drives every operation through every node of three: the range's
// part runs on its leaseholder, wherever the request arrived, and errors
// come back with their codes.
func TestAnyNodeServes(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "routed", object.SpaceSettings{Ranges: 8, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	sp, err := nodes[0].catalog.GetSpace(ctx, "routed")
	if err != nil {
		t.Fatal(err)
	}
	// Opening the space anywhere creates its ranges.
	if _, err := nodes[0].Stat(ctx, &object.GetRequest{Space: "routed", Key: "x"}); wire.CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("stat of a missing object: %v", err)
	}
	descs, err := nodes[0].catalog.SpaceRanges(ctx, sp.ID)
	if err != nil || len(descs) != 8 {
		t.Fatalf("ranges: %+v %v", descs, err)
	}
	holders := map[uint64]bool{}
	for _, d := range descs {
		if len(d.Replicas) != 1 {
			t.Fatalf("range %d has replicas %v with replicas=1", d.ID, d.Replicas)
		}
		holders[d.Replicas[0]] = true
	}
	if len(holders) < 2 {
		t.Fatalf("8 ranges all placed on %v; the test needs them spread", holders)
	}

	var keys []string
	for c := byte(0); c < 64; c++ {
		keys = append(keys, string([]byte{'!' + c, 'k'}))
	}
	for i, k := range keys {
		writeAny(t, nodes[i%3:i%3+1], "routed", k, "v-"+k)
	}
	for _, n := range nodes {
		for _, k := range keys {
			b, info, err := get(t, n, object.GetRequest{Space: "routed", Key: k})
			if err != nil || string(b) != "v-"+k || info.Key != k {
				t.Fatalf("node %d reading %q: %q %+v %v", n.NodeID(), k, b, info, err)
			}
		}
		l, err := n.List(ctx, &object.ListRequest{Space: "routed", Limit: 1000})
		if err != nil || len(l.Objects) != len(keys) || l.Truncated {
			t.Fatalf("node %d lists %d objects (truncated %v), want %d: %v", n.NodeID(), len(l.Objects), l.Truncated, len(keys), err)
		}
		if !slices.IsSortedFunc(l.Objects, func(a, b object.Info) int { return strings.Compare(a.Key, b.Key) }) {
			t.Fatalf("node %d lists out of order", n.NodeID())
		}
		page, err := n.List(ctx, &object.ListRequest{Space: "routed", Limit: 10, StartAfter: keys[20]})
		if err != nil || len(page.Objects) != 10 || page.Objects[0].Key != keys[21] || !page.Truncated {
			t.Fatalf("node %d page after %q: %+v %v", n.NodeID(), keys[20], page, err)
		}
	}

	// Conditions, misses and deletes through a node that may not hold
	// the key's range.
	k := keys[5]
	mustCode(t, putErr(nodes[1], "routed", k, "nope", &object.PutRequest{IfMatch: 1}), wire.CodePreconditionFailed)
	_, _, err = get(t, nodes[2], object.GetRequest{Space: "routed", Key: "missing"})
	mustCode(t, err, wire.CodeNotFound)
	del, err := nodes[2].Delete(ctx, &object.DeleteRequest{Space: "routed", Key: k})
	if err != nil || !del.DeleteMarker {
		t.Fatalf("delete through node %d: %+v %v", nodes[2].NodeID(), del, err)
	}
	for _, n := range nodes {
		_, _, err := get(t, n, object.GetRequest{Space: "routed", Key: k})
		mustCode(t, err, wire.CodeNotFound)
		_, info, err := get(t, n, object.GetRequest{Space: "routed", Key: k, Version: del.Version})
		if wire.CodeOf(err) != wire.CodeDeleted || info.Version != del.Version {
			t.Fatalf("node %d reading the delete marker: %+v %v", n.NodeID(), info, err)
		}
		vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "routed", Key: k})
		if err != nil || len(vs.Versions) != 2 || !vs.Versions[0].DeleteMarker {
			t.Fatalf("node %d versions of %q: %+v %v", n.NodeID(), k, vs, err)
		}
	}

	// Tags change in place through any node: same version, new tags.
	tk := keys[6]
	before, err := nodes[0].Stat(ctx, &object.GetRequest{Space: "routed", Key: tk, Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := nodes[2].SetTags(ctx, &object.TagRequest{Space: "routed", Key: tk, Tags: map[string]string{"tier": "cold"}})
	if err != nil || tagged.Version != before.Version {
		t.Fatalf("set tags through node %d: %+v %v", nodes[2].NodeID(), tagged, err)
	}
	for _, n := range nodes {
		info, err := n.Stat(ctx, &object.GetRequest{Space: "routed", Key: tk, Length: -1})
		if err != nil || info.Version != before.Version || info.Tags["tier"] != "cold" || info.ETag != before.ETag {
			t.Fatalf("node %d after tagging: %+v %v", n.NodeID(), info, err)
		}
	}
	_, err = nodes[1].SetTags(ctx, &object.TagRequest{Space: "routed", Key: k, Tags: map[string]string{"a": "b"}})
	mustCode(t, err, wire.CodeNotFound)
	_, err = nodes[1].SetTags(ctx, &object.TagRequest{Space: "routed", Key: k, Version: del.Version, Tags: map[string]string{"a": "b"}})
	mustCode(t, err, wire.CodeDeleted)

	// Every version, paged through ranges on different nodes: pages of 7
	// end inside k's history too, and resume from Next/NextVersion.
	for _, n := range nodes {
		var all []object.Info
		req := object.ListRequest{Space: "routed", Limit: 7, AllVersions: true}
		for {
			page, err := n.List(ctx, &req)
			if err != nil {
				t.Fatalf("node %d: versions listing: %v", n.NodeID(), err)
			}
			all = append(all, page.Objects...)
			if !page.Truncated {
				break
			}
			req.StartAfter, req.AfterVersion = page.Next, page.NextVersion
		}
		if len(all) != len(keys)+1 {
			t.Fatalf("node %d lists %d versions, want %d", n.NodeID(), len(all), len(keys)+1)
		}
		for i, j := 0, 0; i < len(all); i, j = i+1, j+1 {
			if all[i].Key != keys[j] {
				t.Fatalf("node %d: version %d is of %q, want %q", n.NodeID(), i, all[i].Key, keys[j])
			}
			if keys[j] == k {
				if !all[i].DeleteMarker || all[i+1].Key != k || all[i+1].DeleteMarker || all[i+1].Version >= all[i].Version {
					t.Fatalf("node %d: %q's versions listed as %+v, %+v", n.NodeID(), k, all[i], all[i+1])
				}
				i++
			}
		}
	}

	// A changed history policy reaches every node: writes through node 3
	// prune to it within a few seconds.
	if _, err := nodes[0].SetRetention(ctx, "routed", object.SpaceSettings{Retention: "last", KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	_, err = nodes[0].SetRetention(ctx, "routed", object.SpaceSettings{Retention: "last"})
	mustCode(t, err, wire.CodeInvalidArgument)
	for deadline := time.Now().Add(10 * time.Second); ; {
		for i := range 3 {
			writeAny(t, nodes[2:], "routed", "pruned", fmt.Sprint(i))
		}
		vs, err := nodes[1].Versions(ctx, &object.VersionsRequest{Space: "routed", Key: "pruned"})
		if err != nil {
			t.Fatal(err)
		}
		if len(vs.Versions) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SetRetention(last 2), a key keeps %d versions", len(vs.Versions))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A chunked body written through one node is read through each.
	body := string(randBytes(rand.New(rand.NewPCG(9, 10)), 1<<20))
	writeAny(t, nodes[1:2], "routed", "big", body)
	for _, n := range nodes {
		b, _, err := get(t, n, object.GetRequest{Space: "routed", Key: "big"})
		if err != nil || string(b) != body {
			t.Fatalf("node %d reading the chunked object: %d bytes, %v", n.NodeID(), len(b), err)
		}
	}
}

func putErr(n *Node, space, key, body string, req *object.PutRequest) error {
	req.Space, req.Key, req.Size = space, key, int64(len(body))
	_, err := n.Put(context.Background(), req, strings.NewReader(body))
	return err
}
