package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/storage"
)

// counterSM counts commands. A command is an 8-byte sequence number, which
// must be exactly one more than the last applied one (so a command applied
// twice, or out of order, is caught), or "reject". State lives in pebble
// under "z" + rangeID, written through the apply batch.
type counterSM struct {
	rangeID uint64
	applies atomic.Int64 // Apply calls on this instance
}

var errRejected = errors.New("rejected")

func smKey(rangeID uint64, name string) []byte {
	k := binary.BigEndian.AppendUint64([]byte("z"), rangeID)
	return append(k, name...)
}

func readUint(r pebble.Reader, key []byte) uint64 {
	v, c, err := r.Get(key)
	if err != nil {
		return 0
	}
	defer c.Close()
	return binary.BigEndian.Uint64(v)
}

// Spans implements Spanner: everything under "z" + rangeID.
func (c *counterSM) Spans(rangedesc.Range) []Span {
	start := smKey(c.rangeID, "")
	return []Span{{Start: start, End: keys.PrefixEnd(start)}}
}

func (c *counterSM) Apply(b *pebble.Batch, cmd []byte) any {
	c.applies.Add(1)
	if string(cmd) == "reject" {
		return errRejected
	}
	seq := binary.BigEndian.Uint64(cmd)
	last := readUint(b, smKey(c.rangeID, "last"))
	if seq != last+1 {
		_ = b.Set(smKey(c.rangeID, "bad"), fmt.Appendf(nil, "seq %d after %d", seq, last), nil)
	}
	n := readUint(b, smKey(c.rangeID, "count")) + 1
	_ = b.Set(smKey(c.rangeID, "count"), binary.BigEndian.AppendUint64(nil, n), nil)
	_ = b.Set(smKey(c.rangeID, "last"), binary.BigEndian.AppendUint64(nil, seq), nil)
	return n
}

// waitCount waits until n's state machine has applied want commands
// (checkSM). A follower's applied index is no measure: the leader's status
// is published after its proposals finish, and a follower learns the
// commit index up to CommitDelay later (hold.go).
func waitCount(t testing.TB, what string, n *testNode, want uint64) {
	t.Helper()
	waitFor(t, what, func() bool { return checkSM(t, n.engine.DB(), 1) == want })
}

// checkSM returns the count and fails the test if a command was applied
// twice or out of order.
func checkSM(t testing.TB, db *pebble.DB, rangeID uint64) uint64 {
	t.Helper()
	if v, c, err := db.Get(smKey(rangeID, "bad")); err == nil {
		t.Fatalf("range %d: state machine saw %s", rangeID, v)
		c.Close()
	}
	snap := db.NewSnapshot() // count and last as of one moment
	defer snap.Close()
	n, last := readUint(snap, smKey(rangeID, "count")), readUint(snap, smKey(rangeID, "last"))
	if n != last {
		t.Fatalf("range %d: count %d but last sequence %d", rangeID, n, last)
	}
	return n
}

