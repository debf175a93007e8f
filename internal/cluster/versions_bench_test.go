package cluster

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/object"
)

// BenchmarkReadOldestOf10000 reads one key of 10,000 versions (1 KiB
// each): the latest, and the oldest by its version id, through the Go
// client over the native protocol (what a user sees; issue 23's target:
// the oldest within 1.5x of the latest) and in-process (the store alone:
// the latest comes from the record cache, the oldest is a seek).
//
//	go test ./internal/cluster -run - -bench ReadOldestOf10000 -benchtime 2000x
func BenchmarkReadOldestOf10000(b *testing.B) {
	ctx := context.Background()
	n, c := nativeNode(b, nil)
	if _, err := n.CreateSpace(ctx, "oldest", object.SpaceSettings{}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	write := func() object.Info {
		info, err := n.Put(ctx, &object.PutRequest{Space: "oldest", Key: "k", Size: int64(len(body))}, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		return info
	}
	first := write()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 9999; i += 16 {
				write()
			}
		}()
	}
	wg.Wait()
	read := func(b *testing.B, v uint64) {
		for b.Loop() {
			if _, _, err := getCtx(ctx, n, object.GetRequest{Space: "oldest", Key: "k", Version: v}); err != nil {
				b.Fatal(err)
			}
		}
	}
	native := func(b *testing.B, opts ...client.GetOption) {
		for b.Loop() {
			if _, _, err := c.Get(ctx, "oldest", "k", opts...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("native/latest", func(b *testing.B) { native(b) })
	b.Run("native/oldest", func(b *testing.B) { native(b, client.WithVersion(first.Version)) })
	b.Run("store/latest", func(b *testing.B) { read(b, 0) })
	b.Run("store/oldest", func(b *testing.B) { read(b, first.Version) })
}
