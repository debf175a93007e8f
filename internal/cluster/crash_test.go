package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/wire"
)

// ack is one acknowledged write: that exact version must read back intact
// after any crash.
type ack struct {
	key     string
	version uint64
	hash    [32]byte
	deleted bool
}

func testConfig(fs vfs.FS, ms meta.Store) Config {
	return Config{
		DataDir: "data", FS: fs, Meta: ms,
		MetaPort: -1, PeerPort: -1, PeerCodes: wire.PeerCodes{}, Forwarded: wire.MarkForwarded,
		InlineThreshold: 4 << 10,
		Chunking:        chunk.Options{MinSize: 8 << 10, AvgSize: 16 << 10, MaxSize: 64 << 10},
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// TestCrashLosesNothingAcknowledged runs writers against a node on a file
// layer that drops unsynced data (and keeps a random part of it, tearing
// the last writes) when the node "crashes", reopens the node on what
// survived, and checks that every acknowledged write reads back intact.
func TestCrashLosesNothingAcknowledged(t *testing.T) {
	seed := testenv.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := context.Background()
	ms := meta.NewMemStore(time.Now)
	fs := vfs.NewCrashableMem()
	iterations := 8
	if testing.Short() {
		iterations = 3
	}
	var acked []ack
	n, err := openStarted(ctx, testConfig(fs, ms))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateSpace(ctx, "crash", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	for it := 0; it < iterations; it++ {
		var (
			mu      sync.Mutex
			stop    = make(chan struct{})
			wg      sync.WaitGroup
			newAcks []ack
		)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed+uint64(it*100+w), 1))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("k%02d-%d", w, r.IntN(20))
					var a ack
					if r.IntN(10) == 0 {
						info, err := n.Delete(ctx, &object.DeleteRequest{Space: "crash", Key: key})
						if err != nil {
							continue
						}
						a = ack{key: key, version: info.Version, deleted: true}
					} else {
						size := r.IntN(3) * r.IntN(200<<10)
						body := make([]byte, size)
						for j := range body {
							body[j] = byte(r.Uint32())
						}
						info, err := n.Put(ctx, &object.PutRequest{Space: "crash", Key: key, Size: int64(size)}, bytes.NewReader(body))
						if err != nil {
							continue // not acknowledged: no promise
						}
						a = ack{key: key, version: info.Version, hash: chunk.Sum(body)}
					}
					mu.Lock()
					newAcks = append(newAcks, a)
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(20+rng.IntN(150)) * time.Millisecond)
		// Everything acknowledged before the crash must survive it.
		mu.Lock()
		acked = append(acked, newAcks...)
		newAcks = nil
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(seed, uint64(it)))})
		mu.Unlock()
		close(stop)
		wg.Wait()
		n.Close()

		fs = crashed
		n, err = openStarted(ctx, testConfig(fs, ms))
		if err != nil {
			t.Fatalf("iteration %d: reopen after crash: %v", it, err)
		}
		verify(t, n, acked)
		t.Logf("iteration %d: %d acknowledged writes intact", it, len(acked))
	}
	n.Close()
}

func verify(t *testing.T, n *Node, acked []ack) {
	t.Helper()
	ctx := context.Background()
	for _, a := range acked {
		info, rc, err := n.Get(ctx, &object.GetRequest{Space: "crash", Key: a.key, Version: a.version, Length: -1})
		if a.deleted {
			if wire.CodeOf(err) != wire.CodeDeleted {
				t.Fatalf("%s@%x: acknowledged delete marker reads as %v", a.key, a.version, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s@%x: acknowledged write lost: %v", a.key, a.version, err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s@%x: read: %v", a.key, a.version, err)
		}
		if chunk.Sum(body) != a.hash || info.Hash != a.hash {
			t.Fatalf("%s@%x: content differs from what was acknowledged", a.key, a.version)
		}
	}
}
