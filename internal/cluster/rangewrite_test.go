package cluster

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// TestRangeWriteCost is VOSD's workload on one object, with the default
// ~1 MiB content-defined chunks: 4 MiB, then rounds of 64 random 16 KiB
// modifications. Every version reads back as a model of the bytes; after
// the first round (which re-cuts the large chunks it touches into 16 KiB
// pieces on one grid), a round stores about what it changes: at most 3
// times the bytes written, pieces touched at both ends and the segments'
// block padding included (~2.5x measured; 1 MiB pieces stored ~43x).
func TestRangeWriteCost(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.Chunking = chunk.Options{} // the defaults: ~1 MiB content-defined chunks
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if _, err := n.CreateSpace(ctx, "vosd", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 9))
	model := randBytes(r, 4<<20)
	put(t, n, "vosd", "o", model)
	const mods, size = 64, 16 << 10
	for round := range 3 {
		before := n.chunks.Stats().Bytes
		for range mods {
			off := r.Int64N(int64(len(model) - size))
			data := randBytes(r, size)
			copy(model[off:], data)
			if _, err := n.Put(ctx, &object.PutRequest{Space: "vosd", Key: "o", Mode: object.PutWriteAt, Offset: off, Size: size}, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
		}
		stored := n.chunks.Stats().Bytes - before
		got, info, err := get(t, n, object.GetRequest{Space: "vosd", Key: "o"})
		if err != nil || !bytes.Equal(got, model) {
			t.Fatalf("round %d: the object does not read back as written (%v)", round, err)
		}
		// Its hash comes from the blocks' chaining values (the ones the
		// round did not change kept from the version before): BLAKE3's.
		if info.Hash != chunk.Sum(model) {
			t.Fatalf("round %d: hash %x, BLAKE3 of the content %s", round, info.Hash, chunk.Sum(model))
		}
		t.Logf("round %d: %d bytes written, %d stored (%.1fx)", round, mods*size, stored, float64(stored)/float64(mods*size))
		if round > 0 && stored > mods*size*3 {
			t.Fatalf("round %d stored %d bytes for %d written", round, stored, mods*size)
		}
	}
}

