package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/storage"
)

// countSM counts applied commands under key "count" of its range.
type countSM struct{ key []byte }

func (c countSM) Spans(rangedesc.Range) []replica.Span {
	return []replica.Span{{Start: c.key, End: append(slices.Clone(c.key), 0)}}
}

func (c countSM) Apply(b *pebble.Batch, _ []byte) any {
	n := uint64(0)
	if v, closer, err := b.Get(c.key); err == nil {
		n = binary.BigEndian.Uint64(v)
		closer.Close()
	}
	n++
	_ = b.Set(c.key, binary.BigEndian.AppendUint64(nil, n), nil)
	return n
}

type testNode struct {
	id     uint64
	engine *storage.Engine
	store  *replica.Store
	tr     *Transport
	srv    *grpc.Server
	rep    *replica.Replica
}

func (n *testNode) stop() {
	n.tr.Close()
	n.srv.Stop()
	n.store.Close()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNodes starts one replica Store per id, each with its own pebble and
// its own gRPC server on a loopback port, all holding range 1.
func startNodes(t *testing.T, ids ...uint64) []*testNode {
	t.Helper()
	c := &testCluster{addrs: map[uint64]string{}}
	var nodes []*testNode
	for _, id := range ids {
		nodes = append(nodes, c.start(t, id, ids))
	}
	return nodes
}

type testCluster struct {
	mu    sync.Mutex
	addrs map[uint64]string
}

func (c *testCluster) resolve(id uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[id]
	return a, ok
}

// start starts node id with range 1 bootstrapped on peers, or
// uninitialized if peers is empty.
func (c *testCluster) start(t *testing.T, id uint64, peers []uint64) *testNode {
	t.Helper()
	e, err := storage.Open(storage.Options{Dir: "db", FS: vfs.NewMem(), CacheSize: 8 << 20, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{id: id, engine: e}
	n.tr = New(Options{NodeID: id, Resolve: c.resolve, Logger: quiet(),
		Deliver: func(ctx context.Context, m replica.Message) error { return n.store.Step(ctx, m) },
		ReceiveSnapshot: func(ctx context.Context, m replica.Message, sizes []int64, src io.Reader) error {
			return n.store.ReceiveSnapshot(ctx, m, sizes, src)
		}})
	n.store, err = replica.NewStore(replica.Options{NodeID: id, Engine: e, Transport: n.tr, TickInterval: 10 * time.Millisecond,
		LogKeep: 2, TruncateEvery: 8, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	n.srv = grpc.NewServer(ServerOptions(nil)...)
	n.tr.Register(n.srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go n.srv.Serve(l)
	c.mu.Lock()
	c.addrs[id] = l.Addr().String()
	c.mu.Unlock()
	n.rep, err = n.store.AddReplica(rangedesc.Range{ID: 1, Start: []byte("a"), End: []byte("b"), Replicas: peers}, countSM{key: []byte("zcount")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.stop(); e.Close() })
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaderOf(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	var l *testNode
	waitFor(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.rep.Status().IsLeader {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func count(n *testNode) uint64 {
	v, closer, err := n.engine.DB().Get([]byte("zcount"))
	if err != nil {
		return 0
	}
	defer closer.Close()
	return binary.BigEndian.Uint64(v)
}

// TestRaftOverGRPC runs a three-replica range whose messages cross real
// gRPC streams on loopback: it elects a leader, replicates commands to every
// replica, and after the leader's node stops, the other two elect a new
// leader and go on.
func TestRaftOverGRPC(t *testing.T) {
	nodes := startNodes(t, 1, 2, 3)
	leader := leaderOf(t, nodes)
	ctx := context.Background()
	for i := range 20 {
		if _, err := leader.rep.Propose(ctx, []byte{byte(i)}); err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
	}
	for _, n := range nodes {
		waitFor(t, "replication to every node", func() bool { return count(n) == 20 })
	}

	leader.stop()
	var rest []*testNode
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	next := leaderOf(t, rest)
	for i := range 10 {
		if _, err := next.rep.Propose(ctx, []byte{byte(i)}); err != nil {
			t.Fatalf("propose after failover %d: %v", i, err)
		}
	}
	for _, n := range rest {
		waitFor(t, "replication after failover", func() bool { return count(n) == 30 })
	}
}

// TestSnapshotOverGRPC adds a replica on a new, empty node to a range
// whose log was truncated long ago: its state comes as SSTs over the
// snapshot stream.
func TestSnapshotOverGRPC(t *testing.T) {
	c := &testCluster{addrs: map[uint64]string{}}
	var nodes []*testNode
	for _, id := range []uint64{1, 2, 3} {
		nodes = append(nodes, c.start(t, id, []uint64{1, 2, 3}))
	}
	leader := leaderOf(t, nodes)
	ctx := context.Background()
	for i := range 50 {
		if _, err := leader.rep.Propose(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	n4 := c.start(t, 4, nil)
	add := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(4)}}}
	if err := leader.rep.ChangeReplicas(ctx, add); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new replica's state", func() bool { return count(n4) == 50 })
	if _, err := leader.rep.Propose(ctx, []byte{1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replication after the snapshot", func() bool { return count(n4) == 51 })
}

func TestSnapHeaderRoundTrip(t *testing.T) {
	m := replica.Message{RangeID: 9, Msg: &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: proto.Uint64(2), From: proto.Uint64(1),
		Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(77), Term: proto.Uint64(3)}}}}
	b, err := appendSnapHeader(nil, m, []replica.SnapshotSST{{Size: 10}, {Size: 3}})
	if err != nil {
		t.Fatal(err)
	}
	got, sizes, err := decodeSnapHeader(b)
	if err != nil || got.RangeID != 9 || !proto.Equal(got.Msg, m.Msg) || !slices.Equal(sizes, []int64{10, 3}) {
		t.Fatalf("decoded %v %v %v", got, sizes, err)
	}
	for n := range len(b) {
		if _, _, err := decodeSnapHeader(b[:n]); !errors.Is(err, ErrBadFrame) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	app, _ := appendSnapHeader(nil, replica.Message{RangeID: 1, Msg: &raftpb.Message{Type: raftpb.MsgApp.Enum()}}, nil)
	if _, _, err := decodeSnapHeader(app); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("a header holding a MsgApp: %v", err)
	}
}

func FuzzDecodeSnapHeader(f *testing.F) {
	b, _ := appendSnapHeader(nil, replica.Message{RangeID: 1, Msg: &raftpb.Message{Type: raftpb.MsgSnap.Enum()}}, []replica.SnapshotSST{{Size: 1}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, sizes, err := decodeSnapHeader(b)
		if err != nil {
			return
		}
		for _, s := range sizes {
			if s < 0 || s > replica.MaxSnapshotBytes {
				t.Fatalf("size %d passed", s)
			}
		}
		if m.Msg.GetType() != raftpb.MsgSnap {
			t.Fatalf("type %v passed", m.Msg.GetType())
		}
	})
}

func TestBatchRoundTrip(t *testing.T) {
	msgs := []replica.Message{
		{RangeID: 7, Msg: &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(3),
			Entries: []*raftpb.Entry{{Index: proto.Uint64(9), Term: proto.Uint64(3), Data: []byte("payload")}}}},
		{RangeID: 1 << 40, Msg: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1)}},
	}
	b, err := appendBatch(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("decoded %d messages, want %d", len(got), len(msgs))
	}
	for i := range msgs {
		if got[i].RangeID != msgs[i].RangeID || !proto.Equal(got[i].Msg, msgs[i].Msg) {
			t.Fatalf("message %d: got %v, want %v", i, got[i], msgs[i])
		}
	}
	// Every truncation and a flipped header are refused.
	for n := range len(b) {
		if _, err := decodeBatch(b[:n]); !errors.Is(err, ErrBadFrame) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	bad := append([]byte{}, b...)
	bad[1] = 99
	if _, err := decodeBatch(bad); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("unknown version: %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	b, _ := appendBatch(nil, []replica.Message{{RangeID: 1, Msg: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(2)}}})
	f.Add(b)
	f.Add([]byte{frameMagic, frameVersion, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := decodeBatch(b)
		if err != nil {
			return
		}
		again, err := appendBatch(nil, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeBatch(again); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
	})
}
