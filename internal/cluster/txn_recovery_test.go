package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/object"
)

// Crash recovery of transactions (TODS §3.6 in Cairn's terms). A
// coordinator's crash at each step of a commit leaves exactly the state
// the commands it sent before the crash made; the tests below make that
// state with those commands and no coordinator, then check that readers
// on any node end the transaction all-or-nothing and that no lock stays.

// halfTxn is a transaction driven by hand, command by command.
type halfTxn struct {
	t        *testing.T
	n        *Node
	space    string
	startTS  uint64
	primary  []byte
	objs     [][]byte
	expires  int64
	commitTS uint64
}

// prewrite locks keys (the first the primary) with value, expiring ttl
// from now.
func prewrite(t *testing.T, n *Node, space string, ttl time.Duration, value string, ks ...string) *halfTxn {
	t.Helper()
	ctx := context.Background()
	start, err := n.tso.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := spaceOf(t, n, space)
	h := &halfTxn{t: t, n: n, space: space, startTS: start, expires: time.Now().Add(ttl).UnixMilli()}
	for _, k := range ks {
		h.objs = append(h.objs, keys.Object(s.meta.ID, nil, []byte(k)))
	}
	h.primary = h.objs[0]
	for _, obj := range h.objs {
		rec := &mvcc.Record{Size: int64(len(value)), Inline: []byte(value)}
		cmd := (&kv.PrewriteCmd{StartTS: start, Primary: h.primary, Expires: h.expires, Muts: []mvcc.Mutation{{Obj: obj, Kind: mvcc.LockWrite, Rec: rec}}}).Encode()
		if _, err := n.rc.Propose(ctx, &s.tab, obj, cmd); err != nil {
			t.Fatalf("prewrite: %v", err)
		}
	}
	return h
}

// takeCommitTS takes the transaction's commit timestamp from the oracle
// (a coordinator may take it any time after its prewrites).
func (h *halfTxn) takeCommitTS() {
	h.t.Helper()
	ts, err := h.n.tso.Next(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	h.commitTS = ts
}

// commitPrimary commits the primary alone, with the transaction record, at
// the commit timestamp taken before (takeCommitTS), or at one it takes.
func (h *halfTxn) commitPrimary() {
	h.t.Helper()
	if h.commitTS == 0 {
		h.takeCommitTS()
	}
	cmd := (&kv.CommitCmd{StartTS: h.startTS, CommitTS: h.commitTS, Objs: [][]byte{h.primary}, Record: true}).Encode()
	if _, err := h.n.rc.Propose(context.Background(), &spaceOf(h.t, h.n, h.space).tab, h.primary, cmd); err != nil {
		h.t.Fatalf("commit the primary: %v", err)
	}
}

func spaceOf(t *testing.T, n *Node, name string) *space {
	t.Helper()
	s, release, err := n.acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	release()
	return s
}

// expectAll reads every key through n (latest, and in a transaction
// begun now) and wants value in each.
func expectAll(t *testing.T, n *Node, space, value string, ks ...string) {
	t.Helper()
	for _, k := range ks {
		if got := string(mustGet(t, n, space, k)); got != value {
			t.Fatalf("node %d: %s = %q, want %q", n.NodeID(), k, got, value)
		}
	}
	// A node the test stopped may have led the timestamp oracle: a begin
	// fails until the oracle's lease has moved.
	var tx *object.Txn
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if tx, err = n.Begin(context.Background(), object.TxnOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: begin: %v", n.NodeID(), err)
		}
	}
	for _, k := range ks {
		if got, _ := txnGet(t, tx, space, k); got != value {
			t.Fatalf("node %d: %s = %q in a transaction, want %q", n.NodeID(), k, got, value)
		}
	}
}

