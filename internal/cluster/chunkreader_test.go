package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

// TestChunkReaderBuffers reads ranges of chunked objects from concurrent
// readers that read in odd sizes and sometimes stop early, so chunk
// buffers go round the pool many times: every byte read must be the
// object's.
func TestChunkReaderBuffers(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "bufs", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	seed := testenv.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	var bodies [][]byte
	for i := range 4 {
		b := randBytes(r, 300<<10+r.IntN(300<<10))
		put(t, n, "bufs", fmt.Sprintf("k%d", i), b)
		bodies = append(bodies, b)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)+2))
			buf := make([]byte, 100<<10)
			for range 40 {
				i := r.IntN(len(bodies))
				body := bodies[i]
				off := r.Int64N(int64(len(body)))
				length := r.Int64N(int64(len(body)) - off + 1)
				_, rc, err := n.Get(ctx, &object.GetRequest{Space: "bufs", Key: fmt.Sprintf("k%d", i), Offset: off, Length: length})
				if err != nil {
					t.Error(err)
					return
				}
				want := body[off : off+length]
				stop := int64(len(want))
				if r.IntN(4) == 0 {
					stop = r.Int64N(stop + 1) // close early
				}
				var got []byte
				for int64(len(got)) < stop {
					k, err := rc.Read(buf[:1+r.IntN(len(buf))])
					got = append(got, buf[:k]...)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Error(err)
						rc.Close()
						return
					}
				}
				rc.Close()
				if int64(len(got)) < stop || !bytes.Equal(got, want[:len(got)]) {
					t.Errorf("k%d [%d, +%d): read %d bytes, wrong or short (want %d)", i, off, length, len(got), stop)
					return
				}
				if _, err := rc.Read(buf); err == nil {
					t.Error("read after close succeeded")
					return
				}
			}
		})
	}
	wg.Wait()
}
