package cluster

import (
	"context"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// randReader yields n deterministic pseudo-random bytes.
type randReader struct {
	r *rand.ChaCha8
	n int64
}

func (g *randReader) Read(p []byte) (int, error) {
	if g.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.n {
		p = p[:g.n]
	}
	g.r.Read(p)
	g.n -= int64(len(p))
	return len(p), nil
}

// heapPeak samples the heap in use until stop is called and returns the
// highest sample.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// TestLargeObjectBoundedMemory streams an object much larger than the
// memory it may use through Put and Get on the real disk and checks that
// the heap stays bounded and the bytes come back intact.
func TestLargeObjectBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 512 MiB through the disk")
	}
	const size = 512 << 20
	const cache = 32 << 20
	const allowance = 96<<20 + cache // chunks in flight, chunker buffer, pebble growth, the chunk cache
	cfg := testConfig(vfs.Default, meta.NewMemStore(time.Now))
	cfg.ChunkCache = cache // the object passes through it (in memory of its own, off the heap)
	cfg.DataDir = t.TempDir()
	cfg.Chunking = chunk.Options{} // production chunk sizes
	ctx := context.Background()
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.CreateSpace(ctx, "big", object.SpaceSettings{})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	stop := heapPeak()
	src := &randReader{r: rand.NewChaCha8([32]byte{1}), n: size}
	h := chunk.NewHasher()
	info, err := n.Put(ctx, &object.PutRequest{Space: "big", Key: "obj", Size: size}, io.TeeReader(src, h))
	putPeak := stop()
	if err != nil {
		t.Fatal(err)
	}
	if info.Hash != h.Sum() || info.Size != size {
		t.Fatalf("put info %+v does not describe the body", info)
	}

	stop = heapPeak()
	_, rc, err := n.Get(ctx, &object.GetRequest{Space: "big", Key: "obj", Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	g := chunk.NewHasher()
	got, err := io.Copy(g, rc)
	rc.Close()
	getPeak := stop()
	if err != nil || got != size || g.Sum() != info.Hash {
		t.Fatalf("get returned %d bytes (%v), hash match %v", got, err, g.Sum() == info.Hash)
	}
	t.Logf("heap in use: base %d MiB, peak during put %d MiB, during get %d MiB", base.HeapInuse>>20, putPeak>>20, getPeak>>20)
	// A range read and a read stopped early: every view of the cache's
	// memory is released, leaving only its chunks.
	for _, r := range [][2]int64{{100 << 20, 3 << 20}, {200 << 20, -1}} {
		_, rc, err := n.Get(ctx, &object.GetRequest{Space: "big", Key: "obj", Offset: r[0], Length: r[1]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, rc, 2<<20); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	if st := n.chunks.DataCacheStats(); st.Used != st.Bytes || st.Bytes == 0 {
		t.Errorf("chunk cache: %d bytes of chunks, %d bytes of memory in use; want all of it theirs", st.Bytes, st.Used)
	}
	for name, peak := range map[string]uint64{"put": putPeak, "get": getPeak} {
		if peak > base.HeapInuse+allowance {
			t.Errorf("%s of a %d MiB object raised the heap from %d to %d MiB", name, size>>20, base.HeapInuse>>20, peak>>20)
		}
	}
}