func waitNoLocks(t *testing.T, nodes ...*Node) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := 0
		for _, nd := range nodes {
			n += countLocks(t, nd)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d locks stay", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTxnCoordinatorCrashBeforeCommit: locks prewritten, the coordinator
// gone before the commit point. A read of the latest reads past them at
// once; a read at a later snapshot waits until the primary expires and
// then rolls the transaction back; a writer then goes through; no lock
// stays.
func TestTxnCoordinatorCrashBeforeCommit(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "crash1", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	ks := []string{"!p", "Ls", "zt"}
	for _, k := range ks {
		writeAny(t, nodes, "crash1", k, "old")
	}
	h := prewrite(t, nodes[0], "crash1", 1500*time.Millisecond, "new", ks...)
	for _, k := range ks { // latest: the transaction has not committed
		if got := string(mustGet(t, nodes[1], "crash1", k)); got != "old" {
			t.Fatalf("%s = %q while the transaction is pending", k, got)
		}
	}
	began := time.Now()
	expectAll(t, nodes[2], "crash1", "old", ks...) // a snapshot after the start waits for expiry
	if waited := time.Since(began); waited < time.Until(time.UnixMilli(h.expires))-200*time.Millisecond && time.Now().Before(time.UnixMilli(h.expires)) {
		t.Fatalf("the snapshot read returned before the lock expired (%v)", waited)
	}
	writeAny(t, nodes, "crash1", "Ls", "after")
	waitNoLocks(t, nodes...)
	// The rolled-back transaction can never commit now.
	cmd := (&kv.CommitCmd{StartTS: h.startTS, CommitTS: h.startTS + 1, Objs: [][]byte{h.primary}, Record: true}).Encode()
	if _, err := nodes[0].rc.Propose(ctx, &spaceOf(t, nodes[0], "crash1").tab, h.primary, cmd); err == nil {
		t.Fatal("a rolled-back transaction committed")
	}
}

// TestTxnCoordinatorCrashAfterCommit: the primary committed, the
// coordinator gone before resolving the secondaries. Every reader, on any
// node, rolls the secondaries forward: the transaction is whole.
func TestTxnCoordinatorCrashAfterCommit(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "crash2", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	ks := []string{"!p", "Ls", "zt"}
	for _, k := range ks {
		writeAny(t, nodes, "crash2", k, "old")
	}
	h := prewrite(t, nodes[0], "crash2", time.Hour, "new", ks...) // never expires: only the commit decides
	h.commitPrimary()
	// A snapshot before the commit still sees the old values.
	for _, k := range ks[1:] {
		b, _, err := get(t, nodes[1], object.GetRequest{Space: "crash2", Key: k, AsOf: h.commitTS - 1})
		if err != nil || string(b) != "old" {
			t.Fatalf("%s before the commit: %q %v", k, b, err)
		}
	}
	expectAll(t, nodes[1], "crash2", "new", ks...)
	expectAll(t, nodes[2], "crash2", "new", ks...)
	ls, err := nodes[2].List(ctx, &object.ListRequest{Space: "crash2"})
	if err != nil || len(ls.Objects) != 3 {
		t.Fatalf("list: %+v %v", ls, err)
	}
	for _, o := range ls.Objects {
		if o.Version != h.commitTS {
			t.Fatalf("listed %s at %x, want the commit %x", o.Key, o.Version, h.commitTS)
		}
	}
	waitNoLocks(t, nodes...)
}

// TestTxnCoordinatorCrashDuringCommit: coordinators stopped while they
// commit a stream of two-range transactions, each writing one value to
// two keys. Whatever the crash cut, each pair ends equal (both from one
// transaction), and no lock stays.
func TestTxnCoordinatorCrashDuringCommit(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t, func(c *Config) {
		c.HeartbeatTTL, c.TxnTTL, c.LockSweep = time.Second, time.Second, 500*time.Millisecond
	})
	if _, err := nodes[0].CreateSpace(ctx, "crash3", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	const pairs = 6
	for i := range pairs {
		writeAny(t, nodes, "crash3", fmt.Sprintf("!a%d", i), "0")
		writeAny(t, nodes, "crash3", fmt.Sprintf("zb%d", i), "0")
	}
	coord := nodes[2]
	cfg := restartConfig(coord)
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := 1; ; v++ {
				tx, err := coord.Begin(ctx, object.TxnOptions{})
				if err != nil {
					return
				}
				val := fmt.Sprint(v)
				for _, k := range []string{fmt.Sprintf("!a%d", i), fmt.Sprintf("zb%d", i)} {
					if _, err := tx.Put(ctx, &object.PutRequest{Space: "crash3", Key: k, Size: int64(len(val))}, strings.NewReader(val)); err != nil {
						return
					}
				}
				if _, err := tx.Commit(ctx); err != nil && object.ClassOf(err) != object.ClassTxn {
					return // the node is going away
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	coord.Close()
	wg.Wait()
	for i := range pairs {
		a := string(mustGet(t, nodes[0], "crash3", fmt.Sprintf("!a%d", i)))
		b := string(mustGet(t, nodes[1], "crash3", fmt.Sprintf("zb%d", i)))
		if a != b {
			t.Fatalf("pair %d ended half-committed: %q and %q", i, a, b)
		}
	}
	again, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Serve()
	t.Cleanup(func() { again.Close() })
	waitNoLocks(t, nodes[0], nodes[1], again)
}

// TestTxnLeaderCrashBetweenPrewriteAndCommit: the leaseholder of a
// secondary's range is stopped after the prewrite; the commit goes on
// (the lock is in the range's Raft log, so the new leaseholder has it) and
// the transaction ends whole.
func TestTxnLeaderCrashBetweenPrewriteAndCommit(t *testing.T) {
	ctx := context.Background()
	nodes := threeNodes(t)
	if _, err := nodes[0].CreateSpace(ctx, "crash4", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	ks := []string{"!p", "zs"}
	for _, k := range ks {
		writeAny(t, nodes, "crash4", k, "old")
	}
	// The secondary's leaseholder, and a coordinator that is not it. The
	// meta service must keep its quorum and the coordinator its way to it:
	// every node a voter first (a node joins as a learner), and the node
	// stopped is not the first, whose member the others' meta clients
	// joined through (nodes[0] coordinates; its client has its own member).
	waitMetaVoters(t, nodes[0], memberName(nodes[0].NodeID()), memberName(nodes[1].NodeID()), memberName(nodes[2].NodeID()))
	s := spaceOf(t, nodes[0], "crash4")
	rid := s.tab.Route(keys.Object(s.meta.ID, nil, []byte("zs"))).Desc().ID
	coord := nodes[0]
	var victim *Node
	deadline := time.Now().Add(30 * time.Second)
	for victim == nil {
		for _, n := range nodes {
			if r := n.ranges.Replica(rid); r != nil && r.Leads() {
				if n == coord {
					r.TransferLeadership(nodes[1].NodeID())
				} else {
					victim = n
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leaseholder of the secondary's range but the first node")
		}
		time.Sleep(20 * time.Millisecond)
	}
	h := prewrite(t, coord, "crash4", time.Hour, "new", ks...)
	// The commit timestamp is taken before the stop: what is tested is the
	// range's leaseholder going, not the timestamp oracle's (the victim may
	// lead that too, and its lease takes a while to move).
	h.takeCommitTS()
	victim.Close()
	h.commitPrimary()
	cmd := (&kv.CommitCmd{StartTS: h.startTS, CommitTS: h.commitTS, Objs: h.objs[1:]}).Encode()
	if _, err := coord.rc.Propose(ctx, &spaceOf(t, coord, "crash4").tab, h.objs[1], cmd); err != nil {
		t.Fatalf("commit the secondary on its new leaseholder: %v", err)
	}
	expectAll(t, coord, "crash4", "new", ks...)
}

// TestTxnNodeRestartWithLocks: a single node restarts with locks on its
// disk — one transaction committed at its primary only, one never
// committed. After the restart the first reads whole, the second rolls
// back at its expiry, and no lock stays.
func TestTxnNodeRestartWithLocks(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	ms := meta.NewMemStore(time.Now)
	n, err := openStarted(ctx, testConfig(fs, ms))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateSpace(ctx, "restart", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"!a", "zb", "!c", "zd"} {
		put(t, n, "restart", k, []byte("old"))
	}
	done := prewrite(t, n, "restart", time.Hour, "committed", "!a", "zb")
	done.commitPrimary()
	pending := prewrite(t, n, "restart", time.Second, "never", "!c", "zd")
	if err := n.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	n, err = openStarted(ctx, testConfig(fs, ms))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if c := countLocks(t, n); c != 3 {
		t.Fatalf("%d locks on disk after the restart, want 3", c)
	}
	expectAll(t, n, "restart", "committed", "!a", "zb")
	expectAll(t, n, "restart", "old", "!c", "zd")
	_ = pending
	waitNoLocks(t, n)
}

// TestTxnSweepsAbandonedLocks: locks of a transaction whose coordinator
// died, on keys nobody reads — one transaction never committed, one
// committed at its primary only — are resolved by the leaseholder's sweep
// once they expire: the first rolled back, the second rolled forward.
func TestTxnSweepsAbandonedLocks(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(vfs.NewMem(), meta.NewMemStore(time.Now))
	cfg.LockSweep = 200 * time.Millisecond
	n, err := openStarted(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateSpace(ctx, "sweep", object.SpaceSettings{Ranges: 4}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"!a", "zb", "!c", "zd"} {
		put(t, n, "sweep", k, []byte("old"))
	}
	done := prewrite(t, n, "sweep", time.Second, "committed", "!a", "zb")
	done.commitPrimary()
	prewrite(t, n, "sweep", time.Second, "never", "!c", "zd")
	if c := countLocks(t, n); c != 3 {
		t.Fatalf("%d locks, want 3", c)
	}
	waitNoLocks(t, n) // nothing reads the keys meanwhile
	expectAll(t, n, "sweep", "committed", "!a", "zb")
	expectAll(t, n, "sweep", "old", "!c", "zd")
}
