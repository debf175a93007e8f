package cluster

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
)

// BenchmarkSmallObjects puts and gets 1 KiB objects (inline in their
// version records) through the object service of one node on the real
// disk, from 16 concurrent clients: the request path without a protocol
// (space, range routing, the record's raft round and fsync, or the
// leaseholder's read). It reports the process's CPU time per op:
//
//	go test ./internal/cluster -run '^$' -bench SmallObjects -benchtime 20000x -count 3
func BenchmarkSmallObjects(b *testing.B) {
	const size, clients = 1 << 10, 16
	body := bytes.Repeat([]byte("x"), size)
	b.Run("op=put", func(b *testing.B) {
		n := openBenchNode(b)
		var next atomic.Int64
		runClients(b, clients, size, func() func() error {
			return func() error {
				i := next.Add(1)
				_, err := n.Put(context.Background(), &object.PutRequest{Space: "bench", Key: fmt.Sprintf("k%d", i), Size: size}, bytes.NewReader(body))
				return err
			}
		})
	})
	b.Run("op=get", func(b *testing.B) {
		n := openBenchNode(b)
		const keys = 1000
		for i := range keys {
			if _, err := n.Put(context.Background(), &object.PutRequest{Space: "bench", Key: fmt.Sprintf("k%d", i), Size: size}, bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
		var next atomic.Int64
		runClients(b, clients, size, func() func() error {
			return func() error {
				i := next.Add(1)
				_, rc, err := n.Get(context.Background(), &object.GetRequest{Space: "bench", Key: fmt.Sprintf("k%d", i%keys), Length: -1})
				if err != nil {
					return err
				}
				return rc.Close()
			}
		})
	})
}
