package replica

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// TestLogsMovedFromStateStore opens a store written before the raft log
// had its own instance (its entries in the state store): they move into
// the log's instance, none stay behind, and the range goes on from them.
func TestLogsMovedFromStateStore(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer func() { _ = e.Close() }()
	o := testOptions(1, e)
	writeAndClose(t, o, 30)
	before, _, err := loadRaftStorage(e.DB(), e.LogDB(), 9)
	if err != nil {
		t.Fatal(err)
	}
	want, err := before.Entries(before.truncIndex+1, before.lastIndex+1, 1<<30)
	if err != nil || len(want) == 0 {
		t.Fatalf("entries before: %d, %v", len(want), err)
	}

	// The old layout: the entries in the state store.
	prefix := rangePrefix(9)
	it, err := e.LogDB().NewIter(&pebble.IterOptions{LowerBound: logKey(prefix, 0), UpperBound: stateKey(prefix, suffixLog+1)})
	if err != nil {
		t.Fatal(err)
	}
	b := e.DB().NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		if err := b.Set(it.Key(), it.Value(), nil); err != nil {
			t.Fatal(err)
		}
	}
	_ = it.Close()
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := e.LogDB().DeleteRange(logKey(prefix, 0), stateKey(prefix, suffixLog+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}

	s := newStore(t, o)
	defer s.Close()
	if n := countLogKeys(t, e.DB(), prefix); n != 0 {
		t.Fatalf("%d log entries left in the state store", n)
	}
	if n := countLogKeys(t, e.LogDB(), prefix); n != len(want) {
		t.Fatalf("%d log entries in the log's store, want %d", n, len(want))
	}
	r, err := s.AddReplica(rangedesc.Range{ID: 9}, &counterSM{rangeID: 9})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 31, 40)
	if c := checkSM(t, e.DB(), 9); c != 40 {
		t.Fatalf("counter %d after the move and ten more writes, want 40", c)
	}
}

// TestSweepLogs opens a store whose log holds the entries of a range with
// no state (removed, the log's removal lost in a crash) and of a range
// merged away (a tombstone): both go, the live range's stay.
func TestSweepLogs(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer func() { _ = e.Close() }()
	o := testOptions(1, e)
	writeAndClose(t, o, 10)
	live := countLogKeys(t, e.LogDB(), rangePrefix(9))
	if live == 0 {
		t.Fatal("no entries in the log")
	}
	for _, id := range []uint64{7, 8} {
		st := &raftStorage{prefix: rangePrefix(id)}
		b := e.LogDB().NewBatch()
		if err := st.append(b, []*raftpb.Entry{ent(6, 5, "a"), ent(7, 5, "b")}); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DB().Set(stateKey(rangePrefix(8), suffixTombstone), encodeUint64s(7), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := e.DB().Set(stateKey(rangePrefix(8), suffixHardState), encodeValue(nil), pebble.Sync); err != nil {
		t.Fatal(err)
	}

	s := newStore(t, o)
	defer s.Close()
	for id, want := range map[uint64]int{7: 0, 8: 0, 9: live} {
		if n := countLogKeys(t, e.LogDB(), rangePrefix(id)); n != want {
			t.Errorf("range %d: %d log entries after the sweep, want %d", id, n, want)
		}
	}
}

// writeAndClose starts a Store with o, writes n commands to a new
// single-voter range 9, and closes it.
func writeAndClose(t *testing.T, o Options, n uint64) {
	t.Helper()
	s := newStore(t, o)
	r, err := s.AddReplica(rangedesc.Range{ID: 9, Replicas: []uint64{1}}, &counterSM{rangeID: 9})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 1, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFreshRangeIgnoresStrayLog adds a range over log entries an earlier
// replica of its id left (stray, its state gone while the Store runs):
// the new group starts from an empty log, and its own entries are what
// loads.
func TestFreshRangeIgnoresStrayLog(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer func() { _ = e.Close() }()
	o := testOptions(1, e)
	s := newStore(t, o)
	stray := &raftStorage{prefix: rangePrefix(9)}
	b := e.LogDB().NewBatch()
	var ents []*raftpb.Entry
	for i := uint64(6); i < 60; i++ {
		ents = append(ents, ent(i, 9, "stray"))
	}
	if err := stray.append(b, ents); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r, err := s.AddReplica(rangedesc.Range{ID: 9, Replicas: []uint64{1}}, &counterSM{rangeID: 9})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, r)
	proposeSeq(t, r, 1, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st, _, err := loadRaftStorage(e.DB(), e.LogDB(), 9)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Entries(st.truncIndex+1, st.lastIndex+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range got {
		if string(x.GetData()) == "stray" {
			t.Fatalf("entry %d of the earlier replica loads as the new range's (last index %d)", x.GetIndex(), st.lastIndex)
		}
	}
}

// TestLoadRefusesLogGap loads a range whose log does not go on from its
// truncation: ErrCorrupt, not a log raft finds holes in later.
func TestLoadRefusesLogGap(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer func() { _ = e.Close() }()
	writeAndClose(t, testOptions(1, e), 10)
	st, _, err := loadRaftStorage(e.DB(), e.LogDB(), 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LogDB().Delete(logKey(st.prefix, st.truncIndex+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadRaftStorage(e.DB(), e.LogDB(), 9); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("load with a gap after the truncation: %v, want ErrCorrupt", err)
	}
}