// TestTxnRangeWrites: byte-range writes and appends inside a transaction
// build on the key as the transaction sees it, and many of them make one
// version at commit (VOSD's set of many ranges); a write of the key by
// someone else in between makes the commit a conflict.
// readInTxn reads space/key whole as transaction tx sees it.
func readInTxn(t *testing.T, tx *object.Txn, space, key string) []byte {
	t.Helper()
	_, rc, err := tx.Get(context.Background(), &object.GetRequest{Space: space, Key: key, Length: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTxnRangeWrites(t *testing.T) {
	n := openTestNode(t)
	ctx := context.Background()
	if _, err := n.CreateSpace(ctx, "txnrange", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	model := randBytes(r, 300<<10)
	v1 := put(t, n, "txnrange", "o", model)

	tx, err := n.Begin(ctx, object.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		off := r.Int64N(int64(len(model)) - 1000)
		data := randBytes(r, 1+r.IntN(999))
		copy(model[off:], data)
		if _, err := tx.Put(ctx, &object.PutRequest{Space: "txnrange", Key: "o", Mode: object.PutWriteAt, Offset: off, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			// Reads between the writes see each one (the transaction
			// keeps the key's manifest decoded and encodes it for them).
			if !bytes.Equal(readInTxn(t, tx, "txnrange", "o"), model) {
				t.Fatalf("after write %d the transaction reads other bytes than it wrote", i)
			}
			if info, err := tx.Stat(ctx, &object.GetRequest{Space: "txnrange", Key: "o"}); err != nil || info.Size != int64(len(model)) {
				t.Fatalf("stat in the transaction after write %d: %+v %v", i, info, err)
			}
		}
	}
	tail := []byte("appended")
	model = append(model, tail...)
	if _, err := tx.Put(ctx, &object.PutRequest{Space: "txnrange", Key: "o", Mode: object.PutAppend, Size: int64(len(tail))}, bytes.NewReader(tail)); err != nil {
		t.Fatal(err)
	}
	// A new key written at an offset: zeros before it.
	if _, err := tx.Put(ctx, &object.PutRequest{Space: "txnrange", Key: "fresh", Mode: object.PutWriteAt, Offset: 3, Size: 2}, strings.NewReader("hi")); err != nil {
		t.Fatal(err)
	}
	// The transaction reads its own writes.
	if !bytes.Equal(readInTxn(t, tx, "txnrange", "o"), model) {
		t.Fatal("the transaction does not read its own range writes")
	}
	ts, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Listed right away: a secondary's lock not yet resolved is resolved
	// by the listing, so the committed version shows.
	vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "txnrange", Key: "o"})
	if err != nil || len(vs.Versions) != 2 || vs.Versions[0].Version != ts {
		t.Fatalf("versions after the commit: %+v %v", vs.Versions, err)
	}
	if info, err := n.Stat(ctx, &object.GetRequest{Space: "txnrange", Key: "o"}); err != nil || info.Version != ts || info.Parent != v1.Version ||
		info.Hash != chunk.Sum(model) || info.Size != int64(len(model)) {
		t.Fatalf("the latest version after the commit: %+v %v", info, err)
	}
	if got, _, err := get(t, n, object.GetRequest{Space: "txnrange", Key: "o"}); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("the committed version differs from the model (%v)", err)
	}
	if got, info, err := get(t, n, object.GetRequest{Space: "txnrange", Key: "fresh"}); err != nil || string(got) != "\x00\x00\x00hi" || info.Hash != chunk.Sum(got) {
		t.Fatalf("fresh reads %q (%v)", got, err)
	}

	// Someone else writes the key between the transaction's read and its
	// commit: the commit conflicts and nothing of it lands.
	tx, err = n.Begin(ctx, object.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Put(ctx, &object.PutRequest{Space: "txnrange", Key: "o", Mode: object.PutWriteAt, Offset: 0, Size: 1}, strings.NewReader("X")); err != nil {
		t.Fatal(err)
	}
	put(t, n, "txnrange", "o", []byte("replaced"))
	if _, err := tx.Commit(ctx); object.KindOf(err) != object.TxnConflict {
		t.Fatalf("commit after a concurrent write: %v", err)
	}
	if got, _, _ := get(t, n, object.GetRequest{Space: "txnrange", Key: "o"}); string(got) != "replaced" {
		t.Fatalf("o reads %q", got)
	}
}

// opCounts counts the native requests a server answered, by opcode.
type opCounts struct {
	mu sync.Mutex
	n  map[wire.Op]int
}

func (c *opCounts) RequestDone(op wire.Op, _ wire.Code, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
}

// take returns the counts so far and starts again from zero, once the
// counts stop moving: a server counts a request after it has sent the
// answer, so a client can be done with a request before it is counted.
func (c *opCounts) take() map[wire.Op]int {
	total := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		t := 0
		for _, v := range c.n {
			t += v
		}
		return t
	}
	for last, deadline := -1, time.Now().Add(5*time.Second); time.Now().Before(deadline); {
		now := total()
		if now == last {
			break
		}
		last = now
		time.Sleep(50 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[wire.Op]int{}
	return n
}

// TestTxnRoundTrips drives VOSD's version (64 byte-range writes of 16
// KiB, more than one frame holds) through the Go client: it costs two
// requests, TXN_BEGIN carrying the first writes and TXN_COMMIT the rest,
// and makes one version of the right bytes. A write that fails in the
// request that begins the transaction fails the transaction, which is
// rolled back on the node, and nothing of it lands.
func TestTxnRoundTrips(t *testing.T) {
	ctx := context.Background()
	ops := &opCounts{n: map[wire.Op]int{}}
	_, c := nativeNode(t, ops)
	if _, err := c.CreateSpace(ctx, "trips", client.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	model := randBytes(r, 4<<20)
	v1, err := c.Put(ctx, "trips", "o", model)
	if err != nil {
		t.Fatal(err)
	}
	ops.take()
	tx, err := c.Update(ctx, func(tx *client.Txn) error {
		for range 64 {
			off := r.Int64N(int64(len(model)) - 16<<10)
			data := randBytes(r, 16<<10)
			copy(model[off:], data)
			if err := tx.WriteAt(ctx, "trips", "o", off, data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ops.take(); len(got) != 2 || got[wire.OpTxnBegin] != 1 || got[wire.OpTxnCommit] != 1 {
		t.Fatalf("the transaction's requests: %v, want one TXN_BEGIN and one TXN_COMMIT", got)
	}
	b, info, err := c.Get(ctx, "trips", "o")
	if err != nil || !bytes.Equal(b, model) || info.Version != tx.CommitTS() || info.Parent != v1.Version {
		t.Fatalf("after the transaction: %d bytes, equal %v, %+v, %v", len(b), bytes.Equal(b, model), info, err)
	}

	// The 10th write names a space that does not exist: the request that
	// begins the transaction (when the buffer is full) answers it with an
	// error.
	ops.take()
	_, err = c.Update(ctx, func(tx *client.Txn) error {
		for i := range 70 {
			space := "trips"
			if i == 9 {
				space = "nosuch"
			}
			if err := tx.WriteAt(ctx, space, "o", int64(i)<<14, bytes.Repeat([]byte{'x'}, 16<<10)); err != nil {
				return err
			}
		}
		return nil
	})
	if object.KindOf(err) != object.SpaceNotFound && wire.CodeOf(err) != wire.CodeSpaceNotFound {
		t.Fatalf("a transaction writing to a missing space: %v", err)
	}
	if got := ops.take(); len(got) != 2 || got[wire.OpTxnBegin] != 1 || got[wire.OpTxnRollback] != 1 {
		t.Fatalf("the failed transaction's requests: %v, want one TXN_BEGIN and one TXN_ROLLBACK", got)
	}
	if b, info, err := c.Get(ctx, "trips", "o"); err != nil || !bytes.Equal(b, model) || info.Version != tx.CommitTS() {
		t.Fatalf("after the failed transaction: equal %v, %+v, %v", bytes.Equal(b, model), info, err)
	}

	// Without Update: once a write sent ahead failed (the node ran the
	// ones sent with it), the transaction takes no more writes and its
	// commit fails, rolling it back; an append sent with the failed write
	// does not land twice.
	ops.take()
	own, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var first error
	for i := range 70 {
		space := "trips"
		if i == 9 {
			space = "nosuch"
		}
		if err := own.Append(ctx, space, "log", bytes.Repeat([]byte{'x'}, 16<<10)); err != nil && first == nil {
			first = err
		}
	}
	if wire.CodeOf(first) != wire.CodeSpaceNotFound {
		t.Fatalf("the first error of the writes: %v", first)
	}
	if err := own.Append(ctx, "trips", "log", []byte("more")); wire.CodeOf(err) != wire.CodeSpaceNotFound {
		t.Fatalf("a write after the failure: %v", err)
	}
	if err := own.Commit(ctx); wire.CodeOf(err) != wire.CodeSpaceNotFound {
		t.Fatalf("the commit after the failure: %v", err)
	}
	if got := ops.take(); len(got) != 2 || got[wire.OpTxnBegin] != 1 || got[wire.OpTxnRollback] != 1 {
		t.Fatalf("the failed transaction's requests: %v, want one TXN_BEGIN and one TXN_ROLLBACK", got)
	}
	if _, _, err := c.Get(ctx, "trips", "log"); wire.CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("log after the failed transaction: %v", err)
	}
}
