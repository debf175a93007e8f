package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/wire"
)

// BenchmarkObjects puts and gets 16 MiB objects through the node's
// service (no network, no S3 layer) with the default chunking, on the real
// disk, from 1 and 8 concurrent clients. It reports the process's CPU time
// per object (cpu-ms/op) besides the wall time, as the machine's cores
// are shared with the writers' fsyncs:
//
//	go test ./internal/node -run '^$' -bench Objects -benchtime 24x -count 3
func BenchmarkObjects(b *testing.B) {
	const size = 16 << 20
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("op=put/clients=%d", clients), func(b *testing.B) {
			n := openBenchNode(b)
			body := randBytes(rand.New(rand.NewPCG(1, 2)), size)
			var next atomic.Int64
			runClients(b, clients, size, func() func() error {
				data := bytes.Clone(body)
				return func() error {
					i := next.Add(1)
					// A stamp every 64 KiB (under the chunker's minimum)
					// makes every chunk new, so dedup never skips a write.
					for off := 0; off < len(data); off += 64 << 10 {
						binary.BigEndian.PutUint64(data[off:], uint64(i))
					}
					_, err := n.Put(context.Background(), &object.PutRequest{Space: "bench", Key: fmt.Sprintf("k%d", i), Size: size}, bytes.NewReader(data))
					return err
				}
			})
		})
		b.Run(fmt.Sprintf("op=get/clients=%d", clients), func(b *testing.B) {
			n := openBenchNode(b)
			const keys = 8
			r := rand.New(rand.NewPCG(3, 4))
			for i := range keys {
				body := randBytes(r, size)
				if _, err := n.Put(context.Background(), &object.PutRequest{Space: "bench", Key: fmt.Sprintf("k%d", i), Size: size}, bytes.NewReader(body)); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			runClients(b, clients, size, func() func() error {
				buf := make([]byte, 32<<10)
				return func() error {
					i := next.Add(1)
					_, rc, err := n.Get(context.Background(), &object.GetRequest{Space: "bench", Key: fmt.Sprintf("k%d", i%keys), Length: -1})
					if err != nil {
						return err
					}
					defer rc.Close()
					// 32 KiB reads, as net/http's io.Copy makes them.
					k, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf)
					if err == nil && k != size {
						err = fmt.Errorf("read %d bytes of %d", k, size)
					}
					return err
				}
			})
		})
	}
}

// openBenchNode opens a single node on a temporary directory of the real
// disk with an in-memory meta service, and creates space "bench".
func openBenchNode(b *testing.B) *Node {
	b.Helper()
	n, err := openStarted(context.Background(), Config{
		DataDir: b.TempDir(), FS: vfs.Default, Meta: meta.NewMemStore(time.Now),
		MetaPort: -1, PeerPort: -1, PeerCodes: wire.PeerCodes{}, Forwarded: wire.MarkForwarded,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	if _, err := n.CreateSpace(context.Background(), "bench", object.SpaceSettings{}); err != nil {
		b.Fatal(err)
	}
	return n
}

// runClients runs b.N ops from clients goroutines, each with the op that
// newOp returns, and reports the process's CPU time per op.
func runClients(b *testing.B, clients int, size int64, newOp func() func() error) {
	b.SetBytes(size)
	b.ReportAllocs()
	var left atomic.Int64
	left.Store(int64(b.N))
	cpu0 := testenv.CPUTime(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range clients {
		op := newOp()
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(testenv.CPUTime(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