func seqCmd(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openEngine(t testing.TB, fs vfs.FS) *storage.Engine {
	t.Helper()
	e, err := storage.Open(storage.Options{Dir: "db", FS: fs, CacheSize: 8 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testOptions(nodeID uint64, e *storage.Engine) Options {
	return Options{
		NodeID:       nodeID,
		Engine:       e,
		TickInterval: 10 * time.Millisecond,
		Logger:       quietLogger(),
	}
}

func newStore(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := NewStore(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds; the deadline only bounds a hang.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitLeader(t testing.TB, r *Replica) {
	t.Helper()
	waitFor(t, "leadership", func() bool { return r.Status().IsLeader })
}

// without returns nodes but n, in order.
func without(nodes []*testNode, n *testNode) []*testNode {
	var out []*testNode
	for _, x := range nodes {
		if x != n {
			out = append(out, x)
		}
	}
	return out
}

// addEmptyNode starts a Store for node id on net (options through adjust)
// with an empty, uninitialized replica of range 1, for the group to add.
func addEmptyNode(t *testing.T, net *memNet, id uint64, adjust func(*Options)) (*storage.Engine, *Replica) {
	t.Helper()
	e := openEngine(t, vfs.NewMem())
	o := testOptions(id, e)
	o.Transport = net
	adjust(&o)
	s := newStore(t, o)
	t.Cleanup(func() { _ = s.Close(); _ = e.Close() })
	net.set(id, s)
	r, err := s.AddReplica(rangedesc.Range{ID: 1}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e, r
}

// learnerChange adds node id as a learner.
func learnerChange(id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: new(id)}}}
}

// proposeConcurrently has workers goroutines each propose each commands
// to r (commands w*1000+i: not a sequence, so counterSM flags them) and
// waits for all of them.
func proposeConcurrently(t testing.TB, r *Replica, workers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := r.Propose(context.Background(), seqCmd(uint64(w*1000+i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// proposeSeq proposes sequence numbers from..to and checks each result.
func proposeSeq(t testing.TB, r *Replica, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		v, err := r.Propose(context.Background(), seqCmd(i))
		if err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
		if v != i {
			t.Fatalf("propose %d: result %v", i, v)
		}
	}
}

// memNet routes messages between Stores in one process, as a network would:
// it copies every message.
type memNet struct {
	mu     sync.Mutex
	stores map[uint64]*Store
	cut    map[uint64]bool // partitioned nodes: nothing from or to them
	snaps  atomic.Int64    // snapshots sent
	// blocked ranges: their messages to these nodes are dropped.
	blocked  map[uint64]map[uint64]bool
	declined atomic.Int64 // snapshots the receiver declined
	// raftMsgs counts the raft messages sent, storeBeats the store
	// heartbeats (range 0).
	raftMsgs, storeBeats atomic.Int64
}

// block drops (or, with on false, delivers again) range rangeID's
// messages to node to.
func (n *memNet) block(rangeID, to uint64, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.blocked == nil {
		n.blocked = map[uint64]map[uint64]bool{}
	}
	if n.blocked[rangeID] == nil {
		n.blocked[rangeID] = map[uint64]bool{}
	}
	n.blocked[rangeID][to] = on
}

func (n *memNet) partition(id uint64, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == nil {
		n.cut = map[uint64]bool{}
	}
	n.cut[id] = cut
}

func (n *memNet) set(id uint64, s *Store) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stores == nil {
		n.stores = map[uint64]*Store{}
	}
	if s == nil {
		delete(n.stores, id)
		return
	}
	n.stores[id] = s
}

func (n *memNet) Send(msgs []Message) {
	for _, m := range msgs {
		if m.RangeID == 0 {
			n.storeBeats.Add(1)
		} else {
			n.raftMsgs.Add(1)
		}
		n.mu.Lock()
		s := n.stores[m.Msg.GetTo()]
		if n.cut[m.Msg.GetTo()] || n.cut[m.Msg.GetFrom()] || n.blocked[m.RangeID][m.Msg.GetTo()] {
			s = nil
		}
		n.mu.Unlock()
		if s != nil {
			_ = s.Step(context.Background(), Message{RangeID: m.RangeID, Msg: proto.CloneOf(m.Msg)})
		}
	}
}

// buildTestSSTs builds the SSTs of a snapshot of spans on s, as an
// outgoing snapshot's are, and returns their bytes.
func buildTestSSTs(t *testing.T, s *Store, rd pebble.Reader, spans []Span) [][]byte {
	t.Helper()
	token := s.nextID.Add(1)
	var paths []string
	for i := range spans {
		paths = append(paths, s.outSnapPath(0, token, i))
	}
	defer s.removeFiles(paths)
	ssts, err := s.buildSSTs(rd, spans, paths, s.opts.Engine.WriterOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := readSSTs(ssts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readSSTs reads an outgoing snapshot's SSTs into memory.
func readSSTs(ssts []SnapshotSST) ([][]byte, error) {
	var out [][]byte
	for _, sst := range ssts {
		rc, err := sst.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != sst.Size {
			return nil, fmt.Errorf("SST of %d bytes read as %d", sst.Size, len(b))
		}
		out = append(out, b)
	}
	return out, nil
}

// SendSnapshot implements SnapshotTransport.
func (n *memNet) SendSnapshot(ctx context.Context, m Message, files []SnapshotSST) error {
	ssts, err := readSSTs(files)
	if err != nil {
		return err
	}
	n.mu.Lock()
	s := n.stores[m.Msg.GetTo()]
	cut := n.cut[m.Msg.GetTo()] || n.cut[m.Msg.GetFrom()]
	n.mu.Unlock()
	if s == nil || cut {
		return errors.New("unreachable")
	}
	n.snaps.Add(1)
	var sizes []int64
	var all []byte
	for _, b := range ssts {
		sizes = append(sizes, int64(len(b)))
		all = append(all, b...)
	}
	err = s.ReceiveSnapshot(ctx, Message{RangeID: m.RangeID, Msg: proto.CloneOf(m.Msg)}, sizes, bytes.NewReader(all))
	if errors.Is(err, ErrSnapshotDeclined) {
		n.declined.Add(1)
	}
	return err
}
