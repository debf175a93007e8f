package replica

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

func TestOptionsValidate(t *testing.T) {
	o := Options{ElectionTicks: 2, HeartbeatTicks: 3}
	o.EnsureDefaults()
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate accepted options without NodeID, Engine, and bad ticks")
	}
	for _, want := range []string{"NodeID", "Engine", "HeartbeatTicks"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestSingleReplicaRestart proposes, restarts the Store and the engine, and
// finds the state and applied index recovered.
func TestSingleReplicaRestart(t *testing.T) {
	fs := vfs.NewMem()
	e := openEngine(t, fs)
	s := newStore(t, testOptions(1, e))
	d := rangedesc.Range{ID: 7, Start: []byte("a"), End: []byte("m"), Replicas: []uint64{1}}
	r, err := s.AddReplica(d, &counterSM{rangeID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if s.Replica(7) != r || s.Replica(8) != nil {
		t.Fatal("Store.Replica lookup is wrong")
	}
	if _, err := s.AddReplica(d, &counterSM{rangeID: 7}); !errors.Is(err, ErrReplicaExists) {
		t.Fatalf("second AddReplica: %v", err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 1, 30)
	if v, err := r.Propose(context.Background(), []byte("reject")); err != nil || v != errRejected {
		t.Fatalf("rejected command: %v, %v", v, err)
	}
	before := r.Status()
	if before.Applied != before.Commit || before.Applied < 31 {
		t.Fatalf("status before restart: %+v", before)
	}
	if got := r.Descriptor(); string(got.Start) != "a" || len(got.Replicas) != 1 {
		t.Fatalf("descriptor %+v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Propose(context.Background(), seqCmd(31)); err == nil {
		t.Fatal("Propose after Close succeeded")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, fs)
	defer e.Close()
	s = newStore(t, testOptions(1, e))
	defer s.Close()
	sm := &counterSM{rangeID: 7}
	r, err = s.AddReplica(rangedesc.Range{ID: 7}, sm)
	if err != nil {
		t.Fatal(err)
	}
	// AddReplica of a single voter returns once it leads: its new term's
	// empty entry is applied past the old state (under a slow scheduler an
	// extra empty entry may precede it, so only the lower bound is exact).
	if got := r.Status(); got.Applied < before.Applied+1 || got.Commit != got.Applied || !got.IsLeader || got.Term <= before.Term {
		t.Fatalf("after restart %+v, before %+v", got, before)
	}
	if err := r.ReadReady(); err != nil {
		t.Fatalf("ReadReady right after AddReplica: %v", err)
	}
	if sm.applies.Load() != 0 {
		t.Fatalf("restart re-applied %d commands", sm.applies.Load())
	}
	if n := checkSM(t, e.DB(), 7); n != 30 {
		t.Fatalf("count %d after restart, want 30", n)
	}
	if got := r.Descriptor().Replicas; len(got) != 1 || got[0] != 1 {
		t.Fatalf("peers after restart %v", got)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 31, 35)
	if n := checkSM(t, e.DB(), 7); n != 35 {
		t.Fatalf("count %d, want 35", n)
	}
}

// TestReplayCommittedUnapplied leaves entries committed in the durable log
// but not applied, as a crash after the synced log write and before the
// unsynced apply batch does, and checks AddReplica applies each of them
// exactly once before it returns.
func TestReplayCommittedUnapplied(t *testing.T) {
	fs := vfs.NewMem()
	e := openEngine(t, fs)
	s := newStore(t, testOptions(1, e))
	r, err := s.AddReplica(rangedesc.Range{ID: 3, Replicas: []uint64{1}}, &counterSM{rangeID: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	const n = 40
	proposeSeq(t, r, 1, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Rewind the applied index and the state machine by the last k commands.
	st, _, err := loadRaftStorage(e.DB(), e.LogDB(), 3)
	if err != nil {
		t.Fatal(err)
	}
	const k = 12
	ents, err := st.Entries(st.applied-k+1, st.applied+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	cmds := uint64(0)
	for _, ent := range ents {
		if len(ent.GetData()) > 0 {
			cmds++
		}
	}
	b := e.DB().NewBatch()
	_ = b.Set(stateKey(st.prefix, suffixApplied), encodeUint64s(st.applied-k), nil)
	_ = b.Set(smKey(3, "count"), seqCmd(n-cmds), nil)
	_ = b.Set(smKey(3, "last"), seqCmd(n-cmds), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, fs)
	defer e.Close()
	s = newStore(t, testOptions(1, e))
	defer s.Close()
	sm := &counterSM{rangeID: 3}
	r, err = s.AddReplica(rangedesc.Range{ID: 3}, sm)
	if err != nil {
		t.Fatal(err)
	}
	// AddReplica returned: the replay is done.
	if got := sm.applies.Load(); got != int64(cmds) {
		t.Fatalf("replayed %d commands, want %d", got, cmds)
	}
	if c := checkSM(t, e.DB(), 3); c != n {
		t.Fatalf("count %d after replay, want %d", c, n)
	}
	if st := r.Status(); st.Applied != st.Commit {
		t.Fatalf("status after replay %+v", st)
	}
	waitLeader(t, r)
	proposeSeq(t, r, n+1, n+3)
}

// TestCrashKeepsAcknowledged drops every unsynced write after acknowledged
// proposals (a power cut) and finds every acknowledged command applied
// exactly once after restart.
func TestCrashKeepsAcknowledged(t *testing.T) {
	fs := vfs.NewCrashableMem()
	e := openEngine(t, fs)
	s := newStore(t, testOptions(1, e))
	r, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	const n = 25
	proposeSeq(t, r, 1, n)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = s.Close()
	_ = e.Close()

	e = openEngine(t, crashed)
	defer e.Close()
	s = newStore(t, testOptions(1, e))
	defer s.Close()
	r, err = s.AddReplica(rangedesc.Range{ID: 1}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	// The last commands' commit index may have been lost with the apply
	// batch; the new term's entry commits them again.
	waitFor(t, "re-commit", func() bool { return r.ReadReady() == nil })
	if c := checkSM(t, e.DB(), 1); c != n {
		t.Fatalf("count %d after crash, want %d", c, n)
	}
	proposeSeq(t, r, n+1, n+2)
}

// TestTruncation checks the log is truncated behind the applied index and
// that a restart after truncation works.
func TestTruncation(t *testing.T) {
	fs := vfs.NewMem()
	e := openEngine(t, fs)
	o := testOptions(1, e)
	o.LogKeep, o.TruncateEvery = 5, 20
	s := newStore(t, o)
	r, err := s.AddReplica(rangedesc.Range{ID: 9, Replicas: []uint64{1}}, &counterSM{rangeID: 9})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	const n = 100
	proposeSeq(t, r, 1, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st, _, err := loadRaftStorage(e.DB(), e.LogDB(), 9)
	if err != nil {
		t.Fatal(err)
	}
	if st.truncIndex <= bootstrapIndex || st.applied-st.truncIndex > o.TruncateEvery || st.applied-st.truncIndex < o.LogKeep {
		t.Fatalf("truncated at %d with applied %d", st.truncIndex, st.applied)
	}
	if _, err := st.Entries(st.truncIndex, st.truncIndex+1, 1<<20); err == nil {
		t.Fatal("truncated entry still readable")
	}
	if term, err := st.Term(st.truncIndex); err != nil || term == 0 {
		t.Fatalf("term at truncation point: %d, %v", term, err)
	}
	snap, err := st.Snapshot()
	if err != nil || snap.GetMetadata().GetIndex() != st.applied || len(snap.GetMetadata().GetConfState().GetVoters()) != 1 {
		t.Fatalf("snapshot %v, %v", snap, err)
	}
	if got := countLogKeys(t, e.LogDB(), st.prefix); got != int(st.lastIndex-st.truncIndex) {
		t.Fatalf("%d log entries on disk, want %d", got, st.lastIndex-st.truncIndex)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, fs)
	defer e.Close()
	o.Engine = e
	s = newStore(t, o)
	defer s.Close()
	r, err = s.AddReplica(rangedesc.Range{ID: 9}, &counterSM{rangeID: 9})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, n+1, n+30)
	if c := checkSM(t, e.DB(), 9); c != n+30 {
		t.Fatalf("count %d", c)
	}
}

func countLogKeys(t *testing.T, db *pebble.DB, prefix []byte) int {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: logKey(prefix, 0), UpperBound: stateKey(prefix, suffixLog+1)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// TestManyRangesOneStore runs several groups on one Store and proposes to
// all of them concurrently.
func TestManyRangesOneStore(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer e.Close()
	s := newStore(t, testOptions(1, e))
	defer s.Close()
	var reps []*Replica
	for id := uint64(1); id <= 4; id++ {
		r, err := s.AddReplica(rangedesc.Range{ID: id, Replicas: []uint64{1}}, &counterSM{rangeID: id})
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	var wg sync.WaitGroup
	for _, r := range reps {
		waitLeader(t, r)
		wg.Go(func() { proposeSeq(t, r, 1, 20) })
	}
	wg.Wait()
	for id := uint64(1); id <= 4; id++ {
		if c := checkSM(t, e.DB(), id); c != 20 {
			t.Fatalf("range %d: count %d", id, c)
		}
	}
}

// TestLeaseExpires uses a manual clock and no ticks: the lease taken when
// the replica became leader expires when the clock passes
// contact - MaxClockOffset + election timeout.
func TestLeaseExpires(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer e.Close()
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	o := testOptions(1, e)
	o.TickInterval = time.Hour // no ticks, so no renewals
	o.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newStore(t, o)
	defer s.Close()
	r, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lease", func() bool { return r.ReadReady() == nil })
	want := now.Add(10*time.Hour - 500*time.Millisecond)
	if got := r.Status().LeaseExpiration; !got.Equal(want) {
		t.Fatalf("lease expiration %v, want %v", got, want)
	}
	mu.Lock()
	now = want
	mu.Unlock()
	if err := r.ReadReady(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ReadReady after lease expiry: %v", err)
	}
}

// TestCloseLeavesNoGoroutines closes twice and checks every goroutine the
// Store started has exited.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	e := openEngine(t, vfs.NewMem())
	s := newStore(t, testOptions(1, e))
	r, err := s.AddReplica(rangedesc.Range{ID: 1, Replicas: []uint64{1}}, &counterSM{rangeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 1, 3)
	// A proposer blocked when the Store closes gets an error, not a hang.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.AddReplica(rangedesc.Range{ID: 2, Replicas: []uint64{1}}, &counterSM{rangeID: 2}); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddReplica after Close: %v", err)
	}
	if err := s.Step(context.Background(), Message{RangeID: 1, Msg: nil}); err == nil {
		t.Fatal("Step of nil message succeeded")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}
