package replica

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func ent(index, term uint64, data string) *raftpb.Entry {
	return &raftpb.Entry{Index: new(index), Term: new(term), Data: []byte(data)}
}

func commitEnts(t *testing.T, st *raftStorage, ents ...*raftpb.Entry) {
	t.Helper()
	b := st.log.NewBatch()
	defer b.Close()
	if err := st.append(b, ents); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	st.appended(ents)
}

// TestRaftStorage checks the raft.Storage contract over pebble, with and
// without the entry cache: bounds, maxSize, overwriting a tail, truncation.
func TestRaftStorage(t *testing.T) {
	for _, cached := range []bool{true, false} {
		e := openEngine(t, vfs.NewMem())
		defer e.Close()
		st, found, err := loadRaftStorage(e.DB(), e.LogDB(), 4)
		if err != nil || found {
			t.Fatalf("empty range: found %v, %v", found, err)
		}
		if !cached {
			st.cache.maxEnts = 0
		}
		b := e.DB().NewBatch()
		if err := st.bootstrap(b, []uint64{1, 2, 3}, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		_ = b.Commit(pebble.Sync)
		_ = b.Close()

		if fi, _ := st.FirstIndex(); fi != bootstrapIndex+1 {
			t.Fatalf("first index %d", fi)
		}
		if term, err := st.Term(bootstrapIndex); err != nil || term != bootstrapTerm {
			t.Fatalf("term at bootstrap %d %v", term, err)
		}
		commitEnts(t, st, ent(6, 5, "a"), ent(7, 5, "b"), ent(8, 6, "c"), ent(9, 6, "d"))
		if li, _ := st.LastIndex(); li != 9 {
			t.Fatalf("last index %d", li)
		}
		ents, err := st.Entries(6, 10, 0)
		if err != nil || len(ents) != 1 || ents[0].GetIndex() != 6 {
			t.Fatalf("maxSize 0 must return one entry: %v %v", ents, err)
		}
		ents, err = st.Entries(7, 10, 1<<20)
		if err != nil || len(ents) != 3 || string(ents[2].GetData()) != "d" {
			t.Fatalf("entries 7..9: %v %v", ents, err)
		}
		if _, err := st.Entries(5, 7, 1<<20); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("compacted range: %v", err)
		}
		if _, err := st.Entries(8, 11, 1<<20); !errors.Is(err, raft.ErrUnavailable) {
			t.Fatalf("beyond last: %v", err)
		}
		if _, err := st.Term(10); !errors.Is(err, raft.ErrUnavailable) {
			t.Fatalf("term beyond last: %v", err)
		}

		// A new leader overwrites 8..9 with a shorter tail: 9 must go.
		commitEnts(t, st, ent(8, 7, "C"))
		if li, _ := st.LastIndex(); li != 8 {
			t.Fatalf("last index after overwrite %d", li)
		}
		if term, _ := st.Term(8); term != 7 {
			t.Fatalf("term of overwritten entry %d", term)
		}
		reloaded, _, err := loadRaftStorage(e.DB(), e.LogDB(), 4)
		if err != nil || reloaded.lastIndex != 8 {
			t.Fatalf("reloaded last index %d, %v", reloaded.lastIndex, err)
		}
		if ents, err := reloaded.Entries(6, 9, 1<<20); err != nil || len(ents) != 3 || string(ents[2].GetData()) != "C" {
			t.Fatalf("reloaded entries %v %v", ents, err)
		}

		// Truncate through 7.
		b = e.DB().NewBatch()
		term, err := st.truncate(b, 7)
		if err != nil || term != 5 {
			t.Fatalf("truncate: %d %v", term, err)
		}
		_ = b.Commit(pebble.Sync)
		_ = b.Close()
		st.truncated(7, term)
		if fi, _ := st.FirstIndex(); fi != 8 {
			t.Fatalf("first index after truncation %d", fi)
		}
		if term, err := st.Term(7); err != nil || term != 5 {
			t.Fatalf("term at truncation point %d %v", term, err)
		}
		if _, err := st.Term(6); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("term below truncation: %v", err)
		}
		if _, err := st.Entries(7, 9, 1<<20); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("entries at truncation point: %v", err)
		}
		hs, cs, err := st.InitialState()
		if err != nil || hs.GetCommit() != bootstrapIndex || len(cs.GetVoters()) != 3 {
			t.Fatalf("initial state %v %v %v", hs, cs, err)
		}
	}
}

// TestRaftStorageWrittenApart covers what asynchronous log writes
// (persist.go) ask of the storage: two appends of one range in one batch,
// the second replacing the first's tail before either is durable, leave
// only the second's entries; and an apply batch that reached the disk
// before the hard state with its commit index loads as committed.
func TestRaftStorageWrittenApart(t *testing.T) {
	e := openEngine(t, vfs.NewMem())
	defer e.Close()
	st, _, err := loadRaftStorage(e.DB(), e.LogDB(), 4)
	if err != nil {
		t.Fatal(err)
	}
	b := e.DB().NewBatch()
	if err := st.bootstrap(b, []uint64{1, 2, 3}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	_ = b.Commit(pebble.Sync)
	_ = b.Close()

	first := []*raftpb.Entry{ent(6, 5, "a"), ent(7, 5, "b"), ent(8, 5, "c"), ent(9, 5, "d")}
	second := []*raftpb.Entry{ent(8, 6, "C")}
	b = e.LogDB().NewBatch()
	if err := st.append(b, first); err != nil {
		t.Fatal(err)
	}
	if err := st.append(b, second); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	hb := e.DB().NewBatch()
	if err := st.setHardState(hb, &raftpb.HardState{Term: new(uint64(6)), Commit: new(uint64(6))}); err != nil {
		t.Fatal(err)
	}
	if err := hb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = hb.Close()
	st.appended(first)
	st.appended(second)
	if li, _ := st.LastIndex(); li != 8 {
		t.Fatalf("last index %d, want 8", li)
	}

	// Entries up to 8 applied; the hard state on disk still says commit 6.
	if err := e.DB().Set(stateKey(st.prefix, suffixApplied), encodeUint64s(8), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	reloaded, found, err := loadRaftStorage(e.DB(), e.LogDB(), 4)
	if err != nil || !found {
		t.Fatalf("reload: found %v, %v", found, err)
	}
	if reloaded.lastIndex != 8 || reloaded.applied != 8 || reloaded.hs.GetCommit() != 8 {
		t.Fatalf("reloaded last %d applied %d commit %d, want 8 8 8", reloaded.lastIndex, reloaded.applied, reloaded.hs.GetCommit())
	}
	ents, err := reloaded.Entries(6, 9, 1<<20)
	if err != nil || len(ents) != 3 || string(ents[2].GetData()) != "C" || ents[2].GetTerm() != 6 {
		t.Fatalf("reloaded entries %v %v", ents, err)
	}
	if _, err := reloaded.Term(9); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("entry 9 of the replaced tail is still there: %v", err)
	}
}
