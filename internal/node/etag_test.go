package node

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/internal/md5lanes"
	"github.com/cairn-db/cairn/internal/wire"
)

// TestMD5Hashers checks which kind of hasher md5Hashers hands out, that
// both give MD5, and that the server outlives close while a hasher of it
// is in use.
func TestMD5Hashers(t *testing.T) {
	data := randBytes(rand.New(rand.NewPCG(1, 1)), 1<<20+77)
	want := md5.Sum(data)
	var m md5Hashers
	type held struct {
		simd    bool
		release func()
	}
	var hs []held
	for i := range simdMD5Min + 2 {
		h, release := m.get()
		_, simd := h.(*md5lanes.Stream)
		if simd != (i >= simdMD5Min) {
			t.Fatalf("hasher %d with %d others: simd = %v", i, i, simd)
		}
		h.Write(data[:1000])
		h.Write(data[1000:])
		if got := h.Sum(nil); string(got) != string(want[:]) {
			t.Fatalf("hasher %d (simd %v): wrong sum", i, simd)
		}
		hs = append(hs, held{simd, release})
	}
	m.close()
	m.close() // idempotent
	h, release := m.get()
	if _, simd := h.(*md5lanes.Stream); simd {
		t.Fatal("a hasher handed out after close is simd")
	}
	release()
	for i, h := range hs {
		m.mu.Lock()
		running := m.mu.srv != nil
		m.mu.Unlock()
		if !running {
			t.Fatalf("server stopped with %d hashers still in use", len(hs)-i)
		}
		h.release()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.srv != nil || m.mu.users != 0 || m.mu.active != 0 {
		t.Fatalf("after every release: server %v, users %d, active %d", m.mu.srv != nil, m.mu.users, m.mu.active)
	}
}

// TestConcurrentUploadETags puts chunked objects from several writers at
// once (so that most hash on the multi-buffer server) and checks each
// ETag is the MD5 of its body.
func TestConcurrentUploadETags(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "etags", wire.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 4 {
				body := randBytes(r, 100<<10+r.IntN(400<<10))
				key := fmt.Sprintf("w%d-%d", g, i)
				info, err := n.Put(ctx, &wire.PutRequest{Space: "etags", Key: key, Size: int64(len(body))}, bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				if sum := md5.Sum(body); info.ETag != hex.EncodeToString(sum[:]) {
					t.Errorf("%s: ETag %s, want %x", key, info.ETag, sum)
					return
				}
			}
		})
	}
	wg.Wait()
}
