package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/storage"
)

// nopSM applies nothing but a small write, so the benchmark measures the
// replication path: queue, raft, synced log batch, apply batch.
type nopSM struct{ key []byte }

func (s nopSM) Apply(b *pebble.Batch, cmd []byte) any {
	_ = b.Set(s.key, cmd, nil)
	return nil
}

// BenchmarkPropose measures Propose throughput on one single-voter range
// on the real disk (every log batch is fsynced) with 1 and 64 concurrent
// proposers. With 64, proposals queue while a synced batch is in flight and
// share its fsync, so ops/s should grow with concurrency.
//
//	go test ./internal/replica -run - -bench Propose -benchtime 2000x
func BenchmarkPropose(b *testing.B) {
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			e, err := storage.Open(storage.Options{Dir: b.TempDir(), FS: vfs.Default, CacheSize: 8 << 20, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			s := newStore(b, Options{NodeID: 1, Engine: e, Logger: quietLogger()})
			defer s.Close()
			r, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, nopSM{key: []byte("zbench")})
			if err != nil {
				b.Fatal(err)
			}
			waitLeader(b, r)
			cmd := make([]byte, 64)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := r.Propose(context.Background(), cmd); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
		})
	}
}
