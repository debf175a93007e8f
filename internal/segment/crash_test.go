package segment

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestCrash runs concurrent writers, takes a crash image of the file system
// (pebble's included) at a random moment, keeping a random share of the
// unsynced writes, and recovers from it. Every Put acknowledged before the
// image was taken must read back byte-identical, and no Get may return
// bytes other than those written for its hash. The recovered store must
// take writes and survive a clean reopen.
func TestCrash(t *testing.T) {
	seed := testenv.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	iters := 30
	if testing.Short() {
		iters = 5
	}
	for iter := range iters {
		crashOnce(t, iter, rng)
	}
}

func crashOnce(t *testing.T, iter int, rng *rand.Rand) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	n := openNode(t, fs, 16<<10)

	var (
		mu      sync.Mutex
		acked   = map[chunk.Hash][]byte{}
		written = map[chunk.Hash][]byte{} // every chunk a writer tried
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Some repeats, to exercise dedup across writers.
				d, h := randomChunk(rand.New(rand.NewPCG(wrng.Uint64N(400), 0)), 1+int(wrng.Uint64N(4000)))
				mu.Lock()
				written[h] = d
				mu.Unlock()
				if err := n.st.Put(ctx, h, d); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Put: %v", err)
					}
					return
				}
				mu.Lock()
				acked[h] = d
				mu.Unlock()
			}
		})
	}
	// Crash after a random number of acknowledged writes.
	target := rng.IntN(60)
	for {
		mu.Lock()
		k := len(acked)
		mu.Unlock()
		if k >= target {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	mu.Lock()
	durable := make(map[chunk.Hash][]byte, len(acked))
	for h, d := range acked {
		durable[h] = d
	}
	mu.Unlock()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
	close(stop)
	wg.Wait()
	n.close(t)

	n = openNode(t, crashed, 16<<10)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("iter %d: %d acknowledged at the crash, %d tried; recovered %+v", iter, len(durable), len(written), n.st.Stats())
	for h, d := range durable {
		got, err := n.st.Get(ctx, h, nil)
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("iter %d: acknowledged chunk %s lost after crash: %v", iter, h, err)
		}
	}
	for h, d := range written {
		got, err := n.st.Get(ctx, h, nil)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("iter %d: chunk %s after crash: %d bytes, %v", iter, h, len(got), err)
		}
	}
	// The recovered store takes writes, and a clean reopen keeps them.
	d, h := randomChunk(rng, 3000)
	if err := n.st.Put(ctx, h, d); err != nil {
		t.Fatalf("iter %d: Put after recovery: %v", iter, err)
	}
	n.close(t)
	n = openNode(t, crashed, 16<<10)
	defer n.close(t)
	mustGet(t, n.st, h, d)
	for h, d := range durable {
		mustGet(t, n.st, h, d)
	}
}
