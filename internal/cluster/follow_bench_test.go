package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
)

// BenchmarkFollow reads a document that references 10 others through the
// Go client over the native protocol: with one Follow (one round trip,
// the node reads the 10 together), and as a client without it would, a
// Get of the document and then a Get of each reference in turn.
//
//	go test ./internal/cluster -run - -bench Follow -benchtime 2000x
func BenchmarkFollow(b *testing.B) {
	ctx := context.Background()
	n, c := nativeNode(b, nil)
	if _, err := n.CreateSpace(ctx, "docs", object.SpaceSettings{Ranges: 4}); err != nil {
		b.Fatal(err)
	}
	put := func(key, doc string) {
		if _, err := n.Put(ctx, &object.PutRequest{Space: "docs", Key: key, Size: int64(len(doc)), ContentType: "application/json"},
			bytes.NewReader([]byte(doc))); err != nil {
			b.Fatal(err)
		}
	}
	var refs []string
	for i := range 10 {
		key := fmt.Sprintf("%c-item-%d", 'a'+i*2, i) // spread over the ranges
		put(key, fmt.Sprintf(`{"n": %d, "name": "item %d"}`, i, i))
		refs = append(refs, fmt.Sprintf(`{"$ref": "docs/%s"}`, key))
	}
	put("order", `{"items": [`+strings.Join(refs, ",")+`]}`)

	b.Run("follow", func(b *testing.B) {
		for b.Loop() {
			res, err := c.Follow(ctx, "docs", "order", 1)
			if err != nil || len(res.Objects) != 11 {
				b.Fatalf("%d objects, %v", len(res.Objects), err)
			}
		}
	})
	b.Run("gets", func(b *testing.B) {
		for b.Loop() {
			doc, _, err := c.Get(ctx, "docs", "order")
			if err != nil {
				b.Fatal(err)
			}
			got := 1
			for _, r := range object.References(doc) {
				space, key, _ := strings.Cut(r, "/")
				if _, _, err := c.Get(ctx, space, key); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if got != 11 {
				b.Fatalf("%d objects", got)
			}
		}
	})
}
