package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// threeNodes starts a three-node cluster (see clusterOf).
func threeNodes(t *testing.T, tune ...func(*Config)) []*Node { return clusterOf(t, 3, tune...) }

// clusterOf starts a cluster of k nodes and waits until every node sees all
// of them in the cluster map. Each config passes through tune.
func clusterOf(t testing.TB, k int, tune ...func(*Config)) []*Node {
	t.Helper()
	cfg := func(join string) Config {
		c := clusterConfig(t, join)
		for _, f := range tune {
			f(&c)
		}
		return c
	}
	first := openNode(t, cfg(""))
	nodes := []*Node{first}
	for len(nodes) < k {
		nodes = append(nodes, openNode(t, cfg(first.PeerAddr())))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for len(n.peers.view()) < k {
			if time.Now().After(deadline) {
				t.Fatalf("node %d sees %d nodes", n.NodeID(), len(n.peers.view()))
			}
			n.peers.forget()
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// TestReplicatedChunks writes a chunked object on a three-node cluster and
// checks that every chunk is durable on all three nodes (R = 3) before the
// write is acknowledged, that a node holding no copy reads through the
// others, and that a corrupt copy is skipped for a good one.
func TestReplicatedChunks(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "chunks", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	body := randBytes(rand.New(rand.NewPCG(1, 2)), 3<<20)
	info := writeAny(t, nodes, "chunks", "big", string(body))
	if got := readAny(t, nodes, "chunks", "big"); got != string(body) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(body))
	}
	m := manifest(t, nodes[0], "chunks", "big", info.Version)
	if len(m.Chunks) < 2 {
		t.Fatalf("a 3 MiB object has %d chunks; want several", len(m.Chunks))
	}
	for _, n := range nodes {
		for _, ref := range m.Chunks {
			if ok, err := n.chunks.Has(ref.Hash); !ok || err != nil {
				t.Fatalf("node %d lacks chunk %s of the acknowledged write (%v)", n.NodeID(), ref.Hash, err)
			}
		}
	}

	// A chunk only on node 1 is read through it by node 0 and node 2,
	// verified.
	lone := randBytes(rand.New(rand.NewPCG(3, 4)), 1<<20)
	h := chunk.Sum(lone)
	if err := nodes[1].chunks.Put(ctx, h, lone); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Node{nodes[0], nodes[2]} {
		b, err := n.plane.GetChunk(ctx, h, nil, 3)
		if err != nil || !bytes.Equal(b, lone) {
			t.Fatalf("node %d reading a chunk held only by node %d: %d bytes, %v", n.NodeID(), nodes[1].NodeID(), len(b), err)
		}
	}

	// Corrupt node 1's only segment holding that chunk: the read fails as
	// corrupt, never returning wrong bytes; with a good copy on node 2 it
	// succeeds. (Without chunk caches: a chunk just written is cached,
	// and a cached chunk is served from memory whatever happens on disk.)
	fresh := threeNodes(t, func(c *Config) { c.ChunkCache = -1 })
	lone2 := randBytes(rand.New(rand.NewPCG(5, 6)), 1<<20)
	h2 := chunk.Sum(lone2)
	if err := fresh[1].chunks.Put(ctx, h2, lone2); err != nil {
		t.Fatal(err)
	}
	corruptSegments(t, fresh[1])
	if _, err := fresh[0].plane.GetChunk(ctx, h2, nil, 3); wire.CodeOf(err) != wire.CodeCorrupt {
		t.Fatalf("reading a chunk whose only copy is corrupt: %v, want CORRUPT", err)
	}
	if err := fresh[2].chunks.Put(ctx, h2, lone2); err != nil {
		t.Fatal(err)
	}
	b, err := fresh[0].plane.GetChunk(ctx, h2, nil, 3)
	if err != nil || !bytes.Equal(b, lone2) {
		t.Fatalf("reading past a corrupt copy to a good one: %d bytes, %v", len(b), err)
	}
	if b, err := fresh[1].plane.GetChunk(ctx, h2, nil, 3); err != nil || !bytes.Equal(b, lone2) {
		t.Fatalf("a node whose own copy is corrupt reads another: %d bytes, %v", len(b), err)
	}
}

// corruptSegments flips a byte in the middle of every segment file of n.
func corruptSegments(t *testing.T, n *Node) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.cfg.DataDir, "segments", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("segment files of node %d: %v %v", n.NodeID(), files, err)
	}
	for _, name := range files {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if st.Size() > 1<<10 {
			var b [1]byte
			off := st.Size() / 2
			if _, err := f.ReadAt(b[:], off); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0xff
			if _, err := f.WriteAt(b[:], off); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
}

// manifest returns the chunk manifest of a version of space/key, read
// through n (which forwards to the leaseholder if need be).
func manifest(t testing.TB, n *Node, space, key string, version uint64) chunk.Manifest {
	t.Helper()
	rec, err := recordOf(n, space, key, version)
	if err != nil {
		t.Fatalf("read %s/%s through node %d: %v", space, key, n.NodeID(), err)
	}
	m, err := chunk.UnmarshalManifest(rec.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recordOf reads the version record of space/key (version 0: the
// latest) through n, from the range's leaseholder.
func recordOf(n *Node, space, key string, version uint64) (*mvcc.Record, error) {
	ctx := context.Background()
	s, release, err := n.acquire(ctx, space)
	if err != nil {
		return nil, err
	}
	defer release()
	rec, err := n.rc.Read(ctx, &s.tab, keys.Object(s.meta.ID, nil, []byte(key)), version, 0)
	return rec, object.FromRange(err)
}

// TestDrainedNodeRefusesChunkedWrites: with its only node draining, a
// cluster has nowhere to keep chunks, so a chunked write fails with a
// clear error and commits nothing (inline writes, which live in the
// range, go on); undrained, it writes again.
func TestDrainedNodeRefusesChunkedWrites(t *testing.T) {
	ctx := context.Background()
	n := openTestNode(t)
	if _, err := n.CreateSpace(ctx, "drained", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	if err := n.NodeAdmin(ctx, wire.NodeDrain, n.NodeID()); err != nil {
		t.Fatal(err)
	}
	rereadMap(n)
	body := randBytes(rand.New(rand.NewPCG(5, 6)), 300<<10)
	_, err := n.Put(ctx, &object.PutRequest{Space: "drained", Key: "big", Size: int64(len(body))}, bytes.NewReader(body))
	if wire.CodeOf(err) != wire.CodeUnavailable || !strings.Contains(err.Error(), "no node can take chunks") || !strings.Contains(err.Error(), "node 1 draining") {
		t.Fatalf("chunked PUT on a drained single node: %v", err)
	}
	if _, err := n.Stat(ctx, &object.GetRequest{Space: "drained", Key: "big", Length: -1}); wire.CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("after the refused PUT: %v, want not found", err)
	}
	if _, err := n.Put(ctx, &object.PutRequest{Space: "drained", Key: "small", Size: 5}, strings.NewReader("small")); err != nil {
		t.Fatalf("an inline PUT on a drained node: %v", err)
	}
	if err := n.NodeAdmin(ctx, wire.NodeUndrain, n.NodeID()); err != nil {
		t.Fatal(err)
	}
	rereadMap(n)
	if _, err := n.Put(ctx, &object.PutRequest{Space: "drained", Key: "big", Size: int64(len(body))}, bytes.NewReader(body)); err != nil {
		t.Fatalf("chunked PUT after undrain: %v", err)
	}
	if got := readAny(t, []*Node{n}, "drained", "big"); got != string(body) {
		t.Fatal("read back after undrain differs")
	}
}

// TestMinCopies: a space keeping three copies on two nodes needs two
// durable copies of each chunk; with one of the nodes draining only one
// node can hold them, and a chunked write fails and commits nothing,
// unless --min-copies 1 allows it.
func TestMinCopies(t *testing.T) {
	ctx := context.Background()
	nodes := clusterOf(t, 2)
	if _, err := nodes[0].CreateSpace(ctx, "copies", object.SpaceSettings{Ranges: 1}); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].NodeAdmin(ctx, wire.NodeDrain, nodes[1].NodeID()); err != nil {
		t.Fatal(err)
	}
	rereadMap(nodes[0])
	body := randBytes(rand.New(rand.NewPCG(7, 8)), 300<<10)
	_, err := nodes[0].Put(ctx, &object.PutRequest{Space: "copies", Key: "big", Size: int64(len(body))}, bytes.NewReader(body))
	if wire.CodeOf(err) != wire.CodeUnavailable || !strings.Contains(err.Error(), "needs 2 durable copies") {
		t.Fatalf("chunked PUT with one node to hold two copies: %v", err)
	}
	if _, err := nodes[0].Stat(ctx, &object.GetRequest{Space: "copies", Key: "big", Length: -1}); wire.CodeOf(err) != wire.CodeNotFound {
		t.Fatalf("after the refused PUT: %v, want not found", err)
	}
	// Restarted with --min-copies 1, the node takes the write.
	cfg := restartConfig(nodes[0])
	cfg.MinCopies = 1
	nodes[0].Close()
	again, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Serve()
	t.Cleanup(func() { again.Close() })
	if _, err := again.Put(ctx, &object.PutRequest{Space: "copies", Key: "big", Size: int64(len(body))}, bytes.NewReader(body)); err != nil {
		t.Fatalf("chunked PUT with --min-copies 1: %v", err)
	}
}

// rereadMap makes n read the cluster map again on its next use, as it
// does within two seconds of a change anyway.
func rereadMap(n *Node) {
	n.peers.mu.Lock()
	n.peers.fetched = time.Time{}
	n.peers.mu.Unlock()
}

// TestDrainedNodeLogsOnce: a drained single node's ranges have nowhere to
// go; their repair fails every second, and is logged once per range, not
// every time (it was about 16 lines a second).
func TestDrainedNodeLogsOnce(t *testing.T) {
	ctx := context.Background()
	var logs countingHandler
	cfg := testConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.Logger = slog.New(&logs)
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateSpace(ctx, "quiet", object.SpaceSettings{Ranges: 2}); err != nil {
		t.Fatal(err)
	}
	if err := n.NodeAdmin(ctx, wire.NodeDrain, n.NodeID()); err != nil {
		t.Fatal(err)
	}
	rereadMap(n)
	// The node's repair loop runs every second: let it fail four times.
	time.Sleep(4500 * time.Millisecond)
	if got := logs.count("range membership step failed"); got < 1 || got > 2 {
		t.Fatalf("four failing repair passes over 2 ranges logged %d lines, want one per range", got)
	}
}

// countingHandler is a slog handler that counts messages.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}
