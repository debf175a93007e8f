package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	dto "github.com/prometheus/client_model/go"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/testenv"
)

// gcConfig is testConfig with a collector that runs only when asked, a
// grace of a millisecond and small segments.
func gcConfig(fs vfs.FS, ms meta.Store) Config {
	c := testConfig(fs, ms)
	c.GCGrace = time.Millisecond
	c.GCInterval = -1
	c.SegmentSize = 1 << 20
	return c
}

func gauge(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			default:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestGCCollectsWhatNoVersionReferences writes versions that stay
// (a live object, the newest version of a key that keeps one, a clone of
// the first in another space) and versions that go (the version a
// keep-last space pruned, every version of a dropped space), collects,
// and checks that exactly the chunks no version references are gone, that
// the versions left read back whole, and that the segments shrank.
func TestGCCollectsWhatNoVersionReferences(t *testing.T) {
	ctx := context.Background()
	n, err := openStarted(ctx, gcConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for name, s := range map[string]object.SpaceSettings{
		"keep": {Ranges: 2},
		"last": {Ranges: 2, Retention: "last", KeepLast: 1},
		"drop": {Ranges: 2},
	} {
		if _, err := n.CreateSpace(ctx, name, s); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	a, b1, b2, c := randBytes(rng, 1<<20), randBytes(rng, 1<<20), randBytes(rng, 1<<20), randBytes(rng, 2<<20)
	ia := put(t, n, "keep", "a", a)
	ib1 := put(t, n, "last", "b", b1)
	gone := manifestOfKey(t, n, "last", "b", ib1.Version).Chunks
	ib2 := put(t, n, "last", "b", b2)
	if _, err := n.Clone(ctx, &object.CloneRequest{Space: "keep", Key: "a", DstSpace: "last", DstKey: "a-clone"}); err != nil {
		t.Fatal(err)
	}
	ic := put(t, n, "drop", "c", c)
	gone = append(gone, manifestOfKey(t, n, "drop", "c", ic.Version).Chunks...)
	if _, err := n.Delete(ctx, &object.DeleteRequest{Space: "drop", Key: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteSpace(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	kept := append(manifestOfKey(t, n, "keep", "a", ia.Version).Chunks, manifestOfKey(t, n, "last", "b", ib2.Version).Chunks...)
	before := n.chunks.Stats()

	// The ranges of a dropped space go in the background.
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(10 * time.Millisecond)
		if err := n.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _ := n.chunks.Has(gone[len(gone)-1].Hash); !ok || time.Now().After(deadline) {
			break
		}
	}
	for _, r := range gone {
		if ok, err := n.chunks.Has(r.Hash); ok || err != nil {
			t.Fatalf("chunk %s of a version that is gone is still stored (%v)", r.Hash, err)
		}
	}
	for _, r := range kept {
		if ok, err := n.chunks.Has(r.Hash); !ok || err != nil {
			t.Fatalf("chunk %s of a live version was collected (%v)", r.Hash, err)
		}
	}
	for _, o := range []struct {
		space, key string
		want       []byte
	}{{"keep", "a", a}, {"last", "b", b2}, {"last", "a-clone", a}} {
		got, _, err := get(t, n, object.GetRequest{Space: o.space, Key: o.key})
		if err != nil || !bytes.Equal(got, o.want) {
			t.Fatalf("%s/%s after collection: %d bytes, %v", o.space, o.key, len(got), err)
		}
	}
	st := n.GCStatus()
	after := n.chunks.Stats()
	t.Logf("collector: %+v; segments %d bytes -> %d", st, before.Bytes, after.Bytes)
	if st.DeletedChunks != int64(len(gone)) || st.Phase != "idle" || st.Error != "" || st.Runs == 0 {
		t.Fatalf("status %+v: want %d chunks deleted", st, len(gone))
	}
	if got := gauge(t, n, "cairn_gc_deleted_chunks_total"); got != float64(len(gone)) {
		t.Fatalf("cairn_gc_deleted_chunks_total = %v, want %d", got, len(gone))
	}
	// 3 MiB of the 5 MiB written went: compaction gives most of it back.
	if freed := before.Bytes - after.Bytes; freed < 2<<20 || st.ReclaimedBytes < freed {
		t.Fatalf("segments %d -> %d bytes (reclaimed %d): want 2 MiB or more back", before.Bytes, after.Bytes, st.ReclaimedBytes)
	}
	// A second collection finds nothing more.
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if st2 := n.GCStatus(); st2.DeletedChunks != st.DeletedChunks || st2.Garbage != 0 {
		t.Fatalf("second collection: %+v", st2)
	}
}

// TestGCRacesWriters runs the collector without pause, with a short
// grace, against writers whose versions share chunks with older ones —
// clones of versions that a keep-last space prunes and that are deleted
// by version, transactions of byte-range writes over such versions —
// and restarts the node between rounds (its chunks' touches are lost).
// Every version that exists at the end must read back whole: the
// collector never takes a chunk a committed version references.
func TestGCRacesWriters(t *testing.T) {
	seed := testenv.Seed(t)
	ctx := context.Background()
	fs, ms := vfs.NewMem(), meta.NewMemStore(time.Now)
	cfg := gcConfig(fs, ms)
	// The grace must outlast every write's commit (the collector's
	// contract), lock waits under the race detector included.
	cfg.GCGrace = time.Second
	cfg.SegmentSize = 256 << 10
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close() }()
	for name, s := range map[string]object.SpaceSettings{
		"src": {Ranges: 2, Retention: "last", KeepLast: 2},
		"dst": {Ranges: 2, Retention: "last", KeepLast: 1},
		"txs": {Ranges: 2, Retention: "last", KeepLast: 1},
	} {
		if _, err := n.CreateSpace(ctx, name, s); err != nil {
			t.Fatal(err)
		}
	}
	const keys = 12
	rounds, round := 3, 3*time.Second
	if testing.Short() {
		rounds, round = 2, 2*time.Second
	}
	var clones, txns, deletes, merges, collections atomic.Int64
	for r := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		fail := make(chan error, 8)
		worker := func(w int, step func(rng *rand.Rand) error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(r*10+w)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := step(rng); err != nil {
						fail <- err
						return
					}
				}
			}()
		}
		worker(0, func(rng *rand.Rand) error { // the keep-last space's writer
			// Slow enough that versions outlive the grace.
			k := fmt.Sprintf("k%d", rng.IntN(keys))
			_, err := n.Put(ctx, &object.PutRequest{Space: "src", Key: k, Size: 96 << 10}, bytes.NewReader(randBytes(rng, 96<<10)))
			time.Sleep(60 * time.Millisecond)
			return err
		})
		worker(1, func(rng *rand.Rand) error { // clones of src's versions, old ones too
			k := fmt.Sprintf("k%d", rng.IntN(keys))
			vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "src", Key: k})
			if err != nil || len(vs.Versions) == 0 {
				return err
			}
			// The oldest, which the deletes and the pruning go for; into
			// a space that keeps one version of few keys, so that the
			// clone is often the one version left sharing its chunks.
			v := vs.Versions[len(vs.Versions)-1].Version
			_, err = n.Clone(ctx, &object.CloneRequest{Space: "src", Key: k, Version: v, DstSpace: "dst", DstKey: fmt.Sprintf("c%d", rng.IntN(3))})
			if object.KindOf(err) == object.NotFound {
				return nil // pruned or deleted meanwhile
			}
			if err == nil {
				clones.Add(1)
			}
			return err
		})
		worker(2, func(rng *rand.Rand) error { // deletes of src's older versions
			k := fmt.Sprintf("k%d", rng.IntN(keys))
			vs, err := n.Versions(ctx, &object.VersionsRequest{Space: "src", Key: k})
			if err != nil || len(vs.Versions) < 2 {
				return err
			}
			_, err = n.Delete(ctx, &object.DeleteRequest{Space: "src", Key: k, Version: vs.Versions[len(vs.Versions)-1].Version})
			switch object.KindOf(err) {
			case object.NotFound, object.PreconditionFailed, object.Unavailable:
				return nil // gone, or held by a branch (being made)
			}
			if err == nil {
				deletes.Add(1)
			}
			return err
		})
		worker(3, func(rng *rand.Rand) error { // transactions of range writes
			tx, err := n.Begin(ctx, object.TxnOptions{})
			if err != nil {
				return err
			}
			for range 1 + rng.IntN(3) {
				k := fmt.Sprintf("t%d", rng.IntN(4))
				b := randBytes(rng, 16<<10)
				req := &object.PutRequest{Space: "txs", Key: k, Size: int64(len(b)), Mode: object.PutWriteAt, Offset: int64(rng.IntN(256 << 10))}
				if _, err := tx.Put(ctx, req, bytes.NewReader(b)); err != nil {
					tx.Rollback()
					if object.KindOf(err) == object.TxnConflict {
						return nil // its parent was pruned by another commit and collected
					}
					return err
				}
			}
			_, err = tx.Commit(ctx)
			if object.KindOf(err) == object.TxnConflict {
				return nil
			}
			if err == nil {
				txns.Add(1)
			}
			return err
		})
		branches := 0
		worker(5, func(rng *rand.Rand) error { // branches of src: byte-range writes over its versions, merged back, removed
			name := fmt.Sprintf("br-%d-%d", r, branches)
			branches++
			if _, err := n.CreateBranch(ctx, "src", name, ""); err != nil {
				return err
			}
			for range 1 + rng.IntN(3) {
				k := fmt.Sprintf("k%d", rng.IntN(keys))
				b := randBytes(rng, 16<<10)
				req := &object.PutRequest{Space: name, Key: k, Size: int64(len(b)), Mode: object.PutWriteAt, Offset: int64(rng.IntN(64 << 10))}
				if _, err := n.Put(ctx, req, bytes.NewReader(b)); err != nil {
					return err
				}
			}
			res, err := n.MergeBranch(ctx, &object.MergeRequest{Branch: name, Strategy: object.MergeSourceWins})
			if err != nil && object.KindOf(err) != object.TxnConflict {
				return err
			}
			if err == nil && res.Version != 0 {
				merges.Add(1)
			}
			return n.DeleteBranch(ctx, name)
		})
		worker(4, func(*rand.Rand) error { // the collector, without pause
			if err := n.CollectGarbage(ctx); err != nil {
				return err
			}
			collections.Add(1)
			return nil
		})
		time.Sleep(round)
		close(stop)
		wg.Wait()
		select {
		case err := <-fail:
			t.Fatalf("round %d: %v", r, err)
		default:
		}
		// A restart: the chunks' touches are lost.
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if n, err = openStarted(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * cfg.GCGrace)
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	st := n.GCStatus()
	t.Logf("%d clones, %d transactions, %d version deletes, %d branch merges, %d collections; last: %+v", clones.Load(), txns.Load(), deletes.Load(), merges.Load(), collections.Load(), st)
	if clones.Load() == 0 || txns.Load() == 0 || deletes.Load() == 0 || merges.Load() == 0 || st.DeletedChunks == 0 {
		t.Fatalf("the race did not happen: %d clones, %d transactions, %d deletes, %d merges, %d chunks collected", clones.Load(), txns.Load(), deletes.Load(), merges.Load(), st.DeletedChunks)
	}
	read := 0
	for _, space := range []string{"src", "dst", "txs"} {
		l, err := n.List(ctx, &object.ListRequest{Space: space, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Objects {
			vs, err := n.Versions(ctx, &object.VersionsRequest{Space: space, Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs.Versions {
				if v.DeleteMarker {
					continue
				}
				b, info, err := get(t, n, object.GetRequest{Space: space, Key: o.Key, Version: v.Version})
				if err != nil || int64(len(b)) != info.Size {
					t.Fatalf("%s/%s version %d after the race: %d bytes, %v", space, o.Key, v.Version, len(b), err)
				}
				read++
			}
		}
	}
	t.Logf("%d versions read back whole", read)
}

// TestGCSharingRacesCollector makes the race deterministic: a clone, a
// copy and a transaction's byte-range write each share the chunks of an
// old version, and between their touch and their commit (a testing knob)
// the version is deleted and a whole collection runs. The touch must keep
// the chunks: the new version reads back whole.
func TestGCSharingRacesCollector(t *testing.T) {
	ctx := context.Background()
	var hook atomic.Pointer[func()]
	cfg := gcConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.GCGrace = 50 * time.Millisecond
	cfg.TestingAfterTouch = func() {
		if f := hook.Swap(nil); f != nil {
			(*f)()
		}
	}
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateSpace(ctx, "gcr", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, op := range []string{"clone", "copy", "txn", "merge"} {
		t.Run(op, func(t *testing.T) {
			body := randBytes(rng, 512<<10)
			space := "gcr"
			if op == "merge" {
				// The branch's version is merged while it is removed
				// and collected.
				space = "gcr-branch"
				if _, err := n.CreateBranch(ctx, "gcr", space, ""); err != nil {
					t.Fatal(err)
				}
			}
			src := put(t, n, space, op+"-src", body)
			// A segment's chunks count as touched when it last took a
			// write: the source's must be in a sealed one.
			put(t, n, "gcr", op+"-filler", randBytes(rng, 1<<20))
			time.Sleep(2 * cfg.GCGrace)
			ran := false
			f := func() {
				ran = true
				if _, err := n.Delete(ctx, &object.DeleteRequest{Space: space, Key: op + "-src", Version: src.Version}); err != nil {
					t.Error(err)
				}
				if err := n.CollectGarbage(ctx); err != nil {
					t.Error(err)
				}
			}
			hook.Store(&f)
			dst, want := op+"-dst", body
			switch op {
			case "clone":
				_, err = n.Clone(ctx, &object.CloneRequest{Space: "gcr", Key: op + "-src", Version: src.Version, DstKey: dst})
			case "copy":
				_, err = n.Compose(ctx, &object.PutRequest{Space: "gcr", Key: dst}, "", []object.ComposeSource{{Space: "gcr", Key: op + "-src", Version: src.Version, Length: -1}})
			case "txn":
				dst = op + "-src"
				patch := randBytes(rng, 16<<10)
				want = append(append(append([]byte{}, body[:100<<10]...), patch...), body[100<<10+len(patch):]...)
				var tx *object.Txn
				if tx, err = n.Begin(ctx, object.TxnOptions{}); err != nil {
					t.Fatal(err)
				}
				req := &object.PutRequest{Space: "gcr", Key: dst, Size: int64(len(patch)), Mode: object.PutWriteAt, Offset: 100 << 10}
				if _, err = tx.Put(ctx, req, bytes.NewReader(patch)); err != nil {
					t.Fatal(err)
				}
				_, err = tx.Commit(ctx)
			case "merge":
				dst = op + "-src"
				_, err = n.MergeBranch(ctx, &object.MergeRequest{Branch: space})
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatal("the knob did not run: nothing was touched")
			}
			got, _, err := get(t, n, object.GetRequest{Space: "gcr", Key: dst})
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s after the collection: %d bytes, %v", dst, len(got), err)
			}
		})
	}
}

// TestGCThreeNodes collects on a three-node cluster: the marks go to
// ranges led elsewhere, a clone's touch reaches every node, and each node
// deletes its own copies of what no version references — and only those.
// The cluster report shows every node's collector.
func TestGCThreeNodes(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) {
		c.GCGrace, c.GCInterval, c.SegmentSize = time.Millisecond, -1, 1<<20
	})
	for _, name := range []string{"gc3", "gcdrop"} {
		if _, err := nodes[0].CreateSpace(ctx, name, object.SpaceSettings{Ranges: 2}); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	a, b := randBytes(rng, 1<<20), randBytes(rng, 1<<20)
	writeAny(t, nodes, "gc3", "a", string(a))
	ib := writeAny(t, nodes, "gcdrop", "b", string(b))
	gone := manifest(t, nodes[0], "gcdrop", "b", ib.Version).Chunks
	if _, err := nodes[1].Clone(ctx, &object.CloneRequest{Space: "gc3", Key: "a", DstKey: "a2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[2].Delete(ctx, &object.DeleteRequest{Space: "gcdrop", Key: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].DeleteSpace(ctx, "gcdrop"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for {
			time.Sleep(10 * time.Millisecond)
			if err := n.CollectGarbage(ctx); err != nil {
				t.Fatalf("node %d: %v", n.NodeID(), err)
			}
			if ok, _ := n.chunks.Has(gone[0].Hash); !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still holds the dropped space's chunks: %+v", n.NodeID(), n.GCStatus())
			}
		}
		for _, r := range gone {
			if ok, _ := n.chunks.Has(r.Hash); ok {
				t.Fatalf("node %d still holds chunk %s of the dropped space", n.NodeID(), r.Hash)
			}
		}
	}
	for _, key := range []string{"a", "a2"} {
		if got := readAny(t, nodes, "gc3", key); got != string(a) {
			t.Fatalf("gc3/%s after collection: %d bytes", key, len(got))
		}
	}
	b2, err := nodes[0].ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rep admin.ClusterReport
	if err := json.Unmarshal(b2, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.GC) != 3 {
		t.Fatalf("cluster report lists %d collectors, want 3", len(rep.GC))
	}
	for _, g := range rep.GC {
		if g.Error != "" || g.Runs == 0 || g.DeletedChunks < int64(len(gone)) {
			t.Fatalf("node %d collector: %+v; want a run that deleted the %d chunks", g.Node, g, len(gone))
		}
	}
}

// TestGCPrunesByRetention: a key no one writes again still loses the
// versions its space's keep-for retention no longer keeps, at the next
// collection — unless a snapshot shows them.
func TestGCPrunesByRetention(t *testing.T) {
	ctx := context.Background()
	n, err := openStarted(ctx, gcConfig(vfs.NewMem(), meta.NewMemStore(time.Now)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, name := range []string{"exp", "held"} {
		if _, err := n.CreateSpace(ctx, name, object.SpaceSettings{Ranges: 2, Retention: "duration", KeepForSeconds: 1}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(space string) int {
		t.Helper()
		vs, err := n.Versions(ctx, &object.VersionsRequest{Space: space, Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		return len(vs.Versions)
	}
	for _, space := range []string{"exp", "held"} {
		for i := range 3 {
			put(t, n, space, "k", []byte(fmt.Sprintf("version %d", i)))
		}
	}
	if _, err := n.CreateSnapshot(ctx, "held", "held-snap"); err != nil {
		t.Fatal(err)
	}
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if c := count("exp"); c != 3 {
		t.Fatalf("versions noncurrent for less than a second were pruned: %d left", c)
	}
	time.Sleep(1200 * time.Millisecond)
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if c, h := count("exp"), count("held"); c != 1 || h != 3 {
		t.Fatalf("after the keep-for second: %d versions left (want 1), %d in the snapshotted space (want 3)", c, h)
	}
	if st := n.GCStatus(); st.PrunedVersions != 2 {
		t.Fatalf("status: %d versions pruned, want 2", st.PrunedVersions)
	}
	got, _, err := get(t, n, object.GetRequest{Space: "exp", Key: "k"})
	if err != nil || string(got) != "version 2" {
		t.Fatalf("latest after pruning: %q, %v", got, err)
	}
}

// pausingReader is a body that stops once, at offset at, to run pause.
type pausingReader struct {
	b     []byte
	off   int
	at    int
	pause func()
}

func (r *pausingReader) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	if r.off >= r.at && r.pause != nil {
		r.pause()
		r.pause = nil
	}
	end := min(len(r.b), r.off+len(p))
	if r.off < r.at {
		end = min(end, r.at)
	}
	n := copy(p, r.b[r.off:end])
	r.off += n
	return n, nil
}

// TestGCSlowWritesCommitNoHole: a plain PUT whose body streams for longer
// than the grace, and a transaction whose whole-object write waits longer
// than the grace for its commit, with a collection in between: each either
// commits a version that reads back whole or fails with nothing written —
// never an acknowledged version with collected chunks. A pause under the
// grace commits.
func TestGCSlowWritesCommitNoHole(t *testing.T) {
	ctx := context.Background()
	cfg := gcConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.GCGrace = time.Second
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateSpace(ctx, "slow", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(key string, body []byte, err error) {
		t.Helper()
		got, _, gerr := get(t, n, object.GetRequest{Space: "slow", Key: key})
		switch {
		case err == nil && (gerr != nil || !bytes.Equal(got, body)):
			t.Fatalf("%s: acknowledged, but reads %d bytes, %v", key, len(got), gerr)
		case err != nil && object.KindOf(err) != object.Unavailable:
			t.Fatalf("%s: %v, want an Unavailable error naming the grace", key, err)
		case err != nil && object.KindOf(gerr) != object.NotFound:
			t.Fatalf("%s failed (%v) but left a version: %v", key, err, gerr)
		}
	}
	for _, c := range []struct {
		pause time.Duration
		fails bool
	}{{100 * time.Millisecond, false}, {1500 * time.Millisecond, true}} {
		body := randBytes(rng, 4<<20)
		key := fmt.Sprintf("put-%v", c.pause)
		r := &pausingReader{b: body, at: 3 << 20, pause: func() {
			time.Sleep(c.pause)
			if err := n.CollectGarbage(ctx); err != nil {
				t.Error(err)
			}
		}}
		_, err := n.Put(ctx, &object.PutRequest{Space: "slow", Key: key, Size: int64(len(body))}, r)
		if (err != nil) != c.fails {
			t.Fatalf("%s: %v", key, err)
		}
		check(key, body, err)

		key = fmt.Sprintf("txn-%v", c.pause)
		tx, err := n.Begin(ctx, object.TxnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Put(ctx, &object.PutRequest{Space: "slow", Key: key, Size: int64(len(body))}, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(c.pause)
		if err := n.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Commit(ctx)
		if (err != nil) != c.fails {
			t.Fatalf("%s: %v", key, err)
		}
		check(key, body, err)
	}
}

// TestGCSafePoint: the collector prunes versions at the safe point, the
// oldest snapshot an open transaction of any node reads. A transaction
// open on one node keeps the versions it may read through every node's
// collection, whatever the space's retention; the status names what held
// the safe point; once the transaction ends, the next collection prunes
// them.
func TestGCSafePoint(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) { c.GCInterval = -1; c.GCGrace = time.Millisecond })
	if _, err := nodes[0].CreateSpace(ctx, "aged", object.SpaceSettings{Retention: "duration", KeepForSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		vs, err := nodes[0].Versions(ctx, &object.VersionsRequest{Space: "aged", Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		return len(vs.Versions)
	}
	collect := func() {
		t.Helper()
		for _, n := range nodes {
			if err := n.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(t, nodes[0], "aged", "k", []byte("v0"))
	tx := begin(t, nodes[2], false)
	if v, ok := txnGet(t, tx, "aged", "k"); !ok || v != "v0" {
		t.Fatalf("the transaction reads %q %v", v, ok)
	}
	put(t, nodes[0], "aged", "k", []byte("v1"))
	put(t, nodes[1], "aged", "k", []byte("v2"))
	time.Sleep(1200 * time.Millisecond) // v0 and v1 are past their keep-for second
	collect()
	if c := count(); c != 3 {
		t.Fatalf("with a transaction open since v0, the collection left %d versions, want 3", c)
	}
	held := 0
	for _, n := range nodes {
		if st := n.GCStatus(); st.SafePointBy == fmt.Sprintf("a transaction on node %d", nodes[2].NodeID()) && !st.SafePoint.IsZero() {
			held++
		}
	}
	if held != len(nodes) {
		for _, n := range nodes {
			st := n.GCStatus()
			t.Logf("node %d: safe point %v by %q", n.NodeID(), st.SafePoint, st.SafePointBy)
		}
		t.Fatalf("%d nodes say the transaction held their safe point, want %d", held, len(nodes))
	}
	if v, ok := txnGet(t, tx, "aged", "k"); !ok || v != "v0" {
		t.Fatalf("after the collections the transaction reads %q %v", v, ok)
	}
	// Its listing (sent to the range's leaseholder, wherever it is) too.
	if ls, err := tx.List(ctx, &object.ListRequest{Space: "aged"}); err != nil || len(ls.Objects) != 1 || ls.Objects[0].Size != 2 {
		t.Fatalf("the transaction lists %+v, %v", ls, err)
	}
	tx.Rollback()
	collect()
	if c := count(); c != 1 {
		t.Fatalf("with no transaction open, the collection left %d versions, want 1", c)
	}
	if st := nodes[0].GCStatus(); st.SafePointBy != "now" {
		t.Fatalf("safe point held by %q with no transaction open", st.SafePointBy)
	}
	if g := gauge(t, nodes[0], "cairn_gc_safe_point_timestamp_seconds"); g < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("cairn_gc_safe_point_timestamp_seconds = %v", g)
	}
}
